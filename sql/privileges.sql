-- The privilege matrix of the security model (CONTRACT.md "Security model
-- (since 1.1)"): every role x every function, table and view of the
-- extension, checked twice: by the catalogs (has_*_privilege) and by
-- calling each function as that role.  The function list comes from
-- pg_depend, so a new function the matrix does not know shows as a
-- mismatch.  In 1.0 every function was EXECUTE to PUBLIC and the README
-- told DBAs to grant table rights: every line below would differ.

SET client_min_messages = warning;
DROP ROLE IF EXISTS r_none, r_client, r_worker, r_operator, r_admin, r_cw, r_oa;
CREATE ROLE r_none NOLOGIN;
CREATE ROLE r_client NOLOGIN;
CREATE ROLE r_worker NOLOGIN;
CREATE ROLE r_operator NOLOGIN;
CREATE ROLE r_admin NOLOGIN;
CREATE ROLE r_cw NOLOGIN;
CREATE ROLE r_oa NOLOGIN;
RESET client_min_messages;

SELECT idemjob.grant_capability('r_client', 'client');
SELECT idemjob.grant_capability('r_worker', 'worker');
SELECT idemjob.grant_capability('r_operator', 'operator');
SELECT idemjob.grant_capability('r_admin', 'admin');
-- granting twice changes nothing
SELECT idemjob.grant_capability('r_admin', 'admin');
SELECT grantee, capability FROM idemjob.capabilities WHERE grantee::text LIKE 'r\_%' ORDER BY 1::text, 2;

-- what each role may do, by the catalogs: 'x' allowed, '.' not
CREATE TEMP TABLE roles (ord int, r name);
INSERT INTO roles VALUES (0, 'public'), (1, 'r_none'), (2, 'r_client'),
	(3, 'r_worker'), (4, 'r_operator'), (5, 'r_admin');

-- every function of the extension (pg_depend), as its signature
CREATE TEMP VIEW ext_functions AS
SELECT p.oid, p.oid::regprocedure::text AS sig
FROM pg_proc p
	JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
		AND d.deptype = 'e' AND d.refclassid = 'pg_extension'::regclass
	JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'idemjob';

CREATE TEMP VIEW ext_relations AS
-- (a table of the partitioned layout, idemjob.partitions, counts as one:
-- its partitions hold no privilege of their own)
SELECT c.oid, c.oid::regclass::text AS rel,
	CASE c.relkind WHEN 'p' THEN 'r' ELSE c.relkind END AS relkind
FROM pg_class c
	JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = c.oid
		AND d.deptype = 'e' AND d.refclassid = 'pg_extension'::regclass
	JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'idemjob'
WHERE c.relkind IN ('r', 'p', 'v') AND NOT c.relispartition;

-- the contract's capability table, written out: who may EXECUTE / SELECT
-- (p: PUBLIC and so every role; c w o a: client, worker, operator, admin;
-- nothing: the owner and superusers only)
CREATE TEMP TABLE contract_matrix (obj text PRIMARY KEY, allowed text);
INSERT INTO contract_matrix VALUES
	('idemjob.validate(jsonb,jsonb)', 'p'),
	('idemjob.uuid_v7()', 'p'),
	('idemjob.submit(text,text,text,jsonb,text,timestamp with time zone,integer,integer)', 'c o a'),
	('idemjob.job(uuid)', 'c w o a'),
	('idemjob.await_job(uuid,interval)', 'c o a'),
	('idemjob.cancel_job(uuid,text)', 'c o a'),
	('idemjob.claim(text,text[],integer,interval,interval,boolean)', 'w o a'),
	('idemjob.start_attempt(uuid,text,interval,text)', 'w o a'),
	('idemjob.heartbeat(uuid,interval)', 'w o a'),
	('idemjob.complete_attempt(uuid,jsonb)', 'w o a'),
	('idemjob.fail_attempt(uuid,jsonb,boolean)', 'w o a'),
	('idemjob.mark_unknown(uuid,text)', 'w o a'),
	('idemjob.cancel_attempt(uuid,text,boolean)', 'o a'),
	('idemjob.expire_attempts()', 'o a'),
	('idemjob.purge(interval,integer)', 'o a'),
	('idemjob.purge_race_log(interval)', 'o a'),
	('idemjob.define_contract(text,jsonb)', 'a'),
	('idemjob.certify_provider(text,text,jsonb)', 'a'),
	('idemjob.revoke_provider(text,text,text)', 'a'),
	-- the owner and superusers only
	('idemjob.grant_capability(regrole,text)', ''),
	('idemjob.revoke_capability(regrole,text)', ''),
	-- internal: the views' row filter (a view calls it with the reader's
	-- rights, so readers of the views need it; it reads nothing)
	('idemjob.owner_visible(text)', 'o a'),
	-- internal: trigger functions
	('idemjob.jobs_guard()', ''),
	('idemjob.attempts_guard()', ''),
	('idemjob.truncate_guard()', ''),
	('idemjob.contracts_changed()', ''),
	('idemjob.race_log_guard()', ''),
	('idemjob.contracts_guard()', ''),
	('idemjob.certifications_guard()', ''),
	('idemjob.spent_keys_guard()', ''),
	-- "the views, every table": operator and admin
	('idemjob.jobs', 'o a'),
	('idemjob.attempts', 'o a'),
	('idemjob.race_log', 'o a'),
	('idemjob.contracts', 'o a'),
	('idemjob.certifications', 'o a'),
	('idemjob.spent_keys', 'o a'),
	('idemjob.capabilities', 'o a'),
	('idemjob.in_doubt', 'o a'),
	('idemjob.queue_stats', 'o a'),
	('idemjob.provider_stats', 'o a'),
	-- 1.2: also the monitor capability's (sql/monitor.sql)
	('idemjob.provider_stats(interval)', 'o a'),
	('idemjob.retention_stats', 'o a'),
	('idemjob.compensations', 'o a');

