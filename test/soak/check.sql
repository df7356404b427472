-- test/soak/check.sql: the history checker.
--
-- Reads soak.history (every committed call and its answer) and the final
-- state of idemjob's tables, and records one row per check in
-- soak_check(check_name, violations, detail).  run.sh prints them and exits
-- non-zero when any check has violations.  Each check is written so that
-- it can fail: it compares what clients were told with what is stored.

\set ON_ERROR_STOP 1
-- one transaction (temporary tables dropped at commit): the checker runs
-- unchanged through a transaction pooler; selftest.sql runs it inside its
-- own transaction, which it rolls back
\if :{?in_selftest}
\else
BEGIN;
\endif
SET LOCAL client_min_messages = warning;

CREATE TEMP TABLE soak_check (
	ord			serial,
	check_name	text NOT NULL,
	violations	bigint NOT NULL,
	detail		text
) ON COMMIT DROP;

CREATE INDEX IF NOT EXISTS history_attempt_seq ON soak.history (attempt_id, seq);
CREATE INDEX IF NOT EXISTS history_job ON soak.history (job_id);
ANALYZE soak.history;

-- committed, answered calls
CREATE TEMP TABLE ok ON COMMIT DROP AS
	SELECT * FROM soak.history WHERE sqlstate = '00000';
CREATE INDEX ON ok (attempt_id, seq);
CREATE INDEX ON ok (job_id);
CREATE INDEX ON ok (owner_id, idem_key);
ANALYZE ok;

-- ---------------------------------------------------------------- I1 / submit
INSERT INTO soak_check (check_name, violations)
SELECT 'one job per (owner, key)', count(*)
FROM (SELECT owner_id, idempotency_key FROM idemjob.jobs
	  GROUP BY 1, 2 HAVING count(*) > 1) d;

-- (or, for a purged job, the key is spent with that job id)
INSERT INTO soak_check (check_name, violations)
SELECT 'every submit of a key got that key''s job id', count(*)
FROM ok h
WHERE h.fn = 'submit'
  AND NOT EXISTS (SELECT 1 FROM idemjob.jobs j
				  WHERE j.owner_id = h.owner_id AND j.idempotency_key = h.idem_key
					AND j.id = h.job_id)
  AND NOT EXISTS (SELECT 1 FROM idemjob.spent_keys s
				  WHERE s.owner_id = h.owner_id AND s.idempotency_key = h.idem_key
					AND s.job_id = h.job_id);

INSERT INTO soak_check (check_name, violations)
SELECT 'every job created by exactly one committed submit (created = true)', count(*)
FROM idemjob.jobs j
LEFT JOIN (SELECT job_id, count(*) FILTER (WHERE (answer->>'created')::boolean) AS n
		   FROM ok WHERE fn = 'submit' GROUP BY job_id) c ON c.job_id = j.id
WHERE coalesce(c.n, 0) <> 1;

INSERT INTO soak_check (check_name, violations)
SELECT 'submit answers match the job (state, version, result as committed)', count(*)
FROM ok h JOIN idemjob.jobs j ON j.id = h.job_id
WHERE h.fn = 'submit'
  AND ((h.answer->>'created')::boolean AND (h.answer->>'version')::bigint <> 0
	   OR (h.answer->>'version')::bigint > j.version
	   OR (h.answer->'result' <> 'null' AND h.answer->'result' IS DISTINCT FROM j.result));

-- ---------------------------------------------------------------- I3
INSERT INTO soak_check (check_name, violations)
SELECT 'never two in-doubt attempts per job (seen at each start_attempt)', count(*)
FROM ok WHERE fn = 'start_attempt' AND in_doubt_after IS DISTINCT FROM 1;

INSERT INTO soak_check (check_name, violations)
SELECT 'never two in-doubt attempts per job (final state)', count(*)
FROM (SELECT job_id FROM idemjob.attempts WHERE state IN ('started', 'unknown')
	  GROUP BY job_id HAVING count(*) > 1) d;

