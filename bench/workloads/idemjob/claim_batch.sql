-- W7 idemjob batch, ONE round trip: claim(max_jobs => 100) and one
-- complete_attempt per claimed job in the same statement (one transaction).
-- A worker that calls its provider between claim and complete cannot do
-- this; claim_batch_rt.sql is the 101-round-trip form.
SELECT count(*) AS n
  FROM idemjob.claim('w', NULL, 100) c,
       LATERAL idemjob.complete_attempt(c.attempt_id, '{"ok": true}') r \aset
