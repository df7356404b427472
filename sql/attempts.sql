-- attempts: start, in doubt, unknown, cancel, fail, expire
\set VERBOSITY sqlstate

SELECT job_id AS j FROM idemjob.submit('att', 'job-1', 'summarize', '{"doc": 1}', 'primary-ai') \gset

-- the first attempt: number 1, started, read_version 0, on the job's provider
SELECT id AS a1 FROM idemjob.start_attempt(:'j', worker => 'w1', timeout => '30 seconds') \gset
SELECT attempt_no, provider, state, read_version, worker, owner_id,
       deadline = started_at + interval '30 seconds' AS deadline_ok, finished_at IS NULL AS open
  FROM idemjob.attempts WHERE id = :'a1';
SELECT state, attempt_count, version FROM idemjob.jobs WHERE id = :'j';

-- no new attempt while one is in doubt: IJ002
SELECT * FROM idemjob.start_attempt(:'j');
SELECT * FROM idemjob.start_attempt(:'j', worker => 'w2');
-- I7: the same worker on the same provider gets its own attempt back
SELECT id = :'a1' AS same_attempt, state FROM idemjob.start_attempt(:'j', worker => 'w1');
SELECT id = :'a1' AS same_attempt FROM idemjob.start_attempt(:'j', 'primary-ai', NULL, 'w1');
SELECT count(*) FROM idemjob.attempts WHERE job_id = :'j';

-- a timeout makes the attempt unknown, never failed; the job is in doubt
SELECT state, error FROM idemjob.mark_unknown(:'a1');
SELECT state FROM idemjob.jobs WHERE id = :'j';
-- repeated: the row as stored, even with another reason
SELECT state, error FROM idemjob.mark_unknown(:'a1', 'connection lost');
-- still blocked
SELECT * FROM idemjob.start_attempt(:'j');
-- the worker that lost the answer still learns its attempt
SELECT id = :'a1' AS same_attempt, state FROM idemjob.start_attempt(:'j', worker => 'w1');

-- out-of-band resolution: cancel frees the job
SELECT state, error, finished_at IS NOT NULL AS finished FROM idemjob.cancel_attempt(:'a1', 'operator: provider down');
SELECT state, version FROM idemjob.jobs WHERE id = :'j';
SELECT state, error FROM idemjob.cancel_attempt(:'a1', 'another reason');
-- a cancelled attempt cannot become unknown or failed by a call
SELECT * FROM idemjob.mark_unknown(:'a1');
SELECT * FROM idemjob.fail_attempt(:'a1', '{"code": "x"}');

-- attempt 2 starts with the job's version
SELECT id AS a2 FROM idemjob.start_attempt(:'j', timeout => '1 hour') \gset
SELECT attempt_no, state, read_version FROM idemjob.attempts WHERE id = :'a2';

-- a retryable failure frees the job; NULL error is {"code": "failed"}
SELECT state, error FROM idemjob.fail_attempt(:'a2');
SELECT state, version FROM idemjob.jobs WHERE id = :'j';
SELECT state, error FROM idemjob.fail_attempt(:'a2', '{"code": "other"}', false);
SELECT state, version FROM idemjob.jobs WHERE id = :'j';
SELECT * FROM idemjob.mark_unknown(:'a2');
SELECT * FROM idemjob.cancel_attempt(:'a2', 'too late');

-- a non-retryable failure ends the job: failed, version + 1
SELECT id AS a3 FROM idemjob.start_attempt(:'j') \gset
SELECT state, error FROM idemjob.fail_attempt(:'a3', '{"code": "invalid_request", "status": 400}', false);
SELECT state, version, completed_at IS NOT NULL AS completed FROM idemjob.jobs WHERE id = :'j';
SELECT * FROM idemjob.start_attempt(:'j');
SELECT * FROM idemjob.cancel_job(:'j', 'too late');
SELECT attempt_no, state FROM idemjob.attempts WHERE job_id = :'j' ORDER BY attempt_no;