INSERT INTO soak_check (check_name, violations, detail)
SELECT 'job state agrees with its attempts', count(*),
	   string_agg(DISTINCT x.state::text || '/' || x.why, ', ')
FROM (
	SELECT j.id, j.state,
		CASE
		WHEN j.state = 'pending' AND d.n > 0 THEN 'pending with an attempt in doubt'
		WHEN j.state = 'running' AND NOT (d.n = 1 AND d.started = 1) THEN 'running without a started attempt'
		WHEN j.state = 'in_doubt' AND NOT (d.n = 1 AND d.unknown = 1) THEN 'in_doubt without an unknown attempt'
		WHEN j.state = 'succeeded' AND (j.completed_by IS NULL OR j.result IS NULL) THEN 'succeeded without a result'
		WHEN j.state <> 'succeeded' AND j.completed_by IS NOT NULL THEN 'result on a job not succeeded'
		WHEN j.state IN ('succeeded', 'failed', 'cancelled') AND j.completed_at IS NULL THEN 'final without completed_at'
		WHEN j.attempt_count <> a.n OR a.maxno <> a.n THEN 'attempt_count or numbering'
		END AS why
	FROM idemjob.jobs j
	LEFT JOIN LATERAL (SELECT count(*) AS n,
							  count(*) FILTER (WHERE state = 'started') AS started,
							  count(*) FILTER (WHERE state = 'unknown') AS unknown
					   FROM idemjob.attempts WHERE job_id = j.id AND state IN ('started', 'unknown')) d ON true
	LEFT JOIN LATERAL (SELECT count(*) AS n, coalesce(max(attempt_no), 0) AS maxno
					   FROM idemjob.attempts WHERE job_id = j.id) a ON true
) x WHERE x.why IS NOT NULL;

-- ---------------------------------------------------------------- I5: one winner
INSERT INTO soak_check (check_name, violations)
SELECT 'at most one won attempt per job', count(*)
FROM (SELECT job_id FROM ok WHERE fn = 'complete_attempt' AND answer->>'outcome' = 'won'
	  GROUP BY job_id HAVING count(DISTINCT attempt_id) > 1) d;

INSERT INTO soak_check (check_name, violations)
SELECT 'at most one succeeded attempt per job', count(*)
FROM (SELECT job_id FROM idemjob.attempts WHERE state = 'succeeded'
	  GROUP BY job_id HAVING count(*) > 1) d;

INSERT INTO soak_check (check_name, violations)
SELECT 'completed_by is the attempt that was told "won"', count(*)
FROM (
	SELECT h.attempt_id FROM ok h JOIN idemjob.jobs j ON j.id = h.job_id
	WHERE h.fn = 'complete_attempt' AND h.answer->>'outcome' = 'won'
	  AND (j.completed_by IS DISTINCT FROM h.attempt_id
		   OR (h.answer->>'winner_attempt_id')::uuid IS DISTINCT FROM h.attempt_id)
	UNION ALL
	-- and every stored winner was told so by a committed call
	SELECT j.completed_by FROM idemjob.jobs j
	WHERE j.completed_by IS NOT NULL
	  AND NOT EXISTS (SELECT 1 FROM ok h WHERE h.fn = 'complete_attempt'
					  AND h.attempt_id = j.completed_by AND h.answer->>'outcome' = 'won')
	UNION ALL
	SELECT a.id FROM idemjob.attempts a JOIN idemjob.jobs j ON j.id = a.job_id
	WHERE a.state = 'succeeded' AND j.completed_by IS DISTINCT FROM a.id
) d;

INSERT INTO soak_check (check_name, violations)
SELECT 'stored result byte-identical to what the winner sent', count(*)
FROM idemjob.jobs j
JOIN LATERAL (SELECT h.sent->'result' AS sent FROM ok h
			  WHERE h.fn = 'complete_attempt' AND h.attempt_id = j.completed_by
				AND h.answer->>'outcome' = 'won'
			  ORDER BY h.seq LIMIT 1) w ON true
WHERE j.result::text IS DISTINCT FROM w.sent::text
   OR jsonb_typeof(j.result) IS DISTINCT FROM jsonb_typeof(w.sent);

