-- W1 (and W5, growth): submit of a new key.
\set k random(1, 1000000000000000)
\set o :k % 1000
SELECT job_id, created, state, version FROM idemjob.submit(:o, :k, 'pay', jsonb_build_object('amount', :k::bigint, 'currency', 'EUR'));
