-- claim_plan (issue 21): claim() stays O(log n) at any backlog.  A session
-- that claimed while the queue was small keeps the plans it made then
-- (generic plans, cached per backend); after a burst of 100,000 due jobs,
-- with the statistics still those of the small queue, each claim must walk
-- its claim-order index and stop: no sort of the due jobs, no sequential
-- scan of jobs (the foreign-key check of each new attempt, PostgreSQL's own
-- cached statement, included).  What claim() really ran is read from this
-- transaction's counters (pg_stat_get_xact_*): index scans and the index
-- entries they returned, and sequential scans of jobs.  EXPLAIN of the
-- same text would be planned anew, not the plan claim() keeps.
-- Everything is rolled back.
\set VERBOSITY sqlstate
SET idemjob.notify = off;

-- per relation of jobs (the table: sequential scans): what the statement
-- did, as counted in this transaction.  In the partitioned layout
-- (idemjob.partitions) a partition and its indexes count as the table and
-- its indexes: scans the most any partition's index made, rows read the
-- sum over them.
CREATE TEMP TABLE before_reads (oid oid, scans bigint, tuples bigint);
CREATE FUNCTION pg_temp.reads(sql text)
RETURNS TABLE (relname text, scans text, small boolean) LANGUAGE plpgsql AS $$
DECLARE
	b record;
BEGIN
	TRUNCATE before_reads;
	INSERT INTO before_reads
	WITH tables(t) AS (SELECT 'idemjob.jobs'::regclass
					   UNION SELECT relid FROM pg_partition_tree('idemjob.jobs'))
	SELECT c.oid, pg_stat_get_xact_numscans(c.oid), pg_stat_get_xact_tuples_returned(c.oid)
	  FROM pg_class c
	 WHERE c.relnamespace = 'idemjob'::regnamespace
	   AND (c.oid IN (SELECT t FROM tables t)
			OR c.oid IN (SELECT indexrelid FROM pg_index WHERE indrelid IN (SELECT t FROM tables t)));
	EXECUTE sql;
	-- scans: how many (of the primary key only "by key": the foreign-key
	-- checks' look-ups, which PostgreSQL 15 and 17 count differently);
	-- small: fewer than 100 rows or index entries read
	RETURN QUERY
	SELECT n.name,
		   CASE WHEN n.name = 'jobs_pkey' THEN 'by key'
				ELSE max(pg_stat_get_xact_numscans(r.oid) - r.scans)::text END,
		   sum(pg_stat_get_xact_tuples_returned(r.oid) - r.tuples) < 100
	  FROM before_reads r JOIN pg_class c ON c.oid = r.oid,
		   LATERAL (SELECT regexp_replace(c.relname, '_p[0-9]+$', '') AS name) n
	 WHERE pg_stat_get_xact_numscans(r.oid) > r.scans
	 GROUP BY n.name
	 ORDER BY 1;
END $$;

BEGIN;
-- a small queue, analyzed as such: one intent only, so the statistics say
-- that every due job is of intent cp.rare
SELECT count(*) FROM (SELECT idemjob.submit('cp', 'small-' || g, 'cp.rare') FROM generate_series(1, 20) g) s;
ANALYZE idemjob.jobs;
-- every claim plan made and cached now (and the foreign-key check's)
SELECT count(*) AS any_one FROM idemjob.claim('cp-w', NULL, 1);
SELECT count(*) AS any_batch FROM idemjob.claim('cp-w', NULL, 2);
SELECT count(*) AS one_one FROM idemjob.claim('cp-w', ARRAY['cp.rare'], 1);
SELECT count(*) AS one_batch FROM idemjob.claim('cp-w', ARRAY['cp.rare'], 2);
SELECT count(*) AS some_one FROM idemjob.claim('cp-w', ARRAY['cp.rare', 'cp.other'], 1);

-- the burst: 100,000 due jobs of another intent, ahead of cp.rare's in
-- claim order (inserted as a restore would: no ANALYZE follows), and a few
-- more of cp.rare
INSERT INTO idemjob.jobs (owner_id, idempotency_key, intent, params, provider, run_at, owner_hash)
SELECT 'cp', 'bulk-' || g, 'cp.bulk', '{}', 'p', now() - interval '1 hour', 'cp'::text
  FROM generate_series(1, 100000) g;
SELECT count(*) FROM (SELECT idemjob.submit('cp', 'late-' || g, 'cp.rare') FROM generate_series(1, 20) g) s;

-- any intent: jobs_claim, in order, stopped after max_jobs
SELECT * FROM pg_temp.reads($$SELECT idemjob.claim('cp-w', NULL, 1)$$);
SELECT * FROM pg_temp.reads($$SELECT idemjob.claim('cp-w', NULL, 10)$$);
-- one intent: jobs_claim_intent only (not jobs_claim filtered by intent,
-- which would read the 100,000 cp.bulk jobs first)
SELECT * FROM pg_temp.reads($$SELECT idemjob.claim('cp-w', ARRAY['cp.rare'], 1)$$);
SELECT * FROM pg_temp.reads($$SELECT idemjob.claim('cp-w', ARRAY['cp.rare'], 10)$$);
-- several intents: jobs_claim filtered; here the first ones match
SELECT * FROM pg_temp.reads($$SELECT idemjob.claim('cp-w', ARRAY['cp.bulk', 'cp.other'], 1)$$);
ROLLBACK;
