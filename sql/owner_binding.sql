-- Owner binding (CONTRACT.md "Security model (since 1.1)"):
-- idemjob.owner_binding = off | role | setting:NAME | setting:NAME/KEY.
-- Bound, a role submits only for its owner (42501 otherwise, and when the
-- owner is missing or empty), sees other owners' jobs and attempts as
-- absent (IJ006), claims only its owner's jobs, and the views show only its
-- owner's rows.  The binding is superuser only.  1.0 had no binding: any
-- application role read and cancelled every owner's jobs (issue 8, item 8).

SET client_min_messages = warning;
DROP ROLE IF EXISTS ob_alice, ob_bob, ob_operator;
CREATE ROLE ob_alice LOGIN;
CREATE ROLE ob_bob LOGIN;
CREATE ROLE ob_operator NOLOGIN;
RESET client_min_messages;
SELECT idemjob.grant_capability(r, c)
FROM unnest('{ob_alice,ob_bob}'::regrole[]) r, unnest('{client,worker}'::text[]) c;
SELECT idemjob.grant_capability('ob_operator', 'operator');

-- each call inside a subtransaction always rolled back: 'ok' when it
-- answered, else its SQLSTATE
CREATE FUNCTION pg_temp.try(sql text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	BEGIN
		EXECUTE sql;
		RAISE SQLSTATE 'ZZ000';
	EXCEPTION WHEN SQLSTATE 'ZZ000' THEN
		RETURN 'ok';
	WHEN OTHERS THEN
		RETURN SQLSTATE;
	END;
END
$$;

-- fixtures (no binding): for ob_alice and for ob_bob, a pending job (p), a job
-- with a started attempt (s) and a job with an attempt in doubt (u)
CREATE TEMP TABLE fx (name text PRIMARY KEY, id uuid);
GRANT SELECT ON fx TO PUBLIC;
INSERT INTO fx
SELECT o || '_p', (idemjob.submit(o, 'ob-p', 'ob')).job_id FROM unnest('{ob_alice,ob_bob}'::text[]) o;
INSERT INTO fx
SELECT o || '_sj', (idemjob.submit(o, 'ob-s', 'ob')).job_id FROM unnest('{ob_alice,ob_bob}'::text[]) o;
INSERT INTO fx
SELECT o || '_s', (idemjob.start_attempt(f.id, NULL, '1h', 'w')).id
FROM unnest('{ob_alice,ob_bob}'::text[]) o JOIN fx f ON f.name = o || '_sj';
INSERT INTO fx
SELECT o || '_uj', (idemjob.submit(o, 'ob-u', 'ob')).job_id FROM unnest('{ob_alice,ob_bob}'::text[]) o;
INSERT INTO fx
SELECT o || '_u', (idemjob.mark_unknown((idemjob.start_attempt(f.id, NULL, '1h', 'w')).id)).id
FROM unnest('{ob_alice,ob_bob}'::text[]) o JOIN fx f ON f.name = o || '_uj';
-- 1.2: an attempt claimed with a lease (l), by worker wl_<owner>
SET idemjob.claim_lease = '1h';
INSERT INTO fx
SELECT o || '_lj', (idemjob.submit(o, 'ob-l', 'obl_' || o)).job_id FROM unnest('{ob_alice,ob_bob}'::text[]) o;
INSERT INTO fx
SELECT o || '_l', c.attempt_id
FROM unnest('{ob_alice,ob_bob}'::text[]) o,
	LATERAL idemjob.claim('wl_' || o, ARRAY['obl_' || o], lease => true) c;

-- every call that names a job or an attempt, for owner o's fixtures
CREATE TEMP TABLE calls (ord int, fn text, sql text);
GRANT SELECT ON calls TO PUBLIC;
INSERT INTO calls VALUES
	(1, 'submit', $$SELECT idemjob.submit('%1$s', 'ob-new', 'ob')$$),
	(2, 'submit (replay)', $$SELECT idemjob.submit('%1$s', 'ob-p', 'ob')$$),
	(3, 'job', $$SELECT idemjob.job(fx('%1$s_p'))$$),
	(4, 'await_job', $$SELECT idemjob.await_job(fx('%1$s_p'), '1 ms')$$),
	(5, 'cancel_job', $$SELECT idemjob.cancel_job(fx('%1$s_p'), 'test')$$),
	(6, 'start_attempt', $$SELECT idemjob.start_attempt(fx('%1$s_p'))$$),
	(7, 'start_attempt (in doubt)', $$SELECT idemjob.start_attempt(fx('%1$s_uj'))$$),
	(8, 'heartbeat', $$SELECT idemjob.heartbeat(fx('%1$s_s'))$$),
	(9, 'complete_attempt', $$SELECT idemjob.complete_attempt(fx('%1$s_s'), '{}')$$),
	(10, 'fail_attempt', $$SELECT idemjob.fail_attempt(fx('%1$s_s'))$$),
	(11, 'mark_unknown', $$SELECT idemjob.mark_unknown(fx('%1$s_s'))$$),
	(12, 'complete_attempt (in doubt)', $$SELECT idemjob.complete_attempt(fx('%1$s_u'), '{}')$$),
	(13, 'begin_attempt', $$SELECT idemjob.begin_attempt(fx('%1$s_l'))$$),
	-- 22012 (a division by zero): nothing to abandon, as for another owner
	(14, 'abandon_attempts', $$SELECT 1 / idemjob.abandon_attempts('wl_%1$s')$$);
CREATE FUNCTION pg_temp.fx(n text) RETURNS uuid LANGUAGE sql STABLE
	AS $$ SELECT id FROM fx WHERE name = n $$;

-- ob_alice's calls on her own fixtures and on ob_bob's, as answered now
CREATE FUNCTION pg_temp.matrix() RETURNS TABLE (fn text, own text, other text)
LANGUAGE sql AS $$
	SELECT fn, pg_temp.try(replace(format(sql, 'ob_alice'), 'fx(', 'pg_temp.fx(')),
		pg_temp.try(replace(format(sql, 'ob_bob'), 'fx(', 'pg_temp.fx('))
	FROM calls ORDER BY ord
$$;

--
-- off (the default): ob_alice acts on every owner's jobs, as in 1.0
--
SHOW idemjob.owner_binding;
SET ROLE ob_alice;
SELECT * FROM pg_temp.matrix();
RESET ROLE;

--
-- role: the owner is the calling role's name
--
SET idemjob.owner_binding = 'role';
SET ROLE ob_alice;
SELECT * FROM pg_temp.matrix();
-- claim takes ob_alice's jobs only (ob_bob's pending job is due as well)
SELECT pg_temp.try($$
	DO $d$ DECLARE o text[]; BEGIN
		SELECT array_agg(c.owner_id) INTO o FROM idemjob.claim('w', '{ob}', 100) c;
		IF o IS NULL OR NOT 'ob_alice' = ALL (o) THEN
			RAISE 'claimed %', o;
		END IF;
	END $d$ $$) AS claim_only_own;