CREATE TEMP VIEW expected AS
SELECT m.obj, r.r,
	CASE WHEN m.allowed LIKE '%p%' THEN true
		 WHEN r.r IN ('public', 'r_none') THEN false
		 ELSE position(substr(r.r, 3, 1) IN m.allowed) > 0 END AS allowed
FROM contract_matrix m CROSS JOIN roles r;

CREATE TEMP VIEW actual AS
SELECT f.sig AS obj, r.r, has_function_privilege(r.r, f.oid, 'EXECUTE') AS allowed
FROM ext_functions f CROSS JOIN roles r
UNION ALL
SELECT x.rel, r.r, has_table_privilege(r.r, x.oid, 'SELECT')
FROM ext_relations x CROSS JOIN roles r;

-- the matrix by the catalogs (columns: PUBLIC, none, client, worker,
-- operator, admin)
SELECT obj, string_agg(CASE WHEN allowed THEN 'x' ELSE '.' END, ' ' ORDER BY ord) AS "P n c w o a"
FROM actual JOIN roles USING (r)
GROUP BY obj ORDER BY obj;

-- against the contract's table: no function, table or view missing from
-- either side, and no difference (no rows)
SELECT coalesce(e.obj, a.obj) AS obj, coalesce(e.r, a.r) AS role,
	e.allowed AS contract, a.allowed AS granted
FROM expected e FULL JOIN actual a ON a.obj = e.obj AND a.r = e.r
WHERE e.allowed IS DISTINCT FROM a.allowed
ORDER BY 1, 2;

-- schema idemjob: USAGE with any capability, CREATE for nobody
SELECT r, has_schema_privilege(r, 'idemjob', 'USAGE') AS usage,
	has_schema_privilege(r, 'idemjob', 'CREATE') AS create
FROM roles ORDER BY ord;

-- no role may write any table or view (only the owner and superusers)
SELECT r, x.rel, p.priv
FROM roles CROSS JOIN ext_relations x
	CROSS JOIN unnest('{INSERT,UPDATE,DELETE,TRUNCATE,REFERENCES,TRIGGER}'::text[]) p(priv)
WHERE has_table_privilege(r, x.oid, p.priv)
ORDER BY 1, 2, 3;

--
-- The same matrix by calling every function as each role.  Fixtures, made
-- by the superuser: a contract, a certified provider, jobs and attempts in
-- the states each call needs.
--
SELECT idemjob.define_contract('priv', '{"type": "object"}');
SELECT (idemjob.certify_provider('priv', 'p2')).provider;
SELECT job_id AS job FROM idemjob.submit('priv-o', 'k1', 'priv') \gset
SELECT job_id AS job2 FROM idemjob.submit('priv-o', 'k2', 'priv') \gset
SELECT id AS att FROM idemjob.start_attempt(:'job2', NULL, '1h', 'w1') \gset

