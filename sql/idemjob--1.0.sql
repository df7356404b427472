/* sql/idemjob--1.0.sql */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION idemjob" to load this file. \quit

--
-- Types
--
CREATE TYPE idemjob.job_state AS ENUM
	('pending', 'running', 'in_doubt', 'succeeded', 'failed', 'cancelled');

CREATE TYPE idemjob.attempt_state AS ENUM
	('started', 'unknown', 'succeeded', 'superseded', 'failed', 'cancelled');

-- Time-ordered UUID (RFC 9562 version 7), generated in C.
CREATE FUNCTION idemjob.uuid_v7()
RETURNS uuid
AS 'MODULE_PATHNAME', 'idemjob_uuid_v7'
LANGUAGE C VOLATILE STRICT PARALLEL SAFE;

--
-- Tables
--
CREATE TABLE idemjob.jobs (
	id				uuid NOT NULL DEFAULT idemjob.uuid_v7(),
	owner_id		text COLLATE "C" NOT NULL,
	idempotency_key	text COLLATE "C" NOT NULL,
	intent			text COLLATE "C" NOT NULL,
	params			jsonb NOT NULL DEFAULT '{}',
	provider		text COLLATE "C" NOT NULL,
	state			idemjob.job_state NOT NULL DEFAULT 'pending',
	version			bigint NOT NULL DEFAULT 0,
	attempt_count	integer NOT NULL DEFAULT 0,
	completed_by	uuid,
	result			jsonb,
	created_at		timestamptz NOT NULL DEFAULT pg_catalog.now(),
	updated_at		timestamptz NOT NULL DEFAULT pg_catalog.now(),
	completed_at	timestamptz,
	cancel_reason	text,
	CONSTRAINT jobs_pkey PRIMARY KEY (id),
	CONSTRAINT jobs_owner_key UNIQUE (owner_id, idempotency_key)
);
-- No CHECK constraints on jobs and attempts: the executor re-reads every
-- CHECK expression from its stored text at each statement, which cost
-- about a third of a submit().  The guard triggers check the same rules
-- (versions and counts start at 0 and never go back, a result and its
-- winner are written together, attempt numbers start at 1) on raw DML; the
-- extension's functions never break them.
-- Identifiers (owner, key, intent, provider, worker) are compared byte for
-- byte: COLLATE "C" makes the unique indexes cheap whatever the database's
-- locale, and equality is what they are for.
-- the default fillfactor leaves no room for HOT updates of a job's row
ALTER TABLE idemjob.jobs SET (fillfactor = 90);

CREATE TABLE idemjob.attempts (
	id				uuid NOT NULL DEFAULT idemjob.uuid_v7(),
	job_id			uuid NOT NULL,
	owner_id		text COLLATE "C" NOT NULL,
	attempt_no		integer NOT NULL,
	provider		text COLLATE "C" NOT NULL,
	state			idemjob.attempt_state NOT NULL DEFAULT 'started',
	read_version	bigint NOT NULL,
	worker			text COLLATE "C",
	started_at		timestamptz NOT NULL DEFAULT pg_catalog.now(),
	deadline		timestamptz,
	finished_at		timestamptz,
	error			jsonb,
	result_sha256	bytea,
	CONSTRAINT attempts_pkey PRIMARY KEY (id),
	CONSTRAINT attempts_job_attempt_no_key UNIQUE (job_id, attempt_no),
	CONSTRAINT attempts_job_id_fkey FOREIGN KEY (job_id)
		REFERENCES idemjob.jobs (id) ON DELETE CASCADE
);
ALTER TABLE idemjob.attempts SET (fillfactor = 90);

-- I3: at most one attempt in doubt per job
CREATE UNIQUE INDEX attempts_one_in_doubt
	ON idemjob.attempts (job_id)
	WHERE state IN ('started', 'unknown');

-- expire_attempts(): only attempts still running, so the index stays small
CREATE INDEX attempts_started_deadline
	ON idemjob.attempts (deadline)
	WHERE state = 'started' AND deadline IS NOT NULL;

