-- test/examples/setup.sql: one database for one example run (as superuser)
SET client_min_messages = warning;
CREATE EXTENSION idemjob;
DO $$
DECLARE r text;
BEGIN
	FOREACH r IN ARRAY ARRAY['ij_ex_client', 'ij_ex_worker', 'ij_ex_admin'] LOOP
		IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = r) THEN
			EXECUTE format('CREATE ROLE %I LOGIN', r);
		END IF;
	END LOOP;
END $$;
SELECT idemjob.grant_capability('ij_ex_client', 'client');
SELECT idemjob.grant_capability('ij_ex_worker', 'worker');
SELECT idemjob.grant_capability('ij_ex_admin', 'admin');
SELECT idemjob.define_contract('ex.charge',
	'{"type": "object", "required": ["by"], "properties": {"by": {"enum": ["primary", "fallback"]}}}');
SELECT idemjob.certify_provider('ex.charge', 'fallback', '{"suite": "examples"}');
-- failover is the server's: after a failure, or a doubt fenced after
-- fence_unknown_after, a job goes on to the next certified provider of its
-- route, at once (no backoff), and claim returns it there
SELECT idemjob.set_route('ex.charge', '{primary,fallback}');
SELECT idemjob.set_retry_policy('ex.charge', retry_backoff => '0', fence_unknown_after => '1s');