-- ---------------------------------------------------------------- losers and the race log
INSERT INTO soak_check (check_name, violations)
SELECT 'every superseded or rejected attempt has exactly one race_log row', count(*)
FROM idemjob.attempts a
LEFT JOIN (SELECT attempt_id, count(*) AS n FROM idemjob.race_log GROUP BY 1) r
	ON r.attempt_id = a.id
WHERE (a.state = 'superseded'
	   OR (a.state = 'failed' AND a.error->>'code' = 'contract_violation')) <> (coalesce(r.n, 0) = 1)
   OR coalesce(r.n, 0) > 1;

INSERT INTO soak_check (check_name, violations)
SELECT 'race_log sha256 and size match what the loser sent', count(*)
FROM idemjob.race_log r
LEFT JOIN LATERAL (SELECT h.sent->'result' AS sent FROM ok h
				   WHERE h.fn = 'complete_attempt' AND h.attempt_id = r.attempt_id
					 AND h.answer->>'outcome' IN ('lost', 'rejected')
				   ORDER BY h.seq LIMIT 1) l ON true
WHERE l.sent IS NULL
   OR r.result_sha256 <> sha256(convert_to(l.sent::text, 'UTF8'))
   OR r.result_bytes <> octet_length(l.sent::text);

INSERT INTO soak_check (check_name, violations)
SELECT 'race_log reason, winner and versions consistent', count(*)
FROM idemjob.race_log r JOIN idemjob.jobs j ON j.id = r.job_id
WHERE NOT (
	(r.reason = 'slot_taken' AND r.winner_attempt_id = j.completed_by AND r.late_by >= '0'
		AND r.fenced_at IS NULL)
	OR (r.reason = 'version_moved' AND r.winner_attempt_id IS NULL AND r.late_by IS NULL
		AND r.fenced_at <= r.logged_at)
	OR (r.reason = 'rejected' AND r.late_by IS NULL AND r.fenced_at IS NULL
		AND (r.winner_attempt_id IS NULL OR r.winner_attempt_id = j.completed_by)
		AND r.found_version >= r.expected_version))
   OR (r.reason <> 'rejected' AND r.found_version <= r.expected_version)
   OR r.owner_id <> j.owner_id
   -- since 1.2 the row stands alone: the job's intent and key, both providers
   OR r.intent IS DISTINCT FROM j.intent
   OR r.idempotency_key IS DISTINCT FROM j.idempotency_key
   OR r.winner_provider IS DISTINCT FROM
		(SELECT w.provider FROM idemjob.attempts w WHERE w.id = r.winner_attempt_id);

INSERT INTO soak_check (check_name, violations)
SELECT 'lost/rejected answers agree with the stored attempt', count(*)
FROM ok h JOIN idemjob.attempts a ON a.id = h.attempt_id
LEFT JOIN idemjob.jobs j ON j.id = a.job_id
WHERE h.fn = 'complete_attempt' AND (
	(h.answer->>'outcome' = 'lost' AND (a.state <> 'superseded'
		OR ((h.answer->>'winner_attempt_id') IS NOT NULL
			AND (h.answer->>'winner_attempt_id')::uuid IS DISTINCT FROM j.completed_by)))
	OR (h.answer->>'outcome' = 'rejected' AND (a.state <> 'failed'
		OR a.error->>'code' IS DISTINCT FROM 'contract_violation'
		OR NOT (h.sent->'result' ? 'bad')))
	OR (h.answer->>'outcome' = 'won' AND a.state <> 'succeeded')
	OR (h.sent->'result' ? 'bad' AND h.answer->>'outcome' <> 'rejected'));

-- ---------------------------------------------------------------- no overwrite
INSERT INTO soak_check (check_name, violations)
SELECT 'no committed result ever overwritten (every read saw the final result)', count(*)
FROM ok h JOIN idemjob.jobs j ON j.id = h.job_id
WHERE h.fn = 'read' AND h.answer->'result' <> 'null'
  AND (h.answer->'result' IS DISTINCT FROM j.result
	   OR (h.answer->>'completed_by')::uuid IS DISTINCT FROM j.completed_by
	   OR h.answer->>'state' <> j.state::text);

