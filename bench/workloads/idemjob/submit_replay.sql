-- W2: replay of an existing key (preloaded 1..:nkeys) with an identical request.
\set k random(1, :nkeys)
\set o :k % 1000
SELECT job_id, created, state, version FROM idemjob.submit(:o, :k, 'pay', jsonb_build_object('amount', :k::bigint, 'currency', 'EUR'));
