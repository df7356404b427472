-- pgTAP: the installed schema matches ../shared/CONTRACT.md
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
SELECT plan(129);

SELECT has_schema('idemjob');
SELECT has_extension('idemjob');

-- types
SELECT has_enum('idemjob', 'job_state', 'type job_state');
SELECT enum_has_labels('idemjob', 'job_state',
	ARRAY['pending', 'running', 'in_doubt', 'succeeded', 'failed', 'cancelled']);
SELECT has_enum('idemjob', 'attempt_state', 'type attempt_state');
SELECT enum_has_labels('idemjob', 'attempt_state',
	ARRAY['started', 'unknown', 'succeeded', 'superseded', 'failed', 'cancelled', 'released']);

-- tables and their contract columns
SELECT has_table('idemjob', 'jobs', 'jobs');
SELECT columns_are('idemjob', 'jobs', ARRAY['id', 'owner_id', 'idempotency_key', 'intent',
	'params', 'provider', 'state', 'version', 'attempt_count', 'completed_by', 'result',
	'created_at', 'updated_at', 'completed_at', 'cancel_reason',
	'priority', 'run_at', 'max_attempts', 'error', 'next_provider', 'owner_hash']);
SELECT col_type_is('idemjob', 'jobs', 'priority', 'integer', 'idemjob.jobs.priority.integer');
SELECT col_type_is('idemjob', 'jobs', 'run_at', 'timestamp with time zone', 'idemjob.jobs.run_at.timestamptz');
SELECT col_type_is('idemjob', 'jobs', 'max_attempts', 'integer', 'idemjob.jobs.max_attempts.integer');
SELECT col_type_is('idemjob', 'jobs', 'error', 'jsonb', 'idemjob.jobs.error.jsonb');
SELECT col_type_is('idemjob', 'jobs', 'id', 'uuid', 'idemjob.jobs.id.uuid');
SELECT col_type_is('idemjob', 'jobs', 'params', 'jsonb', 'idemjob.jobs.params.jsonb');
SELECT col_type_is('idemjob', 'jobs', 'state', 'idemjob', 'job_state', 'jobs.state');
SELECT col_type_is('idemjob', 'jobs', 'version', 'bigint', 'idemjob.jobs.version.bigint');
SELECT col_type_is('idemjob', 'jobs', 'attempt_count', 'integer', 'idemjob.jobs.attempt_count.integer');
SELECT col_type_is('idemjob', 'jobs', 'completed_at', 'timestamp with time zone', 'idemjob.jobs.completed_at.timestamp with time zone');
-- since 1.2, in the partitioned layout (idemjob.partitions) and in a
-- database with Citus, every key ends with the owner hash; in plain tables
-- the keys are 1.1's (docs/scaling.md)
SELECT relkind = 'p' OR EXISTS (SELECT FROM pg_extension WHERE extname = 'citus') AS keyed
FROM pg_class WHERE oid = 'idemjob.jobs'::regclass \gset
SELECT col_is_pk('idemjob', 'jobs', (CASE WHEN :'keyed' THEN ARRAY['id', 'owner_hash'] ELSE ARRAY['id'] END)::name[], 'idemjob.jobs.id');
SELECT col_is_unique('idemjob', 'jobs', (CASE WHEN :'keyed' THEN ARRAY['owner_id', 'idempotency_key', 'owner_hash'] ELSE ARRAY['owner_id', 'idempotency_key'] END)::name[], 'one job per owner and key');
SELECT col_type_is('idemjob', 'jobs', 'owner_hash', 'idemjob', 'owner_hash', 'jobs.owner_hash');
SELECT col_not_null('idemjob', 'jobs', 'owner_hash', 'idemjob.jobs.owner_hash');
SELECT col_not_null('idemjob', 'jobs', 'owner_id', 'idemjob.jobs.owner_id');
SELECT col_not_null('idemjob', 'jobs', 'idempotency_key', 'idemjob.jobs.idempotency_key');

SELECT has_table('idemjob', 'attempts', 'attempts');
SELECT columns_are('idemjob', 'attempts', ARRAY['id', 'job_id', 'owner_id', 'attempt_no',
	'provider', 'state', 'read_version', 'worker', 'started_at', 'deadline', 'finished_at',
	'error', 'result_sha256', 'unknown_at', 'dropped_result', 'lease_until', 'owner_hash']);