INSERT INTO soak_check (check_name, violations)
SELECT 'final states never left (reads of a final job saw the final state)', count(*)
FROM ok h JOIN idemjob.jobs j ON j.id = h.job_id
WHERE h.fn IN ('read', 'cancel_job')
  AND h.answer->>'state' IN ('succeeded', 'failed', 'cancelled')
  AND h.answer->>'state' <> j.state::text;

-- ---------------------------------------------------------------- I7 and the expected errors
INSERT INTO soak_check (check_name, violations)
SELECT 'complete_attempt retried: one result per attempt, one answer', count(*)
FROM (SELECT attempt_id FROM ok WHERE fn = 'complete_attempt'
	  GROUP BY attempt_id
	  HAVING count(DISTINCT sent->'result') > 1
		  OR count(DISTINCT answer->>'outcome') > 1
		  OR count(DISTINCT answer->>'winner_attempt_id') > 1) d;

INSERT INTO soak_check (check_name, violations)
SELECT 'IJ001 from complete_attempt only after a different committed result', count(*)
FROM soak.history e
WHERE e.fn = 'complete_attempt' AND e.sqlstate = 'IJ001'
  AND NOT EXISTS (SELECT 1 FROM ok h WHERE h.fn = 'complete_attempt'
				  AND h.attempt_id = e.attempt_id AND h.seq < e.seq
				  AND h.sent->'result' <> e.sent->'result');

