-- purge(), spent keys, key_retention, purge_race_log(), keep_dropped_results
\set VERBOSITY sqlstate

-- the request fingerprint, as documented in src/retention.c: length-prefixed
-- intent and provider, then the canonical text of params
CREATE FUNCTION pg_temp.req_sha(intent text, provider text, params jsonb) RETURNS bytea
LANGUAGE sql AS $$
  SELECT sha256(int4send(octet_length(intent)) || convert_to(intent, 'UTF8')
             || int4send(octet_length(provider)) || convert_to(provider, 'UTF8')
             || convert_to(params::text, 'UTF8'))
$$;
-- submit(), expecting an error: its SQLSTATE and DETAIL
CREATE FUNCTION pg_temp.try_submit(o text, k text, i text, p jsonb, prov text DEFAULT NULL,
                                   OUT code text, OUT detail text) LANGUAGE plpgsql AS $$
BEGIN
  PERFORM idemjob.submit(o, k, i, p, prov);
  code := 'none';
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS code = RETURNED_SQLSTATE, detail = PG_EXCEPTION_DETAIL;
END $$;

-- arguments
SELECT idemjob.purge('-1 second');
SELECT idemjob.purge(make_interval(days => 1, hours => -30));
SELECT idemjob.purge(NULL);
SELECT idemjob.purge('1 day', NULL);
SELECT idemjob.purge('1 day', 0);
SELECT idemjob.purge('1 day', -5);
SELECT idemjob.purge_race_log('-1 minute');
SELECT idemjob.purge_race_log(NULL);

-- jobs in every state; the final ones finish in two waves, 2 s apart
SELECT job_id AS pend FROM idemjob.submit('ret', 'pending', 'charge', '{"amount": 1}') \gset
SELECT job_id AS run FROM idemjob.submit('ret', 'running', 'charge', '{"amount": 2}') \gset
SELECT id AS run_a FROM idemjob.start_attempt(:'run') \gset
SELECT job_id AS doubt FROM idemjob.submit('ret', 'doubt', 'charge', '{"amount": 3}') \gset
SELECT id AS doubt_a FROM idemjob.start_attempt(:'doubt') \gset
SELECT state FROM idemjob.mark_unknown(:'doubt_a');

-- wave 1: succeeded, failed, cancelled, and one cancelled with its attempt
-- still in flight
SELECT job_id AS s1 FROM idemjob.submit('ret', 's1', 'charge', '{"amount": 1.0, "to": "acct"}', 'stripe') \gset
SELECT id AS s1_a FROM idemjob.start_attempt(:'s1') \gset
SELECT outcome FROM idemjob.complete_attempt(:'s1_a', '{"charge": "ch_1"}');
SELECT job_id AS f1 FROM idemjob.submit('ret', 'f1', 'charge', '{"amount": 5}', NULL, max_attempts => 1) \gset
SELECT id AS f1_a FROM idemjob.start_attempt(:'f1') \gset
SELECT state FROM idemjob.fail_attempt(:'f1_a', '{"code": "card_declined"}', false);
SELECT job_id AS c1 FROM idemjob.submit('ret', 'c1', 'charge', '{"amount": 6}') \gset
SELECT state FROM idemjob.cancel_job(:'c1', 'customer left');
SELECT job_id AS cf FROM idemjob.submit('ret', 'cancelled-in-flight', 'charge', '{"amount": 7}') \gset
SELECT id AS cf_a FROM idemjob.start_attempt(:'cf') \gset
SELECT state FROM idemjob.cancel_job(:'cf', 'customer left');
-- a late loser of a finished job: a race-log row that must outlive the job
SELECT job_id AS l1 FROM idemjob.submit('ret', 'l1', 'charge', '{"amount": 8}') \gset
SELECT id AS l1_a FROM idemjob.start_attempt(:'l1') \gset
SELECT state FROM idemjob.cancel_job(:'l1', 'customer left');
SELECT outcome FROM idemjob.complete_attempt(:'l1_a', '{"charge": "ch_late"}');
SELECT state FROM idemjob.jobs WHERE id IN (:'s1', :'f1', :'c1', :'cf', :'l1') ORDER BY id;

SELECT pg_sleep(2);

-- wave 2: three succeeded jobs of another owner
SELECT job_id AS w2_1 FROM idemjob.submit('ret2', 'w2-1', 'charge', '{"amount": 9}') \gset
SELECT outcome FROM idemjob.complete_attempt((SELECT id FROM idemjob.start_attempt(:'w2_1')), '{"charge": "ch_9"}');
SELECT job_id AS w2_2 FROM idemjob.submit('ret2', 'w2-2', 'charge', '{"amount": 10}') \gset
SELECT outcome FROM idemjob.complete_attempt((SELECT id FROM idemjob.start_attempt(:'w2_2')), '{"charge": "ch_10"}');
SELECT job_id AS w2_3 FROM idemjob.submit('ret2', 'w2-3', 'charge', '{"amount": 11}') \gset
SELECT outcome FROM idemjob.complete_attempt((SELECT id FROM idemjob.start_attempt(:'w2_3')), '{"charge": "ch_11"}');

