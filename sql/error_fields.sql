-- Machine-readable error fields: every IJ00x error from a function carries
-- schema_name 'idemjob', table_name (the table its ids refer to) and
-- constraint_name, a space-separated key=value list a program can read
-- without parsing the DETAIL prose.
-- ids are random, so each check compares the fields with the ids it knows.
CREATE FUNCTION public.err_fields(q text)
RETURNS TABLE (code text, schema_name text, table_name text, kv text)
LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE q;
	code := 'none';
	RETURN NEXT;
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS code = RETURNED_SQLSTATE,
		schema_name = SCHEMA_NAME, table_name = TABLE_NAME,
		kv = CONSTRAINT_NAME;
	RETURN NEXT;
END $$;
SET idemjob.attempt_timeout = '2min';
SELECT job_id AS j FROM idemjob.submit('ef', 'k1', 'ef.intent', '{"a": 1}') \gset
-- IJ001 on submit: the conflicting job
SELECT code, schema_name, table_name, kv = 'job_id=' || :'j' AS kv_ok
FROM err_fields($q$SELECT idemjob.submit('ef', 'k1', 'ef.intent', '{"a": 2}')$q$);
-- IJ002 with a deadline: job, attempt, state, deadline in UTC, retry_after
SELECT id AS a, deadline AS d FROM idemjob.start_attempt(:'j', timeout => '1 hour') \gset
SELECT code, table_name,
	kv ~ ('^job_id=' || :'j' || ' attempt_id=' || :'a' || ' state=started deadline=' ||
		to_char(:'d'::timestamptz AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') ||
		' retry_after=[0-9]+$') AS kv_ok,
	substring(kv from 'retry_after=([0-9]+)$')::int BETWEEN 3590 AND 3600 AS retry_after_ok
FROM err_fields(format('SELECT idemjob.start_attempt(%L)', :'j'));
-- the deadline is UTC ISO 8601 whatever the session's DateStyle and TimeZone
SET DateStyle = 'SQL, DMY';
SET TimeZone = 'America/Santiago';
SELECT code,
	substring(kv from ' deadline=([^ ]+) ')::timestamptz = :'d'::timestamptz AS deadline_ok
FROM err_fields(format('SELECT idemjob.start_attempt(%L)', :'j'));
RESET DateStyle;
RESET TimeZone;
-- IJ002 without a deadline: retry_after is idemjob.attempt_timeout (2 min)
SELECT job_id AS j2 FROM idemjob.submit('ef', 'k2', 'ef.intent') \gset
SET idemjob.attempt_timeout = 0;
SELECT id AS a2 FROM idemjob.start_attempt(:'j2') \gset
SET idemjob.attempt_timeout = '2min';
SELECT state FROM idemjob.mark_unknown(:'a2');
SELECT code, table_name,
	kv = format('job_id=%s attempt_id=%s state=unknown retry_after=120', :'j2', :'a2') AS kv_ok
FROM err_fields(format('SELECT idemjob.start_attempt(%L)', :'j2'));
-- and 60 s when attempt_timeout is 0
SET idemjob.attempt_timeout = 0;
SELECT code, substring(kv from 'retry_after=([0-9]+)$') AS retry_after
FROM err_fields(format('SELECT idemjob.start_attempt(%L)', :'j2'));
RESET idemjob.attempt_timeout;
-- IJ001 on complete_attempt with another result: the attempt and its job
SELECT outcome FROM idemjob.complete_attempt(:'a', '{"r": 1}');
SELECT code, table_name,
	kv = format('attempt_id=%s job_id=%s state=succeeded', :'a', :'j') AS kv_ok
FROM err_fields(format($q$SELECT idemjob.complete_attempt(%L, '{"r": 2}')$q$, :'a'));
-- IJ003: a finished job
SELECT code, table_name, kv = format('job_id=%s state=succeeded', :'j') AS kv_ok
FROM err_fields(format('SELECT idemjob.start_attempt(%L)', :'j'));
SELECT code, table_name, kv = format('job_id=%s state=succeeded', :'j') AS kv_ok
FROM err_fields(format($q$SELECT idemjob.cancel_job(%L, 'x')$q$, :'j'));
-- IJ004: an uncertified failover
SELECT job_id AS j3 FROM idemjob.submit('ef', 'k3', 'ef.intent') \gset
SELECT code, table_name, kv = 'job_id=' || :'j3' AS kv_ok
FROM err_fields(format($q$SELECT idemjob.start_attempt(%L, 'elsewhere')$q$, :'j3'));
-- IJ005: a failed attempt cannot complete, a final one cannot become unknown
SELECT id AS a3 FROM idemjob.start_attempt(:'j3') \gset
SELECT state FROM idemjob.fail_attempt(:'a3', '{"code": "boom"}');
SELECT code, table_name,
	kv = format('attempt_id=%s job_id=%s state=failed', :'a3', :'j3') AS kv_ok
FROM err_fields(format($q$SELECT idemjob.complete_attempt(%L, '{}')$q$, :'a3'));
SELECT code, table_name,
	kv = format('attempt_id=%s job_id=%s state=failed', :'a3', :'j3') AS kv_ok
FROM err_fields(format('SELECT idemjob.mark_unknown(%L)', :'a3'));
SELECT code, table_name,
	kv = format('attempt_id=%s job_id=%s state=failed', :'a3', :'j3') AS kv_ok
FROM err_fields(format('SELECT idemjob.heartbeat(%L)', :'a3'));
-- IJ006: the id asked for, and the table it was looked up in
SELECT code, schema_name, table_name, kv
FROM err_fields($q$SELECT idemjob.job('00000000-0000-0000-0000-00000000000a')$q$);
SELECT code, table_name, kv
FROM err_fields($q$SELECT idemjob.start_attempt('00000000-0000-0000-0000-00000000000b')$q$);
SELECT code, table_name, kv
FROM err_fields($q$SELECT idemjob.cancel_job('00000000-0000-0000-0000-00000000000c', 'x')$q$);
SELECT code, table_name, kv
FROM err_fields($q$SELECT idemjob.complete_attempt('00000000-0000-0000-0000-00000000000d', '{}')$q$);
SELECT code, table_name, kv
FROM err_fields($q$SELECT idemjob.mark_unknown('00000000-0000-0000-0000-00000000000e')$q$);
SELECT code, schema_name, table_name, kv
FROM err_fields($q$SELECT idemjob.certify_provider('ef.no-contract', 'p')$q$);
-- a malformed uuid is the core's 22P02, without idemjob's fields
SELECT code, schema_name, table_name, kv
FROM err_fields($q$SELECT idemjob.job('not-a-uuid')$q$);
DROP FUNCTION public.err_fields(text);
