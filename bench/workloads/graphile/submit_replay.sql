-- W2 for Graphile Worker: add_job again with an existing job key (preloaded
-- 1..:nkeys); in 'replace' mode Graphile Worker updates the pending job.
\set k random(1, :nkeys)
\set o :k % 1000
SELECT id FROM graphile_worker.add_job('pay', json_build_object('amount', :k::bigint, 'currency', 'EUR'), job_key := :o || '/' || :k);