-- what the purged jobs were, to check their spent keys against
CREATE TEMP TABLE before AS SELECT * FROM idemjob.jobs WHERE owner_id LIKE 'ret%';

-- bound to owner "ret" (so that the other tests' jobs stay): nothing is a
-- day old
SET idemjob.owner_binding = 'setting:app.owner';
SET app.owner = 'ret';
SELECT idemjob.purge('1 day');
-- older than 1 s: wave 1 only, without the job whose attempt is in flight,
-- in batches of 2, oldest first
SELECT idemjob.purge('1 second', 2);
SELECT idempotency_key FROM idemjob.spent_keys WHERE owner_id LIKE 'ret%' ORDER BY completed_at;
SELECT idemjob.purge('1 second', 2);
SELECT idemjob.purge('1 second', 2);
RESET idemjob.owner_binding;
SELECT idempotency_key, final_state FROM idemjob.spent_keys WHERE owner_id LIKE 'ret%' ORDER BY completed_at;
-- what is left: live jobs, the in-flight cancelled one, wave 2
SELECT idempotency_key, state FROM idemjob.jobs WHERE owner_id LIKE 'ret%' ORDER BY idempotency_key;
-- the purged jobs' attempts went with them; the others' stayed
SELECT count(*) FROM idemjob.attempts WHERE job_id IN (:'s1', :'f1', :'c1', :'l1');
SELECT count(*) FROM idemjob.attempts WHERE job_id IN (:'run', :'doubt', :'cf', :'w2_1');

-- one spent key per purged job, each column from the job
SELECT k.idempotency_key,
       k.owner_id = b.owner_id AS owner_ok,
       k.job_id = b.id AS job_ok,
       k.final_state = b.state AS state_ok,
       k.completed_at = b.completed_at AS completed_ok,
       k.purged_at > b.completed_at AND k.purged_at <= now() AS purged_ok,
       k.request_sha256 = pg_temp.req_sha(b.intent, b.provider, b.params) AS sha_ok,
       length(k.request_sha256) AS sha_len
  FROM idemjob.spent_keys k JOIN before b ON b.id = k.job_id
 ORDER BY k.completed_at;

-- the race-log row of the late loser survived its job
SELECT job_id = :'l1' AS l1, attempt_id = :'l1_a' AS l1_a, provider, reason
  FROM idemjob.race_log WHERE owner_id = 'ret';

-- the same request again: IJ007, naming the job, its final state and the
-- purge time; no job is created
SELECT code,
       detail LIKE '%' || :'s1' || '%' AS names_job,
       detail LIKE '%succeeded%' AS names_state,
       detail LIKE '%' || (SELECT purged_at::text FROM idemjob.spent_keys WHERE job_id = :'s1') || '%' AS names_purge_time
  FROM pg_temp.try_submit('ret', 's1', 'charge', '{"to": "acct",  "amount": 1.0}', 'stripe');
SELECT code, detail LIKE '%' || :'f1' || '%failed%' AS names_job
  FROM pg_temp.try_submit('ret', 'f1', 'charge', '{"amount": 5}');
SELECT code, detail LIKE '%' || :'c1' || '%cancelled%' AS names_job
  FROM pg_temp.try_submit('ret', 'c1', 'charge', '{"amount": 6}');
-- another request under a spent key: IJ001 (intent, params, provider)
SELECT code, detail LIKE '%' || :'s1' || '%' AS names_job
  FROM pg_temp.try_submit('ret', 's1', 'refund', '{"amount": 1.0, "to": "acct"}', 'stripe');
SELECT code FROM pg_temp.try_submit('ret', 's1', 'charge', '{"amount": 2.0, "to": "acct"}', 'stripe');
SELECT code FROM pg_temp.try_submit('ret', 's1', 'charge', '{"amount": 1.0, "to": "acct"}', 'adyen');
-- the documented corner: 1 and 1.0 are equal jsonb, but not the same text
SELECT code FROM pg_temp.try_submit('ret', 's1', 'charge', '{"amount": 1, "to": "acct"}', 'stripe');
-- no second job for any of them; the same key of another owner is free
SELECT count(*) FROM idemjob.jobs WHERE idempotency_key IN ('s1', 'f1', 'c1');
SELECT created FROM idemjob.submit('ret-other', 's1', 'charge', '{"amount": 1.0, "to": "acct"}', 'stripe');
-- a live key replays as before (the spent-key check is on the create path only)
SELECT created, state FROM idemjob.submit('ret', 'pending', 'charge', '{"amount": 1}');

-- key_retention: spent keys older than it go at the next purge; the key is
-- then free again
SET idemjob.key_retention = '1s';
SHOW idemjob.key_retention;
SELECT pg_sleep(1.2);
SET idemjob.owner_binding = 'setting:app.owner';
SET app.owner = 'ret';
SELECT idemjob.purge('1 day');
RESET idemjob.owner_binding;
SELECT count(*) AS spent_keys_left FROM idemjob.spent_keys WHERE owner_id LIKE 'ret%';
SELECT created FROM idemjob.submit('ret', 's1', 'charge', '{"amount": 1.0, "to": "acct"}', 'stripe');
RESET idemjob.key_retention;

-- wave 2 and the rest, under an owner binding: only the bound owner's jobs
SET idemjob.owner_binding = 'setting:app.owner';
SET app.owner = 'ret';
SELECT idemjob.purge('0');
SELECT count(*) FROM idemjob.jobs WHERE owner_id = 'ret2';
SET app.owner = 'ret2';
SELECT idemjob.purge('0');
SELECT count(*) FROM idemjob.jobs WHERE owner_id = 'ret2';
RESET idemjob.owner_binding;
RESET app.owner;
SELECT owner_id, count(*) FROM idemjob.spent_keys WHERE owner_id LIKE 'ret%' GROUP BY owner_id ORDER BY owner_id;

-- keep_dropped_results: a losing and a rejected result, off (default) then on
SELECT idemjob.define_contract('quote', '{"type": "object", "required": ["price"]}') IS NOT NULL AS defined;
CREATE FUNCTION pg_temp.drops(tag text) RETURNS TABLE(state idemjob.attempt_state, kept jsonb)
LANGUAGE plpgsql AS $$
DECLARE
  j uuid;
  a uuid;
BEGIN
  -- a loser: its job was cancelled while it ran
  SELECT s.job_id INTO j FROM idemjob.submit('drop', tag || '-lost', 'quote', '{}') s;
  SELECT s.id INTO a FROM idemjob.start_attempt(j) s;
  PERFORM idemjob.cancel_job(j, 'gave up');
  PERFORM idemjob.complete_attempt(a, jsonb_build_object('price', 10, 'tag', tag));
  RETURN QUERY SELECT t.state, t.dropped_result FROM idemjob.attempts t WHERE t.id = a;
  -- a rejected result: it breaks the contract
  SELECT s.job_id INTO j FROM idemjob.submit('drop', tag || '-rejected', 'quote', '{}') s;
  SELECT s.id INTO a FROM idemjob.start_attempt(j) s;
  PERFORM idemjob.complete_attempt(a, jsonb_build_object('cost', 10, 'tag', tag));
  RETURN QUERY SELECT t.state, t.dropped_result FROM idemjob.attempts t WHERE t.id = a;
END $$;
SELECT * FROM pg_temp.drops('off');
SET idemjob.keep_dropped_results = on;
SELECT * FROM pg_temp.drops('on');
RESET idemjob.keep_dropped_results;
-- the race log says who lost or was rejected, and (since 1.2) keeps what
-- to compensate itself, as the attempt does
SELECT r.provider, r.reason, r.dropped_result,
	r.dropped_result IS NOT DISTINCT FROM a.dropped_result AS as_the_attempt
  FROM idemjob.race_log r JOIN idemjob.attempts a ON a.id = r.attempt_id
 WHERE r.owner_id = 'drop' ORDER BY r.logged_at;

-- purge_race_log, bound to owner "ret": nothing an hour old, then that
-- owner's rows logged before now, and no other owner's
SET idemjob.owner_binding = 'setting:app.owner';
SET app.owner = 'ret';
SELECT idemjob.purge_race_log('1 hour');
SELECT idemjob.purge_race_log('0');
RESET idemjob.owner_binding;
RESET app.owner;
SELECT owner_id, count(*) FROM idemjob.race_log WHERE owner_id IN ('ret', 'drop') GROUP BY owner_id;

-- idemjob.purge_pause: the same purge in chunks of 1,000 jobs with a pause
-- after each; max_jobs still counts jobs, and every purged job has its key
SET idemjob.owner_binding = 'setting:app.owner';
SET app.owner = 'pause';
SELECT count(*) FROM generate_series(1, 2500) i,
  LATERAL idemjob.submit('pause', 'p-' || i, 'charge', '{}') s,
  LATERAL idemjob.complete_attempt((SELECT id FROM idemjob.start_attempt(s.job_id)), '{"ok": 1}') c;
SET idemjob.purge_pause = '20ms';
SELECT clock_timestamp() AS t0 \gset
SELECT idemjob.purge('0', 2100);
-- two pauses (after the first and the second thousand), none after the last chunk
SELECT clock_timestamp() - :'t0'::timestamptz >= interval '40ms' AS paused;
SELECT idemjob.purge('0', 2100);
SELECT idemjob.purge('0', 2100);
RESET idemjob.purge_pause;
RESET idemjob.owner_binding;
RESET app.owner;
SELECT count(*) AS spent, count(DISTINCT job_id) AS jobs FROM idemjob.spent_keys WHERE owner_id = 'pause';
SELECT count(*) AS left_over FROM idemjob.jobs WHERE owner_id = 'pause';