-- each call as role r, inside a subtransaction always rolled back (the
-- fixtures stay as they are for the next call): 'ok' when the call
-- answered or failed with anything but 42501 that the next query lists;
-- '42501' when refused
CREATE TEMP TABLE calls (fn text PRIMARY KEY, sql text);
INSERT INTO calls VALUES
	('validate', $$SELECT idemjob.validate('{}', '1')$$),
	('uuid_v7', $$SELECT idemjob.uuid_v7()$$),
	('submit', $$SELECT idemjob.submit('priv-o', 'k-new', 'priv')$$),
	('job', format($$SELECT idemjob.job(%L)$$, :'job')),
	('await_job', format($$SELECT idemjob.await_job(%L, '1 ms')$$, :'job')),
	('cancel_job', format($$SELECT idemjob.cancel_job(%L, 'test')$$, :'job')),
	('claim', $$SELECT idemjob.claim('w9')$$),
	('claim_on', $$SELECT idemjob.claim_on('0', 'w9')$$),
	('on_node', $$SELECT idemjob.on_node('0', 'abandon_attempts', '{w9}')$$),
	('start_attempt', format($$SELECT idemjob.start_attempt(%L)$$, :'job')),
	('heartbeat', format($$SELECT idemjob.heartbeat(%L)$$, :'att')),
	('complete_attempt', format($$SELECT idemjob.complete_attempt(%L, '{}')$$, :'att')),
	('fail_attempt', format($$SELECT idemjob.fail_attempt(%L)$$, :'att')),
	('mark_unknown', format($$SELECT idemjob.mark_unknown(%L)$$, :'att')),
	('cancel_attempt', format($$SELECT idemjob.cancel_attempt(%L, 'test')$$, :'att')),
	('expire_attempts', $$SELECT idemjob.expire_attempts()$$),
	('purge', $$SELECT idemjob.purge('1 day')$$),
	('purge_race_log', $$SELECT idemjob.purge_race_log('1 day')$$),
	('define_contract', $$SELECT idemjob.define_contract('priv2', '{}')$$),
	('certify_provider', $$SELECT idemjob.certify_provider('priv', 'p3')$$),
	('revoke_provider', $$SELECT idemjob.revoke_provider('priv', 'p2', 'test')$$),
	('grant_capability', $$SELECT idemjob.grant_capability('r_none', 'client')$$),
	('revoke_capability', $$SELECT idemjob.revoke_capability('r_client', 'client')$$),
	('owner_visible', $$SELECT idemjob.owner_visible('priv-o')$$),
	('jobs_guard', $$SELECT idemjob.jobs_guard()$$),
	('attempts_guard', $$SELECT idemjob.attempts_guard()$$),
	('truncate_guard', $$SELECT idemjob.truncate_guard()$$),
	('contracts_changed', $$SELECT idemjob.contracts_changed()$$),
	('race_log_guard', $$SELECT idemjob.race_log_guard()$$),
	('contracts_guard', $$SELECT idemjob.contracts_guard()$$),
	('certifications_guard', $$SELECT idemjob.certifications_guard()$$),
	('spent_keys_guard', $$SELECT idemjob.spent_keys_guard()$$),
	('read jobs', $$SELECT count(*) FROM idemjob.jobs$$),
	('read attempts', $$SELECT count(*) FROM idemjob.attempts$$),
	('read race_log', $$SELECT count(*) FROM idemjob.race_log$$),
	('read contracts', $$SELECT count(*) FROM idemjob.contracts$$),
	('read certifications', $$SELECT count(*) FROM idemjob.certifications$$),
	('read spent_keys', $$SELECT count(*) FROM idemjob.spent_keys$$),
	('read capabilities', $$SELECT count(*) FROM idemjob.capabilities$$),
	('read in_doubt', $$SELECT count(*) FROM idemjob.in_doubt$$),
	('read queue_stats', $$SELECT count(*) FROM idemjob.queue_stats$$),
	('read provider_stats', $$SELECT count(*) FROM idemjob.provider_stats$$),
	('provider_stats', $$SELECT count(*) FROM idemjob.provider_stats('5 minutes')$$),
	('read retention_stats', $$SELECT count(*) FROM idemjob.retention_stats$$),
	('read compensations', $$SELECT count(*) FROM idemjob.compensations$$);

-- every function of the extension has a call above (no rows)
SELECT sig FROM ext_functions
WHERE split_part(substr(sig, 9), '(', 1) NOT IN (SELECT fn FROM calls)
ORDER BY 1;

CREATE TEMP TABLE outcomes (fn text, r name, state text, msg text);
CREATE FUNCTION pg_temp.call_as(role name, sql text, OUT state text, OUT msg text)
LANGUAGE plpgsql AS $$
BEGIN
	BEGIN
		EXECUTE format('SET LOCAL ROLE %I', role);
		EXECUTE sql;
		RAISE SQLSTATE 'ZZ000';		-- roll the call back
	EXCEPTION WHEN SQLSTATE 'ZZ000' THEN
		state := '00000';
	WHEN OTHERS THEN
		GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, msg = MESSAGE_TEXT;
	END;