CREATE TABLE idemjob.race_log (
	logged_at			timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
	job_id				uuid NOT NULL,
	owner_id			text COLLATE "C" NOT NULL,
	attempt_id			uuid NOT NULL,
	winner_attempt_id	uuid,
	expected_version	bigint NOT NULL,
	found_version		bigint NOT NULL,
	reason				text NOT NULL,
	result_sha256		bytea NOT NULL,
	result_bytes		integer NOT NULL,
	late_by				interval,
	CONSTRAINT race_log_job_id_fkey FOREIGN KEY (job_id)
		REFERENCES idemjob.jobs (id) ON DELETE CASCADE,
	CONSTRAINT race_log_reason_check
		CHECK (reason IN ('slot_taken', 'version_moved'))
);
CREATE INDEX race_log_job_id ON idemjob.race_log (job_id);
CREATE UNIQUE INDEX race_log_attempt_id ON idemjob.race_log (attempt_id);

CREATE TABLE idemjob.contracts (
	intent			text COLLATE "C" NOT NULL,
	version			integer NOT NULL,
	output_schema	jsonb NOT NULL,
	updated_at		timestamptz NOT NULL DEFAULT pg_catalog.now(),
	CONSTRAINT contracts_pkey PRIMARY KEY (intent),
	CONSTRAINT contracts_version_check CHECK (version > 0)
);

CREATE TABLE idemjob.certifications (
	intent				text COLLATE "C" NOT NULL,
	provider			text COLLATE "C" NOT NULL,
	contract_version	integer NOT NULL,
	certified_at		timestamptz NOT NULL DEFAULT pg_catalog.now(),
	evidence			jsonb,
	revoked_at			timestamptz,
	revoke_reason		text,
	CONSTRAINT certifications_pkey PRIMARY KEY (intent, provider, contract_version),
	CONSTRAINT certifications_intent_fkey FOREIGN KEY (intent)
		REFERENCES idemjob.contracts (intent) ON DELETE CASCADE
);

-- pg_dump keeps the data; restore it with --disable-triggers (see README)
SELECT pg_catalog.pg_extension_config_dump('idemjob.jobs', '');
SELECT pg_catalog.pg_extension_config_dump('idemjob.attempts', '');
SELECT pg_catalog.pg_extension_config_dump('idemjob.race_log', '');
SELECT pg_catalog.pg_extension_config_dump('idemjob.contracts', '');
SELECT pg_catalog.pg_extension_config_dump('idemjob.certifications', '');

--
-- Guards for raw DML (I8)
--
CREATE FUNCTION idemjob.jobs_guard()
RETURNS trigger
AS 'MODULE_PATHNAME', 'idemjob_jobs_guard'
LANGUAGE C;

CREATE FUNCTION idemjob.attempts_guard()
RETURNS trigger
AS 'MODULE_PATHNAME', 'idemjob_attempts_guard'
LANGUAGE C;

CREATE FUNCTION idemjob.truncate_guard()
RETURNS trigger
AS 'MODULE_PATHNAME', 'idemjob_truncate_guard'
LANGUAGE C;

CREATE FUNCTION idemjob.contracts_changed()
RETURNS trigger
AS 'MODULE_PATHNAME', 'idemjob_contracts_changed'
LANGUAGE C;

CREATE TRIGGER jobs_guard
	BEFORE INSERT OR UPDATE OR DELETE ON idemjob.jobs
	FOR EACH ROW EXECUTE FUNCTION idemjob.jobs_guard();
CREATE TRIGGER jobs_truncate_guard
	BEFORE TRUNCATE ON idemjob.jobs
	FOR EACH STATEMENT EXECUTE FUNCTION idemjob.truncate_guard();
CREATE TRIGGER attempts_guard
	BEFORE INSERT OR UPDATE OR DELETE ON idemjob.attempts
	FOR EACH ROW EXECUTE FUNCTION idemjob.attempts_guard();
