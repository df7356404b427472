-- A late result for an attempt whose job was purged (I10; issue 17,
-- finding 8).  A cancelled attempt can still report (cancelled ->
-- superseded); purge() deletes final jobs with their attempts, and 1.1 then
-- answered that late result IJ006, with no race-log row.  Since 1.2 the
-- job's spent_keys row keeps the attempts that can still report, and the
-- result is lost and logged, as it is before the purge.
\set VERBOSITY sqlstate
-- purge only this test's owner (a superuser bound through the setting)
SET idemjob.owner_binding = 'setting:pl.owner';
SET pl.owner = 'pl';
SELECT job_id AS pj FROM idemjob.submit('pl', 'late-1', 'pl') \gset
SELECT id AS a1 FROM idemjob.start_attempt(:'pj') \gset
SELECT state FROM idemjob.mark_unknown(:'a1', 'timeout');
SELECT state FROM idemjob.cancel_attempt(:'a1', 'gave up', fence => true);
SELECT id AS a2 FROM idemjob.start_attempt(:'pj') \gset
SELECT outcome FROM idemjob.complete_attempt(:'a2', '{"n": 2}');
SELECT pg_sleep(0.01);
SELECT idemjob.purge('0 s') AS purged;
SELECT count(*) AS jobs_left FROM idemjob.jobs WHERE id = :'pj';
SELECT jsonb_array_length(open_attempts) AS open_attempts, final_state
  FROM idemjob.spent_keys WHERE job_id = :'pj';
-- the cancelled attempt's provider answers now: lost, and logged
-- (since issue 21: the row it would have had before the purge, slot_taken
-- against the winner, with the job's intent and key)
SELECT outcome, job_id = :'pj' AS its_job, job_version, winner_attempt_id = :'a2' AS winner_a2
  FROM idemjob.complete_attempt(:'a1', '{"n": 1}');
SELECT reason, expected_version, found_version, provider, result_bytes,
	winner_attempt_id = :'a2' AS winner_a2, winner_provider, intent, idempotency_key,
	late_by > '0' AS late
  FROM idemjob.race_log WHERE attempt_id = :'a1';
-- sent again: the same answer (I7); another result: IJ001
SELECT outcome, winner_attempt_id = :'a2' AS winner_a2 FROM idemjob.complete_attempt(:'a1', '{"n": 1}');
SELECT idemjob.complete_attempt(:'a1', '{"n": 99}');
SELECT count(*) FROM idemjob.race_log WHERE attempt_id = :'a1';
-- the winner's id is no tombstone; an id never seen is IJ006 as before
SELECT idemjob.complete_attempt(:'a2', '{"n": 2}');
SELECT idemjob.complete_attempt('00000000-0000-7000-8000-0000000000ff', '{}');
-- another owner's tombstone is absent to a bound caller
SET pl.owner = 'someone-else';
SELECT idemjob.complete_attempt(:'a1', '{"n": 1}');
RESET pl.owner;
RESET idemjob.owner_binding;