END
$$;
INSERT INTO outcomes
SELECT c.fn, r.r, o.state, o.msg
FROM calls c CROSS JOIN roles r CROSS JOIN LATERAL pg_temp.call_as(r.r, c.sql) o
WHERE r.r <> 'public';

-- the matrix by calling (columns: none, client, worker, operator, admin):
-- 'ok' (not refused) or 42501
SELECT fn, string_agg(CASE WHEN state = '42501' THEN '42501' ELSE 'ok' END, ' '
		ORDER BY ord) AS "none client worker operator admin"
FROM outcomes JOIN roles USING (r)
GROUP BY fn ORDER BY fn;

-- the calls that were not refused but failed: only the trigger functions
-- (called outside a trigger) and functions still to be written (XX000
-- "... is not written yet": the privilege check passed) may appear here
SELECT DISTINCT fn, state, msg FROM outcomes
WHERE state NOT IN ('00000', '42501')
	AND NOT (state = 'XX000' AND msg LIKE '% is not written yet')
ORDER BY 1, 2, 3;

-- a 42501 for a role the catalogs allow, or an answer for one they do not
-- (no rows)
SELECT o.fn, o.r, o.state, a.allowed
FROM outcomes o
	JOIN actual a ON a.r = o.r
		AND (a.obj LIKE 'idemjob.' || o.fn || '(%' OR a.obj = 'idemjob.' || substr(o.fn, 6))
WHERE (o.state = '42501') = (a.allowed AND has_schema_privilege(o.r, 'idemjob', 'USAGE'))
ORDER BY 1, 2;

--
-- Writes: no role may write any table, whatever its capability
--
CREATE TEMP TABLE writes (rel text, sql text);
INSERT INTO writes
SELECT rel, s FROM ext_relations CROSS JOIN LATERAL (VALUES
	(format('INSERT INTO %s DEFAULT VALUES', rel)),
	(format('UPDATE %s SET %I = %I', rel,
			(SELECT attname FROM pg_attribute WHERE attrelid = oid AND attnum = 1),
			(SELECT attname FROM pg_attribute WHERE attrelid = oid AND attnum = 1))),
	(format('DELETE FROM %s', rel)),
	(format('TRUNCATE %s', rel))) v(s)
WHERE relkind = 'r';
SELECT w.rel, string_agg(o.state, ' ' ORDER BY w.sql) AS "insert update delete truncate"
FROM writes w
	CROSS JOIN LATERAL pg_temp.call_as('r_admin', w.sql) o
GROUP BY w.rel ORDER BY w.rel;

--
-- grant_capability and revoke_capability
--
-- by a role that is neither the owner nor a superuser: 42501, even with
-- EXECUTE granted (the function checks the caller itself)
GRANT EXECUTE ON FUNCTION idemjob.grant_capability(regrole, text),
	idemjob.revoke_capability(regrole, text) TO r_admin;
SELECT r, (pg_temp.call_as(r, $$SELECT idemjob.grant_capability('r_none', 'admin')$$)).state AS grant,
	(pg_temp.call_as(r, $$SELECT idemjob.revoke_capability('r_client', 'client')$$)).state AS revoke
FROM roles WHERE r <> 'public' ORDER BY ord;
REVOKE EXECUTE ON FUNCTION idemjob.grant_capability(regrole, text),
	idemjob.revoke_capability(regrole, text) FROM r_admin;

\set VERBOSITY sqlstate
SELECT idemjob.grant_capability('r_none', 'superuser');		-- 22023
SELECT idemjob.grant_capability('r_none', 'Client');		-- 22023
SELECT idemjob.revoke_capability('r_none', '');				-- 22023
SELECT idemjob.grant_capability(NULL, 'client');			-- 22004
SELECT idemjob.grant_capability('r_none', NULL);			-- 22004
SELECT idemjob.revoke_capability(NULL, 'client');			-- 22004
SELECT idemjob.revoke_capability('r_none', NULL);			-- 22004
SELECT idemjob.grant_capability('-', 'client');				-- 22023: not to PUBLIC
\set VERBOSITY default
-- nothing was recorded or granted by the refused calls
SELECT grantee, capability FROM idemjob.capabilities WHERE grantee = 'r_none'::regrole;
SELECT has_schema_privilege('r_none', 'idemjob', 'USAGE') AS r_none_usage;

