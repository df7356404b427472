-- complete_attempt(): compare-and-swap, the race log, retries
\set VERBOSITY sqlstate

SELECT job_id AS j FROM idemjob.submit('cas', 'job-1', 'translate', '{"text": "hola"}', 'primary-ai') \gset

-- the winner: attempt succeeded, job succeeded with its result, version + 1
SELECT id AS a1 FROM idemjob.start_attempt(:'j') \gset
SELECT outcome, job_id = :'j' AS this_job, job_version, winner_attempt_id = :'a1' AS self
  FROM idemjob.complete_attempt(:'a1', '{"text": "hello"}');
SELECT state, version, result, completed_by = :'a1' AS by_a1, completed_at IS NOT NULL AS completed
  FROM idemjob.jobs WHERE id = :'j';
SELECT state, finished_at IS NOT NULL AS finished FROM idemjob.attempts WHERE id = :'a1';

-- a lost response: the same call again returns the first answer, changes nothing
SELECT outcome, job_version, winner_attempt_id = :'a1' AS self
  FROM idemjob.complete_attempt(:'a1', '{"text": "hello"}');
SELECT version, updated_at = completed_at AS untouched FROM idemjob.jobs WHERE id = :'j';
-- the same attempt with another result: IJ001
SELECT * FROM idemjob.complete_attempt(:'a1', '{"text": "hi"}');
-- a finished job starts nothing
SELECT * FROM idemjob.start_attempt(:'j');

-- reverse order: A (primary) starts, times out, is cancelled; B (fallback) starts;
-- B returns first and wins; A returns later and loses
SELECT job_id AS r FROM idemjob.submit('cas', 'job-reverse', 'translate', '{"text": "adios"}') \gset
SELECT id AS ra FROM idemjob.start_attempt(:'r', worker => 'A') \gset
SELECT state FROM idemjob.mark_unknown(:'ra');
SELECT * FROM idemjob.start_attempt(:'r', worker => 'B');
SELECT state FROM idemjob.cancel_attempt(:'ra', 'timed out, trying again');
SELECT id AS rb FROM idemjob.start_attempt(:'r', worker => 'B') \gset
SELECT outcome, job_version, winner_attempt_id = :'rb' AS b_wins FROM idemjob.complete_attempt(:'rb', '{"text": "goodbye"}');
SELECT outcome, job_version, winner_attempt_id = :'rb' AS names_b FROM idemjob.complete_attempt(:'ra', '{"text": "bye"}');
SELECT result, completed_by = :'rb' AS by_b FROM idemjob.jobs WHERE id = :'r';
SELECT attempt_no, state FROM idemjob.attempts WHERE job_id = :'r' ORDER BY attempt_no;
-- the race log: who lost to whom, a fingerprint of the dropped payload, never the payload
SELECT job_id = :'r' AS this_job, owner_id, winner_attempt_id = :'rb' AS winner_b,
       expected_version, found_version, reason,
       result_sha256 = sha256(convert_to('{"text": "bye"}', 'UTF8')) AS sha_ok,
       result_bytes, late_by >= interval '0' AS late_by_ok
  FROM idemjob.race_log WHERE attempt_id = :'ra';
-- the loser retried: the same answer, no second log row
SELECT outcome, job_version, winner_attempt_id = :'rb' AS names_b FROM idemjob.complete_attempt(:'ra', '{"text":"bye"}');
SELECT count(*) FROM idemjob.race_log WHERE attempt_id = :'ra';
SELECT * FROM idemjob.complete_attempt(:'ra', '{"text": "ciao"}');
-- the loser's result is nowhere
SELECT count(*) FROM idemjob.jobs WHERE result::text LIKE '%bye"%' AND result::text NOT LIKE '%goodbye%';

-- a cancelled attempt that returns first, unfenced, wins
SELECT job_id AS c FROM idemjob.submit('cas', 'job-cancelled-wins', 'translate') \gset
SELECT id AS c1 FROM idemjob.start_attempt(:'c') \gset
SELECT state FROM idemjob.cancel_attempt(:'c1', 'presumed dead');
SELECT id AS c2 FROM idemjob.start_attempt(:'c') \gset
SELECT outcome FROM idemjob.complete_attempt(:'c1', '{"n": 1}');
-- the job is final; the started attempt keeps its state, its late result loses
SELECT state, completed_by = :'c1' AS by_c1 FROM idemjob.jobs WHERE id = :'c';
SELECT state FROM idemjob.attempts WHERE id = :'c2';
SELECT outcome FROM idemjob.complete_attempt(:'c2', '{"n": 2}');
SELECT reason FROM idemjob.race_log WHERE attempt_id = :'c2';

-- completing from unknown works (the result arrived after the timeout)
SELECT job_id AS u FROM idemjob.submit('cas', 'job-unknown', 'translate') \gset
SELECT id AS u1 FROM idemjob.start_attempt(:'u') \gset
SELECT state FROM idemjob.mark_unknown(:'u1');
SELECT outcome FROM idemjob.complete_attempt(:'u1', '[1, 2, 3]');
SELECT state, result FROM idemjob.jobs WHERE id = :'u';

-- a failed attempt cannot complete: IJ005
SELECT job_id AS f FROM idemjob.submit('cas', 'job-failed', 'translate') \gset
SELECT id AS f1 FROM idemjob.start_attempt(:'f') \gset
SELECT state FROM idemjob.fail_attempt(:'f1', '{"code": "429"}');
SELECT * FROM idemjob.complete_attempt(:'f1', '{}');
-- and a won or lost attempt cannot fail, be marked unknown or be cancelled
SELECT * FROM idemjob.fail_attempt(:'a1');
SELECT * FROM idemjob.mark_unknown(:'a1');
SELECT * FROM idemjob.cancel_attempt(:'ra', 'x');

-- results are stored byte for byte as jsonb: scalars, nulls, big numbers
SELECT job_id AS s FROM idemjob.submit('cas', 'job-scalar', 'translate') \gset
SELECT id AS s1 FROM idemjob.start_attempt(:'s') \gset
SELECT outcome FROM idemjob.complete_attempt(:'s1', '{"n": 1.50, "big": 123456789012345678901234567890, "z": null}');
SELECT result FROM idemjob.jobs WHERE id = :'s';
-- 1.5 is the same jsonb value but not the same text: a different result
SELECT * FROM idemjob.complete_attempt(:'s1', '{"n": 1.5, "big": 123456789012345678901234567890, "z": null}');

-- deleting a finished job deletes its attempts; since 1.1 its race log stays (I10)
SELECT count(*) FROM idemjob.attempts WHERE job_id = :'r';
DELETE FROM idemjob.jobs WHERE id = :'r';
SELECT count(*) FROM idemjob.attempts WHERE job_id = :'r';
SELECT count(*) FROM idemjob.race_log WHERE job_id = :'r';
-- and the race log alone may be pruned
DELETE FROM idemjob.race_log WHERE attempt_id = :'c2';
-- a loser retried after pruning answers from the job
SELECT outcome, winner_attempt_id = :'c1' AS names_c1 FROM idemjob.complete_attempt(:'c2', '{"n": 2}');