RESET ROLE;
-- as ob_bob: the mirror image
SET ROLE ob_bob;
SELECT pg_temp.try($$SELECT idemjob.submit('ob_bob', 'ob-x', 'ob')$$) AS ob_bob_for_bob,
	pg_temp.try($$SELECT idemjob.submit('ob_alice', 'ob-x', 'ob')$$) AS ob_bob_for_alice,
	pg_temp.try(format($$SELECT idemjob.cancel_job(%L, 't')$$, pg_temp.fx('ob_alice_p'))) AS ob_bob_cancels_alice;
-- a non-superuser can neither change nor reset the binding
\set VERBOSITY sqlstate
SET idemjob.owner_binding = 'off';
RESET idemjob.owner_binding;
SELECT set_config('idemjob.owner_binding', 'off', true);
\set VERBOSITY default
SHOW idemjob.owner_binding;
RESET ROLE;
-- the superuser, bound by role, acts as owner "postgres"-or-whatever its
-- name is: ob_alice's job is absent for it too
SELECT pg_temp.try(format($$SELECT idemjob.cancel_job(%L, 't')$$, pg_temp.fx('ob_alice_p'))) AS superuser_bound;
RESET idemjob.owner_binding;

--
-- setting:NAME: the value of another setting, set per request
--
SET idemjob.owner_binding = 'setting:app.owner';
SET ROLE ob_alice;
-- not set at all: 42501 for every call, even on ob_alice's own jobs
SELECT * FROM pg_temp.matrix();
-- empty: 42501
SET app.owner = '';
SELECT pg_temp.try($$SELECT idemjob.submit('ob_alice', 'ob-x', 'ob')$$) AS empty_submit,
	pg_temp.try(format($$SELECT idemjob.job(%L)$$, pg_temp.fx('ob_alice_p'))) AS empty_job;
