-- W7 idemjob: claim one job, then complete it (two calls, two transactions).
\set got 0
SELECT 1 AS got, attempt_id FROM idemjob.claim('w', NULL, 1) \aset
\if :got = 1
SELECT outcome FROM idemjob.complete_attempt(:attempt_id, '{"ok": true}') \aset
\endif