INSERT INTO soak_check (check_name, violations)
SELECT 'IJ005 only for transitions the state machine forbids', count(*)
FROM soak.history e JOIN idemjob.attempts a ON a.id = e.attempt_id
WHERE e.sqlstate = 'IJ005' AND NOT (
	-- from failed (fail_attempt's, not a rejected result: that one answers again)
	(e.fn = 'complete_attempt' AND a.state = 'failed'
		AND a.error->>'code' IS DISTINCT FROM 'contract_violation')
	-- from succeeded, superseded or cancelled (which may still end in a result)
	OR (e.fn = 'fail_attempt' AND (a.state IN ('succeeded', 'superseded', 'cancelled')
		OR (a.state = 'failed' AND a.error->>'code' = 'contract_violation')))
	-- from anything but started and unknown
	OR (e.fn = 'mark_unknown' AND a.state IN ('succeeded', 'superseded', 'failed', 'cancelled'))
	-- from a final state
	OR (e.fn = 'cancel_attempt' AND a.state IN ('succeeded', 'superseded', 'failed'))
);

INSERT INTO soak_check (check_name, violations)
SELECT 'IJ003 only for final jobs', count(*)
FROM soak.history e JOIN idemjob.jobs j ON j.id = e.job_id
WHERE e.sqlstate = 'IJ003'
  AND (j.state NOT IN ('succeeded', 'failed', 'cancelled')
	   OR (e.fn = 'cancel_job' AND j.state = 'cancelled'));

INSERT INTO soak_check (check_name, violations)
SELECT 'IJ004 only for an uncertified failover, and never an attempt on one', count(*)
FROM soak.history e JOIN idemjob.jobs j ON j.id = e.job_id
WHERE e.fn = 'start_attempt' AND (
	(e.sqlstate = 'IJ004' AND NOT (e.sent->>'provider' = 'rogue'
		OR (e.sent->>'provider' = 'alt' AND j.intent <> 'soakc')))
	OR (e.sqlstate = '00000' AND (e.answer->>'provider' IS DISTINCT FROM
		coalesce(e.sent->>'provider', j.provider)
		OR e.answer->>'provider' = 'rogue'
		OR (e.answer->>'provider' = 'alt' AND j.intent <> 'soakc'))));

INSERT INTO soak_check (check_name, violations)
SELECT 'start_attempt gives an existing attempt back only to its own worker', count(*)
FROM (SELECT attempt_id FROM ok WHERE fn = 'start_attempt'
	  GROUP BY attempt_id HAVING count(DISTINCT client) > 1) d;

INSERT INTO soak_check (check_name, violations)
SELECT 'cancel_job answers: cancelled, version moved once', count(*)
FROM ok h JOIN idemjob.jobs j ON j.id = h.job_id
WHERE h.fn = 'cancel_job'
  AND (h.answer->>'state' <> 'cancelled' OR j.state <> 'cancelled'
	   OR (h.answer->>'version')::bigint <> j.version);

INSERT INTO soak_check (check_name, violations, detail)
SELECT 'unexpected errors (none allowed)', count(*),
	   string_agg(DISTINCT h.fn || ':' || h.sqlstate || ' ' || coalesce(u.message, ''), '; ')
FROM soak.history h LEFT JOIN soak.unexpected u ON u.seq = h.seq
WHERE NOT h.expected;

-- ---------------------------------------------------------------- workers (work, work_purge)
-- the in-doubt span of an attempt is [started_at, finished_at) (finished_at
-- is set exactly when it ends; NULL: still in doubt).  An attempt cancelled
-- by cancel_attempt may still send its result later, which moves its
-- finished_at past the cancel: those are left out (the cancel ended the
-- doubt, and the table no longer records when)
INSERT INTO soak_check (check_name, violations, detail)
SELECT 'never two attempts of a job in doubt at once (history of worker jobs)',
	   count(*) FILTER (WHERE b.started_at < coalesce(a.finished_at, 'infinity')
			AND NOT EXISTS (SELECT 1 FROM ok c WHERE c.fn = 'cancel_attempt'
							AND c.attempt_id = a.id)),
	   count(*) || ' pairs of attempts checked'
FROM idemjob.jobs j
JOIN idemjob.attempts a ON a.job_id = j.id
JOIN idemjob.attempts b ON b.job_id = j.id AND b.attempt_no > a.attempt_no
WHERE j.intent = 'soakw';

-- after the drain nothing touched the worker jobs: none may be due
INSERT INTO soak_check (check_name, violations, detail)
SELECT 'no due worker job left unclaimed after the drain', count(*),
	   'queue_stats due: ' || coalesce((SELECT sum(due) FROM idemjob.queue_stats
										WHERE intent = 'soakw'), 0)
FROM idemjob.jobs
WHERE intent = 'soakw' AND state = 'pending' AND run_at <= now();

INSERT INTO soak_check (check_name, violations)
SELECT 'queue_stats agrees: no worker job due', coalesce(sum(due), 0)
FROM idemjob.queue_stats WHERE intent = 'soakw';

-- a failed attempt sent its job back to pending (or ended it); the next
-- attempt (claim only: claim honours run_at) starts no earlier than the
-- backoff after the failure: both times are transaction timestamps, so
-- only 1 ms is allowed for their granularity.  The pairs come from the
-- tables (jobs still there) and from the client log, which outlives
-- purges: fail_attempt answers the attempt row (finished_at), claim
-- answers the deadline (start + the 200 ms timeout)
INSERT INTO soak_check (check_name, violations, detail)
SELECT 'retry backoff honoured (next claim >= failure + backoff x 2^(n-1), capped)',
	   count(*) FILTER (WHERE p.started < p.failed
			+ least(c.retry_backoff * power(2, p.n - 1), c.retry_backoff_max)
			- interval '1 ms'),
	   count(*) || ' retries checked (' || count(*) FILTER (WHERE p.src = 'log') || ' from the log), shortest wait '
	   || coalesce(min(p.started - p.failed)::text, '-')
FROM (
	SELECT 'table' AS src, a.attempt_no AS n, a.finished_at AS failed, b.started_at AS started
	FROM idemjob.jobs j
	JOIN idemjob.attempts a ON a.job_id = j.id AND a.state = 'failed'
	JOIN idemjob.attempts b ON b.job_id = j.id AND b.attempt_no = a.attempt_no + 1
	WHERE j.intent = 'soakw'
	UNION ALL
	SELECT DISTINCT 'log', (f.answer->>'attempt_no')::int, (f.answer->>'finished_at')::timestamptz,
		   (l.answer->>'deadline')::timestamptz - interval '200 ms'
	FROM ok f JOIN ok l ON l.fn = 'claim' AND l.job_id = f.job_id
		AND (l.answer->>'attempt_no')::int = (f.answer->>'attempt_no')::int + 1
	WHERE f.fn = 'fail_attempt' AND f.answer->>'state' = 'failed'
) p, soak.conf c;

-- max_attempts is checked when an attempt fails (a cancel_attempt frees
-- the job without counting), so: no attempt after a failed one numbered
-- max_attempts or more, and no job failed for max_attempts before that
INSERT INTO soak_check (check_name, violations, detail)
SELECT 'max_attempts honoured', count(*),
	   coalesce(string_agg(DISTINCT x.why, ', ') || '; ', '')
	   || (SELECT count(*) FROM idemjob.jobs WHERE intent = 'soakw'
		   AND error->>'code' = 'max_attempts') || ' jobs ended by max_attempts'
FROM (
	SELECT CASE
		WHEN EXISTS (SELECT 1 FROM idemjob.attempts a
					 WHERE a.job_id = j.id AND a.state = 'failed'
					   AND a.attempt_no >= coalesce(j.max_attempts, c.max_attempts)
					   AND a.attempt_no < j.attempt_count)
			THEN 'claimed again after the last allowed failure'
		WHEN j.state = 'pending' AND j.attempt_count >= coalesce(j.max_attempts, c.max_attempts)
			 AND EXISTS (SELECT 1 FROM idemjob.attempts a WHERE a.job_id = j.id
						 AND a.attempt_no = j.attempt_count AND a.state = 'failed')
			THEN 'pending after the last allowed failure'
		WHEN j.state = 'failed' AND j.error->>'code' = 'max_attempts'
			 AND j.attempt_count < coalesce(j.max_attempts, c.max_attempts)
			THEN 'failed for max_attempts before reaching it'
		END AS why
	FROM idemjob.jobs j, soak.conf c WHERE j.intent = 'soakw'
) x WHERE x.why IS NOT NULL;

INSERT INTO soak_check (check_name, violations)
SELECT 'every claimed attempt exists once, on the job claimed, by that worker (or purged)', count(*)
FROM (SELECT attempt_id FROM ok WHERE fn = 'claim' AND attempt_id IS NOT NULL
	  GROUP BY attempt_id HAVING count(*) > 1
	  UNION ALL
	  SELECT h.attempt_id FROM ok h LEFT JOIN idemjob.attempts a ON a.id = h.attempt_id
	  WHERE h.fn = 'claim' AND h.attempt_id IS NOT NULL
		AND (a.id IS NULL AND NOT EXISTS (SELECT 1 FROM idemjob.spent_keys s
										  WHERE s.job_id = h.job_id)
			 OR a.job_id <> h.job_id OR a.worker <> 'w' || h.client)) d;

-- ---------------------------------------------------------------- purge and spent keys
INSERT INTO soak_check (check_name, violations)
SELECT 'no (owner, key) both a job and a spent key', count(*)
FROM idemjob.jobs j JOIN idemjob.spent_keys s
	ON s.owner_id = j.owner_id AND s.idempotency_key = j.idempotency_key;

INSERT INTO soak_check (check_name, violations)
SELECT 'one job id per key ever (answers, jobs, spent keys)', count(*)
FROM (SELECT owner_id, idem_key FROM (
		SELECT owner_id, idem_key, job_id FROM ok WHERE fn = 'submit'
		UNION ALL SELECT owner_id, idempotency_key, id FROM idemjob.jobs
		UNION ALL SELECT owner_id, idempotency_key, job_id FROM idemjob.spent_keys) k
	  GROUP BY 1, 2 HAVING count(DISTINCT job_id) > 1) d;

-- a job a client was given that is gone was purged: its key is spent,
-- and it was final when purged
INSERT INTO soak_check (check_name, violations)
SELECT 'every purged job has its spent key', count(*)
FROM (SELECT DISTINCT owner_id, idem_key, job_id FROM ok
	  WHERE fn = 'submit' AND (answer->>'created')::boolean) h
WHERE NOT EXISTS (SELECT 1 FROM idemjob.jobs j WHERE j.id = h.job_id)
  AND NOT EXISTS (SELECT 1 FROM idemjob.spent_keys s
				  WHERE s.job_id = h.job_id AND s.owner_id = h.owner_id
					AND s.idempotency_key = h.idem_key
					AND s.final_state IN ('succeeded', 'failed', 'cancelled'));

INSERT INTO soak_check (check_name, violations)
SELECT 'IJ007 only for a spent key; never IJ001 for a replay', count(*)
FROM soak.history e
WHERE e.fn = 'submit' AND e.phase LIKE 'work%'
  AND (e.sqlstate = 'IJ001'
	   OR (e.sqlstate = 'IJ007' AND NOT EXISTS (
			SELECT 1 FROM idemjob.spent_keys s
			WHERE s.owner_id = e.owner_id AND s.idempotency_key = e.idem_key)));

INSERT INTO soak_check (check_name, violations)
SELECT 'IJ006 only for attempts of purged jobs', count(*)
FROM soak.history e
WHERE e.sqlstate = 'IJ006'
  AND (EXISTS (SELECT 1 FROM idemjob.attempts a WHERE a.id = e.attempt_id)
	   OR NOT EXISTS (SELECT 1 FROM idemjob.spent_keys s WHERE s.job_id = e.job_id));

-- race-log rows outlive purges: every loser a client was told about has
-- its one row, whether or not its job is still there
INSERT INTO soak_check (check_name, violations)
SELECT 'every lost answer has exactly one race_log row (purged jobs too)', count(*)
FROM (SELECT DISTINCT attempt_id FROM ok
	  WHERE fn = 'complete_attempt' AND answer->>'outcome' = 'lost') h
LEFT JOIN (SELECT attempt_id, count(*) AS n FROM idemjob.race_log GROUP BY 1) r
	ON r.attempt_id = h.attempt_id
WHERE coalesce(r.n, 0) <> 1;

INSERT INTO soak_check (check_name, violations)
SELECT 'every rejected answer has exactly one race_log row (purged jobs too)', count(*)
FROM (SELECT DISTINCT attempt_id FROM ok
	  WHERE fn = 'complete_attempt' AND answer->>'outcome' = 'rejected') h
LEFT JOIN (SELECT attempt_id, count(*) AS n FROM idemjob.race_log
		   WHERE reason = 'rejected' GROUP BY 1) r
	ON r.attempt_id = h.attempt_id
WHERE coalesce(r.n, 0) <> 1;

-- ---------------------------------------------------------------- amcheck
\if :{?snapshot}
\else
\set snapshot f
\endif
\if :snapshot
-- Citus (run.sh): the rows lie in the workers' shards; each worker checks
-- its own (Citus's connection sees them in pg_class), and a check that
-- raises makes that node's answer fail
INSERT INTO soak_check (check_name, violations, detail)
SELECT k.name,
	   sum(CASE WHEN w.success THEN split_part(w.result, ' ', 1)::bigint ELSE 1 END),
	   string_agg(w.nodeport || ': ' || CASE WHEN w.success THEN split_part(w.result, ' ', 2) || ' ' || k.what || ' checked'
											 ELSE w.result END, ', ' ORDER BY w.nodeport)
FROM (VALUES
	(1, 'amcheck bt_index_check(heapallindexed) on every idemjob index', 'indexes', $cmd$
	SELECT count(*) FILTER (WHERE NOT ok) || ' ' || count(*) FROM (
		SELECT (SELECT true FROM (SELECT bt_index_check(c.oid, true)) x) AS ok
		FROM pg_catalog.pg_index i
		JOIN pg_catalog.pg_class c ON c.oid = i.indexrelid
		JOIN pg_catalog.pg_am am ON am.oid = c.relam AND am.amname = 'btree'
		WHERE c.relnamespace = 'idemjob'::regnamespace) x
$cmd$),
	(2, 'amcheck verify_heapam on every idemjob table', 'tables', $cmd$
	SELECT (SELECT count(*) FROM pg_catalog.pg_class c,
				LATERAL verify_heapam(c.oid, check_toast => true) v
			WHERE c.relnamespace = 'idemjob'::regnamespace AND c.relkind = 'r')
		|| ' ' || (SELECT count(*) FROM pg_catalog.pg_class c
				   WHERE c.relnamespace = 'idemjob'::regnamespace AND c.relkind = 'r')
$cmd$)) k(ord, name, what, cmd),
	LATERAL run_command_on_workers(k.cmd) w
GROUP BY k.ord, k.name
ORDER BY k.ord;
\else
INSERT INTO soak_check (check_name, violations, detail)
SELECT 'amcheck bt_index_check(heapallindexed) on every idemjob index',
	   count(*) FILTER (WHERE NOT ok), count(*) || ' indexes checked'
FROM (
	SELECT c.relname,
		   (SELECT true FROM (SELECT bt_index_check(c.oid, true)) x) AS ok
	FROM pg_catalog.pg_index i
	JOIN pg_catalog.pg_class c ON c.oid = i.indexrelid
	JOIN pg_catalog.pg_am am ON am.oid = c.relam AND am.amname = 'btree'
	WHERE c.relnamespace = 'idemjob'::regnamespace
) x;

INSERT INTO soak_check (check_name, violations, detail)
SELECT 'amcheck verify_heapam on every idemjob table',
	   (SELECT count(*) FROM pg_catalog.pg_class c,
			LATERAL verify_heapam(c.oid, check_toast => true) v
		WHERE c.relnamespace = 'idemjob'::regnamespace AND c.relkind = 'r'),
	   (SELECT count(*) FROM pg_catalog.pg_class c
		WHERE c.relnamespace = 'idemjob'::regnamespace AND c.relkind = 'r') || ' tables checked';

\endif

-- ---------------------------------------------------------------- report
\pset format unaligned
\pset tuples_only on
\pset fieldsep '|'
\echo FIGURES
SELECT 'calls', count(*) FROM soak.history;
SELECT 'jobs', count(*) FROM idemjob.jobs;
SELECT 'attempts', count(*) FROM idemjob.attempts;
SELECT 'race_log', count(*) FROM idemjob.race_log;
SELECT 'spent_keys', count(*) FROM idemjob.spent_keys;
SELECT 'race_log of purged jobs', count(*) FROM idemjob.race_log r
WHERE NOT EXISTS (SELECT 1 FROM idemjob.jobs j WHERE j.id = r.job_id);
\echo PHASES
SELECT phase, count(*) AS calls,
	   count(*) FILTER (WHERE fn = 'submit') AS submits,
	   count(*) FILTER (WHERE fn = 'submit' AND (answer->>'created')::boolean) AS created,
	   round(100.0 * (1 - count(*) FILTER (WHERE fn = 'submit' AND (answer->>'created')::boolean)::numeric
			/ nullif(count(*) FILTER (WHERE fn = 'submit'), 0)), 1) AS dup_pct
FROM soak.history GROUP BY phase ORDER BY min(seq);
\echo OUTCOMES
SELECT fn, CASE WHEN sqlstate <> '00000' THEN sqlstate
				WHEN fn = 'complete_attempt' THEN answer->>'outcome'
				WHEN fn = 'claim' THEN CASE WHEN answer IS NULL THEN 'none' ELSE 'claimed' END
				WHEN fn = 'submit' THEN CASE WHEN (answer->>'created')::boolean THEN 'created' ELSE 'existing' END
				ELSE 'ok' END AS outcome,
	   count(*)
FROM soak.history GROUP BY 1, 2 ORDER BY 1, 2;
\echo CHECKS
SELECT check_name, violations, coalesce(detail, '') FROM soak_check ORDER BY ord;
\echo TOTAL
SELECT 'violations', sum(violations) FROM soak_check;
\if :{?in_selftest}
\else
COMMIT;
\endif
