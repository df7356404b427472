-- settings: the duration settings' units, the retry backoff's bound, and
-- the LOG lines of grants, bindings and purges (docs/reference.md#settings)
\set VERBOSITY sqlstate
-- the settings exist once the library is loaded: at a session's first
-- idemjob call, or at server start with shared_preload_libraries
LOAD 'idemjob';

-- the defaults, as SHOW writes them
SELECT name, setting, boot_val, context FROM pg_settings
WHERE name IN ('idemjob.attempt_timeout', 'idemjob.retry_backoff', 'idemjob.retry_backoff_max',
			   'idemjob.key_retention', 'idemjob.purge_pause', 'idemjob.max_wait',
			   'idemjob.claim_lease', 'idemjob.sweeper_interval', 'idemjob.notify')
ORDER BY name;

-- a number without a unit is refused (1.1 read '30' as 30 ms), but 0
\set VERBOSITY default
SET idemjob.attempt_timeout = '30';
\set VERBOSITY sqlstate
SET idemjob.attempt_timeout = 30;
SET idemjob.attempt_timeout = '1.5';
SET idemjob.key_retention = '7776000';
SET idemjob.attempt_timeout = 0;
SHOW idemjob.attempt_timeout;
SET idemjob.key_retention = '0';
SHOW idemjob.key_retention;

-- a number with one of PostgreSQL's units, as postgresql.conf takes them
SET idemjob.attempt_timeout = '200ms';
SET idemjob.attempt_timeout = '5s';
SET idemjob.attempt_timeout = '1h';
SET idemjob.attempt_timeout = '1.5h';
SET idemjob.key_retention = '90d';
SHOW idemjob.key_retention;
-- or an interval, as PostgreSQL's interval input reads it
SET idemjob.key_retention = '90 days';
SHOW idemjob.key_retention;
SET idemjob.key_retention = '1 month';		-- 30 days
SET idemjob.attempt_timeout = 'PT5M';
SET idemjob.attempt_timeout = '1 hour 30 minutes';
SHOW idemjob.attempt_timeout;
-- the value is the one given: an attempt started without a timeout
SELECT job_id IS NOT NULL AS submitted FROM idemjob.submit('settings', 's-1', 'settings', '{}', 'p');
SELECT deadline - started_at AS timeout
FROM idemjob.start_attempt((SELECT id FROM idemjob.jobs WHERE owner_id = 'settings' AND idempotency_key = 's-1'));
RESET idemjob.attempt_timeout;
RESET idemjob.key_retention;

-- out of range, malformed, negative: refused, the value unchanged
SET idemjob.attempt_timeout = '90 days';	-- past 2^31-1 ms
SET idemjob.key_retention = '100 years';	-- past 2^31-1 s
SET idemjob.key_retention = '-1 day';
SET idemjob.key_retention = 'soon';
SET idemjob.key_retention = 'infinity';
SET idemjob.key_retention = '';
SET idemjob.claim_lease = '0';
SET idemjob.claim_lease = '100us';			-- rounds to 0 ms
SET idemjob.purge_pause = '11s';
SHOW idemjob.attempt_timeout;
SHOW idemjob.key_retention;
SHOW idemjob.claim_lease;
SHOW idemjob.purge_pause;

-- retry_backoff <= retry_backoff_max: a SET past the other is refused
\set VERBOSITY default
SET idemjob.retry_backoff = '2h';			-- the maximum is 1h
\set VERBOSITY sqlstate
SET idemjob.retry_backoff_max = '10ms';		-- the backoff is 1s
SELECT set_config('idemjob.retry_backoff', '5h', false);
SET idemjob.retry_backoff_max = '4h';		-- raise the maximum first
SET idemjob.retry_backoff = '2h';
SHOW idemjob.retry_backoff;
SET idemjob.retry_backoff_max = '1h';		-- now below the backoff
RESET idemjob.retry_backoff;
RESET idemjob.retry_backoff_max;
-- ALTER ROLE/DATABASE ... SET set one at a time: not compared there (the
-- delay is capped at retry_backoff_max when it is used: retry_policy.sql)
CREATE ROLE ij_settings_role NOLOGIN;
ALTER ROLE ij_settings_role SET idemjob.retry_backoff = '2h';
ALTER ROLE ij_settings_role SET idemjob.key_retention = '90 days';
ALTER ROLE ij_settings_role SET idemjob.attempt_timeout = '30';	-- refused there too
SELECT unnest(setconfig) AS setting FROM pg_db_role_setting
WHERE setrole = 'ij_settings_role'::regrole ORDER BY 1;
DROP ROLE ij_settings_role;

-- LOG lines (shown here with client_min_messages = log): a change of
-- rights names who, what and whom; a purge that did something sums what
-- it did
SET log_statement = 'none';
SET log_duration = off;
SET log_min_duration_statement = -1;
CREATE ROLE ij_settings_admin SUPERUSER NOLOGIN;
CREATE ROLE ij_settings_app NOLOGIN;
SELECT count(*) AS submitted
FROM generate_series(2, 4) i, idemjob.submit('settings', 's-' || i, 'settings', '{}', 'p');
SELECT count(*) AS cancelled
FROM idemjob.jobs j, idemjob.cancel_job(j.id, 'test')
WHERE j.owner_id = 'settings' AND j.idempotency_key IN ('s-2', 's-3', 's-4');
SET ROLE ij_settings_admin;
\set VERBOSITY default
SET client_min_messages = log;
SELECT idemjob.grant_capability('ij_settings_app', 'client');
SELECT idemjob.bind_owner('ij_settings_app', 'role');
SELECT idemjob.unbind_owner('ij_settings_app');
SELECT idemjob.unbind_owner('ij_settings_app');	-- nothing to remove: no line
SELECT idemjob.revoke_capability('ij_settings_app', 'client');
SELECT idemjob.purge('0 seconds', 2);
SELECT idemjob.purge('0 seconds', 1);		-- within a minute: summed into the next line
RESET client_min_messages;
\set VERBOSITY sqlstate
RESET ROLE;
DROP ROLE ij_settings_admin;
DROP ROLE ij_settings_app;
