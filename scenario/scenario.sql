-- scenario/scenario.sql: the guarantees of idemjob, narrated.
-- Errors shown here are the point: each one is the database refusing
-- to turn one intent into two jobs.  The script stops on anything else.
\set QUIET on
\pset footer off
CREATE EXTENSION idemjob;
-- a helper for the demo: run a call, print the refusal it gets
CREATE FUNCTION demo_refusal(call text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	state text; msg text; detail text;
BEGIN
	EXECUTE call;
	RAISE EXCEPTION 'expected a refusal, got none: %', call;
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, detail = PG_EXCEPTION_DETAIL;
	IF state = 'P0001' THEN RAISE; END IF;
	RETURN state || ': ' || msg || coalesce(E'\n       ' || nullif(detail, ''), '');
END $$;
\set QUIET off

\echo
\echo '1. Double click.  The user clicks "Pay" twice; both requests reach the database.'
SELECT job_id AS job, created FROM idemjob.submit('user-42', 'checkout-7f3a', 'charge_card',
	'{"amount_cents": 1999, "currency": "EUR"}', 'stripe') \gset
SELECT job_id = :'job' AS same_job, created, state
  FROM idemjob.submit('user-42', 'checkout-7f3a', 'charge_card',
	'{"currency": "EUR", "amount_cents": 1999}', 'stripe');
SELECT count(*) AS jobs_for_this_click FROM idemjob.jobs WHERE idempotency_key = 'checkout-7f3a';
\echo '   One job.  The second call got the first job back, with created = false.'

\echo
\echo '2. The same key with a different request is a conflict, never the old job.'
SELECT demo_refusal($$SELECT idemjob.submit('user-42', 'checkout-7f3a', 'charge_card',
	'{"amount_cents": 9999, "currency": "EUR"}', 'stripe')$$) AS refused;

\echo
\echo '3. A worker starts attempt 1 on an AI provider; the request stalls and times out.'
SELECT job_id AS doc FROM idemjob.submit('user-42', 'summarize-q3-report', 'summarize',
	'{"document": "q3-report.pdf"}', 'primary-ai') \gset
SELECT id AS a1, attempt_no, provider, state FROM idemjob.start_attempt(:'doc', worker => 'worker-1', timeout => '30 seconds') \gset
SELECT state, error FROM idemjob.mark_unknown(:'a1', 'HTTP timeout after 30s');
SELECT state AS job_state FROM idemjob.jobs WHERE id = :'doc';
\echo '   The attempt is unknown, not failed: the provider may still be working on it.'

\echo
\echo '4. While it is in doubt, no second attempt can start (that would be two jobs).'
SELECT demo_refusal(format('SELECT idemjob.start_attempt(%L, worker => %L)', :'doc', 'worker-2')) AS refused;
\echo '   Worker 1, retrying after a lost answer, gets its own attempt back:'
SELECT id = :'a1' AS same_attempt, state FROM idemjob.start_attempt(:'doc', worker => 'worker-1');

\echo
\echo '5. Failover needs a certified provider.  The fallback must be proven against'
\echo '   the intent''s output contract first.'
SELECT idemjob.define_contract('summarize', '{
	"type": "object",
	"required": ["summary"],
	"properties": {"summary": {"type": "string", "minLength": 1}},
	"additionalProperties": false}') AS contract_version;
SELECT demo_refusal(format('SELECT idemjob.cancel_attempt(%L, %L); SELECT idemjob.start_attempt(%L, %L)',
	:'a1', 'primary timed out', :'doc', 'fallback-ai')) AS refused;
SELECT provider, contract_version FROM idemjob.certify_provider('summarize', 'fallback-ai',
	'{"suite": "summarize-contract-v1", "cases": 40, "passed": 40, "temperature": 0}');

\echo
\echo '6. The operator resolves attempt 1 (cancelled, not fenced: its work may still land),'
\echo '   and attempt 2 starts on the certified fallback.'
SELECT state FROM idemjob.cancel_attempt(:'a1', 'primary timed out; failing over');
SELECT id AS a2 FROM idemjob.start_attempt(:'doc', 'fallback-ai', worker => 'worker-2') \gset
SELECT attempt_no, provider, state FROM idemjob.attempts WHERE id = :'a2';

\echo
\echo '7. A result that breaks the contract never wins: the fallback model adds a key.'
SELECT outcome FROM idemjob.complete_attempt(:'a2', '{"summary": "Revenue up 8%.", "confidence": 0.9}');
SELECT state, error FROM idemjob.attempts WHERE id = :'a2';
SELECT state AS job_state FROM idemjob.jobs WHERE id = :'doc';

\echo
\echo '8. Attempt 3 on the fallback returns a valid result first and wins the compare-and-swap.'
SELECT id AS a3 FROM idemjob.start_attempt(:'doc', 'fallback-ai', worker => 'worker-2') \gset
SELECT outcome, job_version, winner_attempt_id = :'a3' AS attempt_3_won
  FROM idemjob.complete_attempt(:'a3', '{"summary": "Revenue grew 8% on strong Q3 demand."}');

\echo
\echo '9. Attempt 1 (the primary) finally answers, late.  It loses; its payload is dropped.'
SELECT outcome, job_version, winner_attempt_id = :'a3' AS winner_is_attempt_3
  FROM idemjob.complete_attempt(:'a1', '{"summary": "Q3 revenue rose 8%."}');
SELECT state, result FROM idemjob.jobs WHERE id = :'doc';
SELECT attempt_no, provider, state FROM idemjob.attempts WHERE job_id = :'doc' ORDER BY attempt_no;

\echo
\echo '10. The race log tells the DBA who lost to whom, with a fingerprint, not the payload.'
SELECT l.reason, a.attempt_no AS loser, w.attempt_no AS winner,
	   l.expected_version, l.found_version, l.result_bytes,
	   encode(l.result_sha256, 'hex') AS result_sha256
  FROM idemjob.race_log l
  JOIN idemjob.attempts a ON a.id = l.attempt_id
  LEFT JOIN idemjob.attempts w ON w.id = l.winner_attempt_id
 WHERE l.job_id = :'doc';

\echo
\echo '11. Lost responses are safe to retry: every call answers again, changing nothing.'
SELECT outcome, winner_attempt_id = :'a3' AS same_winner
  FROM idemjob.complete_attempt(:'a3', '{"summary": "Revenue grew 8% on strong Q3 demand."}');
SELECT created, state, result FROM idemjob.submit('user-42', 'summarize-q3-report', 'summarize',
	'{"document": "q3-report.pdf"}', 'primary-ai');

\echo
\echo '12. And raw SQL cannot rewrite history either.'
SELECT demo_refusal(format($$UPDATE idemjob.jobs SET result = '{"summary": "forged"}' WHERE id = %L$$, :'doc')) AS refused;

\echo
\echo '13. A job system around it: an HTTP handler submits and waits; a worker claims.'
\echo '    The worker claims the job (FOR UPDATE SKIP LOCKED, one statement) and its provider fails;'
\echo '    the job goes back to pending with a backoff (retry_backoff x 2^(attempt-1)).'
SET idemjob.retry_backoff = '2s';
SELECT job_id AS w FROM idemjob.submit('user-7', 'translate-42', 'translate', '{"text": "Hallo"}',
	'primary-ai', max_attempts => 2) \gset
SELECT attempt_no, provider, deadline IS NOT NULL AS has_deadline
  FROM idemjob.claim('worker-1', ARRAY['translate'], timeout => '30 seconds') \gset c_
SELECT state, error FROM idemjob.fail_attempt((SELECT id FROM idemjob.attempts WHERE job_id = :'w'),
	'{"code": "rate_limited"}');
SELECT state, run_at > now() AS backing_off, run_at - now() AS backoff FROM idemjob.job(:'w');
\echo '    Not claimable before its run_at; claim(wait => ...) waits inside the server until it is due.'
SELECT count(*) AS claimed_now FROM idemjob.claim('worker-1', ARRAY['translate']);
SELECT attempt_no AS second_attempt FROM idemjob.claim('worker-1', ARRAY['translate'], wait => '5 seconds');
\echo '    The second attempt fails too: max_attempts (2) is reached, the job ends failed, and says why.'
SELECT state FROM idemjob.fail_attempt((SELECT id FROM idemjob.attempts WHERE job_id = :'w' AND attempt_no = 2),
	'{"code": "rate_limited"}');
SELECT state, error FROM idemjob.job(:'w');
SELECT created, state FROM idemjob.submit('user-7', 'translate-42', 'translate', '{"text": "Hallo"}', 'primary-ai');

\echo
\echo '14. await_job: a handler waits in the server for the result a worker commits.'
SELECT job_id AS aw FROM idemjob.submit('user-7', 'translate-43', 'translate', '{"text": "Welt"}', 'primary-ai') \gset
SELECT id AS aw1 FROM idemjob.start_attempt(:'aw', worker => 'worker-2') \gset
SELECT outcome FROM idemjob.complete_attempt(:'aw1', '{"text": "World"}');
SELECT state, result FROM idemjob.await_job(:'aw', '2 seconds');

\echo
\echo 'Done: one job per intent, one winner per job, every late result accounted for.'