-- fencing: cancel with fence bumps the version; the attempt's result can never win
SELECT job_id AS f FROM idemjob.submit('att', 'job-fence', 'summarize') \gset
SELECT id AS f1 FROM idemjob.start_attempt(:'f') \gset
SELECT state FROM idemjob.cancel_attempt(:'f1', 'stuck', fence => true);
SELECT state, version FROM idemjob.jobs WHERE id = :'f';
-- repeated: nothing more moves
SELECT state FROM idemjob.cancel_attempt(:'f1', 'stuck', fence => true);
SELECT version FROM idemjob.jobs WHERE id = :'f';
SELECT outcome, job_version, winner_attempt_id IS NULL AS no_winner FROM idemjob.complete_attempt(:'f1', '{"late": true}');
SELECT reason, expected_version, found_version, winner_attempt_id IS NULL AS no_winner, late_by IS NULL AS no_late_by
  FROM idemjob.race_log WHERE attempt_id = :'f1';

-- cancelled without a fence, then fenced by a second call
SELECT job_id AS g FROM idemjob.submit('att', 'job-fence-2', 'summarize') \gset
SELECT id AS g1 FROM idemjob.start_attempt(:'g') \gset
SELECT state FROM idemjob.cancel_attempt(:'g1', 'stuck');
SELECT version FROM idemjob.jobs WHERE id = :'g';
SELECT state FROM idemjob.cancel_attempt(:'g1', 'stuck', true);
SELECT version FROM idemjob.jobs WHERE id = :'g';
SELECT state FROM idemjob.cancel_attempt(:'g1', 'stuck', true);
SELECT version FROM idemjob.jobs WHERE id = :'g';

-- expiry: an overdue started attempt is in doubt, and expire_attempts() records it as unknown
SELECT job_id AS e FROM idemjob.submit('att', 'job-expire', 'summarize') \gset
SELECT id AS e1 FROM idemjob.start_attempt(:'e', timeout => '1 millisecond') \gset
SELECT pg_sleep(0.01);
-- still in doubt, still blocked
SELECT * FROM idemjob.start_attempt(:'e');
SELECT idemjob.expire_attempts() >= 1 AS expired_some;
SELECT state, error FROM idemjob.attempts WHERE id = :'e1';
SELECT state FROM idemjob.jobs WHERE id = :'e';
SELECT * FROM idemjob.start_attempt(:'e');
-- nothing left to expire here
SELECT idemjob.expire_attempts() AS expired_again;

-- idemjob.attempt_timeout gives the deadline when timeout is NULL; 0 means none
SELECT job_id AS t FROM idemjob.submit('att', 'job-timeout', 'summarize') \gset
SET idemjob.attempt_timeout = '2min';
SELECT deadline - started_at AS window FROM idemjob.start_attempt(:'t');
SELECT id AS t1 FROM idemjob.attempts WHERE job_id = :'t' \gset
SELECT state FROM idemjob.cancel_attempt(:'t1', 'next');
SET idemjob.attempt_timeout = 0;
SELECT deadline IS NULL AS no_deadline FROM idemjob.start_attempt(:'t');
RESET idemjob.attempt_timeout;
SELECT deadline - started_at AS default_window FROM idemjob.attempts WHERE job_id = :'t' AND attempt_no = 1;

-- cancel_job: terminal, version + 1, attempts keep their state but are fenced
SELECT id AS t2 FROM idemjob.attempts WHERE job_id = :'t' AND attempt_no = 2 \gset
SELECT state, version, cancel_reason, completed_at IS NOT NULL AS completed FROM idemjob.cancel_job(:'t', 'user gave up');
SELECT state FROM idemjob.attempts WHERE id = :'t2';
-- repeated: the same answer
SELECT state, version, cancel_reason FROM idemjob.cancel_job(:'t', 'another reason');
SELECT * FROM idemjob.start_attempt(:'t');
-- the still-started attempt's late result loses, fenced by the version
SELECT outcome, job_version FROM idemjob.complete_attempt(:'t2', '{"x": 1}');
SELECT state, version, result IS NULL AS no_result FROM idemjob.jobs WHERE id = :'t';
SELECT reason FROM idemjob.race_log WHERE attempt_id = :'t2';
-- expiry never moves a final job
SELECT job_id AS u FROM idemjob.submit('att', 'job-final-expire', 'summarize') \gset
SELECT id AS u1 FROM idemjob.start_attempt(:'u', timeout => '1 millisecond') \gset
SELECT state FROM idemjob.cancel_job(:'u', 'stop');
SELECT pg_sleep(0.01);
SELECT idemjob.expire_attempts() >= 1 AS expired_some;
SELECT a.state AS attempt, j.state AS job FROM idemjob.attempts a JOIN idemjob.jobs j ON j.id = a.job_id WHERE a.id = :'u1';
