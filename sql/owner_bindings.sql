-- Owner bindings recorded in the database (CONTRACT.md "Security model":
-- since 1.2 the binding is part of the database, not of a session; issue
-- 17, findings 1 and 2).  idemjob.bind_owner(role, mode) binds a role and
-- every role with its privileges, however the session got there: a login,
-- SET ROLE from an authenticator (PostgREST), a member inheriting it,
-- connection options.  1.1 had only the setting idemjob.owner_binding: a
-- client escaped it with PGOPTIONS='-c idemjob.owner_binding=off', and an
-- authenticator's SET ROLE or a member never saw it.  These are the
-- recipes of docs/security.md as deployed, each on a connection of its own.

SET client_min_messages = warning;
DROP ROLE IF EXISTS obt_api, obt_auth, obt_member, obt_other;
CREATE ROLE obt_api LOGIN;
CREATE ROLE obt_auth LOGIN NOINHERIT;
CREATE ROLE obt_member LOGIN;
CREATE ROLE obt_other NOLOGIN;
GRANT obt_api TO obt_auth;
GRANT obt_api TO obt_member;
RESET client_min_messages;
SELECT idemjob.grant_capability('obt_api', 'client');
-- another tenant's job, and the binding
SELECT job_id AS bobs FROM idemjob.submit('obt_bob', 'obt-bob', 'obt') \gset
SELECT idemjob.bind_owner('obt_api', 'role');
SELECT bound_role, mode FROM idemjob.owner_bindings;

CREATE FUNCTION public.obt_try(sql text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE sql;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE || ': ' || regexp_replace(SQLERRM,
		'[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}', '<id>', 'g');
END
$$;
GRANT EXECUTE ON FUNCTION public.obt_try(text) TO PUBLIC;
\set su :USER
\set bob_job '''' :bobs ''''

-- a login as the bound role
\c - obt_api
SELECT current_user, public.obt_try($$SELECT idemjob.submit('obt_bob', 'obt-1', 'obt')$$) AS for_bob,
	public.obt_try($$SELECT idemjob.submit('obt_api', 'obt-1', 'obt')$$) AS for_itself,
	public.obt_try('SELECT idemjob.job(' || :'bob_job' || ')') AS read_bob,
	public.obt_try('SELECT idemjob.cancel_job(' || :'bob_job' || ', ''x'')') AS cancel_bob;
-- the same with the setting turned off in the connection options: the
-- client may not set it (superuser only), and it could only add a binding
\setenv PGOPTIONS '-c idemjob.owner_binding=off'
\c - obt_api
SELECT public.obt_try($$SELECT idemjob.submit('obt_bob', 'obt-2', 'obt')$$) AS for_bob;
SHOW idemjob.owner_binding;
\setenv PGOPTIONS
-- an authenticator that logs in without the role's rights, then SET ROLE
\c - obt_auth
SELECT public.obt_try($$SELECT idemjob.submit('obt_bob', 'obt-3', 'obt')$$) AS before_set_role;
SET ROLE obt_api;
SELECT public.obt_try($$SELECT idemjob.submit('obt_bob', 'obt-3', 'obt')$$) AS for_bob,
	public.obt_try($$SELECT idemjob.submit('obt_api', 'obt-3', 'obt')$$) AS for_the_role;
RESET ROLE;
-- a member that inherits the role's rights: bound the same, to the bound
-- role's owner
\c - obt_member
SELECT public.obt_try($$SELECT idemjob.submit('obt_bob', 'obt-4', 'obt')$$) AS for_bob,
	public.obt_try($$SELECT idemjob.submit('obt_member', 'obt-4', 'obt')$$) AS for_itself,
	public.obt_try($$SELECT idemjob.submit('obt_api', 'obt-4', 'obt')$$) AS for_the_role;
-- a bound role cannot bind or unbind
SELECT public.obt_try($$SELECT idemjob.unbind_owner('obt_api')$$) AS unbind,
	public.obt_try($$SELECT idemjob.bind_owner('obt_member', 'role')$$) AS bind;

-- PostgREST: the authenticator sets the request's claims, then SET ROLE
\c - :su
SELECT idemjob.bind_owner('obt_api', 'setting:request.jwt.claims/sub');
\c - obt_auth
SET ROLE obt_api;
SET request.jwt.claims = '{"sub": "obt_alice", "role": "obt_api"}';
SELECT public.obt_try($$SELECT idemjob.submit('obt_alice', 'obt-5', 'obt')$$) AS for_alice,
	public.obt_try($$SELECT idemjob.submit('obt_bob', 'obt-5', 'obt')$$) AS for_bob;
RESET request.jwt.claims;
SELECT public.obt_try($$SELECT idemjob.submit('obt_alice', 'obt-6', 'obt')$$) AS no_claims;
RESET ROLE;

-- two bindings that would give two owners: refused, never one of them
\c - :su
SELECT idemjob.bind_owner('obt_other', 'role');
GRANT obt_other TO obt_member;
\c - obt_member
SELECT public.obt_try($$SELECT idemjob.submit('obt_api', 'obt-7', 'obt')$$) AS two_ways;
\c - :su
REVOKE obt_other FROM obt_member;

-- bad bindings
SELECT public.obt_try($$SELECT idemjob.bind_owner('obt_api', 'off')$$) AS off,
	public.obt_try($$SELECT idemjob.bind_owner('obt_api', 'setting:')$$) AS empty_setting,
	public.obt_try($$SELECT idemjob.bind_owner(0, 'role')$$) AS public_role,
	public.obt_try($$SELECT idemjob.bind_owner(NULL, 'role')$$) AS null_role,
	public.obt_try($$SELECT idemjob.bind_owner('obt_api', NULL)$$) AS null_mode,
	left(public.obt_try(format('SELECT idemjob.bind_owner(%L, ''role'')', current_user)), 5) AS superuser;

-- unbound: free again
SELECT idemjob.unbind_owner('obt_api') AS was_bound, idemjob.unbind_owner('obt_api') AS again;
SELECT idemjob.unbind_owner('obt_other') AS other;
\c - obt_api
SELECT public.obt_try($$SELECT idemjob.submit('obt_bob', 'obt-8', 'obt')$$) AS for_bob;
\c - :su
SELECT owner_id, idempotency_key FROM idemjob.jobs WHERE intent = 'obt' ORDER BY 2, 1;

-- clean up
DROP FUNCTION public.obt_try(text);
SELECT idemjob.revoke_capability('obt_api', 'client');
DROP ROLE obt_api, obt_auth, obt_member, obt_other;
