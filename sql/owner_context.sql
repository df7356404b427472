-- The owner's context (CONTRACT.md "Security model", since 1.2; issue 17,
-- findings 4, 5 and 6).  The functions run as the extension's owner, as a
-- security-restricted operation with search_path pinned to pg_catalog and
-- pg_temp last: no object or setting of the caller's reaches code that runs
-- as the owner, a trigger a DBA put on the tables included.  1.1 ran a
-- DBA's trigger with the caller's search_path (an unqualified name found
-- the caller's temporary table, whose trigger then ran as a superuser), and
-- a subtransaction aborted inside such a trigger broke the user switch
-- ("invalid role OID: 0" until RESET ROLE).

SET client_min_messages = warning;
DROP ROLE IF EXISTS oc_client, oc_worker;
CREATE ROLE oc_client LOGIN;
CREATE ROLE oc_worker LOGIN;
RESET client_min_messages;
SELECT idemjob.grant_capability('oc_client', 'client');
SELECT idemjob.grant_capability('oc_worker', 'worker');
GRANT CREATE ON SCHEMA public TO oc_client;

-- one line per statement: 'ok' or SQLSTATE and message
CREATE FUNCTION public.oc_try(sql text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE sql;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE || ': ' || regexp_replace(SQLERRM,
		'[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}', '<id>', 'g');
END
$$;
GRANT EXECUTE ON FUNCTION public.oc_try(text) TO PUBLIC;

--
-- 1. A subtransaction aborted inside a trigger, on every table: the user
--    switch and the trusted path come back to the right depth.
--
CREATE TABLE public.oc_seen (tab text, who text, path text, restricted text);
CREATE FUNCTION public.oc_catch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	BEGIN
		PERFORM 1 / 0;
	EXCEPTION WHEN division_by_zero THEN
		-- (a partition of the partitioned layout as its table)
		INSERT INTO public.oc_seen VALUES (regexp_replace(TG_TABLE_NAME, '_p[0-9]+$', ''), current_user,
			pg_catalog.current_setting('search_path'),
			public.oc_try('CREATE TEMP TABLE oc_t (a int)'));
	END;
	RETURN NULL;
END
$$;
SELECT pg_catalog.format('CREATE TRIGGER oc_catch AFTER INSERT OR UPDATE OR DELETE ON idemjob.%I FOR EACH ROW EXECUTE FUNCTION public.oc_catch()', t)
FROM unnest('{jobs,attempts,race_log,contracts,certifications,spent_keys,capabilities}'::text[]) t \gexec

SET ROLE oc_client;
SELECT job_id AS oj1 FROM idemjob.submit('oc', 'oc-1', 'oc_intent', '{"n": 1}', 'p1') \gset
SELECT current_user, pg_catalog.current_setting('search_path') AS search_path;
SELECT created FROM idemjob.submit('oc', 'oc-1', 'oc_intent', '{"n": 1}', 'p1');
RESET ROLE;
SET ROLE oc_worker;
SELECT attempt_no FROM idemjob.start_attempt(:'oj1');
SELECT current_user;
RESET ROLE;
-- a whole life as the superuser too (every table written)
SELECT idemjob.define_contract('oc_intent', '{"type": "object"}') IS NOT NULL AS defined;
SELECT provider FROM idemjob.certify_provider('oc_intent', 'p2', '{}');
SELECT job_id AS oj FROM idemjob.submit('oc', 'oc-2', 'oc_intent', '{"n": 2}', 'p1') \gset
SELECT id AS oa1 FROM idemjob.start_attempt(:'oj') \gset
SELECT state FROM idemjob.mark_unknown(:'oa1', 'timeout');
SELECT state FROM idemjob.cancel_attempt(:'oa1', 'fenced', true);
SELECT id AS oa2 FROM idemjob.start_attempt(:'oj', 'p2') \gset
SELECT outcome FROM idemjob.complete_attempt(:'oa2', '{"ok": true}');
SELECT outcome FROM idemjob.complete_attempt(:'oa1', '{"ok": true}');
SELECT idemjob.revoke_capability('oc_worker', 'worker');
SELECT idemjob.grant_capability('oc_worker', 'worker');
SELECT current_user = session_user AS same_user;
-- spent_keys: a purge, rolled back (it would purge other tests' jobs too)
BEGIN;
SELECT idemjob.purge('0 s') > 0 AS purged;
SELECT count(*) > 0 AS spent_keys_seen FROM public.oc_seen WHERE tab = 'spent_keys';
SELECT current_user = session_user AS same_user;
ROLLBACK;
-- every table's trigger ran as the owner, with the pinned path, and could
-- not make a temporary table (a security-restricted operation)
SELECT tab, who = (SELECT e.extowner::regrole::text FROM pg_extension e WHERE e.extname = 'idemjob') AS as_owner,
	   path, restricted
FROM public.oc_seen GROUP BY 1, 2, 3, 4 ORDER BY 1;
SELECT pg_catalog.format('DROP TRIGGER oc_catch ON idemjob.%I', t)
FROM unnest('{jobs,attempts,race_log,contracts,certifications,spent_keys,capabilities}'::text[]) t \gexec

--
-- 2. A DBA's trigger that names a table without its schema.  It finds no
--    table on the pinned path (and says so), and the caller's temporary
--    table of that name is refused: its trigger would run as the owner.
--
CREATE TABLE public.oc_audit (key text);
CREATE FUNCTION public.oc_audit_unqualified() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO oc_audit VALUES (NEW.idempotency_key);
	RETURN NULL;
END
$$;
CREATE TRIGGER oc_audit AFTER INSERT ON idemjob.jobs
	FOR EACH ROW EXECUTE FUNCTION public.oc_audit_unqualified();
SET ROLE oc_client;
SELECT public.oc_try($$SELECT idemjob.submit('oc', 'oc-3', 'oc_intent', '{"n": 3}', 'p1')$$);
-- the attack: a temporary table named like it, with a trigger that makes
-- the caller a superuser if it ever runs as one
CREATE TEMP TABLE oc_audit (key text);
CREATE FUNCTION pg_temp.oc_escalate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE 'ALTER ROLE oc_client SUPERUSER';
	RETURN NULL;
END
$$;
CREATE TRIGGER oc_escalate AFTER INSERT ON pg_temp.oc_audit
	FOR EACH ROW EXECUTE FUNCTION pg_temp.oc_escalate();
SELECT public.oc_try($$SELECT idemjob.submit('oc', 'oc-3', 'oc_intent', '{"n": 3}', 'p1')$$);
DROP TABLE pg_temp.oc_audit;
DROP FUNCTION pg_temp.oc_escalate();
RESET ROLE;
SELECT rolsuper FROM pg_roles WHERE rolname = 'oc_client';
SELECT count(*) AS oc3_jobs FROM idemjob.jobs WHERE idempotency_key = 'oc-3';
-- the DBA's fix: name the table with its schema
CREATE OR REPLACE FUNCTION public.oc_audit_unqualified() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO public.oc_audit VALUES (NEW.idempotency_key);
	RETURN NULL;
END
$$;
SET ROLE oc_client;
SELECT public.oc_try($$SELECT idemjob.submit('oc', 'oc-3', 'oc_intent', '{"n": 3}', 'p1')$$);
RESET ROLE;
SELECT key FROM public.oc_audit;
DROP TRIGGER oc_audit ON idemjob.jobs;

-- the caller's search_path and its temporary objects are untouched after
-- the call, and the caller's own statements may use its temporary tables
SET search_path = pg_temp, public;
SELECT created FROM idemjob.submit('oc', 'oc-1', 'oc_intent', '{"n": 1}', 'p1');
SHOW search_path;
RESET search_path;

--
-- 3. The functions run as the extension's owner only while schema idemjob
--    is that owner's: a schema given away refuses every call (1.1 then ran
--    as the schema's new owner, and the sweeper called what that role put
--    in the schema as a superuser).
--
ALTER SCHEMA idemjob OWNER TO oc_client;
SELECT public.oc_try($$SELECT idemjob.job('00000000-0000-0000-0000-000000000000')$$);
SELECT public.oc_try($$SELECT idemjob.submit('oc', 'oc-4', 'oc_intent')$$);
SELECT format('ALTER SCHEMA idemjob OWNER TO %I', e.extowner::regrole) FROM pg_extension e WHERE e.extname = 'idemjob' \gexec
SELECT created FROM idemjob.submit('oc', 'oc-4', 'oc_intent');

-- clean up (the jobs of owner 'oc' stay, as every test's do)
DROP TABLE public.oc_seen, public.oc_audit;
DROP FUNCTION public.oc_catch(), public.oc_audit_unqualified(), public.oc_try(text);
SELECT idemjob.revoke_capability('oc_client', 'client');
SELECT idemjob.revoke_capability('oc_worker', 'worker');
REVOKE CREATE ON SCHEMA public FROM oc_client;
DROP ROLE oc_client, oc_worker;