CREATE TRIGGER attempts_truncate_guard
	BEFORE TRUNCATE ON idemjob.attempts
	FOR EACH STATEMENT EXECUTE FUNCTION idemjob.truncate_guard();
-- compiled output contracts are cached per backend; any change invalidates
CREATE TRIGGER contracts_changed
	AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON idemjob.contracts
	FOR EACH STATEMENT EXECUTE FUNCTION idemjob.contracts_changed();

--
-- Jobs
--
CREATE FUNCTION idemjob.submit(
	owner_id text,
	idempotency_key text,
	intent text,
	params jsonb DEFAULT '{}',
	provider text DEFAULT NULL)
RETURNS TABLE(job_id uuid, created boolean, state idemjob.job_state,
			  version bigint, result jsonb)
AS 'MODULE_PATHNAME', 'idemjob_submit'
LANGUAGE C VOLATILE ROWS 1;

CREATE FUNCTION idemjob.cancel_job(job_id uuid, reason text)
RETURNS idemjob.jobs
AS 'MODULE_PATHNAME', 'idemjob_cancel_job'
LANGUAGE C VOLATILE;

--
-- Attempts
--
CREATE FUNCTION idemjob.start_attempt(
	job_id uuid,
	provider text DEFAULT NULL,
	timeout interval DEFAULT NULL,
	worker text DEFAULT NULL)
RETURNS idemjob.attempts
AS 'MODULE_PATHNAME', 'idemjob_start_attempt'
LANGUAGE C VOLATILE;

CREATE FUNCTION idemjob.complete_attempt(attempt_id uuid, result jsonb)
RETURNS TABLE(outcome text, job_id uuid, job_version bigint,
			  winner_attempt_id uuid)
AS 'MODULE_PATHNAME', 'idemjob_complete_attempt'
LANGUAGE C VOLATILE ROWS 1;

CREATE FUNCTION idemjob.fail_attempt(
	attempt_id uuid,
	error jsonb DEFAULT NULL,
	retryable boolean DEFAULT true)
RETURNS idemjob.attempts
AS 'MODULE_PATHNAME', 'idemjob_fail_attempt'
LANGUAGE C VOLATILE;

CREATE FUNCTION idemjob.mark_unknown(attempt_id uuid, reason text DEFAULT 'timeout')
RETURNS idemjob.attempts
AS 'MODULE_PATHNAME', 'idemjob_mark_unknown'
LANGUAGE C VOLATILE;

CREATE FUNCTION idemjob.cancel_attempt(
	attempt_id uuid,
	reason text,
	fence boolean DEFAULT false)
RETURNS idemjob.attempts
AS 'MODULE_PATHNAME', 'idemjob_cancel_attempt'
LANGUAGE C VOLATILE;

CREATE FUNCTION idemjob.expire_attempts()
RETURNS integer
AS 'MODULE_PATHNAME', 'idemjob_expire_attempts'
LANGUAGE C VOLATILE;

--
-- Output contracts and certified failover
--
CREATE FUNCTION idemjob.define_contract(intent text, output_schema jsonb)
RETURNS integer
AS 'MODULE_PATHNAME', 'idemjob_define_contract'
LANGUAGE C VOLATILE;

CREATE FUNCTION idemjob.certify_provider(
	intent text,
	provider text,
	evidence jsonb DEFAULT NULL)
RETURNS idemjob.certifications
AS 'MODULE_PATHNAME', 'idemjob_certify_provider'
LANGUAGE C VOLATILE;

CREATE FUNCTION idemjob.revoke_provider(intent text, provider text, reason text)
RETURNS idemjob.certifications
AS 'MODULE_PATHNAME', 'idemjob_revoke_provider'
LANGUAGE C VOLATILE;

CREATE FUNCTION idemjob.validate(output_schema jsonb, value jsonb)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'idemjob_validate'
LANGUAGE C IMMUTABLE PARALLEL SAFE;
