/* sql/idemjob--1.1--1.2.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION idemjob UPDATE TO '1.2'" to load this file. \quit

--
-- CREATE EXTENSION idemjob runs idemjob--1.0.sql, idemjob--1.0--1.1.sql
-- and this script; ALTER EXTENSION idemjob UPDATE runs what an installed
-- version lacks.  Released scripts are never edited: what 1.2 changes is
-- here.  Every name is qualified.
--

--
-- Lock order.  Every lock the update takes is held until it commits, so
-- a statement that reads a large table (an index build, a fill) comes
-- before the first ALTER TABLE of jobs or attempts, whose ACCESS EXCLUSIVE
-- lock stops even readers: after it only catalog changes follow.  1.1 ->
-- 1.2 holds it on jobs and attempts for under 10 ms at 1M jobs
-- (bench/upgrade_locks.sh measures it; docs/operations.md#upgrading).
--
--
-- The schema belongs to the extension's owner, and holds nothing the
-- extension did not put there.  The functions run as that owner (and the
-- sweeper calls them): a schema made before CREATE EXTENSION by a role
-- with CREATE on the database, or given away later, could hold a function
-- or operator that role planted.
--
DO $check$
DECLARE
	nsp pg_catalog.oid := pg_catalog.to_regnamespace('idemjob')::pg_catalog.oid;
	ext pg_catalog.oid;
	extowner pg_catalog.oid;
	strays pg_catalog.text;
BEGIN
	SELECT e.oid, e.extowner INTO ext, extowner
	FROM pg_catalog.pg_extension e WHERE e.extname OPERATOR(pg_catalog.=) 'idemjob';
	IF (SELECT n.nspowner FROM pg_catalog.pg_namespace n WHERE n.oid OPERATOR(pg_catalog.=) nsp)
		OPERATOR(pg_catalog.<>) extowner THEN
		RAISE EXCEPTION 'schema idemjob is owned by role %, not by the role installing extension idemjob (%)',
			(SELECT n.nspowner::pg_catalog.regrole FROM pg_catalog.pg_namespace n WHERE n.oid OPERATOR(pg_catalog.=) nsp),
			extowner::pg_catalog.regrole
			USING ERRCODE = 'insufficient_privilege',
				  HINT = 'Drop that schema (or, for an installed extension, give it back with ALTER SCHEMA idemjob OWNER TO the extension''s owner) first.';
	END IF;
	SELECT pg_catalog.string_agg(o.what, ', ' ORDER BY o.what) INTO strays
	FROM (SELECT pg_catalog.pg_describe_object('pg_catalog.pg_proc'::pg_catalog.regclass, p.oid, 0) AS what,
				 'pg_catalog.pg_proc'::pg_catalog.regclass AS cls, p.oid
		  FROM pg_catalog.pg_proc p WHERE p.pronamespace OPERATOR(pg_catalog.=) nsp
		  UNION ALL
		  SELECT pg_catalog.pg_describe_object('pg_catalog.pg_operator'::pg_catalog.regclass, o.oid, 0),
				 'pg_catalog.pg_operator'::pg_catalog.regclass, o.oid
		  FROM pg_catalog.pg_operator o WHERE o.oprnamespace OPERATOR(pg_catalog.=) nsp
		  UNION ALL
		  SELECT pg_catalog.pg_describe_object('pg_catalog.pg_class'::pg_catalog.regclass, c.oid, 0),
				 'pg_catalog.pg_class'::pg_catalog.regclass, c.oid
		  FROM pg_catalog.pg_class c WHERE c.relnamespace OPERATOR(pg_catalog.=) nsp
			AND c.relkind OPERATOR(pg_catalog.=) ANY ('{r,v,m,f,p,S,c}'::"char"[])
		  UNION ALL
		  SELECT pg_catalog.pg_describe_object('pg_catalog.pg_type'::pg_catalog.regclass, t.oid, 0),
				 'pg_catalog.pg_type'::pg_catalog.regclass, t.oid
		  FROM pg_catalog.pg_type t WHERE t.typnamespace OPERATOR(pg_catalog.=) nsp
			AND t.typrelid OPERATOR(pg_catalog.=) 0 AND NOT EXISTS
				(SELECT FROM pg_catalog.pg_type e WHERE e.typarray OPERATOR(pg_catalog.=) t.oid)
		 ) o
	WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_depend d
					  WHERE d.classid OPERATOR(pg_catalog.=) o.cls AND d.objid OPERATOR(pg_catalog.=) o.oid
						AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
						AND d.refobjid OPERATOR(pg_catalog.=) ext
						AND d.deptype OPERATOR(pg_catalog.=) 'e');
	IF strays IS NOT NULL THEN
		RAISE EXCEPTION 'schema idemjob holds objects that are not part of extension idemjob: %', strays
			USING ERRCODE = 'insufficient_privilege',
				  HINT = 'Move or drop them first: the extension''s functions run as its owner in this schema.';
	END IF;
END
$check$;

-- >>> issue 21 (audit): a race log that stands alone, compensations >>>
--
-- The race log stands alone: each row names the intent, the key, the
-- loser's and the winner's providers and (with keep_dropped_results) the
-- dropped result itself, so a purge() of the job loses nothing an audit
-- needs.  A result that breaks the intent's output contract is logged too
-- (reason rejected): every result that was not committed is one row.
-- Placed first in this script, before any exclusive lock on jobs or
-- attempts, so that the fill below does not lengthen those locks (it
-- holds race_log's alone).
--
ALTER TABLE idemjob.race_log
	ADD COLUMN intent pg_catalog.text COLLATE pg_catalog."C",
	ADD COLUMN idempotency_key pg_catalog.text COLLATE pg_catalog."C",
	ADD COLUMN winner_provider pg_catalog.text COLLATE pg_catalog."C",
	ADD COLUMN dropped_result pg_catalog.jsonb,
	ADD COLUMN fenced_at pg_catalog.timestamptz,
	DROP CONSTRAINT race_log_reason_check,
	ADD CONSTRAINT race_log_reason_check
		CHECK (reason OPERATOR(pg_catalog.=) ANY
			('{slot_taken,version_moved,rejected}'::pg_catalog.text[]));
-- rows of 1.1 and before: filled from their job and attempts where these
-- still exist (a job purged before 1.2 leaves intent, winner_provider and
-- dropped_result NULL, and the key only while its spent key is kept); the
-- guard refuses raw updates, so it is set aside for this one fill; each
-- row looks its job and attempts up by primary key (40,000 rows of 1M jobs:
-- bench/audit.sh), so the fill costs what the race log holds, not jobs
ALTER TABLE idemjob.race_log DISABLE TRIGGER race_log_guard;
UPDATE idemjob.race_log r SET
	(intent, idempotency_key) = (SELECT j.intent, j.idempotency_key FROM idemjob.jobs j
								 WHERE j.id OPERATOR(pg_catalog.=) r.job_id),
	winner_provider = (SELECT w.provider FROM idemjob.attempts w
					   WHERE w.id OPERATOR(pg_catalog.=) r.winner_attempt_id),
	dropped_result = (SELECT a.dropped_result FROM idemjob.attempts a
					  WHERE a.id OPERATOR(pg_catalog.=) r.attempt_id);
UPDATE idemjob.race_log r SET idempotency_key = s.idempotency_key
	FROM idemjob.spent_keys s
	WHERE r.idempotency_key IS NULL
		AND s.job_id OPERATOR(pg_catalog.=) r.job_id
		AND s.owner_id OPERATOR(pg_catalog.=) r.owner_id;
ALTER TABLE idemjob.race_log ENABLE TRIGGER race_log_guard;

-- the audit questions: by owner ("was customer X charged twice?") and by
-- intent ("what must be refunded?", "which provider loses?"), over time
CREATE INDEX race_log_owner_logged_at ON idemjob.race_log (owner_id, logged_at);
CREATE INDEX race_log_intent_logged_at ON idemjob.race_log (intent, logged_at);
-- by time alone: provider_stats(since), retention_stats (below)
CREATE INDEX race_log_logged_at ON idemjob.race_log (logged_at);

-- compensations: one row per result that was not committed (lost or
-- rejected), with what it takes to undo it; read from the race log alone,
-- so the same before and after purge().  late_by for every loser: the
-- contract's late_by (since the winner's commit, slot_taken only), else
-- since the fence (fenced_at, version_moved)
CREATE VIEW idemjob.compensations WITH (security_barrier) AS
SELECT r.logged_at, r.job_id, r.owner_id, r.idempotency_key, r.intent,
	r.provider, r.attempt_id, r.reason,
	r.winner_attempt_id, r.winner_provider,
	COALESCE(r.late_by, r.logged_at OPERATOR(pg_catalog.-) r.fenced_at) AS late_by,
	r.result_sha256, r.result_bytes, r.dropped_result,
	r.expected_version, r.found_version
FROM idemjob.race_log r
WHERE idemjob.owner_visible(r.owner_id);
REVOKE ALL ON TABLE idemjob.compensations FROM PUBLIC;
-- <<< issue 21 (audit) <<<

--
-- Owner bindings live in the database (1.1 had only the setting
-- idemjob.owner_binding, which a client escaped with PGOPTIONS, and which
-- a role's members and SET ROLE never saw).  bind_owner() records one; it
-- holds for every call whose current user is the role or has its
-- privileges.  Dumped with the data, like the capabilities.
--
CREATE TABLE idemjob.owner_bindings (
	bound_role	pg_catalog.regrole NOT NULL,
	mode		pg_catalog.text NOT NULL,
	bound_at	pg_catalog.timestamptz NOT NULL DEFAULT pg_catalog.now(),
	CONSTRAINT owner_bindings_pkey PRIMARY KEY (bound_role),
	CONSTRAINT owner_bindings_mode_check CHECK
		(mode OPERATOR(pg_catalog.=) 'role'
		 OR pg_catalog.left(mode, 8) OPERATOR(pg_catalog.=) 'setting:')
);
SELECT pg_catalog.pg_extension_config_dump('idemjob.owner_bindings', '');

CREATE FUNCTION idemjob.owner_bindings_changed()
RETURNS trigger
AS 'MODULE_PATHNAME', 'idemjob_owner_bindings_changed'
LANGUAGE C;
CREATE TRIGGER owner_bindings_changed
	AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON idemjob.owner_bindings
	FOR EACH STATEMENT EXECUTE FUNCTION idemjob.owner_bindings_changed();

CREATE FUNCTION idemjob.bind_owner(role pg_catalog.regrole, mode pg_catalog.text)
RETURNS void
AS 'MODULE_PATHNAME', 'idemjob_bind_owner'
LANGUAGE C VOLATILE;

CREATE FUNCTION idemjob.unbind_owner(role pg_catalog.regrole)
RETURNS boolean
AS 'MODULE_PATHNAME', 'idemjob_unbind_owner'
LANGUAGE C VOLATILE;

REVOKE ALL ON TABLE idemjob.owner_bindings FROM PUBLIC;
REVOKE ALL ON FUNCTION idemjob.owner_bindings_changed() FROM PUBLIC;
REVOKE ALL ON FUNCTION idemjob.bind_owner(pg_catalog.regrole, pg_catalog.text) FROM PUBLIC;
REVOKE ALL ON FUNCTION idemjob.unbind_owner(pg_catalog.regrole) FROM PUBLIC;

--
-- The retry policy per intent: max_attempts, backoff and its cap, set by an
-- admin with set_retry_policy(); a NULL column falls back to the setting
-- (idemjob.max_attempts, idemjob.retry_backoff, idemjob.retry_backoff_max),
-- and a job's own max_attempts still wins.  1.1 had only the settings,
-- which only a superuser can change.  Dumped with the data.
--
CREATE TABLE idemjob.retry_policies (
	intent		pg_catalog.text NOT NULL,
	max_attempts pg_catalog.int4,
	retry_backoff pg_catalog.interval,
	retry_backoff_max pg_catalog.interval,
	updated_at	pg_catalog.timestamptz NOT NULL DEFAULT pg_catalog.now(),
	fence_unknown_after pg_catalog.interval,
	CONSTRAINT retry_policies_pkey PRIMARY KEY (intent),
	CONSTRAINT retry_policies_intent_check CHECK
		(pg_catalog.octet_length(intent) OPERATOR(pg_catalog.>=) 1
		 AND pg_catalog.octet_length(intent) OPERATOR(pg_catalog.<=) 255),
	CONSTRAINT retry_policies_max_attempts_check CHECK
		(max_attempts OPERATOR(pg_catalog.>=) 1),
	CONSTRAINT retry_policies_backoff_check CHECK
		(retry_backoff OPERATOR(pg_catalog.>=) '0'::pg_catalog.interval
		 AND retry_backoff_max OPERATOR(pg_catalog.>=) '0'::pg_catalog.interval
		 AND retry_backoff OPERATOR(pg_catalog.<=) retry_backoff_max),
	CONSTRAINT retry_policies_fence_check CHECK
		(fence_unknown_after OPERATOR(pg_catalog.>) '0'::pg_catalog.interval)
);
SELECT pg_catalog.pg_extension_config_dump('idemjob.retry_policies', '');

CREATE FUNCTION idemjob.set_retry_policy(intent pg_catalog.text,
	max_attempts pg_catalog.int4 DEFAULT NULL,
	retry_backoff pg_catalog.interval DEFAULT NULL,
	retry_backoff_max pg_catalog.interval DEFAULT NULL,
	fence_unknown_after pg_catalog.interval DEFAULT NULL)
RETURNS idemjob.retry_policies
AS 'MODULE_PATHNAME', 'idemjob_set_retry_policy'
LANGUAGE C VOLATILE;

REVOKE ALL ON TABLE idemjob.retry_policies FROM PUBLIC;
REVOKE ALL ON FUNCTION idemjob.set_retry_policy(pg_catalog.text, pg_catalog.int4,
	pg_catalog.interval, pg_catalog.interval, pg_catalog.interval) FROM PUBLIC;

--
-- purge() deletes a final job with its attempts; a cancelled attempt can
-- still report, and its late result then found nothing (IJ006, no race-log
-- row: I10 broken).  The job's spent_keys row keeps what that result needs
-- (the attempt's id, read version and provider, the job's final version),
-- and complete_attempt() logs it as lost.  (Before the first ALTER TABLE
-- of jobs or attempts: the index build scans spent_keys, and every lock
-- is held until the update commits; see "Lock order" above.)
--
ALTER TABLE idemjob.spent_keys ADD COLUMN open_attempts pg_catalog.jsonb;
CREATE INDEX spent_keys_open_attempts ON idemjob.spent_keys
	USING gin (open_attempts pg_catalog.jsonb_path_ops) WHERE open_attempts IS NOT NULL;

-- jobs_in_flight: the jobs running or in doubt (it replaces 1.1's
-- jobs_active, dropped below with the reasons); built before the first
-- ALTER TABLE of jobs or attempts ("Lock order")
CREATE INDEX jobs_in_flight
	ON idemjob.jobs (intent, state)
	WHERE state OPERATOR(pg_catalog.=) ANY
		('{running,in_doubt}'::idemjob.job_state[]);

--
-- Two-phase claim.  claim(..., lease => true) starts each attempt with a
-- lease (idemjob.claim_lease): the worker confirms it, with
-- begin_attempt(), immediately before it calls the provider.  An attempt
-- not confirmed in time was provably never sent: expire_attempts() and the
-- sweeper release it (state released, the job due again at once, no retry
-- counted), and a late confirmation or result is refused (IJ008).  A plain
-- claim keeps 1.1's meaning: no lease, nothing releases the attempt but
-- its deadline.  lease_until is NULL for an attempt without a lease or
-- once confirmed; a released attempt keeps the lease it missed.
--
-- (The new enum value cannot be used in the transaction that adds it:
-- nothing below names it; the C code does, in later transactions.)
--
ALTER TYPE idemjob.attempt_state ADD VALUE 'released';
ALTER TABLE idemjob.attempts ADD COLUMN lease_until pg_catalog.timestamptz;

-- No index on lease_until: the confirmation changes it alone, so it is a
-- HOT update on the common path; the sweeper's release and
-- abandon_attempts() look only at attempts in flight, which the partial
-- index attempts_one_in_doubt holds.

DROP FUNCTION idemjob.claim(pg_catalog.text, pg_catalog.text[], pg_catalog.int4,
	pg_catalog.interval, pg_catalog.interval);
CREATE FUNCTION idemjob.claim(
	worker pg_catalog.text,
	intents pg_catalog.text[] DEFAULT NULL,
	max_jobs pg_catalog.int4 DEFAULT 1,
	timeout pg_catalog.interval DEFAULT NULL,
	wait pg_catalog.interval DEFAULT '0'::pg_catalog.interval,
	lease pg_catalog.bool DEFAULT false)
RETURNS TABLE(attempt_id pg_catalog.uuid, job_id pg_catalog.uuid,
			  owner_id pg_catalog.text, intent pg_catalog.text,
			  params pg_catalog.jsonb, provider pg_catalog.text,
			  attempt_no pg_catalog.int4, read_version pg_catalog.int8,
			  deadline pg_catalog.timestamptz)
AS 'MODULE_PATHNAME', 'idemjob_claim'
LANGUAGE C VOLATILE ROWS 1;

CREATE FUNCTION idemjob.begin_attempt(attempt_id pg_catalog.uuid)
RETURNS idemjob.attempts
AS 'MODULE_PATHNAME', 'idemjob_begin_attempt'
LANGUAGE C VOLATILE;

-- a restarted worker gives up what it left in flight or in doubt
CREATE FUNCTION idemjob.abandon_attempts(worker pg_catalog.text)
RETURNS pg_catalog.int4
AS 'MODULE_PATHNAME', 'idemjob_abandon_attempts'
LANGUAGE C VOLATILE;

REVOKE ALL ON FUNCTION idemjob.claim(pg_catalog.text, pg_catalog.text[], pg_catalog.int4,
	pg_catalog.interval, pg_catalog.interval, pg_catalog.bool) FROM PUBLIC;
REVOKE ALL ON FUNCTION idemjob.begin_attempt(pg_catalog.uuid) FROM PUBLIC;
REVOKE ALL ON FUNCTION idemjob.abandon_attempts(pg_catalog.text) FROM PUBLIC;

--
-- Failover routed by the server.  An intent's route is the order of
-- providers its jobs fail over to; when an attempt ends without a result
-- that counts (a retryable failure, a rejected result, a doubt ended by
-- cancel_attempt, the doubt policy or abandon_attempts), the job moves to
-- the next certified provider of [its own provider, then the route], and
-- claim() and start_attempt(job, NULL) start it there.  jobs.provider
-- stays the provider the request named (part of the request); the job's
-- current provider is next_provider, NULL meaning its own.
--
CREATE TABLE idemjob.routes (
	intent		pg_catalog.text NOT NULL,
	providers	pg_catalog.text[] NOT NULL,
	updated_at	pg_catalog.timestamptz NOT NULL DEFAULT pg_catalog.now(),
	CONSTRAINT routes_pkey PRIMARY KEY (intent),
	CONSTRAINT routes_intent_check CHECK
		(pg_catalog.octet_length(intent) OPERATOR(pg_catalog.>=) 1
		 AND pg_catalog.octet_length(intent) OPERATOR(pg_catalog.<=) 255),
	CONSTRAINT routes_providers_check CHECK
		(pg_catalog.cardinality(providers) OPERATOR(pg_catalog.<=) 16
		 AND pg_catalog.array_position(providers, NULL) IS NULL
		 AND pg_catalog.array_ndims(providers) IS NOT DISTINCT FROM
			 CASE WHEN pg_catalog.cardinality(providers) OPERATOR(pg_catalog.=) 0
				  THEN NULL ELSE 1 END)
);
SELECT pg_catalog.pg_extension_config_dump('idemjob.routes', '');
ALTER TABLE idemjob.jobs ADD COLUMN next_provider pg_catalog.text COLLATE pg_catalog."C";

CREATE FUNCTION idemjob.set_route(intent pg_catalog.text, providers pg_catalog.text[])
RETURNS idemjob.routes
AS 'MODULE_PATHNAME', 'idemjob_set_route'
LANGUAGE C VOLATILE;

REVOKE ALL ON TABLE idemjob.routes FROM PUBLIC;
REVOKE ALL ON FUNCTION idemjob.set_route(pg_catalog.text, pg_catalog.text[]) FROM PUBLIC;

-- in_doubt: an attempt still inside its lease was never sent, so it is not
-- in doubt even past its deadline; and (issue 21) why it is in doubt, from
-- what the functions stored: the deadline passed while it was started
-- (expire_attempts() has not marked it yet), expire_attempts() or the
-- sweeper marked it unknown at its deadline, or the worker marked it
-- unknown with mark_unknown() (its reason)
CREATE OR REPLACE VIEW idemjob.in_doubt WITH (security_barrier) AS
SELECT a.job_id, a.owner_id,
	(SELECT j.intent FROM idemjob.jobs j
	 WHERE j.id OPERATOR(pg_catalog.=) a.job_id) AS intent,
	a.id AS attempt_id, a.attempt_no,
	a.provider, a.worker, a.state, a.started_at, a.deadline, a.unknown_at,
	COALESCE(a.unknown_at, a.deadline) AS in_doubt_since,
	pg_catalog.now() OPERATOR(pg_catalog.-)
		COALESCE(a.unknown_at, a.deadline) AS age,
	CASE
	WHEN a.state OPERATOR(pg_catalog.=) 'started'::idemjob.attempt_state
		THEN 'deadline passed, not yet expired'::pg_catalog.text
	WHEN a.error OPERATOR(pg_catalog.=) '{"code": "unknown", "reason": "deadline"}'::pg_catalog.jsonb
		THEN 'expired at its deadline'::pg_catalog.text
	WHEN (a.error OPERATOR(pg_catalog.->>) 'code') OPERATOR(pg_catalog.=) 'unknown'
		THEN 'marked unknown: '::pg_catalog.text OPERATOR(pg_catalog.||)
			COALESCE(a.error OPERATOR(pg_catalog.->>) 'reason', '')
	ELSE 'unknown, no reason recorded'::pg_catalog.text END AS reason
FROM idemjob.attempts a
WHERE (a.state OPERATOR(pg_catalog.=) 'unknown'::idemjob.attempt_state
	   OR (a.state OPERATOR(pg_catalog.=) 'started'::idemjob.attempt_state
		   AND a.deadline IS NOT NULL
		   AND a.deadline OPERATOR(pg_catalog.<) pg_catalog.now()
		   AND a.lease_until IS NULL))
	AND idemjob.owner_visible(a.owner_id);

--
-- ==== issue 21 (claim): indexes that stay small, and vacuum ====
--
-- jobs_active held every job not yet final, pending ones included: a third
-- index entry for each job of a backlog (jobs_claim and jobs_claim_intent
-- hold them already), 13 MB after a burst of 200k jobs for 2.4k left
-- active, and a path a cached claim plan took to read and sort every due
-- job.  jobs_in_flight holds only the running and in-doubt jobs, so its
-- size follows the jobs in flight, not the backlog.  Who reads what:
--   claim(), any intent          jobs_claim (in claim order, stops)
--   claim(), one intent          jobs_claim_intent (the same)
--   queue_stats, pending         jobs_claim_intent (or a scan: all pending)
--   queue_stats, in flight       jobs_in_flight
--   set_route() forgetting       jobs_claim_intent + jobs_in_flight (BitmapOr)
--   purge()                      jobs_final
--   expire_attempts()            attempts_started_deadline
--   in_doubt                     attempts_one_in_doubt
--
-- (jobs_in_flight is built above, before the first ALTER TABLE of jobs:
-- see "Lock order"; dropping jobs_active locks jobs, which is locked by now)
DROP INDEX idemjob.jobs_active;

-- the same columns as in 1.1; the pending jobs through jobs_claim_intent
-- and the others through jobs_in_flight (one index each: no scan of the
-- final jobs, which are most of the table)
CREATE OR REPLACE VIEW idemjob.queue_stats WITH (security_barrier) AS
SELECT j.intent,
	pg_catalog.count(*) FILTER (WHERE j.state OPERATOR(pg_catalog.=) 'pending'::idemjob.job_state
		AND j.run_at OPERATOR(pg_catalog.<=) pg_catalog.now()) AS due,
	pg_catalog.count(*) FILTER (WHERE j.state OPERATOR(pg_catalog.=) 'pending'::idemjob.job_state
		AND j.run_at OPERATOR(pg_catalog.>) pg_catalog.now()) AS scheduled,
	pg_catalog.count(*) FILTER (WHERE j.state OPERATOR(pg_catalog.=) 'running'::idemjob.job_state) AS running,
	pg_catalog.count(*) FILTER (WHERE j.state OPERATOR(pg_catalog.=) 'in_doubt'::idemjob.job_state) AS in_doubt,
	pg_catalog.now() OPERATOR(pg_catalog.-) pg_catalog.min(j.run_at) FILTER (
		WHERE j.state OPERATOR(pg_catalog.=) 'pending'::idemjob.job_state
		AND j.run_at OPERATOR(pg_catalog.<=) pg_catalog.now()) AS oldest_due_age
FROM (SELECT p.intent, p.state, p.run_at FROM idemjob.jobs p
	  WHERE p.state OPERATOR(pg_catalog.=) 'pending'::idemjob.job_state
		AND idemjob.owner_visible(p.owner_id)
	  UNION ALL
	  SELECT f.intent, f.state, f.run_at FROM idemjob.jobs f
	  WHERE f.state OPERATOR(pg_catalog.=) ANY ('{running,in_doubt}'::idemjob.job_state[])
		AND idemjob.owner_visible(f.owner_id)) j
GROUP BY j.intent;

-- Vacuum (docs/operations.md, "Vacuum").  Every claim and every result is
-- a non-HOT update of jobs (the state is in every partial index's
-- predicate), and a claim walks jobs_claim past the entries of the jobs
-- claimed since the last vacuum: autovacuum's default, at 20 % of the
-- table dead, let a burst of 200k leave 400k dead rows.  At 2 % it comes
-- ten times as often, and analyze with it.  A DBA's own value (set
-- before this update) is kept.
DO $vacuum$
DECLARE
	t pg_catalog.text;
	o pg_catalog.text;
BEGIN
	FOREACH t IN ARRAY ARRAY['jobs', 'attempts'] LOOP
		FOREACH o IN ARRAY ARRAY['autovacuum_vacuum_scale_factor',
								 'autovacuum_vacuum_insert_scale_factor',
								 'autovacuum_analyze_scale_factor'] LOOP
			IF NOT EXISTS (SELECT FROM pg_catalog.pg_class c,
								   pg_catalog.pg_options_to_table(c.reloptions) r
						   WHERE c.oid OPERATOR(pg_catalog.=) pg_catalog.format('idemjob.%I', t)::pg_catalog.regclass
							 AND r.option_name OPERATOR(pg_catalog.=) o) THEN
				EXECUTE pg_catalog.format('ALTER TABLE idemjob.%I SET (%s = 0.02)', t, o);
			END IF;
		END LOOP;
	END LOOP;
END
$vacuum$;

-- ==== end issue 21 (claim) ====

--
-- A column added to (or dropped from, renamed, retyped in) one of these
-- tables outside the extension's scripts would be in the dump's COPY list
-- but not in the restored table, and the restore would lose every row: an
-- event trigger refuses it.  The same trigger readies a distributed install
-- for DROP EXTENSION idemjob (on a Citus coordinator: src/triggers.c).
--
CREATE FUNCTION idemjob.ddl_guard()
RETURNS event_trigger
AS 'MODULE_PATHNAME', 'idemjob_ddl_guard'
LANGUAGE C;
REVOKE ALL ON FUNCTION idemjob.ddl_guard() FROM PUBLIC;
CREATE EVENT TRIGGER idemjob_ddl_guard ON ddl_command_start
	WHEN TAG IN ('ALTER TABLE', 'DROP EXTENSION') EXECUTE FUNCTION idemjob.ddl_guard();

-- ==== begin i21 monitoring (provider_stats over a window, monitor, retention_stats) ====
--
-- provider_stats over a window: provider_stats(since) reads the attempts
-- started in the last `since` through attempts_pkey (attempt ids are
-- UUIDv7: their high bits are the time they were made, never before the
-- attempt's started_at) and the race-log rows logged in it through
-- race_log_logged_at, so a dashboard's scrape costs what the window holds,
-- not the history.  C, so that it reads the tables as the extension's
-- owner while the caller needs EXECUTE only (src/stats.c).
--
-- (the index race_log_logged_at is built with the race log's others, above)

-- owner_visible() reads idemjob.owner_bindings (since 1.2) with the latest
-- snapshot, which a parallel worker cannot take ("cannot update
-- SecondarySnapshot during a parallel operation": the provider_stats view
-- failed so at 1M attempts): it runs in the leader only
ALTER FUNCTION idemjob.owner_visible(pg_catalog.text) PARALLEL RESTRICTED;

CREATE FUNCTION idemjob.provider_stats(since pg_catalog.interval)
RETURNS TABLE(intent pg_catalog.text, provider pg_catalog.text,
			  attempts pg_catalog.int8, succeeded pg_catalog.int8,
			  superseded pg_catalog.int8, rejected pg_catalog.int8,
			  failed pg_catalog.int8, in_doubt pg_catalog.int8,
			  cancelled pg_catalog.int8,
			  p50_ms pg_catalog.numeric, p95_ms pg_catalog.numeric,
			  last_started_at pg_catalog.timestamptz,
			  released pg_catalog.int8,
			  races_lost pg_catalog.int8,
			  late_by_p50_ms pg_catalog.numeric, late_by_p95_ms pg_catalog.numeric)
AS 'MODULE_PATHNAME', 'idemjob_provider_stats'
LANGUAGE C STABLE ROWS 10;
REVOKE ALL ON FUNCTION idemjob.provider_stats(pg_catalog.interval) FROM PUBLIC;

--
-- retention_stats: one row, what purge and purge_race_log have left to
-- do, cheap enough to scrape: the oldest final job and race-log row are
-- read at the head of an index (jobs_final, race_log_logged_at); the row
-- counts are the planner's estimates (pg_class.reltuples, as of the last
-- VACUUM or ANALYZE, summed over the partitions in the partitioned layout,
-- NULL before the first: counting would read every
-- row), readable by any role in pg_class anyway, so not filtered by an
-- owner binding, while the two ages are.
--
CREATE VIEW idemjob.retention_stats WITH (security_barrier) AS
SELECT
	(SELECT CASE WHEN pg_catalog.bool_or(c.reltuples OPERATOR(pg_catalog.<) 0::pg_catalog.float4) THEN NULL
				 ELSE pg_catalog.sum(c.reltuples)::pg_catalog.int8 END
	 FROM pg_catalog.pg_class c
	 WHERE c.oid OPERATOR(pg_catalog.=) 'idemjob.jobs_final'::pg_catalog.regclass
		AND c.relkind OPERATOR(pg_catalog.<>) ALL ('{p,I}'::pg_catalog."char"[])
		OR c.oid OPERATOR(pg_catalog.=) ANY (SELECT t.relid FROM pg_catalog.pg_partition_tree('idemjob.jobs_final') t
											 WHERE t.isleaf)) AS final_jobs,
	pg_catalog.now() OPERATOR(pg_catalog.-)
		(SELECT j.completed_at FROM idemjob.jobs j
		 WHERE j.state OPERATOR(pg_catalog.=) ANY
				('{succeeded,failed,cancelled}'::idemjob.job_state[])
			AND idemjob.owner_visible(j.owner_id)
		 ORDER BY j.completed_at LIMIT 1) AS oldest_final_age,
	(SELECT CASE WHEN pg_catalog.bool_or(c.reltuples OPERATOR(pg_catalog.<) 0::pg_catalog.float4) THEN NULL
				 ELSE pg_catalog.sum(c.reltuples)::pg_catalog.int8 END
	 FROM pg_catalog.pg_class c
	 WHERE c.oid OPERATOR(pg_catalog.=) 'idemjob.spent_keys'::pg_catalog.regclass
		AND c.relkind OPERATOR(pg_catalog.<>) ALL ('{p,I}'::pg_catalog."char"[])
		OR c.oid OPERATOR(pg_catalog.=) ANY (SELECT t.relid FROM pg_catalog.pg_partition_tree('idemjob.spent_keys') t
											 WHERE t.isleaf)) AS spent_keys,
	(SELECT CASE WHEN pg_catalog.bool_or(c.reltuples OPERATOR(pg_catalog.<) 0::pg_catalog.float4) THEN NULL
				 ELSE pg_catalog.sum(c.reltuples)::pg_catalog.int8 END
	 FROM pg_catalog.pg_class c
	 WHERE c.oid OPERATOR(pg_catalog.=) 'idemjob.race_log'::pg_catalog.regclass
		AND c.relkind OPERATOR(pg_catalog.<>) ALL ('{p,I}'::pg_catalog."char"[])
		OR c.oid OPERATOR(pg_catalog.=) ANY (SELECT t.relid FROM pg_catalog.pg_partition_tree('idemjob.race_log') t
											 WHERE t.isleaf)) AS race_log_rows,
	pg_catalog.now() OPERATOR(pg_catalog.-)
		(SELECT r.logged_at FROM idemjob.race_log r
		 WHERE idemjob.owner_visible(r.owner_id)
		 ORDER BY r.logged_at LIMIT 1) AS oldest_race_log_age;
REVOKE ALL ON TABLE idemjob.retention_stats FROM PUBLIC;

--
-- The monitor capability: reads the views and provider_stats(since), and
-- nothing else (no table, no function that writes); for a dashboard or a
-- Prometheus exporter.  The rights block below grants it again to the
-- roles recorded with it.
--
ALTER TABLE idemjob.capabilities DROP CONSTRAINT capabilities_capability_check,
	ADD CONSTRAINT capabilities_capability_check
		CHECK (capability OPERATOR(pg_catalog.=) ANY
			('{client,worker,operator,admin,monitor}'::pg_catalog.text[]));
-- ==== end i21 monitoring ====

-- ==== begin issue 22: the owner hash ====
--
-- owner_hash: a 32-bit hash of the owner on every per-owner row (jobs,
-- attempts, race_log, spent_keys), carried in the low 32 bits of every job
-- id the extension makes (and of each attempt id, its job id's bits), and
-- the last column of every unique key in the partitioned layout below
-- (docs/scaling.md).  Rows of one owner share it, so a
-- table partitioned or distributed by owner_hash keeps each owner's jobs,
-- attempts, race-log rows and spent keys together, and a call given only
-- an id knows where its rows are.  On one server it is one more column.
-- (Not "route": that word is taken by the failover order of routes.)
--
-- A type of its own (an int4 inside, and an int4 to every operator), so that
-- an owner_id (text) and an id (uuid) can be assigned to it: Citus routes a
-- call by coercing its argument to the distribution column's type, and
-- these two casts are what make submit(owner_id, ...) and
-- start_attempt(job_id, ...) land on the node of their rows.  The casts
-- are the extension's own, from and to its own type, so no other use of
-- text, uuid or int4 in the database changes.
--
CREATE TYPE idemjob.owner_hash;
CREATE FUNCTION idemjob.owner_hash_in(pg_catalog.cstring) RETURNS idemjob.owner_hash
	AS 'int4in' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION idemjob.owner_hash_out(idemjob.owner_hash) RETURNS pg_catalog.cstring
	AS 'int4out' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION idemjob.owner_hash_recv(pg_catalog.internal) RETURNS idemjob.owner_hash
	AS 'int4recv' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION idemjob.owner_hash_send(idemjob.owner_hash) RETURNS pg_catalog.bytea
	AS 'int4send' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE;
CREATE TYPE idemjob.owner_hash (
	INPUT = idemjob.owner_hash_in, OUTPUT = idemjob.owner_hash_out,
	RECEIVE = idemjob.owner_hash_recv, SEND = idemjob.owner_hash_send,
	LIKE = pg_catalog.int4
);
COMMENT ON TYPE idemjob.owner_hash IS 'a 32-bit hash of an owner_id: where an owner''s rows live (docs/scaling.md)';

-- owner_hash(owner_id): the hash; owner_hash(id): the owner_hash an id carries
CREATE FUNCTION idemjob.owner_hash(owner_id pg_catalog.text) RETURNS idemjob.owner_hash
	AS 'MODULE_PATHNAME', 'idemjob_owner_hash'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION idemjob.owner_hash(id pg_catalog.uuid) RETURNS idemjob.owner_hash
	AS 'MODULE_PATHNAME', 'idemjob_owner_hash_of_id'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
-- the smallest id an owner_hash can carry (all other bits 0): no id the
-- extension makes; it exists for Citus, which wants a cast back from the
-- distribution column's type to a delegated function's argument type
CREATE FUNCTION idemjob.owner_hash_id(idemjob.owner_hash) RETURNS pg_catalog.uuid
	AS 'MODULE_PATHNAME', 'idemjob_owner_hash_id'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
-- a UUIDv7 that carries an owner_hash: the ids of the owner_hash's jobs and attempts
CREATE FUNCTION idemjob.uuid_v7(owner_hash idemjob.owner_hash) RETURNS pg_catalog.uuid
	AS 'MODULE_PATHNAME', 'idemjob_uuid_v7_owner_hash'
	LANGUAGE C VOLATILE STRICT PARALLEL SAFE;
CREATE CAST (pg_catalog.text AS idemjob.owner_hash)
	WITH FUNCTION idemjob.owner_hash(pg_catalog.text) AS ASSIGNMENT;
CREATE CAST (pg_catalog.uuid AS idemjob.owner_hash)
	WITH FUNCTION idemjob.owner_hash(pg_catalog.uuid) AS ASSIGNMENT;
CREATE CAST (idemjob.owner_hash AS pg_catalog.uuid)
	WITH FUNCTION idemjob.owner_hash_id(idemjob.owner_hash);
-- An owner_hash is an int4 to everything else: binary-coercible to it
-- (implicitly), it compares, sorts and hashes with int4's own built-in
-- operators and operator classes (as varchar with text's), in an index, a
-- partition key or a Citus distribution column, and in any query; an int4
-- can be assigned to one
CREATE CAST (idemjob.owner_hash AS pg_catalog.int4) WITHOUT FUNCTION AS IMPLICIT;
CREATE CAST (pg_catalog.int4 AS idemjob.owner_hash) WITHOUT FUNCTION AS ASSIGNMENT;

-- claim() on the node that holds the rows of owner_hash node: under Citus
-- (docs/scaling.md#citus), what claim() on a coordinator without shards
-- calls on each node that has some; elsewhere it is claim()
CREATE FUNCTION idemjob.claim_on(
	node idemjob.owner_hash,
	worker pg_catalog.text,
	intents pg_catalog.text[] DEFAULT NULL,
	max_jobs pg_catalog.int4 DEFAULT 1,
	timeout pg_catalog.interval DEFAULT NULL,
	wait pg_catalog.interval DEFAULT '0'::pg_catalog.interval,
	lease pg_catalog.bool DEFAULT false)
RETURNS TABLE(attempt_id pg_catalog.uuid, job_id pg_catalog.uuid,
			  owner_id pg_catalog.text, intent pg_catalog.text,
			  params pg_catalog.jsonb, provider pg_catalog.text,
			  attempt_no pg_catalog.int4, read_version pg_catalog.int8,
			  deadline pg_catalog.timestamptz)
AS 'MODULE_PATHNAME', 'idemjob_claim_on'
LANGUAGE C VOLATILE ROWS 1;
REVOKE ALL ON FUNCTION idemjob.claim_on(idemjob.owner_hash, pg_catalog.text, pg_catalog.text[],
	pg_catalog.int4, pg_catalog.interval, pg_catalog.interval, pg_catalog.bool) FROM PUBLIC;

-- expire_attempts(), abandon_attempts(), purge() or purge_race_log() (call),
-- with args as text, run as the caller on the node that holds the rows of
-- owner_hash node: under Citus, what those calls on a coordinator without
-- shards run on each node that has some; elsewhere the call itself
CREATE FUNCTION idemjob.on_node(node idemjob.owner_hash, call pg_catalog.text,
	args pg_catalog.text[] DEFAULT '{}'::pg_catalog.text[])
RETURNS pg_catalog.int4
AS 'MODULE_PATHNAME', 'idemjob_on_node'
LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION idemjob.on_node(idemjob.owner_hash, pg_catalog.text, pg_catalog.text[]) FROM PUBLIC;

--
-- The column.  Each table is rewritten once, with owner_hash computed from
-- the row's owner (a generated column whose expression is then dropped).
-- In plain tables the keys stay 1.1's: owner_hash is a function of
-- owner_id, so a key that holds an owner's rows unique holds them so with
-- it or without it, and wider keys cost every insert (the partitioned
-- layout below, which needs owner_hash in every key, adds it).  Holds
-- ACCESS EXCLUSIVE on the four tables for the rewrite
-- (docs/operations.md#upgrading gives the time at 1M jobs).
--
ALTER TABLE idemjob.jobs
	ADD COLUMN owner_hash idemjob.owner_hash NOT NULL
		GENERATED ALWAYS AS (idemjob.owner_hash(owner_id)) STORED;
ALTER TABLE idemjob.jobs ALTER COLUMN owner_hash DROP EXPRESSION;
ALTER TABLE idemjob.attempts
	ADD COLUMN owner_hash idemjob.owner_hash NOT NULL
		GENERATED ALWAYS AS (idemjob.owner_hash(owner_id)) STORED;
ALTER TABLE idemjob.attempts ALTER COLUMN owner_hash DROP EXPRESSION;
ALTER TABLE idemjob.race_log
	ADD COLUMN owner_hash idemjob.owner_hash NOT NULL
		GENERATED ALWAYS AS (idemjob.owner_hash(owner_id)) STORED;
ALTER TABLE idemjob.race_log ALTER COLUMN owner_hash DROP EXPRESSION;
ALTER TABLE idemjob.spent_keys
	ADD COLUMN owner_hash idemjob.owner_hash NOT NULL
		GENERATED ALWAYS AS (idemjob.owner_hash(owner_id)) STORED;
ALTER TABLE idemjob.spent_keys ALTER COLUMN owner_hash DROP EXPRESSION;

-- provider_stats: released attempts (never sent) are counted apart
-- (compared as text: the new enum value is not usable in this transaction);
-- an attempt joins its job on owner_hash too, which Citus needs to join
-- the two distributed tables (on one server: the same rows);
-- the percentiles rounded to 0.1 ms for people (188.6, not
-- 188.61200000000002), still double precision, so CREATE OR REPLACE keeps
-- the view (and anything a DBA built on it)
CREATE OR REPLACE VIEW idemjob.provider_stats WITH (security_barrier) AS
SELECT j.intent, a.provider,
	pg_catalog.count(*) AS attempts,
	pg_catalog.count(*) FILTER (WHERE a.state OPERATOR(pg_catalog.=) 'succeeded'::idemjob.attempt_state) AS succeeded,
	pg_catalog.count(*) FILTER (WHERE a.state OPERATOR(pg_catalog.=) 'superseded'::idemjob.attempt_state) AS superseded,
	pg_catalog.count(*) FILTER (WHERE a.state OPERATOR(pg_catalog.=) 'failed'::idemjob.attempt_state
		AND (a.error OPERATOR(pg_catalog.->>) 'code') OPERATOR(pg_catalog.=) 'contract_violation') AS rejected,
	pg_catalog.count(*) FILTER (WHERE a.state OPERATOR(pg_catalog.=) 'failed'::idemjob.attempt_state
		AND (a.error OPERATOR(pg_catalog.->>) 'code') IS DISTINCT FROM 'contract_violation') AS failed,
	pg_catalog.count(*) FILTER (WHERE a.state OPERATOR(pg_catalog.=) ANY
		('{started,unknown}'::idemjob.attempt_state[])) AS in_doubt,
	pg_catalog.count(*) FILTER (WHERE a.state OPERATOR(pg_catalog.=) 'cancelled'::idemjob.attempt_state) AS cancelled,
	pg_catalog.round(pg_catalog.percentile_cont(0.5::pg_catalog.float8) WITHIN GROUP (ORDER BY
		pg_catalog.date_part('epoch'::pg_catalog.text,
			a.finished_at OPERATOR(pg_catalog.-) a.started_at) OPERATOR(pg_catalog.*) 1000::pg_catalog.float8)
		FILTER (WHERE a.state OPERATOR(pg_catalog.=) 'succeeded'::idemjob.attempt_state)::pg_catalog.numeric,
		1)::pg_catalog.float8 AS p50_ms,
	pg_catalog.round(pg_catalog.percentile_cont(0.95::pg_catalog.float8) WITHIN GROUP (ORDER BY
		pg_catalog.date_part('epoch'::pg_catalog.text,
			a.finished_at OPERATOR(pg_catalog.-) a.started_at) OPERATOR(pg_catalog.*) 1000::pg_catalog.float8)
		FILTER (WHERE a.state OPERATOR(pg_catalog.=) 'succeeded'::idemjob.attempt_state)::pg_catalog.numeric,
		1)::pg_catalog.float8 AS p95_ms,
	pg_catalog.max(a.started_at) AS last_started_at,
	pg_catalog.count(*) FILTER (WHERE a.state::pg_catalog.text OPERATOR(pg_catalog.=) 'released') AS released
FROM idemjob.attempts a
	JOIN idemjob.jobs j ON j.owner_hash OPERATOR(pg_catalog.=) a.owner_hash
		AND j.id OPERATOR(pg_catalog.=) a.job_id
WHERE idemjob.owner_visible(a.owner_id)
GROUP BY j.intent, a.provider;
-- ==== end issue 22: the owner hash ====

--
-- The partitioned layout (docs/scaling.md#partitioned-layout): with
-- idemjob.partitions = N > 0 while this script runs (CREATE EXTENSION, or
-- the update to 1.2), jobs, attempts, race_log and spent_keys become
-- tables partitioned BY HASH (owner_hash) into N partitions
-- (<table>_p0 ... <table>_p<N-1>, members of the extension, their rows
-- dumped with it), with the same columns, keys, indexes, triggers and
-- comments, their rows moved over, and the views redefined on them;
-- owner_hash is added last to every unique key and index, which
-- PostgreSQL requires of a partitioned table and which keeps each key
-- whole in one partition.  With 0 (the default) nothing here runs.
--
DO $partition$
DECLARE
	n pg_catalog.int4 := COALESCE(pg_catalog.current_setting('idemjob.partitions', true), '0')::pg_catalog.int4;
	tabs CONSTANT pg_catalog.text[] := '{jobs,attempts,race_log,spent_keys}';
	t pg_catalog.text;
	i pg_catalog.int4;
	r record;
	dropped pg_catalog.text[] := '{}';	-- views and functions, dropped
	again pg_catalog.text[] := '{}';	-- what makes them, their keys, indexes, triggers
	stmt pg_catalog.text;
BEGIN
	IF n = 0 THEN
		RETURN;
	END IF;
	-- definitions written with every name qualified
	SET LOCAL search_path = pg_catalog, pg_temp;

	-- the old tables' keys, indexes and triggers (the foreign key: below)
	FOREACH t IN ARRAY tabs LOOP
		FOR r IN SELECT co.conname, pg_catalog.pg_get_constraintdef(co.oid) AS def
				 FROM pg_catalog.pg_constraint co
				 WHERE co.conrelid OPERATOR(pg_catalog.=) pg_catalog.format('idemjob.%I', t)::pg_catalog.regclass
				   AND co.contype OPERATOR(pg_catalog.=) ANY ('{p,u}'::pg_catalog."char"[])
				 ORDER BY co.contype DESC, co.conname LOOP
			-- with owner_hash last: a partitioned table's keys hold its partition key
			again := again || pg_catalog.format('ALTER TABLE idemjob.%I ADD CONSTRAINT %I %s',
				t, r.conname, pg_catalog.regexp_replace(r.def, '\)$', ', owner_hash)'));
		END LOOP;
		FOR r IN SELECT CASE WHEN x.indisunique
					THEN pg_catalog.regexp_replace(pg_catalog.pg_get_indexdef(x.indexrelid),
						'USING (\w+) \(([^)]*)\)', 'USING \1 (\2, owner_hash)')
					ELSE pg_catalog.pg_get_indexdef(x.indexrelid) END AS def
				 FROM pg_catalog.pg_index x
				 WHERE x.indrelid OPERATOR(pg_catalog.=) pg_catalog.format('idemjob.%I', t)::pg_catalog.regclass
				   AND NOT EXISTS (SELECT FROM pg_catalog.pg_constraint co
								   WHERE co.conindid OPERATOR(pg_catalog.=) x.indexrelid)
				 ORDER BY x.indexrelid LOOP
			again := again || r.def;
		END LOOP;
		FOR r IN SELECT pg_catalog.pg_get_triggerdef(tg.oid) AS def
				 FROM pg_catalog.pg_trigger tg
				 WHERE tg.tgrelid OPERATOR(pg_catalog.=) pg_catalog.format('idemjob.%I', t)::pg_catalog.regclass
				   AND NOT tg.tgisinternal
				 ORDER BY tg.tgname LOOP
			again := again || r.def;
		END LOOP;
	END LOOP;

	-- the views (they read these tables and their indexes) and the
	-- functions that return a row of one: made again on the new tables,
	-- with their comments and grants (the owner's are implicit)
	FOR r IN SELECT 'VIEW' AS kind, 'TABLE' AS acl_kind,
				c.oid::pg_catalog.regclass::pg_catalog.text AS name,
				pg_catalog.format('CREATE VIEW %s AS %s', c.oid::pg_catalog.regclass,
								  pg_catalog.pg_get_viewdef(c.oid)) AS def,
				pg_catalog.obj_description(c.oid, 'pg_class') AS comment,
				COALESCE(c.relacl, pg_catalog.acldefault('r', c.relowner)) AS acl, c.relowner AS owner
			 FROM pg_catalog.pg_class c
			 WHERE c.relnamespace OPERATOR(pg_catalog.=) 'idemjob'::pg_catalog.regnamespace
			   AND c.relkind OPERATOR(pg_catalog.=) 'v'
			 UNION ALL
			 SELECT 'FUNCTION', 'FUNCTION', p.oid::pg_catalog.regprocedure::pg_catalog.text,
				pg_catalog.pg_get_functiondef(p.oid),
				pg_catalog.obj_description(p.oid, 'pg_proc'),
				COALESCE(p.proacl, pg_catalog.acldefault('f', p.proowner)), p.proowner
			 FROM pg_catalog.pg_proc p
			 WHERE p.pronamespace OPERATOR(pg_catalog.=) 'idemjob'::pg_catalog.regnamespace
			   AND EXISTS (SELECT FROM pg_catalog.pg_depend d
						   JOIN pg_catalog.pg_type ty ON ty.oid OPERATOR(pg_catalog.=) d.refobjid
						   WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
							 AND d.objid OPERATOR(pg_catalog.=) p.oid
							 AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_type'::pg_catalog.regclass
							 AND ty.typrelid OPERATOR(pg_catalog.=) ANY (SELECT pg_catalog.format('idemjob.%I', x)::pg_catalog.regclass::pg_catalog.oid
																	  FROM pg_catalog.unnest(tabs) x))
			 ORDER BY 1 DESC, 3 LOOP
		dropped := dropped || pg_catalog.format('DROP %s %s', r.kind, r.name);
		again := again || r.def
			|| pg_catalog.format('REVOKE ALL ON %s %s FROM PUBLIC', r.acl_kind, r.name);
		IF r.comment IS NOT NULL THEN
			again := again || pg_catalog.format('COMMENT ON %s %s IS %L', r.kind, r.name, r.comment);
		END IF;
		again := again || (SELECT pg_catalog.array_agg(pg_catalog.format('GRANT %s ON %s %s TO %s',
				a.privilege_type, r.acl_kind, r.name,
				CASE WHEN a.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
					 ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(a.grantee)) END))
			FROM pg_catalog.aclexplode(r.acl) a WHERE a.grantee OPERATOR(pg_catalog.<>) r.owner);
	END LOOP;

	-- the new tables, with the old rows
	FOREACH t IN ARRAY tabs LOOP
		EXECUTE pg_catalog.format('CREATE TABLE idemjob.%I (LIKE idemjob.%I INCLUDING DEFAULTS'
			' INCLUDING CONSTRAINTS INCLUDING COMMENTS INCLUDING STORAGE INCLUDING COMPRESSION)'
			' PARTITION BY HASH (owner_hash)', t || '_partitioned', t);
		FOR i IN 0 .. n - 1 LOOP
			EXECUTE pg_catalog.format('CREATE TABLE idemjob.%I PARTITION OF idemjob.%I'
				' FOR VALUES WITH (MODULUS %s, REMAINDER %s) %s',
				t || '_p' || i, t || '_partitioned', n, i,
				(SELECT CASE WHEN c.reloptions IS NULL THEN ''
						ELSE 'WITH (' || pg_catalog.array_to_string(c.reloptions, ', ') || ')' END
				 FROM pg_catalog.pg_class c
				 WHERE c.oid OPERATOR(pg_catalog.=) pg_catalog.format('idemjob.%I', t)::pg_catalog.regclass));
			-- the rows of every partition are dumped with the extension
			PERFORM pg_catalog.pg_extension_config_dump(
				pg_catalog.format('idemjob.%I', t || '_p' || i)::pg_catalog.regclass, '');
		END LOOP;
		EXECUTE pg_catalog.format('INSERT INTO idemjob.%I SELECT * FROM idemjob.%I',
			t || '_partitioned', t);
		EXECUTE pg_catalog.format('COMMENT ON TABLE idemjob.%I IS %L', t || '_partitioned',
			pg_catalog.obj_description(pg_catalog.format('idemjob.%I', t)::pg_catalog.regclass, 'pg_class'));
	END LOOP;

	-- the old ones go, with what depends on them; the new ones take their names
	FOREACH stmt IN ARRAY dropped LOOP
		EXECUTE stmt;
	END LOOP;
	ALTER TABLE idemjob.attempts DROP CONSTRAINT attempts_job_id_fkey;
	FOREACH t IN ARRAY tabs LOOP
		-- out of the extension first: that also takes it off the list of
		-- tables whose rows pg_dump dumps (extconfig)
		EXECUTE pg_catalog.format('ALTER EXTENSION idemjob DROP TABLE idemjob.%I', t);
		EXECUTE pg_catalog.format('DROP TABLE idemjob.%I', t);
		EXECUTE pg_catalog.format('ALTER TABLE idemjob.%I RENAME TO %I', t || '_partitioned', t);
		PERFORM pg_catalog.pg_extension_config_dump(
			pg_catalog.format('idemjob.%I', t)::pg_catalog.regclass, '');
	END LOOP;
	FOREACH stmt IN ARRAY again LOOP
		EXECUTE stmt;
	END LOOP;
	-- attempts' foreign key, partition to partition: a job and its attempts
	-- share their owner_hash, so they lie in partitions of the same number;
	-- and so pg_dump, which orders the data of the tables it dumps by the
	-- foreign keys between them, dumps jobs_pN's rows before attempts_pN's
	FOR i IN 0 .. n - 1 LOOP
		EXECUTE pg_catalog.format('ALTER TABLE idemjob.%I ADD CONSTRAINT %I'
			' FOREIGN KEY (job_id, owner_hash) REFERENCES idemjob.%I (id, owner_hash)'
			' ON DELETE CASCADE', 'attempts_p' || i, 'attempts_p' || i || '_job_id_fkey',
			'jobs_p' || i);
	END LOOP;
	-- each partition's index named as its table's, with the partition's
	-- suffix (jobs_claim_p3 on jobs_p3), so that plans say which they use
	FOR r IN SELECT pi.oid::pg_catalog.regclass::pg_catalog.text AS old_name,
				pg_catalog.format('%s_p%s', parent.relname,
					pg_catalog.substring(pt.relname, '_p([0-9]+)$')) AS new_name
			 FROM pg_catalog.pg_inherits inh
			 JOIN pg_catalog.pg_class parent ON parent.oid OPERATOR(pg_catalog.=) inh.inhparent
			 JOIN pg_catalog.pg_class pi ON pi.oid OPERATOR(pg_catalog.=) inh.inhrelid
			 JOIN pg_catalog.pg_index x ON x.indexrelid OPERATOR(pg_catalog.=) pi.oid
			 JOIN pg_catalog.pg_class pt ON pt.oid OPERATOR(pg_catalog.=) x.indrelid
			 WHERE parent.relkind OPERATOR(pg_catalog.=) 'I'
			   AND parent.relnamespace OPERATOR(pg_catalog.=) 'idemjob'::pg_catalog.regnamespace LOOP
		EXECUTE pg_catalog.format('ALTER INDEX %s RENAME TO %I', r.old_name, r.new_name);
	END LOOP;
	-- a TRUNCATE of one partition fires no trigger of its parent
	FOREACH t IN ARRAY '{jobs,attempts}'::pg_catalog.text[] LOOP
		FOR i IN 0 .. n - 1 LOOP
			EXECUTE pg_catalog.format('CREATE TRIGGER %I BEFORE TRUNCATE ON idemjob.%I'
				' FOR EACH STATEMENT EXECUTE FUNCTION idemjob.truncate_guard()',
				t || '_truncate_guard', t || '_p' || i);
		END LOOP;
	END LOOP;
END
$partition$;

--
-- Citus (docs/scaling.md#citus): with the citus extension in the database
-- while this script runs, and no partitions, jobs, attempts, race_log and
-- spent_keys stay plain tables here with owner_hash added last to every
-- unique key and index, and attempts' foreign key on (job_id,
-- owner_hash): Citus distributes a table only by a column every one of its
-- keys holds, and idemjob.distribute() distributes these four by
-- owner_hash.  Each node runs this script (Citus sends CREATE EXTENSION
-- and ALTER EXTENSION to every node), each on its own tables.
--
DO $keyed$
DECLARE
	tabs CONSTANT pg_catalog.text[] := '{jobs,attempts,race_log,spent_keys}';
	t pg_catalog.text;
	r record;
BEGIN
	IF COALESCE(pg_catalog.current_setting('idemjob.partitions', true), '0')::pg_catalog.int4
			OPERATOR(pg_catalog.<>) 0
		OR NOT EXISTS (SELECT FROM pg_catalog.pg_extension
					   WHERE extname OPERATOR(pg_catalog.=) 'citus') THEN
		RETURN;
	END IF;
	SET LOCAL search_path = pg_catalog, pg_temp;
	ALTER TABLE idemjob.attempts DROP CONSTRAINT attempts_job_id_fkey;
	FOREACH t IN ARRAY tabs LOOP
		FOR r IN SELECT co.conname, pg_catalog.pg_get_constraintdef(co.oid) AS def
				 FROM pg_catalog.pg_constraint co
				 WHERE co.conrelid OPERATOR(pg_catalog.=) pg_catalog.format('idemjob.%I', t)::pg_catalog.regclass
				   AND co.contype OPERATOR(pg_catalog.=) ANY ('{p,u}'::pg_catalog."char"[])
				 ORDER BY co.contype DESC, co.conname LOOP
			EXECUTE pg_catalog.format('ALTER TABLE idemjob.%I DROP CONSTRAINT %I', t, r.conname);
			EXECUTE pg_catalog.format('ALTER TABLE idemjob.%I ADD CONSTRAINT %I %s',
				t, r.conname, pg_catalog.regexp_replace(r.def, '\)$', ', owner_hash)'));
		END LOOP;
		FOR r IN SELECT x.indexrelid::pg_catalog.regclass::pg_catalog.text AS name,
					pg_catalog.regexp_replace(pg_catalog.pg_get_indexdef(x.indexrelid),
						'USING (\w+) \(([^)]*)\)', 'USING \1 (\2, owner_hash)') AS def
				 FROM pg_catalog.pg_index x
				 WHERE x.indrelid OPERATOR(pg_catalog.=) pg_catalog.format('idemjob.%I', t)::pg_catalog.regclass
				   AND x.indisunique
				   AND NOT EXISTS (SELECT FROM pg_catalog.pg_constraint co
								   WHERE co.conindid OPERATOR(pg_catalog.=) x.indexrelid)
				 ORDER BY x.indexrelid LOOP
			EXECUTE pg_catalog.format('DROP INDEX %s', r.name);
			EXECUTE r.def;
		END LOOP;
	END LOOP;
	ALTER TABLE idemjob.attempts ADD CONSTRAINT attempts_job_id_fkey
		FOREIGN KEY (job_id, owner_hash) REFERENCES idemjob.jobs (id, owner_hash) ON DELETE CASCADE;
END
$keyed$;

--
-- idemjob.distribute(): on a Citus coordinator, the per-owner tables
-- distributed by owner_hash and co-located, the others made reference
-- tables (on every node), and the calls given an owner or an id sent whole
-- to the node that holds its rows (docs/scaling.md#citus).  Once per
-- database; a second call changes nothing.
--
CREATE FUNCTION idemjob.distribute(shard_count pg_catalog.int4 DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $distribute$
DECLARE
	refs CONSTANT pg_catalog.text[] :=
		'{contracts,certifications,capabilities,owner_bindings,retry_policies,routes}';
	tabs CONSTANT pg_catalog.text[] := '{jobs,attempts,race_log,spent_keys}';
	-- each call and the argument whose node it runs on
	calls CONSTANT pg_catalog.text[] := ARRAY[
		'idemjob.submit(text,text,text,jsonb,text,timestamptz,int4,int4)', 'owner_id',
		'idemjob.job(uuid)', 'job_id',
		'idemjob.await_job(uuid,interval)', 'job_id',
		'idemjob.start_attempt(uuid,text,interval,text)', 'job_id',
		'idemjob.cancel_job(uuid,text)', 'job_id',
		'idemjob.complete_attempt(uuid,jsonb)', 'attempt_id',
		'idemjob.fail_attempt(uuid,jsonb,boolean)', 'attempt_id',
		'idemjob.mark_unknown(uuid,text)', 'attempt_id',
		'idemjob.cancel_attempt(uuid,text,boolean)', 'attempt_id',
		'idemjob.heartbeat(uuid,interval)', 'attempt_id',
		'idemjob.begin_attempt(uuid)', 'attempt_id',
		'idemjob.claim_on(idemjob.owner_hash,text,text[],int4,interval,interval,boolean)', 'node',
		'idemjob.on_node(idemjob.owner_hash,text,text[])', 'node'];
	t pg_catalog.text;
	i pg_catalog.int4;
	stale pg_catalog.regclass[];
	r pg_catalog.regclass;
	role pg_catalog.text;
	quiet pg_catalog.text;
BEGIN
	IF NOT EXISTS (SELECT FROM pg_catalog.pg_extension WHERE extname OPERATOR(pg_catalog.=) 'citus') THEN
		RAISE EXCEPTION 'idemjob.distribute() needs Citus'
			USING ERRCODE = 'object_not_in_prerequisite_state',
				  DETAIL = 'The citus extension is not installed in this database.',
				  HINT = 'CREATE EXTENSION citus, then CREATE EXTENSION idemjob, on the coordinator.';
	END IF;
	IF NOT pg_catalog.citus_is_coordinator() THEN
		RAISE EXCEPTION 'idemjob.distribute() runs on the coordinator'
			USING ERRCODE = 'object_not_in_prerequisite_state';
	END IF;
	-- a delegated call runs its statements on its own shards, in its own
	-- transaction; without local execution each would be another
	-- connection to this very node, which cannot see what the call wrote
	IF pg_catalog.current_setting('citus.enable_local_execution') OPERATOR(pg_catalog.<>) 'on' THEN
		RAISE EXCEPTION 'idemjob.distribute() needs citus.enable_local_execution = on'
			USING ERRCODE = 'object_not_in_prerequisite_state';
	END IF;
	IF (SELECT pg_catalog.cardinality(co.conkey) FROM pg_catalog.pg_constraint co
		WHERE co.conrelid OPERATOR(pg_catalog.=) 'idemjob.jobs'::pg_catalog.regclass
		  AND co.conname OPERATOR(pg_catalog.=) 'jobs_pkey') OPERATOR(pg_catalog.<>) 2 THEN
		RAISE EXCEPTION 'the keys of idemjob''s tables do not hold owner_hash'
			USING ERRCODE = 'object_not_in_prerequisite_state',
				  DETAIL = 'idemjob was installed, or updated to 1.2, before Citus was installed in this database.',
				  HINT = 'Install Citus first: CREATE EXTENSION citus before CREATE EXTENSION idemjob, in a new database (docs/scaling.md#citus).';
	END IF;

	-- rows already in the tables are copied into the shards (the shards'
	-- guards check each, against its own shard group).  A call given an id
	-- goes to the node its id's owner_hash names: an id made before 1.2
	-- carries none, and its job or attempt could not be found there
	IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition p
				   WHERE p.logicalrelid OPERATOR(pg_catalog.=) 'idemjob.jobs'::pg_catalog.regclass) THEN
		SELECT pg_catalog.count(*) INTO i FROM (
			SELECT FROM idemjob.jobs j
			WHERE idemjob.owner_hash(j.id) OPERATOR(pg_catalog.<>) j.owner_hash
			UNION ALL
			SELECT FROM idemjob.attempts a
			WHERE idemjob.owner_hash(a.id) OPERATOR(pg_catalog.<>) a.owner_hash) x;
		IF i OPERATOR(pg_catalog.>) 0 THEN
			RAISE EXCEPTION 'idemjob.distribute(): % jobs and attempts have ids made before 1.2', i
				USING ERRCODE = 'object_not_in_prerequisite_state',
					  DETAIL = 'Such an id carries no owner_hash; on Citus a call given it would go to a node that does not hold its row.',
					  HINT = 'Let those jobs end and purge them first (docs/scaling.md#citus, "Moving onto Citus").';
		END IF;
	END IF;

	-- Citus's notices on copying rows end in a hint to truncate what it
	-- leaves behind, which is done below
	quiet := pg_catalog.current_setting('client_min_messages');
	IF quiet OPERATOR(pg_catalog.~) '^(debug|log|info|notice)' THEN
		PERFORM pg_catalog.set_config('client_min_messages', 'warning', true);
	END IF;
	-- the guards go with each table to its shards
	PERFORM pg_catalog.set_config('citus.enable_unsafe_triggers', 'on', true);
	-- a reference table's referencing tables stay as they are until their
	-- own turn (Citus would make them local tables of the coordinator)
	PERFORM pg_catalog.set_config('citus.enable_local_reference_table_foreign_keys', 'off', true);
	FOREACH t IN ARRAY refs LOOP
		IF NOT EXISTS (SELECT FROM pg_catalog.pg_dist_partition p
					   WHERE p.logicalrelid OPERATOR(pg_catalog.=) pg_catalog.format('idemjob.%I', t)::pg_catalog.regclass) THEN
			PERFORM pg_catalog.create_reference_table(pg_catalog.format('idemjob.%I', t)::pg_catalog.regclass);
		END IF;
	END LOOP;
	FOREACH t IN ARRAY tabs LOOP
		IF NOT EXISTS (SELECT FROM pg_catalog.pg_dist_partition p
					   WHERE p.logicalrelid OPERATOR(pg_catalog.=) pg_catalog.format('idemjob.%I', t)::pg_catalog.regclass) THEN
			IF t OPERATOR(pg_catalog.=) 'jobs' THEN
				PERFORM pg_catalog.create_distributed_table('idemjob.jobs'::pg_catalog.regclass, 'owner_hash',
					shard_count => COALESCE(shard_count,
						pg_catalog.current_setting('citus.shard_count')::pg_catalog.int4));
			ELSE
				PERFORM pg_catalog.create_distributed_table(pg_catalog.format('idemjob.%I', t)::pg_catalog.regclass,
					'owner_hash', colocate_with => 'idemjob.jobs');
			END IF;
		END IF;
	END LOOP;
	-- an owner's text, or an id, is cast to the owner_hash it names
	-- (owner_hash(text), owner_hash(uuid)) and hashed as the column is.
	-- Forced: sent inside a transaction block too, into the block's own
	-- transaction, where the call's statements run on its node's shards as
	-- plain statements of that node (which Citus does not check against
	-- the argument's value)
	FOR i IN 1 .. pg_catalog.array_length(calls, 1) BY 2 LOOP
		PERFORM pg_catalog.create_distributed_function(calls[i]::pg_catalog.regprocedure,
			calls[i OPERATOR(pg_catalog.+) 1], colocate_with => 'idemjob.jobs',
			force_delegation => true);
	END LOOP;
	-- Citus copied the rows the tables held into the shards and left them
	-- in the coordinator's own tables too, where nothing reads them; the
	-- guards refuse the TRUNCATE that removes them, so they do not fire
	-- for it (session_replication_role, which takes a superuser: only a
	-- distribute() over existing rows needs one)
	SELECT pg_catalog.array_agg(pg_catalog.format('idemjob.%I', n)::pg_catalog.regclass ORDER BY o) INTO stale
	-- (referencing tables first)
	FROM pg_catalog.unnest('{race_log,attempts,spent_keys,jobs,certifications,capabilities,owner_bindings,retry_policies,routes,contracts}'::pg_catalog.text[]) WITH ORDINALITY AS x(n, o)
	WHERE pg_catalog.pg_relation_size(pg_catalog.format('idemjob.%I', n)::pg_catalog.regclass) OPERATOR(pg_catalog.>) 0;
	IF stale IS NOT NULL THEN
		role := pg_catalog.current_setting('session_replication_role');
		PERFORM pg_catalog.set_config('session_replication_role', 'replica', true);
		FOREACH r IN ARRAY stale LOOP
			PERFORM pg_catalog.truncate_local_data_after_distributing_table(r);
		END LOOP;
		PERFORM pg_catalog.set_config('session_replication_role', role, true);
	END IF;
	PERFORM pg_catalog.set_config('client_min_messages', quiet, true);
END
$distribute$;
REVOKE ALL ON FUNCTION idemjob.distribute(pg_catalog.int4) FROM PUBLIC;
COMMENT ON FUNCTION idemjob.distribute(pg_catalog.int4) IS
'On a Citus coordinator: distribute the per-owner tables by owner_hash, make the others reference tables, and send each call given an owner or an id to the node that holds its rows';

--
-- Rights: exactly what the security model says.  Default privileges of the
-- installing role (ALTER DEFAULT PRIVILEGES), grants made by hand and
-- column-level grants are taken back from every role but the owner; then
-- each capability recorded in idemjob.capabilities is granted again, and
-- PUBLIC keeps EXECUTE on validate() and uuid_v7().  Role names are quoted
-- once (%I on the name, never on regrole's already quoted text).
--
DO $rights$
DECLARE
	r record;
	owner pg_catalog.oid := (SELECT e.extowner FROM pg_catalog.pg_extension e
							 WHERE e.extname OPERATOR(pg_catalog.=) 'idemjob');
	nsp pg_catalog.oid := pg_catalog.to_regnamespace('idemjob')::pg_catalog.oid;
BEGIN
	FOR r IN
		SELECT DISTINCT c.oid::pg_catalog.regclass::pg_catalog.text AS obj,
			   CASE WHEN c.relkind OPERATOR(pg_catalog.=) 'S' THEN 'SEQUENCE' ELSE 'TABLE' END AS kind,
			   a.grantee
		FROM pg_catalog.pg_class c
		CROSS JOIN LATERAL pg_catalog.aclexplode(c.relacl) a
		WHERE c.relnamespace OPERATOR(pg_catalog.=) nsp AND a.grantee OPERATOR(pg_catalog.<>) owner
		UNION
		SELECT DISTINCT c.oid::pg_catalog.regclass::pg_catalog.text, 'TABLE', a.grantee
		FROM pg_catalog.pg_class c
		JOIN pg_catalog.pg_attribute att ON att.attrelid OPERATOR(pg_catalog.=) c.oid
		CROSS JOIN LATERAL pg_catalog.aclexplode(att.attacl) a
		WHERE c.relnamespace OPERATOR(pg_catalog.=) nsp AND a.grantee OPERATOR(pg_catalog.<>) owner
		UNION
		SELECT DISTINCT p.oid::pg_catalog.regprocedure::pg_catalog.text, 'FUNCTION', a.grantee
		FROM pg_catalog.pg_proc p
		CROSS JOIN LATERAL pg_catalog.aclexplode(p.proacl) a
		WHERE p.pronamespace OPERATOR(pg_catalog.=) nsp AND a.grantee OPERATOR(pg_catalog.<>) owner
		UNION
		SELECT DISTINCT 'idemjob', 'SCHEMA', a.grantee
		FROM pg_catalog.pg_namespace n
		CROSS JOIN LATERAL pg_catalog.aclexplode(n.nspacl) a
		WHERE n.oid OPERATOR(pg_catalog.=) nsp AND a.grantee OPERATOR(pg_catalog.<>) owner
		UNION
		SELECT DISTINCT t.oid::pg_catalog.regtype::pg_catalog.text, 'TYPE', a.grantee
		FROM pg_catalog.pg_type t
		CROSS JOIN LATERAL pg_catalog.aclexplode(t.typacl) a
		WHERE t.typnamespace OPERATOR(pg_catalog.=) nsp AND a.grantee OPERATOR(pg_catalog.<>) owner
		  AND a.grantee OPERATOR(pg_catalog.<>) 0
	LOOP
		EXECUTE pg_catalog.format('REVOKE ALL ON %s %s FROM %s', r.kind, r.obj,
			CASE WHEN r.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
				 ELSE pg_catalog.quote_ident((SELECT a.rolname FROM pg_catalog.pg_authid a
											  WHERE a.oid OPERATOR(pg_catalog.=) r.grantee)) END);
	END LOOP;
	-- (a type's USAGE for PUBLIC stays, as PostgreSQL's default gives it)
	GRANT EXECUTE ON FUNCTION idemjob.validate(pg_catalog.jsonb, pg_catalog.jsonb) TO PUBLIC;
	GRANT EXECUTE ON FUNCTION idemjob.uuid_v7() TO PUBLIC;
	-- the owner_hash's functions: pure, and run by anyone a cast to it runs for
	GRANT EXECUTE ON FUNCTION idemjob.uuid_v7(idemjob.owner_hash),
		idemjob.owner_hash(pg_catalog.text), idemjob.owner_hash(pg_catalog.uuid),
		idemjob.owner_hash_id(idemjob.owner_hash) TO PUBLIC;
	-- a type's input and output run without a privilege check: no one
	-- needs to call them (and a default privilege may or may not grant it)
	REVOKE ALL ON FUNCTION idemjob.owner_hash_in(pg_catalog.cstring),
		idemjob.owner_hash_out(idemjob.owner_hash),
		idemjob.owner_hash_recv(pg_catalog.internal),
		idemjob.owner_hash_send(idemjob.owner_hash) FROM PUBLIC;
	FOR r IN SELECT c.grantee, c.capability FROM idemjob.capabilities c LOOP
		PERFORM idemjob.grant_capability(r.grantee, r.capability);
	END LOOP;
END
$rights$;