-- set: the binding applies to whoever the setting names
SET app.owner = 'ob_alice';
SELECT * FROM pg_temp.matrix();
SET app.owner = 'ob_bob';
SELECT pg_temp.try($$SELECT idemjob.submit('ob_bob', 'ob-x', 'ob')$$) AS as_bob_for_bob,
	pg_temp.try($$SELECT idemjob.submit('ob_alice', 'ob-x', 'ob')$$) AS as_bob_for_alice;
-- over 255 bytes: 42501 (no owner can be that long)
SELECT set_config('app.owner', repeat('a', 256), false) IS NOT NULL AS set;
SELECT pg_temp.try($$SELECT idemjob.submit('ob_alice', 'ob-x', 'ob')$$) AS too_long;
RESET app.owner;
RESET ROLE;
RESET idemjob.owner_binding;

--
-- setting:NAME/KEY: a member of a JSON object, as PostgREST sets
-- request.jwt.claims for each request
--
SET idemjob.owner_binding = 'setting:request.jwt.claims/sub';
SET ROLE ob_alice;
CREATE TEMP TABLE claims (ord numeric, claims text);
INSERT INTO claims VALUES
	(1, NULL),										-- not set: 42501
	(2, ''),										-- empty: 42501
	(3, '{"role":"x"}'),							-- no "sub": 42501
	(4, '{"sub":"ob_alice","role":"x"}'),				-- ob_alice
	(5, '{"role":"x","sub":"ob_bob"}'),				-- ob_bob
	(6, '{"sub":'),									-- malformed: 42501
	(7, '{"sub":"ob_alice"'),							-- malformed: 42501
	(7.1, '{"sub" "ob_alice"}'),						-- malformed: 42501
	(7.2, '{"sub":"ob_alice",}'),						-- malformed: 42501
	(7.3, '{"sub":"ob_alice"}}'),						-- malformed: 42501
	(7.4, '{"sub":"ob_alice"} x'),						-- malformed: 42501
	(8, 'not json'),								-- 42501
	(9, '["sub","ob_alice"]'),							-- not an object: 42501
	(10, '{"sub":null}'),							-- 42501
	(11, '{"sub":true}'),							-- 42501
	(12, '{"sub":""}'),								-- empty: 42501
	(13, '{"sub":{"id":"ob_alice"}}'),					-- not a scalar: 42501
	(14, '{"x":{"sub":"ob_alice"}}'),					-- not at the top: 42501
	(15, '{"x":{"sub":"ob_bob"},"sub":"ob_alice"}'),		-- ob_alice (top level only)
	(16, '{"sub":42}'),								-- a number, as text: "42"
	(17, '{"s\u0075b":"ob_alice"}'),					-- escapes decoded: ob_alice
	(18, '{"sub":"ob_al\u0069ce"}'),					-- ob_alice
	(19, repeat('{"a":', 5000) || '1' || repeat('}', 5000));	-- deep, no "sub": 42501
CREATE FUNCTION pg_temp.with_claims(claims text, OUT for_alice text,
	OUT for_bob text, OUT for_42 text, OUT cancel_alices text)
LANGUAGE plpgsql AS $f$
BEGIN
	IF claims IS NOT NULL THEN		-- NULL: first row, never set
		PERFORM set_config('request.jwt.claims', claims, false);
	END IF;
	for_alice := pg_temp.try($$SELECT idemjob.submit('ob_alice', 'ob-x', 'ob')$$);
	for_bob := pg_temp.try($$SELECT idemjob.submit('ob_bob', 'ob-x', 'ob')$$);
	for_42 := pg_temp.try($$SELECT idemjob.submit('42', 'ob-x', 'ob')$$);
	cancel_alices := pg_temp.try(format($$SELECT idemjob.cancel_job(%L, 't')$$,
										pg_temp.fx('ob_alice_p')));
