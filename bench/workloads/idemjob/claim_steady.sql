-- W7 at a steady backlog (bench/w7_backlog.sh): claim one job, complete it,
-- and submit one new job, so that the queue keeps its length.
\set got 0
SELECT 1 AS got, attempt_id FROM idemjob.claim('w', NULL, 1) \aset
\if :got = 1
SELECT outcome FROM idemjob.complete_attempt(:attempt_id, '{"ok": true}') \aset
\endif
SELECT 1 AS submitted FROM idemjob.submit('o', pg_catalog.gen_random_uuid()::text, 'w7', '{}') \aset
