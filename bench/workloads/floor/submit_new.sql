-- W1 (and W5, growth) floor: INSERT ... ON CONFLICT DO NOTHING RETURNING
-- (with the contract's NOTIFY idemjob for the new job), then, when nothing
-- came back, a SELECT of the existing row.
\set k random(1, 1000000000000000)
\set o :k % 1000
\set created 0
INSERT INTO floor.jobs (owner_id, idempotency_key, intent, params, provider)
  VALUES (:o, :k, 'pay', jsonb_build_object('amount', :k::bigint, 'currency', 'EUR'), 'default')
  ON CONFLICT (owner_id, idempotency_key) DO NOTHING
  RETURNING 1 AS created, id AS job_id, state, version, pg_notify('idemjob', 'pay') \aset
\if :created = 0
-- the key exists: read the job and compare the request (a mismatch is IJ001)
SELECT id AS job_id, state, version, result,
       (intent = 'pay' AND params = jsonb_build_object('amount', :k::bigint, 'currency', 'EUR')
        AND provider = 'default')::int AS same
  FROM floor.jobs WHERE owner_id = :o AND idempotency_key = :k \gset
\endif
