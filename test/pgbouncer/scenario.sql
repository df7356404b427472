-- test/pgbouncer/scenario.sql: every idemjob function through a transaction
-- pooler.  Each statement is its own transaction, so consecutive statements
-- may run on different server connections: nothing here may rely on
-- session state (no SET, no temp tables, no prepared statements; values
-- carried from one statement to the next by psql variables, on the client).
-- A settings change is made with SET LOCAL inside one transaction.
\set ON_ERROR_STOP 1
\set VERBOSITY terse

INSERT INTO bouncer.seen SELECT 'start', pg_backend_pid();
SELECT idemjob.define_contract('pool', '{"type": "object", "properties": {"bad": false}}') AS v \gset
SELECT count(*) AS n FROM idemjob.certify_provider('pool', 'alt', '{"ok": true}') \gset
SELECT job_id, created FROM idemjob.submit('pooler', 'k1', 'pool', '{"x": 1}') \gset
INSERT INTO bouncer.seen SELECT 'submit', pg_backend_pid();
SELECT job_id AS job_id2, created AS created2 FROM idemjob.submit('pooler', 'k1', 'pool', '{"x": 1.0}') \gset
SELECT :'job_id' = :'job_id2' AND :'created' AND NOT :'created2' AS same_job \gset
\if :same_job
\else
\echo submit retry through the pooler answered another job
\quit 1
\endif
SELECT id AS a1 FROM idemjob.start_attempt(:'job_id', NULL, '1 hour', 'pool-worker') \gset
INSERT INTO bouncer.seen SELECT 'start', pg_backend_pid();
-- I7: the same worker learns its attempt again, whatever connection serves it
SELECT id = :'a1' AS same_attempt FROM idemjob.start_attempt(:'job_id', NULL, '1 hour', 'pool-worker') \gset
\if :same_attempt
\else
\echo start_attempt retry through the pooler answered another attempt
\quit 1
\endif
SELECT state AS st FROM idemjob.mark_unknown(:'a1', 'pooler timeout') \gset
SELECT state AS st FROM idemjob.cancel_attempt(:'a1', 'out of band') \gset
SELECT id AS a2 FROM idemjob.start_attempt(:'job_id', 'alt') \gset
SELECT state AS st FROM idemjob.fail_attempt(:'a2', '{"code": "flaky"}') \gset
SELECT id AS a3 FROM idemjob.start_attempt(:'job_id') \gset
SELECT outcome AS o_bad FROM idemjob.complete_attempt(:'a3', '{"bad": 1}') \gset
SELECT id AS a4 FROM idemjob.start_attempt(:'job_id') \gset
SELECT outcome AS o4 FROM idemjob.complete_attempt(:'a4', '{"ok": 4}') \gset
INSERT INTO bouncer.seen SELECT 'complete', pg_backend_pid();
SELECT outcome AS o4b FROM idemjob.complete_attempt(:'a4', '{"ok": 4}') \gset
SELECT outcome AS o1 FROM idemjob.complete_attempt(:'a1', '{"late": 1}') \gset
SELECT :'o_bad' = 'rejected' AND :'o4' = 'won' AND :'o4b' = 'won' AND :'o1' = 'lost' AS outcomes_ok \gset
\if :outcomes_ok
\else
\echo unexpected outcomes: rejected :o_bad, won :o4, won again :o4b, lost :o1
\quit 1
\endif
SELECT count(*) = 1 AS race_ok FROM idemjob.race_log WHERE attempt_id = :'a1' AND reason = 'slot_taken' \gset
\if :race_ok
\else
\echo no race_log row for the late result
\quit 1
\endif
-- a second job: expiry, cancel_job, revoke
SELECT job_id AS j2 FROM idemjob.submit('pooler', 'k2', 'pool') \gset
SELECT id AS b1 FROM idemjob.start_attempt(:'j2', NULL, '1 millisecond') \gset
SELECT pg_sleep(0.01) \gset
SELECT idemjob.expire_attempts() >= 1 AS expired \gset
SELECT state = 'cancelled' AS cancelled FROM idemjob.cancel_job(:'j2', 'pooler test') \gset
SELECT state = 'cancelled' AS cancelled_again FROM idemjob.cancel_job(:'j2', 'pooler test') \gset
SELECT revoked_at IS NOT NULL AS revoked FROM idemjob.revoke_provider('pool', 'alt', 'pooler test') \gset
SELECT idemjob.validate('{"type": "object"}', '{"a": 1}') IS NULL AS valid \gset
-- a setting for one transaction only
BEGIN;
SET LOCAL idemjob.default_provider = 'pool-provider';
SELECT job_id AS j3 FROM idemjob.submit('pooler', 'k3', 'pool') \gset
COMMIT;
SELECT job_id AS j4 FROM idemjob.submit('pooler', 'k4', 'pool') \gset
SELECT provider = 'pool-provider' AS local_provider FROM idemjob.jobs WHERE id = :'j3' \gset
SELECT provider = 'default' AS default_provider FROM idemjob.jobs WHERE id = :'j4' \gset
SELECT :'expired' AND :'cancelled' AND :'cancelled_again' AND :'revoked' AND :'valid'
	AND :'local_provider' AND :'default_provider' AS rest_ok \gset
\if :rest_ok
\else
\echo expire/cancel_job/revoke/validate/settings: :expired :cancelled :cancelled_again :revoked :valid :local_provider :default_provider
\quit 1
\endif
INSERT INTO bouncer.seen SELECT 'end', pg_backend_pid();
\echo scenario through the pooler: every function answered as the contract says
