-- A raw row without owner_hash (a restore of a dump taken before 1.2,
-- which lists its columns): in plain tables its guard fills it in; in the
-- partitioned layout (idemjob.partitions > 0) it is refused, saying why:
-- PostgreSQL picks a row's partition before any trigger runs.
-- expected/owner_hash_fill_1.out is the partitioned layout's answer.
\set VERBOSITY default
SELECT relkind AS jobs_relkind FROM pg_class WHERE oid = 'idemjob.jobs'::regclass \gset
BEGIN;
INSERT INTO idemjob.spent_keys (owner_id, idempotency_key, request_sha256, job_id, final_state, completed_at)
	VALUES ('fill', 'k', sha256('r'), idemjob.uuid_v7(), 'succeeded', now());
SELECT owner_hash = idemjob.owner_hash('fill'::text) AS spent_key_filled
FROM idemjob.spent_keys WHERE owner_id = 'fill';
ROLLBACK;
BEGIN;
INSERT INTO idemjob.jobs (id, owner_id, idempotency_key, intent, provider)
	VALUES ('00000000-0000-7000-8000-00000000f111', 'fill', 'k', 'charge', 'p');
SELECT owner_hash = idemjob.owner_hash('fill'::text) AS job_filled
FROM idemjob.jobs WHERE owner_id = 'fill';
ROLLBACK;
-- which layout this was
SELECT :'jobs_relkind' AS jobs_relkind;
