-- W7 idemjob, the two-phase claim with the confirmation riding on the
-- result: claim one job with a lease, then complete it, which confirms it
-- (two calls; for a provider call that cannot be sent twice the worker
-- sends begin_attempt first: claim_lease.sql).
\set got 0
SELECT 1 AS got, attempt_id FROM idemjob.claim('w', NULL, 1, lease => true) \aset
\if :got = 1
SELECT outcome FROM idemjob.complete_attempt(:attempt_id, '{"ok": true}') \aset
\endif
