-- W1 for Graphile Worker: add_job with a job key (default job_key_mode
-- 'replace').  The job key stands for (owner, idempotency key).
\set k random(1, 1000000000000000)
\set o :k % 1000
SELECT id FROM graphile_worker.add_job('pay', json_build_object('amount', :k::bigint, 'currency', 'EUR'), job_key := :o || '/' || :k);
