-- bench/floor.sql
--
-- The floor: the tables, constraints and indexes of idemjob 1.1 (sql/idemjob--1.0.sql
-- and sql/idemjob--1.0--1.1.sql),
-- copied into schema "floor" without the guard triggers and without the
-- function layer.  The workloads in bench/workloads/floor/ do, in bare SQL,
-- the database work a correct implementation needs; the distance between
-- them and the extension is the cost of the function layer.  That work
-- includes the notifications of the 1.1 contract (NOTIFY idemjob when a
-- job becomes due, idemjob_done when one becomes final): the workloads
-- send them with pg_notify() in the RETURNING list of the row that makes
-- them due, so only when that row was written.
--
-- The one thing taken from the extension is its id generator: ids are
-- time-ordered UUIDv7 in both (PostgreSQL 15 has no built-in uuidv7(); a
-- random gen_random_uuid() key would make the floor's primary key slower
-- and the comparison unfair to the floor).
--
-- Keep this in step with sql/idemjob--*.sql: run.sh compares the columns and
-- index definitions of both schemas and the report says when they differ.

CREATE SCHEMA floor;

CREATE FUNCTION floor.uuid_v7() RETURNS uuid
AS '$libdir/idemjob', 'idemjob_uuid_v7'
LANGUAGE C VOLATILE STRICT PARALLEL SAFE;

CREATE TYPE floor.job_state AS ENUM
	('pending', 'running', 'in_doubt', 'succeeded', 'failed', 'cancelled');

CREATE TYPE floor.attempt_state AS ENUM
	('started', 'unknown', 'succeeded', 'superseded', 'failed', 'cancelled');

CREATE TABLE floor.jobs (
	id				uuid NOT NULL DEFAULT floor.uuid_v7(),
	owner_id		text COLLATE "C" NOT NULL,
	idempotency_key	text COLLATE "C" NOT NULL,
	intent			text COLLATE "C" NOT NULL,
	params			jsonb NOT NULL DEFAULT '{}',
	provider		text COLLATE "C" NOT NULL,
	state			floor.job_state NOT NULL DEFAULT 'pending',
	version			bigint NOT NULL DEFAULT 0,
	attempt_count	integer NOT NULL DEFAULT 0,
	completed_by	uuid,
	result			jsonb,
	created_at		timestamptz NOT NULL DEFAULT now(),
	updated_at		timestamptz NOT NULL DEFAULT now(),
	completed_at	timestamptz,
	cancel_reason	text,
	priority		integer NOT NULL DEFAULT 0,
	run_at			timestamptz NOT NULL DEFAULT now(),
	max_attempts	integer,
	error			jsonb,
	CONSTRAINT jobs_pkey PRIMARY KEY (id),
	CONSTRAINT jobs_owner_key UNIQUE (owner_id, idempotency_key)
);
ALTER TABLE floor.jobs SET (fillfactor = 90, autovacuum_vacuum_scale_factor = 0.02,
	autovacuum_vacuum_insert_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02);

CREATE TABLE floor.attempts (
	id				uuid NOT NULL DEFAULT floor.uuid_v7(),
	job_id			uuid NOT NULL,
	owner_id		text COLLATE "C" NOT NULL,
	attempt_no		integer NOT NULL,
	provider		text COLLATE "C" NOT NULL,
	state			floor.attempt_state NOT NULL DEFAULT 'started',
	read_version	bigint NOT NULL,
	worker			text COLLATE "C",
	started_at		timestamptz NOT NULL DEFAULT now(),
	deadline		timestamptz,
	finished_at		timestamptz,
	error			jsonb,
	result_sha256	bytea,
	unknown_at		timestamptz,
	dropped_result	jsonb,
	lease_until		timestamptz,
	CONSTRAINT attempts_pkey PRIMARY KEY (id),
	CONSTRAINT attempts_job_attempt_no_key UNIQUE (job_id, attempt_no),
	CONSTRAINT attempts_job_id_fkey FOREIGN KEY (job_id)
		REFERENCES floor.jobs (id) ON DELETE CASCADE
);
ALTER TABLE floor.attempts SET (fillfactor = 90, autovacuum_vacuum_scale_factor = 0.02,
	autovacuum_vacuum_insert_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02);

CREATE UNIQUE INDEX attempts_one_in_doubt
	ON floor.attempts (job_id)
	WHERE state = ANY ('{started,unknown}'::floor.attempt_state[]);

CREATE INDEX attempts_started_deadline
	ON floor.attempts (deadline)
	WHERE state = 'started' AND deadline IS NOT NULL;

CREATE INDEX attempts_unknown
	ON floor.attempts (unknown_at)
	WHERE state = 'unknown';

CREATE INDEX jobs_claim
	ON floor.jobs (priority DESC, run_at, id)
	WHERE state = 'pending';

CREATE INDEX jobs_in_flight
	ON floor.jobs (intent, state)
	WHERE state = ANY ('{running,in_doubt}'::floor.job_state[]);

CREATE INDEX jobs_claim_intent
	ON floor.jobs (intent, priority DESC, run_at, id)
	WHERE state = 'pending';

CREATE INDEX jobs_final
	ON floor.jobs (completed_at)
	WHERE state = ANY ('{succeeded,failed,cancelled}'::floor.job_state[]);

CREATE TABLE floor.race_log (
	logged_at			timestamptz NOT NULL DEFAULT clock_timestamp(),
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
	provider			text COLLATE "C" NOT NULL,
	CONSTRAINT race_log_reason_check
		CHECK (reason = ANY ('{slot_taken,version_moved}'::text[]))
);
CREATE INDEX race_log_job_id ON floor.race_log (job_id);
CREATE UNIQUE INDEX race_log_attempt_id ON floor.race_log (attempt_id);

CREATE TABLE floor.contracts (
	intent			text COLLATE "C" NOT NULL,
	version			integer NOT NULL,
	output_schema	jsonb NOT NULL,
	updated_at		timestamptz NOT NULL DEFAULT now(),
	CONSTRAINT contracts_pkey PRIMARY KEY (intent),
	CONSTRAINT contracts_version_check CHECK (version > 0)
);

CREATE TABLE floor.certifications (
	intent				text COLLATE "C" NOT NULL,
	provider			text COLLATE "C" NOT NULL,
	contract_version	integer NOT NULL,
	certified_at		timestamptz NOT NULL DEFAULT now(),
	evidence			jsonb,
	revoked_at			timestamptz,
	revoke_reason		text,
	CONSTRAINT certifications_pkey PRIMARY KEY (intent, provider, contract_version),
	CONSTRAINT certifications_intent_fkey FOREIGN KEY (intent)
		REFERENCES floor.contracts (intent) ON DELETE CASCADE
);