SELECT col_type_is('idemjob', 'attempts', 'unknown_at', 'timestamp with time zone', 'idemjob.attempts.unknown_at');
SELECT col_type_is('idemjob', 'attempts', 'dropped_result', 'jsonb', 'idemjob.attempts.dropped_result');
SELECT col_type_is('idemjob', 'attempts', 'state', 'idemjob', 'attempt_state', 'attempts.state');
SELECT col_type_is('idemjob', 'attempts', 'read_version', 'bigint', 'idemjob.attempts.read_version.bigint');
SELECT col_type_is('idemjob', 'attempts', 'deadline', 'timestamp with time zone', 'idemjob.attempts.deadline.timestamp with time zone');
SELECT col_is_pk('idemjob', 'attempts', (CASE WHEN :'keyed' THEN ARRAY['id', 'owner_hash'] ELSE ARRAY['id'] END)::name[], 'idemjob.attempts.id');
SELECT col_is_unique('idemjob', 'attempts', (CASE WHEN :'keyed' THEN ARRAY['job_id', 'attempt_no', 'owner_hash'] ELSE ARRAY['job_id', 'attempt_no'] END)::name[], 'one attempt number per job');
-- (in the partitioned layout, idemjob.partitions, partition to partition:
-- attempts_pN to jobs_pN, where a job's attempts lie)
SELECT ok(CASE WHEN (SELECT relkind FROM pg_class WHERE oid = 'idemjob.attempts'::regclass) = 'p'
	THEN (SELECT count(*) > 0 AND bool_and(
			(SELECT count(*) FROM pg_constraint co WHERE co.conrelid = c.oid AND co.contype = 'f') = 1
			AND (SELECT pg_get_constraintdef(co.oid) FROM pg_constraint co
				 WHERE co.conrelid = c.oid AND co.contype = 'f')
				= format('FOREIGN KEY (job_id, owner_hash) REFERENCES idemjob.jobs_%s(id, owner_hash) ON DELETE CASCADE',
						 substring(c.relname, 'p[0-9]+$')))
		  FROM pg_class c JOIN pg_inherits i ON i.inhrelid = c.oid
		  WHERE i.inhparent = 'idemjob.attempts'::regclass)
	ELSE (SELECT pg_get_constraintdef(oid) FROM pg_constraint
		  WHERE conrelid = 'idemjob.attempts'::regclass AND contype = 'f')
		= CASE WHEN :'keyed' THEN 'FOREIGN KEY (job_id, owner_hash) REFERENCES idemjob.jobs(id, owner_hash) ON DELETE CASCADE'
			   ELSE 'FOREIGN KEY (job_id) REFERENCES idemjob.jobs(id) ON DELETE CASCADE' END END,
	'attempts (job_id, owner_hash) references jobs (id, owner_hash), deleted with it');
SELECT has_index('idemjob', 'attempts', 'attempts_one_in_doubt', (CASE WHEN :'keyed' THEN ARRAY['job_id', 'owner_hash'] ELSE ARRAY['job_id'] END)::name[], 'the in-doubt index');
SELECT index_is_unique('idemjob', 'attempts', 'attempts_one_in_doubt');
SELECT is(
	(SELECT pg_get_expr(indpred, indrelid) FROM pg_index
	  WHERE indexrelid = 'idemjob.attempts_one_in_doubt'::regclass),
	$$(state = ANY ('{started,unknown}'::idemjob.attempt_state[]))$$,
	'the in-doubt index is partial on started and unknown');

-- since 1.2 (issue 21): the jobs' partial indexes, one set of rows each
SELECT indexes_are('idemjob', 'jobs', ARRAY['jobs_pkey', 'jobs_owner_key', 'jobs_claim',
	'jobs_claim_intent', 'jobs_in_flight', 'jobs_final'], 'jobs has exactly its six indexes');
SELECT indexes_are('idemjob', 'attempts', ARRAY['attempts_pkey', 'attempts_job_attempt_no_key',
	'attempts_one_in_doubt', 'attempts_started_deadline', 'attempts_unknown'],
	'attempts has exactly its five indexes');
SELECT has_index('idemjob', 'jobs', 'jobs_in_flight', ARRAY['intent', 'state']);
SELECT is(
	(SELECT pg_get_expr(indpred, indrelid) FROM pg_index
	  WHERE indexrelid = 'idemjob.jobs_in_flight'::regclass),
	$$(state = ANY ('{running,in_doubt}'::idemjob.job_state[]))$$,
	'jobs_in_flight holds running and in-doubt jobs only, not the backlog');
SELECT is(
	-- (in the partitioned layout, idemjob.partitions, every partition's)
	(SELECT array_agg(DISTINCT regexp_replace(c.relname::text, '_p[0-9]+$', '') || ':' || o.option_name || '=' || o.option_value)
	   FROM pg_class c, pg_options_to_table(c.reloptions) o
	  WHERE c.relnamespace = 'idemjob'::regnamespace
		AND regexp_replace(c.relname::text, '_p[0-9]+$', '') IN ('jobs', 'attempts')),
	ARRAY['attempts:autovacuum_analyze_scale_factor=0.02', 'attempts:autovacuum_vacuum_insert_scale_factor=0.02',
		  'attempts:autovacuum_vacuum_scale_factor=0.02', 'attempts:fillfactor=90',
		  'jobs:autovacuum_analyze_scale_factor=0.02', 'jobs:autovacuum_vacuum_insert_scale_factor=0.02',
		  'jobs:autovacuum_vacuum_scale_factor=0.02', 'jobs:fillfactor=90'],
	'jobs and attempts: fillfactor 90, autovacuum at 2 %');

SELECT has_table('idemjob', 'race_log', 'race_log');
SELECT columns_are('idemjob', 'race_log', ARRAY['logged_at', 'job_id', 'owner_id', 'attempt_id',
	'winner_attempt_id', 'expected_version', 'found_version', 'reason', 'result_sha256',
	'result_bytes', 'late_by', 'provider', 'intent', 'idempotency_key', 'winner_provider',
	'dropped_result', 'fenced_at', 'owner_hash']);
SELECT hasnt_fk('idemjob', 'race_log', 'race-log rows outlive their job: no foreign key');
SELECT col_type_is('idemjob', 'race_log', 'result_sha256', 'bytea', 'idemjob.race_log.result_sha256.bytea');
SELECT col_type_is('idemjob', 'race_log', 'late_by', 'interval', 'idemjob.race_log.late_by.interval');
SELECT hasnt_column('idemjob', 'race_log', 'result', 'the race log keeps no committed result');
-- since 1.2 (issue 21): rows that stand alone, read by owner and by intent over time
SELECT has_index('idemjob', 'race_log', 'race_log_owner_logged_at', ARRAY['owner_id', 'logged_at'],
	'race-log rows of an owner, in time order');
SELECT has_index('idemjob', 'race_log', 'race_log_intent_logged_at', ARRAY['intent', 'logged_at'],
	'race-log rows of an intent, in time order');
SELECT col_type_is('idemjob', 'race_log', 'dropped_result', 'jsonb', 'idemjob.race_log.dropped_result.jsonb');

SELECT has_table('idemjob', 'contracts', 'contracts');
SELECT col_is_pk('idemjob', 'contracts', 'intent', 'idemjob.contracts.intent');
SELECT has_table('idemjob', 'certifications', 'certifications');
SELECT columns_are('idemjob', 'certifications', ARRAY['intent', 'provider', 'contract_version',
	'certified_at', 'evidence', 'revoked_at', 'revoke_reason']);
SELECT has_table('idemjob', 'spent_keys', 'spent_keys');
SELECT columns_are('idemjob', 'spent_keys', ARRAY['owner_id', 'idempotency_key', 'request_sha256',
	'job_id', 'final_state', 'completed_at', 'purged_at', 'open_attempts', 'owner_hash']);
-- since 1.2: the bindings, one per role, and the tombstones of purged attempts
SELECT has_table('idemjob', 'owner_bindings', 'owner_bindings');
SELECT columns_are('idemjob', 'owner_bindings', ARRAY['bound_role', 'mode', 'bound_at']);
SELECT col_is_pk('idemjob', 'owner_bindings', 'bound_role', 'one binding per role');
-- since 1.2: the retry policy per intent
SELECT has_table('idemjob', 'retry_policies', 'retry_policies');
SELECT columns_are('idemjob', 'retry_policies', ARRAY['intent', 'max_attempts', 'retry_backoff',
	'retry_backoff_max', 'updated_at', 'fence_unknown_after']);
SELECT col_is_pk('idemjob', 'retry_policies', 'intent', 'one policy per intent');
SELECT function_returns('idemjob', 'set_retry_policy', ARRAY['text', 'integer', 'interval', 'interval', 'interval'],
	'idemjob.retry_policies', 'set_retry_policy returns the policy row');
-- since 1.2: the failover order per intent
SELECT has_table('idemjob', 'routes', 'routes');
SELECT columns_are('idemjob', 'routes', ARRAY['intent', 'providers', 'updated_at']);
SELECT col_is_pk('idemjob', 'routes', 'intent', 'one route per intent');
SELECT function_returns('idemjob', 'set_route', ARRAY['text', 'text[]'], 'idemjob.routes',
	'set_route returns the route row');
SELECT has_index('idemjob', 'spent_keys', 'spent_keys_open_attempts', 'late results of purged attempts find their tombstone by an index');
SELECT col_is_pk('idemjob', 'spent_keys', (CASE WHEN :'keyed' THEN ARRAY['owner_id', 'idempotency_key', 'owner_hash'] ELSE ARRAY['owner_id', 'idempotency_key'] END)::name[], 'one spent key per owner and key');
SELECT has_view('idemjob', 'in_doubt', 'in_doubt');
SELECT columns_are('idemjob', 'in_doubt', ARRAY['job_id', 'owner_id', 'intent', 'attempt_id',
	'attempt_no', 'provider', 'worker', 'state', 'started_at', 'deadline', 'unknown_at',
	'in_doubt_since', 'age', 'reason']);
SELECT has_view('idemjob', 'queue_stats', 'queue_stats');
SELECT columns_are('idemjob', 'queue_stats', ARRAY['intent', 'due', 'scheduled', 'running',
	'in_doubt', 'oldest_due_age']);
SELECT has_view('idemjob', 'provider_stats', 'provider_stats');
SELECT columns_are('idemjob', 'provider_stats', ARRAY['intent', 'provider', 'attempts', 'succeeded',
	'superseded', 'rejected', 'failed', 'in_doubt', 'cancelled', 'p50_ms', 'p95_ms', 'last_started_at',
	'released']);
-- since 1.2: monitoring
SELECT has_view('idemjob', 'retention_stats', 'retention_stats');
SELECT columns_are('idemjob', 'retention_stats', ARRAY['final_jobs', 'oldest_final_age', 'spent_keys',
	'race_log_rows', 'oldest_race_log_age']);
SELECT col_type_is('idemjob', 'provider_stats', 'p50_ms', 'double precision',
	'the view''s p50_ms keeps its type (rounded to 0.1)');
SELECT function_returns('idemjob', 'provider_stats', ARRAY['interval'], 'setof record');
SELECT is(pg_get_function_result('idemjob.provider_stats(interval)'::regprocedure),
	'TABLE(intent text, provider text, attempts bigint, succeeded bigint, superseded bigint, rejected bigint, failed bigint, in_doubt bigint, cancelled bigint, p50_ms numeric, p95_ms numeric, last_started_at timestamp with time zone, released bigint, races_lost bigint, late_by_p50_ms numeric, late_by_p95_ms numeric)',
	'provider_stats(since) returns the view''s columns, then the race log''s');
SELECT has_index('idemjob', 'race_log', 'race_log_logged_at', ARRAY['logged_at'],
	'race-log rows by time: provider_stats(since), retention_stats');
SELECT col_has_check('idemjob', 'capabilities', 'capability', 'capabilities are checked');
SELECT lives_ok($$INSERT INTO idemjob.capabilities (grantee, capability) VALUES (current_user::regrole, 'monitor')$$,
	'monitor is a capability the table takes');
SELECT is(array_to_string(ARRAY(SELECT a.privilege_type || ' ' || o.obj
		FROM (VALUES ('idemjob.owner_visible(text)'::regprocedure::oid, 'owner_visible', 'f'),
					 ('idemjob.provider_stats(interval)'::regprocedure::oid, 'provider_stats()', 'f')) o(oid, obj, k)
		JOIN pg_proc p ON p.oid = o.oid CROSS JOIN aclexplode(p.proacl) a
		WHERE a.grantee = 0 ORDER BY 1), ','), '',
	'PUBLIC may not call provider_stats(since) or owner_visible');

-- since 1.2 (issue 21): one row per result that was not committed
SELECT has_view('idemjob', 'compensations', 'compensations');
SELECT columns_are('idemjob', 'compensations', ARRAY['logged_at', 'job_id', 'owner_id',
	'idempotency_key', 'intent', 'provider', 'attempt_id', 'reason', 'winner_attempt_id',
	'winner_provider', 'late_by', 'result_sha256', 'result_bytes', 'dropped_result',
	'expected_version', 'found_version']);

-- guard triggers (I8)
SELECT has_trigger('idemjob', 'jobs', 'jobs_guard', 'idemjob.jobs.jobs_guard');
SELECT has_trigger('idemjob', 'attempts', 'attempts_guard', 'idemjob.attempts.attempts_guard');
SELECT trigger_is('idemjob', 'jobs', 'jobs_guard', 'idemjob', 'jobs_guard');
SELECT is((SELECT l.lanname FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
			WHERE p.oid = 'idemjob.jobs_guard'::regproc), 'c', 'the guards are written in C');

-- functions: exact signatures and return types
SELECT function_returns('idemjob', 'submit', ARRAY['text', 'text', 'text', 'jsonb', 'text',
	'timestamp with time zone', 'integer', 'integer'], 'setof record');
SELECT hasnt_function('idemjob', 'submit', ARRAY['text', 'text', 'text', 'jsonb', 'text'],
	'the 1.0 submit is replaced, not overloaded');
SELECT function_returns('idemjob', 'claim', ARRAY['text', 'text[]', 'integer', 'interval', 'interval', 'boolean'], 'setof record');
SELECT hasnt_function('idemjob', 'claim', ARRAY['text', 'text[]', 'integer', 'interval', 'interval'],
	'the 1.1 claim is replaced, not overloaded');
SELECT function_returns('idemjob', 'begin_attempt', ARRAY['uuid'], 'idemjob.attempts');
SELECT function_returns('idemjob', 'abandon_attempts', ARRAY['text'], 'integer');
SELECT function_returns('idemjob', 'heartbeat', ARRAY['uuid', 'interval'], 'idemjob.attempts');
SELECT function_returns('idemjob', 'job', ARRAY['uuid'], 'idemjob.jobs');
SELECT function_returns('idemjob', 'await_job', ARRAY['uuid', 'interval'], 'idemjob.jobs');
SELECT function_returns('idemjob', 'purge', ARRAY['interval', 'integer'], 'integer');
SELECT function_returns('idemjob', 'purge_race_log', ARRAY['interval'], 'integer');
SELECT function_returns('idemjob', 'grant_capability', ARRAY['regrole', 'text'], 'void');
SELECT function_returns('idemjob', 'revoke_capability', ARRAY['regrole', 'text'], 'void');
SELECT is(pg_get_function_arguments('idemjob.claim'::regproc),
	'worker text, intents text[] DEFAULT NULL::text[], max_jobs integer DEFAULT 1, timeout interval DEFAULT NULL::interval, wait interval DEFAULT ''00:00:00''::interval, lease boolean DEFAULT false',
	'claim defaults');
SELECT function_returns('idemjob', 'start_attempt', ARRAY['uuid', 'text', 'interval', 'text'], 'idemjob.attempts');
SELECT function_returns('idemjob', 'complete_attempt', ARRAY['uuid', 'jsonb'], 'setof record');
SELECT function_returns('idemjob', 'fail_attempt', ARRAY['uuid', 'jsonb', 'boolean'], 'idemjob.attempts');
SELECT function_returns('idemjob', 'mark_unknown', ARRAY['uuid', 'text'], 'idemjob.attempts');
SELECT function_returns('idemjob', 'cancel_attempt', ARRAY['uuid', 'text', 'boolean'], 'idemjob.attempts');
SELECT function_returns('idemjob', 'expire_attempts', ARRAY[]::text[], 'integer');
SELECT function_returns('idemjob', 'cancel_job', ARRAY['uuid', 'text'], 'idemjob.jobs');
SELECT function_returns('idemjob', 'define_contract', ARRAY['text', 'jsonb'], 'integer');
SELECT function_returns('idemjob', 'certify_provider', ARRAY['text', 'text', 'jsonb'], 'idemjob.certifications');
SELECT function_returns('idemjob', 'revoke_provider', ARRAY['text', 'text', 'text'], 'idemjob.certifications');
SELECT function_returns('idemjob', 'validate', ARRAY['jsonb', 'jsonb'], 'jsonb');
SELECT is(pg_get_function_result('idemjob.submit'::regproc),
	'TABLE(job_id uuid, created boolean, state idemjob.job_state, version bigint, result jsonb)',
	'submit returns the contract''s columns');
SELECT is(pg_get_function_result('idemjob.complete_attempt'::regproc),
	'TABLE(outcome text, job_id uuid, job_version bigint, winner_attempt_id uuid)',
	'complete_attempt returns the contract''s columns');
SELECT is(pg_get_function_arguments('idemjob.start_attempt'::regproc),
	'job_id uuid, provider text DEFAULT NULL::text, timeout interval DEFAULT NULL::interval, worker text DEFAULT NULL::text',
	'start_attempt defaults');
SELECT is(pg_get_function_arguments('idemjob.cancel_attempt'::regproc),
	'attempt_id uuid, reason text, fence boolean DEFAULT false',
	'cancel_attempt defaults');
SELECT ok(NOT EXISTS (SELECT 1 FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
					   WHERE p.pronamespace = 'idemjob'::regnamespace AND l.lanname NOT IN ('c', 'internal')
						 AND p.oid <> 'idemjob.distribute(int4)'::regprocedure),
	'every idemjob function is written in C (the owner hash''s input and output are int4''s own), '
	'but distribute(): Citus''s own set-up calls, in PL/pgSQL');
SELECT ok(NOT EXISTS (SELECT 1 FROM pg_proc WHERE pronamespace = 'idemjob'::regnamespace AND prosecdef),
	'no SECURITY DEFINER functions');

-- privileges: PUBLIC gets nothing on the tables
SELECT ok(NOT has_table_privilege('public', 'idemjob.jobs', 'INSERT, UPDATE, DELETE, SELECT'),
	'PUBLIC cannot touch idemjob.jobs');
SELECT ok(NOT has_table_privilege('public', 'idemjob.attempts', 'INSERT, UPDATE, DELETE, SELECT'),
	'PUBLIC cannot touch idemjob.attempts');

-- the extension is not relocatable, its data is dumped
SELECT is((SELECT extrelocatable FROM pg_extension WHERE extname = 'idemjob'), false, 'not relocatable');
SELECT is((SELECT count(*)::int FROM pg_extension e, unnest(e.extconfig) t
		   WHERE e.extname = 'idemjob' AND NOT (SELECT relispartition FROM pg_class WHERE oid = t)), 10,
	'pg_dump keeps the ten tables');
-- (and, in the partitioned layout, every partition's rows; none dropped)
SELECT is((SELECT count(*)::int FROM pg_extension e, unnest(e.extconfig) t
		   WHERE e.extname = 'idemjob' AND NOT EXISTS (SELECT FROM pg_class WHERE oid = t))
		  + (SELECT count(*)::int FROM pg_class c
			 WHERE c.relispartition AND c.relkind = 'r' AND c.relnamespace = 'idemjob'::regnamespace
			   AND NOT c.oid = ANY ((SELECT extconfig FROM pg_extension WHERE extname = 'idemjob')::oid[])), 0,
	'no table pg_dump would look for in vain, no partition left out');
SELECT ok(NOT has_schema_privilege('public', 'idemjob', 'USAGE'), 'PUBLIC has no usage on the schema');
SELECT ok(NOT has_function_privilege('public', 'idemjob.submit(text,text,text,jsonb,text,timestamptz,int,int)', 'EXECUTE'),
	'PUBLIC cannot submit');

SELECT * FROM finish();
ROLLBACK;
