-- Hijack-proof SQL (CONTRACT.md I9 and "Security model (since 1.1)"):
-- objects a caller plants in pg_temp or in a schema on its search_path
-- (domains named like built-in types, operators on the extension's enums
-- and on built-in types, functions and aggregates named like built-ins,
-- relations named like the extension's tables) are never run by the
-- extension's code, whoever calls it, a superuser included.  In 1.0 a
-- temporary domain pg_temp.text ran the caller's code inside the trusted
-- path, and an "=" on idemjob.job_state planted on a superuser's
-- search_path ran as that superuser (issue 8, items 2 and 3).  The control
-- queries show each trap does fire for unqualified SQL.
--
-- Every trap calls hj.rec(), which logs to hj.log AND raises a WARNING (so
-- a trap that fires in a call that then fails still shows in the output).

SET client_min_messages = warning;
DROP ROLE IF EXISTS hj_attacker;
CREATE ROLE hj_attacker NOLOGIN;
RESET client_min_messages;
SELECT idemjob.grant_capability('hj_attacker', c)
FROM unnest('{client,worker,admin}'::text[]) c;
CREATE SCHEMA hj AUTHORIZATION hj_attacker;

SET ROLE hj_attacker;
-- the traps' own setup: pg_temp explicitly last, or its domains would
-- catch the setup's own SQL
SET search_path = pg_catalog, pg_temp;
CREATE TABLE hj.log (what text, by name, super boolean);
GRANT USAGE ON SCHEMA hj TO PUBLIC;
GRANT ALL ON hj.log TO PUBLIC;
CREATE FUNCTION hj.rec(what pg_catalog.text) RETURNS pg_catalog.bool
LANGUAGE plpgsql AS $$
DECLARE
	su pg_catalog.bool := (SELECT r.rolsuper FROM pg_catalog.pg_roles r
						   WHERE r.rolname OPERATOR(pg_catalog.=) CURRENT_USER);
BEGIN
	INSERT INTO hj.log VALUES (what, CURRENT_USER, su);
	RAISE WARNING 'hijack: % ran as % (superuser: %)', what, CURRENT_USER, su;
	RETURN true;
END
$$;
GRANT EXECUTE ON FUNCTION hj.rec(pg_catalog.text) TO PUBLIC;

-- 1. domains in pg_temp named like the types the code uses
DO $$
DECLARE
	t pg_catalog.text;
BEGIN
	FOREACH t IN ARRAY '{text,int4,int8,int2,jsonb,json,uuid,bool,timestamptz,interval,bytea,name,oid,regrole,regclass,regnamespace,float8,numeric,job_state,attempt_state}'::pg_catalog.text[]
	LOOP
		IF t OPERATOR(pg_catalog.=) ANY ('{job_state,attempt_state}'::pg_catalog.text[]) THEN
			EXECUTE pg_catalog.format('CREATE DOMAIN pg_temp.%I AS idemjob.%I CHECK (hj.rec(%L))',
									  t, t, 'domain pg_temp.' OPERATOR(pg_catalog.||) t);
		ELSE
			EXECUTE pg_catalog.format('CREATE DOMAIN pg_temp.%I AS pg_catalog.%s CHECK (hj.rec(%L))',
									  t, t, 'domain pg_temp.' OPERATOR(pg_catalog.||) t);
		END IF;
	END LOOP;
END
$$;

-- 2. relations named like the extension's tables, in pg_temp and in hj:
-- reading one records
DO $$
DECLARE
	t pg_catalog.text;
BEGIN
	FOREACH t IN ARRAY '{jobs,attempts,race_log,contracts,certifications,spent_keys,capabilities,in_doubt}'::pg_catalog.text[]
	LOOP
		EXECUTE pg_catalog.format('CREATE TEMP VIEW %I AS SELECT hj.rec(%L) AS x', t, 'view pg_temp.' OPERATOR(pg_catalog.||) t);
		EXECUTE pg_catalog.format('CREATE VIEW hj.%I AS SELECT hj.rec(%L) AS x', t, 'view hj.' OPERATOR(pg_catalog.||) t);
	END LOOP;
END
$$;

-- 3. operators in hj: on the extension's enums (an exact match wins over
-- pg_catalog's anyenum operators wherever hj is on the path) and on the
-- built-in types (win when hj comes before pg_catalog)
DO $$
DECLARE
	o record;
	n pg_catalog.int4 := 0;
BEGIN
	FOR o IN
		SELECT p.oprname, p.oprleft::pg_catalog.regtype AS l, p.oprright::pg_catalog.regtype AS r,
			p.oprresult::pg_catalog.regtype AS res
		FROM pg_catalog.pg_operator p
		WHERE p.oprnamespace OPERATOR(pg_catalog.=) 'pg_catalog'::pg_catalog.regnamespace
			AND p.oprname OPERATOR(pg_catalog.=) ANY ('{=,<>,<,<=,>,>=,+,-,||,->>,->,@>,?}'::pg_catalog.name[])
			AND p.oprleft OPERATOR(pg_catalog.=) ANY ('{text,uuid,int4,int8,jsonb,bytea,timestamptz,interval,bool,name,oid,regrole}'::pg_catalog.regtype[])
			AND p.oprright OPERATOR(pg_catalog.=) ANY ('{text,uuid,int4,int8,jsonb,bytea,timestamptz,interval,bool,name,oid,regrole,text[]}'::pg_catalog.regtype[])
		UNION ALL
		SELECT op, t, t, 'pg_catalog.bool'::pg_catalog.regtype
		FROM unnest('{=,<>}'::pg_catalog.text[]) op,
			unnest('{idemjob.job_state,idemjob.attempt_state}'::pg_catalog.regtype[]) t
	LOOP
		n := n OPERATOR(pg_catalog.+) 1;
		EXECUTE pg_catalog.format(
			'CREATE FUNCTION hj.op_%s(a %s, b %s) RETURNS %s LANGUAGE sql AS %L',
			n, o.l, o.r, o.res,
			pg_catalog.format('SELECT hj.rec(%L); SELECT a OPERATOR(pg_catalog.%s) b',
							  'operator ' OPERATOR(pg_catalog.||) o.oprname OPERATOR(pg_catalog.||) '(' OPERATOR(pg_catalog.||) o.l OPERATOR(pg_catalog.||) ', ' OPERATOR(pg_catalog.||) o.r OPERATOR(pg_catalog.||) ')',
							  o.oprname));
		EXECUTE pg_catalog.format('CREATE OPERATOR hj.%s (LEFTARG = %s, RIGHTARG = %s, FUNCTION = hj.op_%s)',
								  o.oprname, o.l, o.r, n);
	END LOOP;
END
$$;
SELECT count(*) > 60 AS many_operators FROM pg_operator WHERE oprnamespace = 'hj'::regnamespace;

-- 4. functions and aggregates in hj named like built-ins (and like the
-- extension's uuid_v7)
CREATE FUNCTION hj.now() RETURNS timestamptz LANGUAGE sql AS $$ SELECT hj.rec('now()'); SELECT pg_catalog.now() $$;
CREATE FUNCTION hj.clock_timestamp() RETURNS timestamptz LANGUAGE sql AS $$ SELECT hj.rec('clock_timestamp()'); SELECT pg_catalog.clock_timestamp() $$;
CREATE FUNCTION hj.statement_timestamp() RETURNS timestamptz LANGUAGE sql AS $$ SELECT hj.rec('statement_timestamp()'); SELECT pg_catalog.statement_timestamp() $$;
CREATE FUNCTION hj.transaction_timestamp() RETURNS timestamptz LANGUAGE sql AS $$ SELECT hj.rec('transaction_timestamp()'); SELECT pg_catalog.transaction_timestamp() $$;
CREATE FUNCTION hj.sha256(bytea) RETURNS bytea LANGUAGE sql AS $$ SELECT hj.rec('sha256(bytea)'); SELECT pg_catalog.sha256($1) $$;
CREATE FUNCTION hj.jsonb_out(jsonb) RETURNS text LANGUAGE sql AS $$ SELECT hj.rec('jsonb_out(jsonb)'); SELECT $1::pg_catalog.text $$;
CREATE FUNCTION hj.format(text) RETURNS text LANGUAGE sql AS $$ SELECT hj.rec('format(text)'); SELECT $1 $$;
CREATE FUNCTION hj.format(text, text) RETURNS text LANGUAGE sql AS $$ SELECT hj.rec('format(text, text)'); SELECT pg_catalog.format($1, $2) $$;
CREATE FUNCTION hj.length(text) RETURNS int4 LANGUAGE sql AS $$ SELECT hj.rec('length(text)'); SELECT pg_catalog.length($1) $$;
CREATE FUNCTION hj.octet_length(text) RETURNS int4 LANGUAGE sql AS $$ SELECT hj.rec('octet_length(text)'); SELECT pg_catalog.octet_length($1) $$;
CREATE FUNCTION hj.lower(text) RETURNS text LANGUAGE sql AS $$ SELECT hj.rec('lower(text)'); SELECT pg_catalog.lower($1) $$;
CREATE FUNCTION hj.gen_random_uuid() RETURNS uuid LANGUAGE sql AS $$ SELECT hj.rec('gen_random_uuid()'); SELECT pg_catalog.gen_random_uuid() $$;
CREATE FUNCTION hj.uuid_v7() RETURNS uuid LANGUAGE sql AS $$ SELECT hj.rec('uuid_v7()'); SELECT pg_catalog.gen_random_uuid() $$;
CREATE FUNCTION hj.jsonb_typeof(jsonb) RETURNS text LANGUAGE sql AS $$ SELECT hj.rec('jsonb_typeof(jsonb)'); SELECT pg_catalog.jsonb_typeof($1) $$;
CREATE FUNCTION hj.to_jsonb(text) RETURNS jsonb LANGUAGE sql AS $$ SELECT hj.rec('to_jsonb(text)'); SELECT pg_catalog.to_jsonb($1) $$;
CREATE FUNCTION hj.jsonb_build_object(text, text) RETURNS jsonb LANGUAGE sql AS $$ SELECT hj.rec('jsonb_build_object(text, text)'); SELECT pg_catalog.jsonb_build_object($1, $2) $$;
CREATE FUNCTION hj.jsonb_build_object(text, jsonb) RETURNS jsonb LANGUAGE sql AS $$ SELECT hj.rec('jsonb_build_object(text, jsonb)'); SELECT pg_catalog.jsonb_build_object($1, $2) $$;
CREATE FUNCTION hj.set_config(text, text, bool) RETURNS text LANGUAGE sql AS $$ SELECT hj.rec('set_config'); SELECT pg_catalog.set_config($1, $2, $3) $$;
CREATE FUNCTION hj.current_setting(text, bool) RETURNS text LANGUAGE sql AS $$ SELECT hj.rec('current_setting'); SELECT pg_catalog.current_setting($1, $2) $$;
CREATE FUNCTION hj.pg_notify(text, text) RETURNS void LANGUAGE sql AS $$ SELECT hj.rec('pg_notify'); SELECT pg_catalog.pg_notify($1, $2) $$;
CREATE FUNCTION hj.date_part(text, interval) RETURNS float8 LANGUAGE sql AS $$ SELECT hj.rec('date_part'); SELECT pg_catalog.date_part($1, $2) $$;
CREATE FUNCTION hj.pg_advisory_xact_lock(int8) RETURNS void LANGUAGE sql AS $$ SELECT hj.rec('pg_advisory_xact_lock'); SELECT pg_catalog.pg_advisory_xact_lock($1) $$;
CREATE FUNCTION hj.count_sf(int8) RETURNS int8 LANGUAGE sql AS $$ SELECT hj.rec('count(*)'); SELECT $1 OPERATOR(pg_catalog.+) 1 $$;
CREATE AGGREGATE hj.count(*) (SFUNC = hj.count_sf, STYPE = int8, INITCOND = '0');
CREATE FUNCTION hj.max_sf(int4, int4) RETURNS int4 LANGUAGE sql AS $$ SELECT hj.rec('max(int4)'); SELECT pg_catalog.int4larger($1, $2) $$;
CREATE AGGREGATE hj.max(int4) (SFUNC = hj.max_sf, STYPE = int4);
CREATE FUNCTION hj.min_sf(timestamptz, timestamptz) RETURNS timestamptz LANGUAGE sql AS $$ SELECT hj.rec('min(timestamptz)'); SELECT pg_catalog.timestamptz_smaller($1, $2) $$;
CREATE AGGREGATE hj.min(timestamptz) (SFUNC = hj.min_sf, STYPE = timestamptz);
RESET search_path;

-- the controls: each kind of trap fires for unqualified SQL under the
-- search_paths the lifecycle runs with below (the 1.0 code wrote its SQL
-- this way: "state = 'pending'", "::text")
SET search_path = hj, pg_temp, idemjob;
SELECT 'pending'::idemjob.job_state = 'pending' AS enum_eq;		-- operator
SELECT 'started'::attempt_state <> 'unknown' AS enum_ne;			-- domain + operator
SELECT x FROM jobs;												-- temp view
SET search_path = pg_temp, hj, pg_catalog;
SELECT 'a'::text = 'a' AS text_eq;									-- domain + operator
SELECT now() IS NOT NULL AS now;									-- function
SELECT count(*) FROM (VALUES (1)) v;								-- aggregate
SET search_path = hj, idemjob;		-- pg_temp implicitly first for types
SELECT '{}'::jsonb IS NOT NULL AS jsonb;							-- domain
SELECT uuid_v7() IS NOT NULL AS uuid_v7;							-- function
RESET search_path;
SELECT what, by, super FROM hj.log ORDER BY what;
DELETE FROM hj.log;

--
-- The whole lifecycle, through every function the attacker may call.
-- The harness is written with every name qualified, so that only the
-- extension's own code could reach a trap.
--
RESET ROLE;
CREATE FUNCTION public.hj_lifecycle(tag pg_catalog.text)
RETURNS TABLE (step pg_catalog.text, answer pg_catalog.text)
LANGUAGE plpgsql AS $f$
DECLARE
	i pg_catalog.text := 'hj-' OPERATOR(pg_catalog.||) tag;
	ic pg_catalog.text := 'hj-claim-' OPERATOR(pg_catalog.||) tag;
	j pg_catalog.uuid;
	a pg_catalog.uuid;
	b pg_catalog.uuid;
	s pg_catalog.text;
BEGIN
	step := 'define_contract';
	answer := idemjob.define_contract(i, '{"type": "object", "required": ["ok"], "properties": {"ok": {"type": "boolean"}}}');
	RETURN NEXT;
	step := 'define_contract again';
	answer := idemjob.define_contract(i, '{"required": ["ok"], "type": "object", "properties": {"ok": {"type": "boolean"}}}');
	RETURN NEXT;
	step := 'certify_provider';
	answer := (idemjob.certify_provider(i, 'p2', '{"suite": "x"}')).contract_version;
	RETURN NEXT;
	step := 'validate';
	answer := idemjob.validate('{"type": "object", "required": ["ok"]}', '{}') OPERATOR(pg_catalog.->>) 'keyword';
	RETURN NEXT;

	-- won, replays, conflicts
	step := 'submit';
	SELECT pg_catalog.concat_ws(' ', x.created, x.state, x.version), x.job_id INTO answer, j
		FROM idemjob.submit(i, 'k1', i, '{"n": 1}') x;
	RETURN NEXT;
	step := 'submit replay';
	SELECT pg_catalog.concat_ws(' ', x.created, x.state, x.job_id OPERATOR(pg_catalog.=) j) INTO answer
		FROM idemjob.submit(i, 'k1', i, '{"n": 1.0}', NULL, NULL, 5, 3) x;
	RETURN NEXT;
	step := 'submit other params';
	answer := public.hj_state(pg_catalog.format($$SELECT idemjob.submit(%L, 'k1', %L, '{"n": 2}')$$, i, i));
	RETURN NEXT;
	step := 'start_attempt';
	SELECT pg_catalog.concat_ws(' ', x.state, x.attempt_no, x.read_version), x.id INTO answer, a
		FROM idemjob.start_attempt(j, NULL, '1 hour', 'w1') x;
	RETURN NEXT;
	step := 'start_attempt replay';
	SELECT pg_catalog.concat_ws(' ', x.state, x.id OPERATOR(pg_catalog.=) a) INTO answer
		FROM idemjob.start_attempt(j, NULL, '1 hour', 'w1') x;
	RETURN NEXT;
	step := 'start_attempt other worker';
	answer := public.hj_state(pg_catalog.format($$SELECT idemjob.start_attempt(%L, NULL, '1 hour', 'w2')$$, j));
	RETURN NEXT;
	step := 'heartbeat';
	answer := (idemjob.heartbeat(a, '2 hours')).state;
	RETURN NEXT;
	step := 'complete_attempt';
	SELECT pg_catalog.concat_ws(' ', x.outcome, x.job_version, x.winner_attempt_id OPERATOR(pg_catalog.=) a) INTO answer
		FROM idemjob.complete_attempt(a, '{"ok": true}') x;
	RETURN NEXT;
	step := 'complete_attempt replay';
	SELECT pg_catalog.concat_ws(' ', x.outcome, x.job_version) INTO answer
		FROM idemjob.complete_attempt(a, '{"ok": true}') x;
	RETURN NEXT;
	step := 'complete_attempt other result';
	answer := public.hj_state(pg_catalog.format($$SELECT idemjob.complete_attempt(%L, '{"ok": false}')$$, a));
	RETURN NEXT;
	step := 'job';
	SELECT pg_catalog.concat_ws(' ', x.state, x.version, x.attempt_count, x.result) INTO answer FROM idemjob.job(j) x;
	RETURN NEXT;
	step := 'await_job';
	SELECT pg_catalog.concat_ws(' ', x.state, x.version) INTO answer FROM idemjob.await_job(j, '1 ms') x;
	RETURN NEXT;
	step := 'start_attempt finished';
	answer := public.hj_state(pg_catalog.format($$SELECT idemjob.start_attempt(%L)$$, j));
	RETURN NEXT;

	-- lost (slot taken): cancel the first attempt, fail over, both return
	SELECT x.job_id INTO j FROM idemjob.submit(i, 'k2', i) x;
	a := (idemjob.start_attempt(j, NULL, '1 hour', 'w1')).id;
	step := 'cancel_attempt';
	answer := (idemjob.cancel_attempt(a, 'stuck')).state;
	RETURN NEXT;
	step := 'start_attempt failover';
	SELECT pg_catalog.concat_ws(' ', x.state, x.provider, x.attempt_no), x.id INTO answer, b
		FROM idemjob.start_attempt(j, 'p2', '1 hour', 'w2') x;
	RETURN NEXT;
	step := 'complete_attempt failover';
	SELECT x.outcome INTO answer FROM idemjob.complete_attempt(b, '{"ok": true}') x;
	RETURN NEXT;
	step := 'complete_attempt late';
	SELECT pg_catalog.concat_ws(' ', x.outcome, x.winner_attempt_id OPERATOR(pg_catalog.=) b) INTO answer
		FROM idemjob.complete_attempt(a, '{"ok": false}') x;
	RETURN NEXT;
	step := 'race_log';
	SELECT pg_catalog.concat_ws(' ', r.reason, r.result_bytes OPERATOR(pg_catalog.>) 0, r.provider) INTO answer
		FROM idemjob.race_log r WHERE r.attempt_id OPERATOR(pg_catalog.=) a;
	RETURN NEXT;

	-- fenced
	SELECT x.job_id INTO j FROM idemjob.submit(i, 'k3', i) x;
	a := (idemjob.start_attempt(j)).id;
	step := 'cancel_attempt fence';
	answer := (idemjob.cancel_attempt(a, 'fence', true)).state;
	RETURN NEXT;
	step := 'complete_attempt fenced';
	SELECT pg_catalog.concat_ws(' ', x.outcome, x.winner_attempt_id) INTO answer
		FROM idemjob.complete_attempt(a, '{"ok": true}') x;
	RETURN NEXT;
	step := 'race_log fenced';
	SELECT r.reason INTO answer FROM idemjob.race_log r WHERE r.attempt_id OPERATOR(pg_catalog.=) a;
	RETURN NEXT;

	-- rejected by the contract
	SELECT x.job_id INTO j FROM idemjob.submit(i, 'k4', i) x;
	a := (idemjob.start_attempt(j)).id;
	step := 'complete_attempt rejected';
	SELECT x.outcome INTO answer FROM idemjob.complete_attempt(a, '{"ok": "yes"}') x;
	RETURN NEXT;
	step := 'job after rejected';
	SELECT pg_catalog.concat_ws(' ', x.state, x.version) INTO answer FROM idemjob.job(j) x;
	RETURN NEXT;

	-- failed: retryable, then not
	SELECT x.job_id INTO j FROM idemjob.submit(i, 'k5', i) x;
	a := (idemjob.start_attempt(j)).id;
	step := 'fail_attempt retryable';
	answer := (idemjob.fail_attempt(a, '{"code": "e1"}')).state;
	RETURN NEXT;
	a := (idemjob.start_attempt(j)).id;
	step := 'fail_attempt final';
	answer := (idemjob.fail_attempt(a, NULL, false)).error;
	RETURN NEXT;
	step := 'job failed';
	SELECT pg_catalog.concat_ws(' ', x.state, x.version, x.attempt_count, x.error) INTO answer FROM idemjob.job(j) x;
	RETURN NEXT;

	-- in doubt
	SELECT x.job_id INTO j FROM idemjob.submit(i, 'k6', i) x;
	a := (idemjob.start_attempt(j, NULL, NULL, 'w1')).id;
	step := 'mark_unknown';
	answer := (idemjob.mark_unknown(a, 'lost')).state;
	RETURN NEXT;
	step := 'start_attempt in doubt';
	answer := public.hj_state(pg_catalog.format($$SELECT idemjob.start_attempt(%L, NULL, NULL, 'w2')$$, j));
	RETURN NEXT;
	step := 'in_doubt view';
	SELECT pg_catalog.concat_ws(' ', v.state, v.attempt_no) INTO answer
		FROM idemjob.in_doubt v WHERE v.attempt_id OPERATOR(pg_catalog.=) a;
	RETURN NEXT;

	-- expires later (a statement after this one)
	SELECT x.job_id INTO j FROM idemjob.submit(i, 'k7', i) x;
	PERFORM idemjob.start_attempt(j, NULL, '1 ms');

	-- cancelled job
	SELECT x.job_id INTO j FROM idemjob.submit(i, 'k8', i) x;
	step := 'cancel_job';
	SELECT pg_catalog.concat_ws(' ', x.state, x.version) INTO answer FROM idemjob.cancel_job(j, 'no') x;
	RETURN NEXT;
	step := 'cancel_job again';
	SELECT pg_catalog.concat_ws(' ', x.state, x.version) INTO answer FROM idemjob.cancel_job(j, 'no') x;
	RETURN NEXT;

	-- claim, on an intent of its own
	PERFORM idemjob.submit(i, 'k9', ic);
	step := 'claim';
	SELECT pg_catalog.concat_ws(' ', pg_catalog.count(*), pg_catalog.min(x.attempt_no)) INTO answer
		FROM idemjob.claim('w3', ARRAY[ic], 10) x;
	RETURN NEXT;

	step := 'views';
	SELECT pg_catalog.concat_ws(' ', q.running, q.in_doubt) INTO answer
		FROM idemjob.queue_stats q WHERE q.intent OPERATOR(pg_catalog.=) i;
	SELECT pg_catalog.concat_ws(' ', answer, p.attempts, p.succeeded, p.superseded, p.rejected, p.failed, p.cancelled) INTO answer
		FROM idemjob.provider_stats p WHERE p.intent OPERATOR(pg_catalog.=) i AND p.provider OPERATOR(pg_catalog.=) 'default';
	RETURN NEXT;
	step := 'revoke_provider';
	answer := (idemjob.revoke_provider(i, 'p2', 'done')).revoked_at IS NOT NULL;
	RETURN NEXT;
	step := 'purge';
	answer := idemjob.purge('100 years');
	RETURN NEXT;
	step := 'purge_race_log';
	answer := idemjob.purge_race_log('100 years');
	RETURN NEXT;
	step := 'uuid_v7';
	answer := idemjob.uuid_v7() IS NOT NULL;
	RETURN NEXT;
END
$f$;

-- a call expected to fail: its SQLSTATE
CREATE FUNCTION public.hj_state(sql pg_catalog.text) RETURNS pg_catalog.text
LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE sql;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE;
END
$$;

-- the attempts still started whose deadline has passed, for expire_attempts
CREATE FUNCTION public.hj_expire() RETURNS pg_catalog.text
LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_catalog.pg_sleep(0.01);
	RETURN idemjob.expire_attempts() OPERATOR(pg_catalog.>) 0;
END
$$;

SET ROLE hj_attacker;
-- hj first, then the temporary objects, then idemjob (pg_catalog implicit,
-- first)
SET search_path = hj, pg_temp, idemjob;
SELECT * FROM public.hj_lifecycle('a');
SELECT public.hj_expire() AS expired;
-- pg_temp and hj before pg_catalog: every built-in name is shadowed
SET search_path = pg_temp, hj, pg_catalog;
SELECT * FROM public.hj_lifecycle('b');
SELECT public.hj_expire() AS expired;
-- the default pattern: pg_temp implicitly first for types and relations
SET search_path = hj, idemjob;
SELECT * FROM public.hj_lifecycle('c');
SELECT public.hj_expire() AS expired;
RESET search_path;
-- no trap ran (no rows)
SELECT what, by, super FROM hj.log ORDER BY what;

--
-- A superuser whose search_path has the attacker's schema first: the
-- extension's functions, grant_capability and revoke_capability included,
-- never run the attacker's operators or functions as that superuser (1.0
-- ran its "=" on job_state and made the attacker superuser)
--
RESET ROLE;
SET search_path = hj, pg_catalog, idemjob;
SELECT * FROM public.hj_lifecycle('d');
SELECT public.hj_expire() AS expired;
SELECT idemjob.grant_capability('hj_attacker', 'operator');
SELECT idemjob.revoke_capability('hj_attacker', 'operator');
SET search_path = pg_temp, hj, pg_catalog, idemjob;
SELECT * FROM public.hj_lifecycle('e');
RESET search_path;
-- no trap ran (no rows), and the attacker is no superuser
SELECT what, by, super FROM hj.log ORDER BY what;
SELECT rolsuper FROM pg_roles WHERE rolname = 'hj_attacker';
-- the control: the same trap does run as the superuser for unqualified SQL
SET search_path = hj, pg_catalog, idemjob;
SELECT 'running'::job_state = 'running' AS superuser_enum_eq;
RESET search_path;
SELECT what, by, super FROM hj.log ORDER BY what;

-- clean up (pg_temp last: its domains still shadow the built-in types)
SET search_path = pg_catalog, pg_temp;
DROP FUNCTION public.hj_lifecycle(text), public.hj_state(text), public.hj_expire();
SELECT count(*) AS revoked FROM (
	SELECT idemjob.revoke_capability('hj_attacker', c)
	FROM unnest('{client,worker,admin}'::text[]) c) x;
SET client_min_messages = warning;
DROP OWNED BY hj_attacker;
DROP ROLE hj_attacker;
RESET client_min_messages;
RESET search_path;
