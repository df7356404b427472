-- W2 floor: replay of an existing key (preloaded 1..:nkeys); the INSERT
-- conflicts and the SELECT reads and compares the stored request.
\set k random(1, :nkeys)
\set o :k % 1000
\set created 0
INSERT INTO floor.jobs (owner_id, idempotency_key, intent, params, provider)
  VALUES (:o, :k, 'pay', jsonb_build_object('amount', :k::bigint, 'currency', 'EUR'), 'default')
  ON CONFLICT (owner_id, idempotency_key) DO NOTHING
  RETURNING 1 AS created, id AS job_id, state, version \aset
\if :created = 0
-- the key exists: read the job and compare the request (a mismatch is IJ001)
SELECT id AS job_id, state, version, result,
       (intent = 'pay' AND params = jsonb_build_object('amount', :k::bigint, 'currency', 'EUR')
        AND provider = 'default')::int AS same
  FROM floor.jobs WHERE owner_id = :o AND idempotency_key = :k \gset
\endif
