-- W7 batch at a steady backlog (bench/w7_backlog.sh): claim 100 jobs and
-- complete them in one statement, then submit 100 new jobs.
SELECT count(*) AS n
  FROM idemjob.claim('w', NULL, 100) c,
       LATERAL idemjob.complete_attempt(c.attempt_id, '{"ok": true}') r \aset
SELECT count(*) AS submitted
  FROM pg_catalog.generate_series(1, 100) g,
       LATERAL idemjob.submit('o', pg_catalog.gen_random_uuid()::text || '-' || g, 'w7', '{}') s \aset
