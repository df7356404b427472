-- W7 idemjob, the two-phase claim: claim one job with a lease, confirm it
-- (begin_attempt, what a worker sends right before the provider call), then
-- complete it (three calls, three transactions).
\set got 0
SELECT 1 AS got, attempt_id FROM idemjob.claim('w', NULL, 1, lease => true) \aset
\if :got = 1
SELECT state FROM idemjob.begin_attempt(:attempt_id) \aset
SELECT outcome FROM idemjob.complete_attempt(:attempt_id, '{"ok": true}') \aset
\endif
