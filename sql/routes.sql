-- Failover routed by the server (1.2): set_route(), the job's next
-- provider after a failure, a rejected result or a doubt that ended
-- without a result; claim() and start_attempt(job, NULL) start there.
-- Certification (I4) is unchanged: an uncertified provider is skipped.
\set VERBOSITY sqlstate

-- the job's attempt and provider, and where it goes next
CREATE FUNCTION pg_temp.job(id uuid) RETURNS text LANGUAGE sql AS $$
  SELECT j.state || ' ' || j.attempt_count || ' ' || j.provider || ' -> '
      || coalesce(j.next_provider, '(own)')
  FROM idemjob.jobs j WHERE j.id = $1
$$;

-- arguments
SELECT idemjob.set_route(NULL, '{a}');
SELECT idemjob.set_route('rt', NULL);
SELECT idemjob.set_route('', '{a}');
SELECT idemjob.set_route('rt', '{a,NULL}');
SELECT idemjob.set_route('rt', '{a,""}');
SELECT idemjob.set_route('rt', '{a,b,a}');
SELECT idemjob.set_route('rt', '{{a},{b}}');
SELECT idemjob.set_route('rt', array_fill('p'::text, ARRAY[17]));
SELECT idemjob.set_route('rt', ARRAY[repeat('x', 256)]);
SELECT count(*) AS routes FROM idemjob.routes;

-- a route; again with the same providers: the same row (I7)
SELECT intent, providers FROM idemjob.set_route('rt', '{p1,p2,p3}');
CREATE TEMP TABLE first_set AS SELECT updated_at FROM idemjob.routes WHERE intent = 'rt';
SELECT providers, updated_at = (SELECT updated_at FROM first_set) AS kept
FROM idemjob.set_route('rt', '{p1,p2,p3}');

SELECT idemjob.define_contract('rt', '{"type": "object"}') AS version;
SELECT provider FROM idemjob.certify_provider('rt', 'p2');
SELECT provider FROM idemjob.certify_provider('rt', 'p3');
SELECT intent, retry_backoff FROM idemjob.set_retry_policy('rt', retry_backoff => '0');

-- p1 fails: the job moves to p2; claim returns p2; p2's result is
-- rejected (breaks the contract): p3; p3 fails: back to p1 (wrap around)
SELECT job_id AS j FROM idemjob.submit('o', 'rt-1', 'rt', provider => 'p1') \gset
SELECT pg_temp.job(:'j');
SELECT attempt_id AS a1, provider FROM idemjob.claim('w', '{rt}') \gset
SELECT :'provider' AS provider;
SELECT state FROM idemjob.fail_attempt(:'a1', '{"code": "down"}');
SELECT pg_temp.job(:'j');
SELECT attempt_id AS a2, provider FROM idemjob.claim('w', '{rt}') \gset
SELECT :'provider' AS provider;
SELECT outcome FROM idemjob.complete_attempt(:'a2', '"not an object"');
SELECT pg_temp.job(:'j');
SELECT attempt_id AS a3, provider FROM idemjob.claim('w', '{rt}') \gset
SELECT :'provider' AS provider;
SELECT state FROM idemjob.fail_attempt(:'a3', '{"code": "down"}');
SELECT pg_temp.job(:'j');

-- start_attempt(job, NULL) starts on the routed provider too
SELECT state FROM idemjob.fail_attempt(
	(SELECT id FROM idemjob.start_attempt(:'j', NULL, '1 minute', 'w')), '{"code": "down"}');
SELECT pg_temp.job(:'j');
SELECT provider FROM idemjob.start_attempt(:'j', NULL, '1 minute', 'w') \gset
SELECT :'provider' AS provider;

-- a doubt that ends without a result (cancel_attempt) moves it on
SELECT id AS d FROM idemjob.attempts WHERE job_id = :'j' AND state = 'started' \gset
SELECT state FROM idemjob.mark_unknown(:'d');
SELECT pg_temp.job(:'j');
SELECT state FROM idemjob.cancel_attempt(:'d', 'no answer', true);
SELECT pg_temp.job(:'j');

-- a success ends the journey
SELECT attempt_id AS w, provider FROM idemjob.claim('w', '{rt}') \gset
SELECT :'provider' AS provider;
SELECT outcome FROM idemjob.complete_attempt(:'w', '{"by": "p3"}');
SELECT pg_temp.job(:'j');

-- an uncertified provider in the route is skipped (I4); revoking the
-- provider a job is routed to sends it back to its own
SELECT job_id AS k FROM idemjob.submit('o', 'rt-2', 'rt', provider => 'p1') \gset
SELECT attempt_id AS k1 FROM idemjob.claim('w', '{rt}') \gset
SELECT provider FROM idemjob.revoke_provider('rt', 'p2', 'test');
SELECT state FROM idemjob.fail_attempt(:'k1', '{"code": "down"}');
SELECT pg_temp.job(:'k');
SELECT provider FROM idemjob.revoke_provider('rt', 'p3', 'test');
SELECT pg_temp.job(:'k');
-- a start on an uncertified provider is still refused (I4)
SELECT * FROM idemjob.start_attempt(:'k', 'p3');
-- nothing certified left: the job stays on its own provider
SELECT attempt_id AS k2, provider FROM idemjob.claim('w', '{rt}') \gset
SELECT :'provider' AS provider;
SELECT state FROM idemjob.fail_attempt(:'k2', '{"code": "down"}');
SELECT pg_temp.job(:'k');

-- a new contract version: certifications are of the old one, the jobs go
-- back to their own provider
SELECT provider FROM idemjob.certify_provider('rt', 'p2');
SELECT attempt_id AS k3 FROM idemjob.claim('w', '{rt}') \gset
SELECT state FROM idemjob.fail_attempt(:'k3', '{"code": "down"}');
SELECT pg_temp.job(:'k');
SELECT idemjob.define_contract('rt', '{"type": "object", "required": ["by"]}') AS version;
SELECT pg_temp.job(:'k');

-- '{}' means no failover
SELECT intent, providers FROM idemjob.set_route('rt', '{}');
SELECT attempt_id AS k4 FROM idemjob.claim('w', '{rt}') \gset
SELECT state FROM idemjob.fail_attempt(:'k4', '{"code": "down"}');
SELECT pg_temp.job(:'k');

-- an attempt released unconfirmed was never sent: the job does not move
SELECT provider FROM idemjob.certify_provider('rt', 'p2');
SELECT intent, providers FROM idemjob.set_route('rt', '{p2,p1}');
SET idemjob.claim_lease = '1ms';
SELECT attempt_id AS k5 FROM idemjob.claim('w', '{rt}', lease => true) \gset
SELECT pg_sleep(0.02);
SELECT idemjob.expire_attempts() >= 1 AS released;
RESET idemjob.claim_lease;
SELECT state FROM idemjob.attempts WHERE id = :'k5';
SELECT pg_temp.job(:'k');
-- the job's own provider comes first, wherever the route names it
SELECT attempt_id AS k6, provider FROM idemjob.claim('w', '{rt}') \gset
SELECT :'provider' AS provider;
SELECT state FROM idemjob.fail_attempt(:'k6', '{"code": "down"}');
SELECT pg_temp.job(:'k');
SELECT state FROM idemjob.cancel_job(:'k', 'test');

DELETE FROM idemjob.retry_policies WHERE intent = 'rt';
DELETE FROM idemjob.routes WHERE intent = 'rt';