-- revoke keeps what another held capability still needs
SELECT idemjob.grant_capability('r_cw', 'client');
SELECT idemjob.grant_capability('r_cw', 'worker');
SELECT idemjob.revoke_capability('r_cw', 'worker');
SELECT has_schema_privilege('r_cw', 'idemjob', 'USAGE') AS usage,
	has_function_privilege('r_cw', 'idemjob.job(uuid)', 'EXECUTE') AS job,
	has_function_privilege('r_cw', 'idemjob.validate(jsonb,jsonb)', 'EXECUTE') AS validate,
	has_function_privilege('r_cw', 'idemjob.submit(text,text,text,jsonb,text,timestamptz,int4,int4)', 'EXECUTE') AS submit,
	has_function_privilege('r_cw', 'idemjob.start_attempt(uuid,text,interval,text)', 'EXECUTE') AS start_attempt,
	has_function_privilege('r_cw', 'idemjob.claim(text,text[],int4,interval,interval,bool)', 'EXECUTE') AS claim;
SELECT (pg_temp.call_as('r_cw', format($$SELECT idemjob.job(%L)$$, :'job'))).state IN ('00000', 'XX000') AS job_call_not_refused;
SELECT (pg_temp.call_as('r_cw', format($$SELECT idemjob.start_attempt(%L)$$, :'job'))).state AS start_attempt_call;
-- and the last one takes everything back
SELECT idemjob.revoke_capability('r_cw', 'client');
SELECT count(*) AS r_cw_privileges_left
FROM ext_functions WHERE has_function_privilege('r_cw', oid, 'EXECUTE')
	AND sig NOT IN ('idemjob.validate(jsonb,jsonb)', 'idemjob.uuid_v7()');
SELECT has_schema_privilege('r_cw', 'idemjob', 'USAGE') AS usage;

-- operator + admin, admin revoked: still reads, no longer defines
SELECT idemjob.grant_capability('r_oa', 'operator');
SELECT idemjob.grant_capability('r_oa', 'admin');
SELECT idemjob.revoke_capability('r_oa', 'admin');
SELECT has_table_privilege('r_oa', 'idemjob.jobs', 'SELECT') AS read_jobs,
	has_table_privilege('r_oa', 'idemjob.in_doubt', 'SELECT') AS read_in_doubt,
	has_function_privilege('r_oa', 'idemjob.cancel_attempt(uuid,text,boolean)', 'EXECUTE') AS cancel_attempt,
	has_function_privilege('r_oa', 'idemjob.define_contract(text,jsonb)', 'EXECUTE') AS define_contract;
-- revoking a capability never held takes nothing another one needs
SELECT idemjob.revoke_capability('r_oa', 'client');
SELECT has_function_privilege('r_oa', 'idemjob.submit(text,text,text,jsonb,text,timestamptz,int4,int4)', 'EXECUTE') AS submit,
	has_schema_privilege('r_oa', 'idemjob', 'USAGE') AS usage;

--
-- Settings: only superusers change the ones the contract marks so
--
SELECT name, context FROM pg_settings WHERE name LIKE 'idemjob.%' ORDER BY name;
SET ROLE r_admin;
\set VERBOSITY sqlstate
SET idemjob.max_payload_bytes = 100000000;		-- 42501
SET idemjob.owner_binding = 'off';				-- 42501
SET idemjob.max_attempts = 1000;				-- 42501
SET idemjob.retry_backoff = 0;					-- 42501
SET idemjob.retry_backoff_max = 0;				-- 42501
SET idemjob.keep_dropped_results = on;			-- 42501
SET idemjob.key_retention = '1s';				-- 42501
SET idemjob.require_certified_failover = off;	-- 42501
SELECT set_config('idemjob.max_payload_bytes', '100000000', true);	-- 42501
SET idemjob.sweeper_interval = 0;				-- 55P02 (server start / reload only)
SET idemjob.attempt_timeout = '1min';			-- user setting: ok
SET idemjob.default_provider = 'other';			-- user setting: ok
\set VERBOSITY default
RESET ROLE;
SHOW idemjob.max_payload_bytes;
SHOW idemjob.owner_binding;
SHOW idemjob.require_certified_failover;
RESET idemjob.attempt_timeout;
RESET idemjob.default_provider;

-- clean up: take every capability back, then drop the roles
SELECT count(*) AS revoked FROM (
	SELECT idemjob.revoke_capability(grantee, capability)
	FROM idemjob.capabilities WHERE grantee::text LIKE 'r\_%') x;
SELECT count(*) AS capabilities_left FROM idemjob.capabilities WHERE grantee::text LIKE 'r\_%';
SET client_min_messages = warning;
DROP OWNED BY r_none, r_client, r_worker, r_operator, r_admin, r_cw, r_oa;
DROP ROLE r_none, r_client, r_worker, r_operator, r_admin, r_cw, r_oa;
