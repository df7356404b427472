/* sql/idemjob--1.0--1.1.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION idemjob UPDATE TO '1.1'" to load this file. \quit

--
-- There is no separate 1.1 install script: CREATE EXTENSION idemjob runs
-- idemjob--1.0.sql (released, never edited) and then this script, as
-- PostgreSQL's contrib modules do, so a fresh 1.1 and an upgraded 1.0 are
-- the same objects by construction.  Every name written here is qualified:
-- types, functions, operators and collations resolve in pg_catalog or
-- idemjob whatever the search_path.  Rows are kept; columns new in 1.1 are
-- filled from what 1.0 recorded.
--

--
-- Rights (security model): the functions run with the extension owner's
-- rights, so callers need no privilege on the tables, and nothing is
-- granted to PUBLIC.  The 1.0 README told DBAs to grant the application
-- role SELECT, INSERT and UPDATE on every table: in 1.1 only the owner and
-- superusers write the tables, and reading them is the operator
-- capability, so every such grant is taken back here (a NOTICE names each
-- role; give it a capability with idemjob.grant_capability).
--
DO $upgrade$
DECLARE
	r record;
BEGIN
	FOR r IN
		SELECT DISTINCT c.oid::pg_catalog.regclass AS tab, a.grantee
		FROM pg_catalog.pg_class c
			CROSS JOIN LATERAL pg_catalog.aclexplode(c.relacl) a
		WHERE c.relnamespace OPERATOR(pg_catalog.=) 'idemjob'::pg_catalog.regnamespace
			AND a.grantee OPERATOR(pg_catalog.<>) c.relowner
	LOOP
		IF r.grantee OPERATOR(pg_catalog.=) 0::pg_catalog.oid THEN
			EXECUTE pg_catalog.format('REVOKE ALL ON TABLE %s FROM PUBLIC', r.tab);
		ELSE
			RAISE WARNING 'idemjob 1.1: revoked the privileges of role % on %; grant it a capability with idemjob.grant_capability()',
				r.grantee::pg_catalog.regrole, r.tab;
			EXECUTE pg_catalog.format('REVOKE ALL ON TABLE %s FROM %I', r.tab,
									  r.grantee::pg_catalog.regrole::pg_catalog.text);
		END IF;
	END LOOP;
END
$upgrade$;

REVOKE ALL ON SCHEMA idemjob FROM PUBLIC;
DO $upgrade$
DECLARE
	r record;
BEGIN
	FOR r IN
		SELECT a.grantee
		FROM pg_catalog.pg_namespace n
			CROSS JOIN LATERAL pg_catalog.aclexplode(n.nspacl) a
		WHERE n.nspname OPERATOR(pg_catalog.=) 'idemjob'::pg_catalog.name
			AND a.grantee OPERATOR(pg_catalog.<>) n.nspowner
			AND a.grantee OPERATOR(pg_catalog.<>) 0::pg_catalog.oid
	LOOP
		EXECUTE pg_catalog.format('REVOKE ALL ON SCHEMA idemjob FROM %I',
								  r.grantee::pg_catalog.regrole::pg_catalog.text);
	END LOOP;
END
$upgrade$;
REVOKE ALL ON FUNCTION idemjob.cancel_job(pg_catalog.uuid, pg_catalog.text) FROM PUBLIC;
REVOKE ALL ON FUNCTION idemjob.start_attempt(pg_catalog.uuid, pg_catalog.text, interval, pg_catalog.text) FROM PUBLIC;
REVOKE ALL ON FUNCTION idemjob.complete_attempt(pg_catalog.uuid, pg_catalog.jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION idemjob.fail_attempt(pg_catalog.uuid, pg_catalog.jsonb, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION idemjob.mark_unknown(pg_catalog.uuid, pg_catalog.text) FROM PUBLIC;
REVOKE ALL ON FUNCTION idemjob.cancel_attempt(pg_catalog.uuid, pg_catalog.text, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION idemjob.expire_attempts() FROM PUBLIC;
REVOKE ALL ON FUNCTION idemjob.define_contract(pg_catalog.text, pg_catalog.jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION idemjob.certify_provider(pg_catalog.text, pg_catalog.text, pg_catalog.jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION idemjob.revoke_provider(pg_catalog.text, pg_catalog.text, pg_catalog.text) FROM PUBLIC;
REVOKE ALL ON FUNCTION idemjob.jobs_guard() FROM PUBLIC;
REVOKE ALL ON FUNCTION idemjob.attempts_guard() FROM PUBLIC;
REVOKE ALL ON FUNCTION idemjob.truncate_guard() FROM PUBLIC;
REVOKE ALL ON FUNCTION idemjob.contracts_changed() FROM PUBLIC;
-- validate() and uuid_v7() stay public (they read no table); schema usage
-- comes with a capability

--
-- Jobs: scheduling, retries, the error that ended a failed job
--
ALTER TABLE idemjob.jobs
	ADD COLUMN priority pg_catalog.int4 NOT NULL DEFAULT 0,
	ADD COLUMN run_at pg_catalog.timestamptz,
	ADD COLUMN max_attempts pg_catalog.int4,
	ADD COLUMN error pg_catalog.jsonb;
-- a 1.0 job was due when it was created; the guards refuse raw updates of
-- the columns the functions own, so they are set aside for this one fill
ALTER TABLE idemjob.jobs DISABLE TRIGGER jobs_guard;
UPDATE idemjob.jobs SET run_at = created_at;
-- a 1.0 job that failed for good: the error of the attempt that ended it
UPDATE idemjob.jobs j SET error = (
		SELECT a.error FROM idemjob.attempts a
		WHERE a.job_id OPERATOR(pg_catalog.=) j.id
			AND a.state OPERATOR(pg_catalog.=) 'failed'::idemjob.attempt_state
		ORDER BY a.attempt_no DESC LIMIT 1)
	WHERE j.state OPERATOR(pg_catalog.=) 'failed'::idemjob.job_state;
ALTER TABLE idemjob.jobs ENABLE TRIGGER jobs_guard;
ALTER TABLE idemjob.jobs
	ALTER COLUMN run_at SET DEFAULT pg_catalog.now(),
	ALTER COLUMN run_at SET NOT NULL;

--
-- Attempts: when an attempt became unknown; a dropped result, on request
--
ALTER TABLE idemjob.attempts
	ADD COLUMN unknown_at pg_catalog.timestamptz,
	ADD COLUMN dropped_result pg_catalog.jsonb;
-- 1.0 did not record when; the deadline (or the start) is the best bound
ALTER TABLE idemjob.attempts DISABLE TRIGGER attempts_guard;
UPDATE idemjob.attempts
	SET unknown_at = COALESCE(deadline, started_at)
	WHERE state OPERATOR(pg_catalog.=) 'unknown'::idemjob.attempt_state;
ALTER TABLE idemjob.attempts ENABLE TRIGGER attempts_guard;

--
-- Race log: the loser's provider; rows outlive the job they name
--
ALTER TABLE idemjob.race_log
	DROP CONSTRAINT race_log_job_id_fkey,
	ADD COLUMN provider pg_catalog.text COLLATE pg_catalog."C";
UPDATE idemjob.race_log r SET provider = a.provider
	FROM idemjob.attempts a
	WHERE a.id OPERATOR(pg_catalog.=) r.attempt_id;
ALTER TABLE idemjob.race_log ALTER COLUMN provider SET NOT NULL;

-- the 1.0 index predicates and CHECK compared with an unqualified "=";
-- 1.1 names pg_catalog's operator (same meaning, nothing to shadow)
DROP INDEX idemjob.attempts_one_in_doubt;
DROP INDEX idemjob.attempts_started_deadline;
ALTER TABLE idemjob.race_log DROP CONSTRAINT race_log_reason_check;

-- the 1.0 guards: replaced below by one guard per table
DROP TRIGGER jobs_guard ON idemjob.jobs;
DROP TRIGGER attempts_guard ON idemjob.attempts;

-- I3: at most one attempt in doubt per job
CREATE UNIQUE INDEX attempts_one_in_doubt
	ON idemjob.attempts (job_id)
	WHERE state OPERATOR(pg_catalog.=) ANY
		('{started,unknown}'::idemjob.attempt_state[]);

-- expire_attempts() and the in_doubt view: attempts still running
CREATE INDEX attempts_started_deadline
	ON idemjob.attempts (deadline)
	WHERE state OPERATOR(pg_catalog.=) 'started'::idemjob.attempt_state
		AND deadline IS NOT NULL;

-- the in_doubt view: attempts whose outcome nobody knows
CREATE INDEX attempts_unknown
	ON idemjob.attempts (unknown_at)
	WHERE state OPERATOR(pg_catalog.=) 'unknown'::idemjob.attempt_state;

ALTER TABLE idemjob.race_log ADD CONSTRAINT race_log_reason_check
	CHECK (reason OPERATOR(pg_catalog.=) ANY
		('{slot_taken,version_moved}'::pg_catalog.text[]));

-- claim(): due pending jobs in claim order, and nothing else (a job leaves
-- the index when it starts running or ends)
CREATE INDEX jobs_claim
	ON idemjob.jobs (priority DESC, run_at, id)
	WHERE state OPERATOR(pg_catalog.=) 'pending'::idemjob.job_state;
-- claim() of one intent (a worker per intent): that intent's due pending
-- jobs in claim order, so other intents' due jobs are never scanned
CREATE INDEX jobs_claim_intent
	ON idemjob.jobs (intent, priority DESC, run_at, id)
	WHERE state OPERATOR(pg_catalog.=) 'pending'::idemjob.job_state;

-- queue_stats: jobs not yet final, by intent
CREATE INDEX jobs_active
	ON idemjob.jobs (intent, state, run_at)
	WHERE state OPERATOR(pg_catalog.=) ANY
		('{pending,running,in_doubt}'::idemjob.job_state[]);

-- purge(): final jobs, oldest first, without scanning the live ones
CREATE INDEX jobs_final
	ON idemjob.jobs (completed_at)
	WHERE state OPERATOR(pg_catalog.=) ANY
		('{succeeded,failed,cancelled}'::idemjob.job_state[]);

--
-- Spent keys: what stays of a purged job, so that its key never runs again
--
CREATE TABLE idemjob.spent_keys (
	owner_id		pg_catalog.text COLLATE pg_catalog."C" NOT NULL,
	idempotency_key	pg_catalog.text COLLATE pg_catalog."C" NOT NULL,
	request_sha256	pg_catalog.bytea NOT NULL,
	job_id			pg_catalog.uuid NOT NULL,
	final_state		idemjob.job_state NOT NULL,
	completed_at	pg_catalog.timestamptz NOT NULL,
	purged_at		pg_catalog.timestamptz NOT NULL DEFAULT pg_catalog.now(),
	CONSTRAINT spent_keys_pkey PRIMARY KEY (owner_id, idempotency_key)
);
-- key_retention deletes by purge time; rows arrive in that order
CREATE INDEX spent_keys_purged_at ON idemjob.spent_keys USING brin (purged_at);

--
-- Capabilities granted with idemjob.grant_capability(), so that
-- revoke_capability() takes back only what no other capability of the role
-- still needs.  Dumped with the data; the GRANTs themselves are dumped by
-- pg_dump as changes to the extension's initial privileges.
--
CREATE TABLE idemjob.capabilities (
	grantee			pg_catalog.regrole NOT NULL,
	capability		pg_catalog.text COLLATE pg_catalog."C" NOT NULL,
	granted_at		pg_catalog.timestamptz NOT NULL DEFAULT pg_catalog.now(),
	CONSTRAINT capabilities_pkey PRIMARY KEY (grantee, capability),
	CONSTRAINT capabilities_capability_check
		CHECK (capability OPERATOR(pg_catalog.=) ANY
			('{client,worker,operator,admin}'::pg_catalog.text[]))
);

SELECT pg_catalog.pg_extension_config_dump('idemjob.spent_keys', '');
SELECT pg_catalog.pg_extension_config_dump('idemjob.capabilities', '');

--
-- Guards for raw DML (I8).  Each guard function checks the table and the
-- event it fires for; attached anywhere else it raises an error.  The
-- extension's own functions run on a trusted path and skip the checks.
-- UPDATE of jobs and attempts is checked AFTER the row is written: a
-- BEFORE UPDATE row trigger makes PostgreSQL lock, and WAL-log, every row
-- it guards, which would cost each legitimate call a record.
--

CREATE FUNCTION idemjob.race_log_guard()
RETURNS trigger
AS 'MODULE_PATHNAME', 'idemjob_race_log_guard'
LANGUAGE C;

CREATE FUNCTION idemjob.contracts_guard()
RETURNS trigger
AS 'MODULE_PATHNAME', 'idemjob_contracts_guard'
LANGUAGE C;

CREATE FUNCTION idemjob.certifications_guard()
RETURNS trigger
AS 'MODULE_PATHNAME', 'idemjob_certifications_guard'
LANGUAGE C;

CREATE FUNCTION idemjob.spent_keys_guard()
RETURNS trigger
AS 'MODULE_PATHNAME', 'idemjob_spent_keys_guard'
LANGUAGE C;

CREATE TRIGGER jobs_guard
	BEFORE INSERT OR DELETE ON idemjob.jobs
	FOR EACH ROW EXECUTE FUNCTION idemjob.jobs_guard();
-- AFTER triggers fire in name order: the update guards are named to fire
-- before the foreign keys' ("RI_ConstraintTrigger_..."), so that a changed
-- id or job_id is refused as IJ005, not as 23503
-- (no WHEN clause: the executor parses and compiles a trigger's WHEN for
-- every statement, which costs more than queueing the row; AFTER, not
-- BEFORE, because a BEFORE UPDATE row trigger locks, and logs, each row)
CREATE TRIGGER "IJ_jobs_update_guard"
	AFTER UPDATE ON idemjob.jobs
	FOR EACH ROW EXECUTE FUNCTION idemjob.jobs_guard();
CREATE TRIGGER attempts_guard
	BEFORE INSERT OR DELETE ON idemjob.attempts
	FOR EACH ROW EXECUTE FUNCTION idemjob.attempts_guard();
CREATE TRIGGER "IJ_attempts_update_guard"
	AFTER UPDATE ON idemjob.attempts
	FOR EACH ROW EXECUTE FUNCTION idemjob.attempts_guard();
CREATE TRIGGER race_log_guard
	BEFORE INSERT OR UPDATE ON idemjob.race_log
	FOR EACH ROW EXECUTE FUNCTION idemjob.race_log_guard();
-- a contract is replaced, never removed; a certification is revoked
CREATE TRIGGER contracts_guard
	BEFORE INSERT OR UPDATE OR DELETE ON idemjob.contracts
	FOR EACH ROW EXECUTE FUNCTION idemjob.contracts_guard();
CREATE TRIGGER contracts_truncate_guard
	BEFORE TRUNCATE ON idemjob.contracts
	FOR EACH STATEMENT EXECUTE FUNCTION idemjob.truncate_guard();
CREATE TRIGGER certifications_guard
	BEFORE INSERT OR UPDATE OR DELETE ON idemjob.certifications
	FOR EACH ROW EXECUTE FUNCTION idemjob.certifications_guard();
CREATE TRIGGER certifications_truncate_guard
	BEFORE TRUNCATE ON idemjob.certifications
	FOR EACH STATEMENT EXECUTE FUNCTION idemjob.truncate_guard();
CREATE TRIGGER spent_keys_guard
	BEFORE INSERT OR UPDATE ON idemjob.spent_keys
	FOR EACH ROW EXECUTE FUNCTION idemjob.spent_keys_guard();

--
-- Jobs: submit() gains its scheduling arguments (not part of the request)
--
DROP FUNCTION idemjob.submit(pg_catalog.text, pg_catalog.text, pg_catalog.text,
							 pg_catalog.jsonb, pg_catalog.text);
CREATE FUNCTION idemjob.submit(
	owner_id pg_catalog.text,
	idempotency_key pg_catalog.text,
	intent pg_catalog.text,
	params pg_catalog.jsonb DEFAULT '{}'::pg_catalog.jsonb,
	provider pg_catalog.text DEFAULT NULL,
	run_at pg_catalog.timestamptz DEFAULT NULL,
	priority pg_catalog.int4 DEFAULT 0,
	max_attempts pg_catalog.int4 DEFAULT NULL)
RETURNS TABLE(job_id pg_catalog.uuid, created pg_catalog.bool,
			  state idemjob.job_state, version pg_catalog.int8,
			  result pg_catalog.jsonb)
AS 'MODULE_PATHNAME', 'idemjob_submit'
LANGUAGE C VOLATILE ROWS 1;

CREATE FUNCTION idemjob.job(job_id pg_catalog.uuid)
RETURNS idemjob.jobs
AS 'MODULE_PATHNAME', 'idemjob_job'
LANGUAGE C VOLATILE;

CREATE FUNCTION idemjob.await_job(job_id pg_catalog.uuid, timeout interval)
RETURNS idemjob.jobs
AS 'MODULE_PATHNAME', 'idemjob_await_job'
LANGUAGE C VOLATILE;

--
-- Workers
--
CREATE FUNCTION idemjob.claim(
	worker pg_catalog.text,
	intents pg_catalog.text[] DEFAULT NULL,
	max_jobs pg_catalog.int4 DEFAULT 1,
	timeout interval DEFAULT NULL,
	wait interval DEFAULT '0'::interval)
RETURNS TABLE(attempt_id pg_catalog.uuid, job_id pg_catalog.uuid,
			  owner_id pg_catalog.text, intent pg_catalog.text,
			  params pg_catalog.jsonb, provider pg_catalog.text,
			  attempt_no pg_catalog.int4, read_version pg_catalog.int8,
			  deadline pg_catalog.timestamptz)
AS 'MODULE_PATHNAME', 'idemjob_claim'
LANGUAGE C VOLATILE ROWS 1;

CREATE FUNCTION idemjob.heartbeat(attempt_id pg_catalog.uuid,
								  extend interval DEFAULT NULL)
RETURNS idemjob.attempts
AS 'MODULE_PATHNAME', 'idemjob_heartbeat'
LANGUAGE C VOLATILE;

--
-- Retention
--
CREATE FUNCTION idemjob.purge(older_than interval,
							  max_jobs pg_catalog.int4 DEFAULT 10000)
RETURNS pg_catalog.int4
AS 'MODULE_PATHNAME', 'idemjob_purge'
LANGUAGE C VOLATILE;

CREATE FUNCTION idemjob.purge_race_log(older_than interval)
RETURNS pg_catalog.int4
AS 'MODULE_PATHNAME', 'idemjob_purge_race_log'
LANGUAGE C VOLATILE;

--
-- Rights
--
CREATE FUNCTION idemjob.grant_capability(role pg_catalog.regrole,
										 capability pg_catalog.text)
RETURNS pg_catalog.void
AS 'MODULE_PATHNAME', 'idemjob_grant_capability'
LANGUAGE C VOLATILE;

CREATE FUNCTION idemjob.revoke_capability(role pg_catalog.regrole,
										  capability pg_catalog.text)
RETURNS pg_catalog.void
AS 'MODULE_PATHNAME', 'idemjob_revoke_capability'
LANGUAGE C VOLATILE;

-- the views' row filter: true when the owner binding lets the caller see
-- rows of owner_id (always, when no binding is set)
CREATE FUNCTION idemjob.owner_visible(owner_id pg_catalog.text)
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME', 'idemjob_owner_visible'
LANGUAGE C STABLE STRICT PARALLEL SAFE;

--
-- Views for operators
--
-- in_doubt reads attempts through a partial index of the attempts in
-- flight and each job by its primary key (a subquery: a join would let the
-- planner hash all of jobs)
CREATE VIEW idemjob.in_doubt WITH (security_barrier) AS
SELECT a.job_id, a.owner_id,
	(SELECT j.intent FROM idemjob.jobs j
	 WHERE j.id OPERATOR(pg_catalog.=) a.job_id) AS intent,
	a.id AS attempt_id, a.attempt_no,
	a.provider, a.worker, a.state, a.started_at, a.deadline, a.unknown_at,
	COALESCE(a.unknown_at, a.deadline) AS in_doubt_since,
	pg_catalog.now() OPERATOR(pg_catalog.-)
		COALESCE(a.unknown_at, a.deadline) AS age
FROM idemjob.attempts a
WHERE (a.state OPERATOR(pg_catalog.=) 'unknown'::idemjob.attempt_state
	   OR (a.state OPERATOR(pg_catalog.=) 'started'::idemjob.attempt_state
		   AND a.deadline IS NOT NULL
		   AND a.deadline OPERATOR(pg_catalog.<) pg_catalog.now()))
	AND idemjob.owner_visible(a.owner_id);

CREATE VIEW idemjob.queue_stats WITH (security_barrier) AS
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
FROM idemjob.jobs j
WHERE j.state OPERATOR(pg_catalog.=) ANY
		('{pending,running,in_doubt}'::idemjob.job_state[])
	AND idemjob.owner_visible(j.owner_id)
GROUP BY j.intent;

CREATE VIEW idemjob.provider_stats WITH (security_barrier) AS
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
	pg_catalog.percentile_cont(0.5::pg_catalog.float8) WITHIN GROUP (ORDER BY
		pg_catalog.date_part('epoch'::pg_catalog.text,
			a.finished_at OPERATOR(pg_catalog.-) a.started_at) OPERATOR(pg_catalog.*) 1000::pg_catalog.float8)
		FILTER (WHERE a.state OPERATOR(pg_catalog.=) 'succeeded'::idemjob.attempt_state) AS p50_ms,
	pg_catalog.percentile_cont(0.95::pg_catalog.float8) WITHIN GROUP (ORDER BY
		pg_catalog.date_part('epoch'::pg_catalog.text,
			a.finished_at OPERATOR(pg_catalog.-) a.started_at) OPERATOR(pg_catalog.*) 1000::pg_catalog.float8)
		FILTER (WHERE a.state OPERATOR(pg_catalog.=) 'succeeded'::idemjob.attempt_state) AS p95_ms,
	pg_catalog.max(a.started_at) AS last_started_at
FROM idemjob.attempts a
	JOIN idemjob.jobs j ON j.id OPERATOR(pg_catalog.=) a.job_id
WHERE idemjob.owner_visible(a.owner_id)
GROUP BY j.intent, a.provider;

--
-- Nothing for PUBLIC but validate() and uuid_v7(); grant_capability()
-- gives each role what one capability needs.
--
REVOKE ALL ON FUNCTION idemjob.race_log_guard() FROM PUBLIC;
REVOKE ALL ON FUNCTION idemjob.contracts_guard() FROM PUBLIC;
REVOKE ALL ON FUNCTION idemjob.certifications_guard() FROM PUBLIC;
REVOKE ALL ON FUNCTION idemjob.spent_keys_guard() FROM PUBLIC;
REVOKE ALL ON FUNCTION idemjob.submit(pg_catalog.text, pg_catalog.text, pg_catalog.text,
	pg_catalog.jsonb, pg_catalog.text, pg_catalog.timestamptz, pg_catalog.int4,
	pg_catalog.int4) FROM PUBLIC;
REVOKE ALL ON FUNCTION idemjob.job(pg_catalog.uuid) FROM PUBLIC;
REVOKE ALL ON FUNCTION idemjob.await_job(pg_catalog.uuid, interval) FROM PUBLIC;
REVOKE ALL ON FUNCTION idemjob.claim(pg_catalog.text, pg_catalog.text[], pg_catalog.int4,
	interval, interval) FROM PUBLIC;
REVOKE ALL ON FUNCTION idemjob.heartbeat(pg_catalog.uuid, interval) FROM PUBLIC;
REVOKE ALL ON FUNCTION idemjob.purge(interval, pg_catalog.int4) FROM PUBLIC;
REVOKE ALL ON FUNCTION idemjob.purge_race_log(interval) FROM PUBLIC;
REVOKE ALL ON FUNCTION idemjob.grant_capability(pg_catalog.regrole, pg_catalog.text) FROM PUBLIC;
REVOKE ALL ON FUNCTION idemjob.revoke_capability(pg_catalog.regrole, pg_catalog.text) FROM PUBLIC;
REVOKE ALL ON FUNCTION idemjob.owner_visible(pg_catalog.text) FROM PUBLIC;
REVOKE ALL ON TABLE idemjob.spent_keys, idemjob.capabilities,
	idemjob.in_doubt, idemjob.queue_stats, idemjob.provider_stats FROM PUBLIC;