END
$f$;
SELECT ord, left(claims, 40) AS claims, w.*
FROM claims CROSS JOIN LATERAL pg_temp.with_claims(claims) w
ORDER BY ord;
RESET ROLE;
RESET idemjob.owner_binding;

--
-- Views: an operator bound to one owner sees only that owner's rows
--
CREATE TEMP VIEW views AS
SELECT 'in_doubt' AS view, string_agg(DISTINCT owner_id, ',') AS owners, count(*) AS n
FROM idemjob.in_doubt WHERE intent = 'ob'
UNION ALL
SELECT 'queue_stats', NULL, sum(due + scheduled + running + in_doubt)
FROM idemjob.queue_stats WHERE intent = 'ob'
UNION ALL
SELECT 'provider_stats', NULL, sum(attempts)
FROM idemjob.provider_stats WHERE intent = 'ob';
GRANT SELECT ON views TO PUBLIC;
SET ROLE ob_operator;
SELECT * FROM views;						-- no binding: both owners
RESET ROLE;
SET idemjob.owner_binding = 'setting:app.owner';
SET app.owner = 'ob_alice';
SET ROLE ob_operator;
SELECT * FROM views;						-- ob_alice's rows only
SELECT pg_temp.try(format($$SELECT idemjob.cancel_attempt(%L, 't')$$, pg_temp.fx('ob_bob_u'))) AS cancel_bobs,
	pg_temp.try(format($$SELECT idemjob.cancel_attempt(%L, 't')$$, pg_temp.fx('ob_alice_u'))) AS cancel_alices;
RESET app.owner;
SELECT pg_temp.try('SELECT count(*) FROM idemjob.in_doubt') AS unset_in_doubt;	-- 42501
RESET ROLE;
RESET idemjob.owner_binding;

--
-- Invalid bindings: refused by the setting's check (22023)
--
\set VERBOSITY sqlstate
SET idemjob.owner_binding = 'roles';
SET idemjob.owner_binding = 'Role';
SET idemjob.owner_binding = 'setting:';
SET idemjob.owner_binding = 'setting:/sub';
SET idemjob.owner_binding = 'setting:request.jwt.claims/';
SET idemjob.owner_binding = 'user:ob_alice';
\set VERBOSITY default
SHOW idemjob.owner_binding;

--
-- ALTER ROLE ... SET: the usual way, in effect from the role's next login,
-- and out of the role's reach
--
ALTER ROLE ob_alice SET idemjob.owner_binding = 'role';
\c - ob_alice
SHOW idemjob.owner_binding;
-- a value set before the library is loaded (a placeholder) does not
-- survive it: the library refuses it and the binding stays
SET client_min_messages = error;
DO $$ BEGIN
	PERFORM set_config('idemjob.owner_binding', 'off', false);
EXCEPTION WHEN insufficient_privilege THEN NULL;	-- when preloaded
END $$;
SELECT idemjob.validate('{}', '1') IS NULL AS library_loaded;
RESET client_min_messages;
SHOW idemjob.owner_binding;
\set VERBOSITY sqlstate
SELECT job_id IS NOT NULL AS ok FROM idemjob.submit('ob_bob', 'ob-login', 'ob');	-- 42501
\set VERBOSITY default
SELECT created FROM idemjob.submit('ob_alice', 'ob-login', 'ob');
\c - postgres
ALTER ROLE ob_alice RESET idemjob.owner_binding;

-- clean up
SELECT count(*) AS revoked FROM (
	SELECT idemjob.revoke_capability(grantee, capability)
	FROM idemjob.capabilities
	WHERE grantee::text IN ('ob_alice', 'ob_bob', 'ob_operator')) x;
SET client_min_messages = warning;
DROP OWNED BY ob_alice, ob_bob, ob_operator;
DROP ROLE ob_alice, ob_bob, ob_operator;
