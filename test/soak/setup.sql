-- test/soak/setup.sql: the soak's history table and call wrappers.
--
-- The wrappers' own reads of idemjob's tables name the row's owner_hash
-- (from the owner or the id, idemjob.owner_hash()), as docs/scaling.md
-- asks of queries on a distributed install: the same soak runs through a
-- Citus coordinator (test/citus/run.sh), where each read goes to one shard.
--
-- Everything here lives in schema "soak" of the test database, never in the
-- extension's schema.  Each wrapper calls one idemjob function and, in the
-- same transaction, writes one soak.history row: what was sent, the answer
-- (or the SQLSTATE of the error), and whether that error is one the mixed
-- workload can legitimately meet.  So a committed call always has its
-- history row, and a call whose transaction rolled back has none (pgbench's
-- own per-transaction log -l counts those).
--
-- Honesty rules for the wrappers:
--   - 40001 and 40P01 are re-raised, so pgbench (--max-tries) retries the
--     whole transaction;
--   - only the SQLSTATEs listed for each function are "expected"; anything
--     else is logged with expected = false and counted as a violation by
--     check.sql (and the transaction still commits, so the run goes on);
--   - expected errors are checked again by check.sql against the final
--     state (an IJ003 must be for a final job, an IJ001 from
--     complete_attempt must follow a different committed result, ...).

\set ON_ERROR_STOP 1
SET client_min_messages = warning;

DROP SCHEMA IF EXISTS soak CASCADE;
CREATE SCHEMA soak;

CREATE TABLE soak.history (
	seq				bigserial PRIMARY KEY,
	phase			text NOT NULL,
	client			int NOT NULL,
	fn				text NOT NULL,
	owner_id		text,
	idem_key		text,
	job_id			uuid,
	attempt_id		uuid,
	sent			jsonb NOT NULL,			-- the arguments as sent
	sqlstate		text NOT NULL,			-- '00000': answered
	expected		boolean NOT NULL,		-- an error the workload may meet
	answer			jsonb,					-- the answer row, as jsonb
	in_doubt_after	int,					-- start_attempt: attempts in doubt on the job, seen in the same transaction
	iso				text NOT NULL DEFAULT pg_catalog.current_setting('transaction_isolation'),
	xid				xid8 NOT NULL DEFAULT pg_catalog.pg_current_xact_id(),
	at				timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp()
);

-- one row per history row's error message, only for unexpected errors
CREATE TABLE soak.unexpected (
	seq				bigint PRIMARY KEY,
	message			text,
	detail			text
);

CREATE FUNCTION soak.log(p_phase text, p_client int, p_fn text, p_owner text,
						 p_key text, p_job uuid, p_attempt uuid, p_sent jsonb,
						 p_state text, p_expected_states text[], p_answer jsonb,
						 p_msg text DEFAULT NULL, p_detail text DEFAULT NULL,
						 p_in_doubt int DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	v_expected boolean := p_state = '00000' OR p_state = ANY (p_expected_states);
	v_seq bigint;
BEGIN
	INSERT INTO soak.history (phase, client, fn, owner_id, idem_key, job_id,
							  attempt_id, sent, sqlstate, expected, answer,
							  in_doubt_after)
	VALUES (p_phase, p_client, p_fn, p_owner, p_key, p_job, p_attempt, p_sent,
			p_state, v_expected, p_answer, p_in_doubt)
	RETURNING seq INTO v_seq;
	IF NOT v_expected THEN
		INSERT INTO soak.unexpected VALUES (v_seq, p_msg, p_detail);
	END IF;
	RETURN p_state;
END;
$$;

-- the params of a key: always the same request, spelled several ways
-- (key order and 1.0 vs 1 do not matter to jsonb equality)
CREATE FUNCTION soak.params(p_key text, p_variant int)
RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
	SELECT CASE p_variant % 2
		WHEN 0 THEN pg_catalog.format('{"k": %s, "n": 1, "tags": ["a", "b"]}', pg_catalog.to_json(p_key))::jsonb
		ELSE pg_catalog.format('{"tags":["a","b"],  "n": 1.0, "k": %s}', pg_catalog.to_json(p_key))::jsonb
	END
$$;

--
-- submit
--
CREATE FUNCTION soak.submit(p_phase text, p_client int, p_owner text,
							p_key text, p_intent text, p_variant int,
							p_max int DEFAULT NULL, p_expect text[] DEFAULT '{}')
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	v_params jsonb := soak.params(p_key, p_variant);
	-- provider NULL means idemjob.default_provider ("default"): the same request
	v_provider text := CASE WHEN p_variant / 2 % 2 = 0 THEN NULL ELSE 'default' END;
	v_answer jsonb;
	v_state text := '00000';
	v_msg text;
	v_detail text;
BEGIN
	BEGIN
		SELECT pg_catalog.to_jsonb(s) INTO v_answer
		FROM idemjob.submit(p_owner, p_key, p_intent, v_params, v_provider,
							NULL, 0, p_max) s;
	EXCEPTION
		WHEN serialization_failure OR deadlock_detected THEN RAISE;
		WHEN OTHERS THEN
			GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE,
				v_msg = MESSAGE_TEXT, v_detail = PG_EXCEPTION_DETAIL;
	END;
	RETURN soak.log(p_phase, p_client, 'submit', p_owner, p_key,
					(v_answer->>'job_id')::uuid, NULL,
					pg_catalog.jsonb_build_object('intent', p_intent, 'params', v_params,
												  'provider', v_provider, 'max_attempts', p_max),
					v_state, p_expect, v_answer, v_msg, v_detail);
END;
$$;

-- duplicate-ratio phases: with probability dup% a key from a pool of
-- p_pool keys, else a fresh one
CREATE FUNCTION soak.dup(p_phase text, p_client int, p_d int, p_dup int,
						 p_k int, p_u bigint, p_variant int)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	v_key text;
BEGIN
	IF p_d <= p_dup THEN
		v_key := p_phase || '-p' || p_k;
	ELSE
		v_key := p_phase || '-u' || p_client || '-' || p_u;
	END IF;
	RETURN soak.submit(p_phase, p_client, 'o' || (pg_catalog.abs(pg_catalog.hashtext(v_key)) % 4),
					   v_key, 'soak', p_variant);
END;
$$;

--
-- the mixed workload: one call per transaction on a job of a small key
-- space.  Each slot holds a generation; once a slot's job is final, a call
-- on it moves the slot on to a new key (half the time), so new jobs keep
-- coming at a pace set by the calls, not by the clock.  One call in five
-- goes to the slot's previous job: late results, calls on final jobs.
--
CREATE TABLE soak.slots (
	phase	text,
	slot	int,
	gen		int NOT NULL DEFAULT 0,
	PRIMARY KEY (phase, slot)
);

CREATE FUNCTION soak.mixed(p_phase text, p_client int, p_slot int, p_op int,
						   p_r int)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	v_gen int;
	v_key text;
	v_owner text := 'm' || (p_slot % 3);
	v_intent text := CASE WHEN p_slot % 4 = 0 THEN 'soakc' ELSE 'soak' END;
	v_job uuid;
	v_att uuid;
	v_answer jsonb;
	v_sent jsonb;
	v_state text := '00000';
	v_msg text;
	v_detail text;
	v_fn text;
	v_expect text[];
	v_in_doubt int;
	v_provider text;
	v_timeout interval;
	v_result jsonb;
BEGIN
	SELECT gen INTO v_gen FROM soak.slots WHERE phase = p_phase AND slot = p_slot;
	IF NOT FOUND THEN
		INSERT INTO soak.slots VALUES (p_phase, p_slot) ON CONFLICT DO NOTHING;
		v_gen := 0;
	END IF;
	IF p_r % 5 = 0 AND v_gen > 0 THEN
		v_gen := v_gen - 1;
	ELSIF p_r % 2 = 0 AND EXISTS (
		SELECT 1 FROM idemjob.jobs
		WHERE owner_hash = idemjob.owner_hash(v_owner) AND owner_id = v_owner
		AND idempotency_key = p_phase || '-s' || p_slot || '-g' || v_gen
		AND state IN ('succeeded', 'failed', 'cancelled')) THEN
		UPDATE soak.slots SET gen = gen + 1
		WHERE phase = p_phase AND slot = p_slot AND gen = v_gen;
		v_gen := v_gen + 1;
	END IF;
	v_key := p_phase || '-s' || p_slot || '-g' || v_gen;

	SELECT id INTO v_job FROM idemjob.jobs
	WHERE owner_hash = idemjob.owner_hash(v_owner) AND owner_id = v_owner
	  AND idempotency_key = v_key;

	IF p_op <= 15 OR v_job IS NULL THEN
		RETURN soak.submit(p_phase, p_client, v_owner, v_key, v_intent, p_r);
	END IF;

	IF p_op > 94 THEN
		-- a reader: what is committed now (checked against the end state)
		v_fn := 'read';
		SELECT pg_catalog.jsonb_build_object('state', state, 'version', version,
			'completed_by', completed_by, 'result', result)
		INTO v_answer FROM idemjob.jobs
		WHERE owner_hash = idemjob.owner_hash(v_job) AND id = v_job;
		RETURN soak.log(p_phase, p_client, v_fn, v_owner, v_key, v_job, NULL,
						'{}', '00000', '{}', v_answer);
	END IF;

	IF p_op > 90 THEN
		v_fn := 'expire_attempts';
		v_sent := '{}';
		v_expect := '{}';
		BEGIN
			v_answer := pg_catalog.to_jsonb(idemjob.expire_attempts());
		EXCEPTION
			WHEN serialization_failure OR deadlock_detected THEN RAISE;
			WHEN OTHERS THEN
				GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE,
					v_msg = MESSAGE_TEXT, v_detail = PG_EXCEPTION_DETAIL;
		END;
		RETURN soak.log(p_phase, p_client, v_fn, v_owner, v_key, NULL, NULL,
						v_sent, v_state, v_expect, v_answer, v_msg, v_detail);
	END IF;

	IF p_op > 86 THEN
		v_fn := 'cancel_job';
		v_sent := pg_catalog.jsonb_build_object('reason', 'soak ' || p_r);
		v_expect := '{IJ003}';
		BEGIN
			SELECT pg_catalog.to_jsonb(j) INTO v_answer
			FROM idemjob.cancel_job(v_job, 'soak ' || p_r) j;
		EXCEPTION
			WHEN serialization_failure OR deadlock_detected THEN RAISE;
			WHEN OTHERS THEN
				GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE,
					v_msg = MESSAGE_TEXT, v_detail = PG_EXCEPTION_DETAIL;
		END;
		RETURN soak.log(p_phase, p_client, v_fn, v_owner, v_key, v_job, NULL,
						v_sent, v_state, v_expect, v_answer, v_msg, v_detail);
	END IF;

	-- the other calls work on an attempt; with none, start one
	IF p_op > 35 THEN
		IF p_op <= 60 AND p_r % 10 < 3 THEN
			SELECT id INTO v_att FROM idemjob.attempts
			WHERE owner_hash = idemjob.owner_hash(v_job) AND job_id = v_job
			ORDER BY pg_catalog.random() LIMIT 1;
		ELSE
			SELECT id INTO v_att FROM idemjob.attempts
			WHERE owner_hash = idemjob.owner_hash(v_job) AND job_id = v_job
			ORDER BY attempt_no DESC LIMIT 1;
		END IF;
	END IF;

	IF p_op <= 35 OR v_att IS NULL THEN
		v_fn := 'start_attempt';
		v_provider := CASE p_r % 20 WHEN 0 THEN 'alt' WHEN 1 THEN 'rogue' END;
		v_timeout := CASE p_r % 10 WHEN 0 THEN interval '50 ms' WHEN 1 THEN interval '1 s' END;
		v_sent := pg_catalog.jsonb_build_object('provider', v_provider,
			'timeout', v_timeout, 'worker', 'w' || p_client);
		v_expect := '{IJ002,IJ003,IJ004}';
		BEGIN
			SELECT pg_catalog.to_jsonb(a) INTO v_answer
			FROM idemjob.start_attempt(v_job, v_provider, v_timeout, 'w' || p_client) a;
			SELECT pg_catalog.count(*) INTO v_in_doubt FROM idemjob.attempts
			WHERE owner_hash = idemjob.owner_hash(v_job) AND job_id = v_job
			  AND state IN ('started', 'unknown');
		EXCEPTION
			WHEN serialization_failure OR deadlock_detected THEN RAISE;
			WHEN OTHERS THEN
				GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE,
					v_msg = MESSAGE_TEXT, v_detail = PG_EXCEPTION_DETAIL;
		END;
		RETURN soak.log(p_phase, p_client, v_fn, v_owner, v_key, v_job,
						(v_answer->>'id')::uuid, v_sent, v_state, v_expect,
						v_answer, v_msg, v_detail, v_in_doubt);
	END IF;

	IF p_op <= 60 THEN
		v_fn := 'complete_attempt';
		-- the same attempt may be completed again: with the same result
		-- (v) it is a retry (I7), with the other one it is IJ001
		v_result := pg_catalog.jsonb_build_object('a', v_att, 'v', CASE WHEN p_r % 10 = 7 THEN 1 ELSE 0 END,
			'pad', pg_catalog.repeat('x', p_r % 300), 'n', 1.50);
		IF v_intent = 'soakc' AND p_r % 10 = 3 THEN
			v_result := v_result || '{"bad": true}';	-- breaks the contract
		END IF;
		v_sent := pg_catalog.jsonb_build_object('result', v_result);
		v_expect := '{IJ001,IJ005}';
		BEGIN
			SELECT pg_catalog.to_jsonb(c) INTO v_answer
			FROM idemjob.complete_attempt(v_att, v_result) c;
		EXCEPTION
			WHEN serialization_failure OR deadlock_detected THEN RAISE;
			WHEN OTHERS THEN
				GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE,
					v_msg = MESSAGE_TEXT, v_detail = PG_EXCEPTION_DETAIL;
		END;
	ELSIF p_op <= 68 THEN
		v_fn := 'fail_attempt';
		v_sent := pg_catalog.jsonb_build_object('error',
			pg_catalog.jsonb_build_object('code', 'soak', 'r', p_r), 'retryable', p_r % 5 <> 0);
		v_expect := '{IJ005}';
		BEGIN
			SELECT pg_catalog.to_jsonb(a) INTO v_answer
			FROM idemjob.fail_attempt(v_att, v_sent->'error', p_r % 5 <> 0) a;
		EXCEPTION
			WHEN serialization_failure OR deadlock_detected THEN RAISE;
			WHEN OTHERS THEN
				GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE,
					v_msg = MESSAGE_TEXT, v_detail = PG_EXCEPTION_DETAIL;
		END;
	ELSIF p_op <= 76 THEN
		v_fn := 'mark_unknown';
		v_sent := pg_catalog.jsonb_build_object('reason', 'timeout ' || p_r);
		v_expect := '{IJ005}';
		BEGIN
			SELECT pg_catalog.to_jsonb(a) INTO v_answer
			FROM idemjob.mark_unknown(v_att, 'timeout ' || p_r) a;
		EXCEPTION
			WHEN serialization_failure OR deadlock_detected THEN RAISE;
			WHEN OTHERS THEN
				GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE,
					v_msg = MESSAGE_TEXT, v_detail = PG_EXCEPTION_DETAIL;
		END;
	ELSE
		v_fn := 'cancel_attempt';
		v_sent := pg_catalog.jsonb_build_object('reason', 'out of band ' || p_r,
			'fence', p_r % 2 = 0);
		v_expect := '{IJ005}';
		BEGIN
			SELECT pg_catalog.to_jsonb(a) INTO v_answer
			FROM idemjob.cancel_attempt(v_att, 'out of band ' || p_r, p_r % 2 = 0) a;
		EXCEPTION
			WHEN serialization_failure OR deadlock_detected THEN RAISE;
			WHEN OTHERS THEN
				GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE,
					v_msg = MESSAGE_TEXT, v_detail = PG_EXCEPTION_DETAIL;
		END;
	END IF;

	RETURN soak.log(p_phase, p_client, v_fn, v_owner, v_key, v_job, v_att,
					v_sent, v_state, v_expect, v_answer, v_msg, v_detail);
END;
$$;

-- the failover intent: an output contract that refuses a "bad" key, and one
-- certified failover provider ("alt"); "rogue" is never certified
SELECT idemjob.define_contract('soakc',
	'{"type": "object", "properties": {"bad": false}}');
SELECT idemjob.certify_provider('soakc', 'alt', '{"suite": "soak"}');

--
-- the worker phases (work, work_purge): one call per transaction.  A client
-- claims a job (timeout 200 ms) and picks what happens to it; its next
-- transaction does it (soak.held): complete (won), fail retryable, fail
-- non-retryable, mark_unknown and later complete (late result), or nothing
-- (the attempt expires: client 0 runs expire_attempts, and any client may
-- complete an unknown attempt as the late result).  Some calls submit new
-- jobs (intent "soakw", max_attempts NULL, 2 or 3 by key).  In work_purge,
-- client 0 also purges and submits replay keys of the work phase.
--
CREATE TABLE soak.held (
	phase		text,
	client		int,
	attempt_id	uuid NOT NULL,
	job_id		uuid NOT NULL,
	action		text NOT NULL,
	PRIMARY KEY (phase, client)
);

-- the worker phases that have purged (soak.work purges at least once)
CREATE TABLE soak.purged (phase text PRIMARY KEY);

-- the settings of the worker phases (run.sh sets them on the database)
CREATE TABLE soak.conf (
	retry_backoff		interval NOT NULL,
	retry_backoff_max	interval NOT NULL,
	max_attempts		int NOT NULL
);
INSERT INTO soak.conf VALUES ('10 ms', '100 ms', 4);

-- one claim, logged; returns the attempt (NULL: nothing due)
CREATE FUNCTION soak.claim_one(p_phase text, p_client int)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
	v_answer jsonb;
	v_state text := '00000';
	v_msg text;
	v_detail text;
BEGIN
	BEGIN
		SELECT pg_catalog.to_jsonb(c) INTO v_answer
		FROM idemjob.claim('w' || p_client, '{soakw}', 1, interval '200 ms') c;
	EXCEPTION
		WHEN serialization_failure OR deadlock_detected THEN RAISE;
		WHEN OTHERS THEN
			GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE,
				v_msg = MESSAGE_TEXT, v_detail = PG_EXCEPTION_DETAIL;
	END;
	PERFORM soak.log(p_phase, p_client, 'claim', v_answer->>'owner_id', NULL,
					 (v_answer->>'job_id')::uuid, (v_answer->>'attempt_id')::uuid,
					 '{"timeout": "200 ms"}', v_state, '{}', v_answer, v_msg, v_detail);
	RETURN v_answer;
END;
$$;

-- an attempt's result: one per attempt, whoever sends it
CREATE FUNCTION soak.work_result(p_att uuid)
RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
	SELECT pg_catalog.jsonb_build_object('a', p_att, 'w', 1)
$$;

CREATE FUNCTION soak.work(p_phase text, p_client int, p_op int, p_r int,
						  p_keys int, p_purge boolean)
RETURNS text
LANGUAGE plpgsql
-- the settings of soak.conf for every call, also through a pooler whose
-- server connections predate run.sh's ALTER DATABASE
SET idemjob.retry_backoff = '10ms'
SET idemjob.retry_backoff_max = '100ms'
SET idemjob.max_attempts = 4
AS $$
DECLARE
	h soak.held;
	v_answer jsonb;
	v_state text := '00000';
	v_msg text;
	v_detail text;
	v_fn text;
	v_sent jsonb;
	v_att uuid;
	v_job uuid;
	v_key text;
	v_base text;
BEGIN
	DELETE FROM soak.held WHERE phase = p_phase AND client = p_client
	RETURNING * INTO h;
	IF h.attempt_id IS NOT NULL THEN
		v_att := h.attempt_id;
		BEGIN
			IF h.action IN ('complete', 'late') THEN
				v_fn := 'complete_attempt';
				v_sent := pg_catalog.jsonb_build_object('result', soak.work_result(v_att));
				SELECT pg_catalog.to_jsonb(c) INTO v_answer
				FROM idemjob.complete_attempt(v_att, soak.work_result(v_att)) c;
			ELSIF h.action IN ('fail_r', 'fail_n') THEN
				v_fn := 'fail_attempt';
				v_sent := pg_catalog.jsonb_build_object('error',
					pg_catalog.jsonb_build_object('code', 'soak', 'r', p_r),
					'retryable', h.action = 'fail_r');
				SELECT pg_catalog.to_jsonb(a) INTO v_answer
				FROM idemjob.fail_attempt(v_att, v_sent->'error', h.action = 'fail_r') a;
			ELSE
				v_fn := 'mark_unknown';
				v_sent := '{"reason": "soak timeout"}';
				SELECT pg_catalog.to_jsonb(a) INTO v_answer
				FROM idemjob.mark_unknown(v_att, 'soak timeout') a;
				-- the late result comes in a later transaction
				INSERT INTO soak.held VALUES (p_phase, p_client, v_att, h.job_id, 'late');
			END IF;
		EXCEPTION
			WHEN serialization_failure OR deadlock_detected THEN RAISE;
			WHEN OTHERS THEN
				GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE,
					v_msg = MESSAGE_TEXT, v_detail = PG_EXCEPTION_DETAIL;
		END;
		-- IJ005: another client resolved it first; IJ006: purged since
		RETURN soak.log(p_phase, p_client, v_fn, NULL, NULL, h.job_id, v_att,
						v_sent, v_state, '{IJ005,IJ006}', v_answer, v_msg, v_detail);
	END IF;

	-- purges: 6 % of client 0's fresh calls, and always its first one of
	-- the phase (the checker's self-test needs purged jobs, and a short or
	-- slow run may otherwise draw none)
	IF p_purge AND p_client = 0
	   AND (p_op <= 6 OR NOT EXISTS (SELECT FROM soak.purged WHERE phase = p_phase)) THEN
		INSERT INTO soak.purged VALUES (p_phase) ON CONFLICT DO NOTHING;
		v_fn := 'purge';
		v_sent := '{"older_than": "0 seconds", "max_jobs": 50}';
		BEGIN
			v_answer := pg_catalog.to_jsonb(idemjob.purge('0 seconds', 50));
		EXCEPTION
			WHEN serialization_failure OR deadlock_detected THEN RAISE;
			WHEN OTHERS THEN
				GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE,
					v_msg = MESSAGE_TEXT, v_detail = PG_EXCEPTION_DETAIL;
		END;
		RETURN soak.log(p_phase, p_client, v_fn, NULL, NULL, NULL, NULL,
						v_sent, v_state, '{}', v_answer, v_msg, v_detail);
	END IF;

	IF p_client = 0 AND p_op <= 16 THEN
		v_fn := 'expire_attempts';
		BEGIN
			v_answer := pg_catalog.to_jsonb(idemjob.expire_attempts());
		EXCEPTION
			WHEN serialization_failure OR deadlock_detected THEN RAISE;
			WHEN OTHERS THEN
				GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE,
					v_msg = MESSAGE_TEXT, v_detail = PG_EXCEPTION_DETAIL;
		END;
		RETURN soak.log(p_phase, p_client, v_fn, NULL, NULL, NULL, NULL,
						'{}', v_state, '{}', v_answer, v_msg, v_detail);
	END IF;

	IF p_op <= 10 THEN
		-- an attempt in doubt (expired, or its worker gone) is resolved out
		-- of band (cancel_attempt, a quarter of them fenced), or its late
		-- result arrives; so does the late result of a cancelled one (it
		-- may still win, or lose to the attempt claimed after it)
		SELECT a.id, a.job_id INTO v_att, v_job
		FROM idemjob.attempts a
		JOIN idemjob.jobs j ON j.owner_hash = a.owner_hash AND j.id = a.job_id
		WHERE a.state IN ('unknown', 'cancelled') AND j.intent = 'soakw'
		  AND (a.state = 'cancelled') = (p_r % 3 = 0)
		ORDER BY pg_catalog.random() LIMIT 1;
		IF v_att IS NOT NULL AND p_r % 3 = 1 THEN
			v_fn := 'cancel_attempt';
			v_sent := pg_catalog.jsonb_build_object('reason', 'soak resolve', 'fence', p_r % 4 = 1);
			BEGIN
				SELECT pg_catalog.to_jsonb(a) INTO v_answer
				FROM idemjob.cancel_attempt(v_att, 'soak resolve', p_r % 4 = 1) a;
			EXCEPTION
				WHEN serialization_failure OR deadlock_detected THEN RAISE;
				WHEN OTHERS THEN
					GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE,
						v_msg = MESSAGE_TEXT, v_detail = PG_EXCEPTION_DETAIL;
			END;
			RETURN soak.log(p_phase, p_client, v_fn, NULL, NULL, v_job, v_att,
							v_sent, v_state, '{IJ005,IJ006}', v_answer, v_msg, v_detail);
		ELSIF v_att IS NOT NULL THEN
			v_fn := 'complete_attempt';
			BEGIN
				SELECT pg_catalog.to_jsonb(c) INTO v_answer
				FROM idemjob.complete_attempt(v_att, soak.work_result(v_att)) c;
			EXCEPTION
				WHEN serialization_failure OR deadlock_detected THEN RAISE;
				WHEN OTHERS THEN
					GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE,
						v_msg = MESSAGE_TEXT, v_detail = PG_EXCEPTION_DETAIL;
			END;
			RETURN soak.log(p_phase, p_client, v_fn, NULL, NULL, v_job, v_att,
							pg_catalog.jsonb_build_object('result', soak.work_result(v_att)),
							v_state, '{IJ005,IJ006}', v_answer, v_msg, v_detail);
		END IF;
	END IF;

	IF p_op <= 30 THEN
		-- a key of this phase (new or a duplicate), or in work_purge half
		-- the time a key of the work phase, which may have been purged
		v_base := CASE WHEN p_purge AND p_r % 2 = 0 THEN 'work' ELSE p_phase END;
		v_key := v_base || '-k' || (p_r % p_keys);
		RETURN soak.submit(p_phase, p_client, 'w' || (pg_catalog.abs(pg_catalog.hashtext(v_key)) % 3),
						   v_key, 'soakw', p_r,
						   CASE pg_catalog.abs(pg_catalog.hashtext(v_key || 'm')) % 3
						   WHEN 0 THEN NULL ELSE pg_catalog.abs(pg_catalog.hashtext(v_key || 'm')) % 3 + 1 END,
						   CASE WHEN p_purge THEN '{IJ007}'::text[] ELSE '{}' END);
	END IF;

	v_answer := soak.claim_one(p_phase, p_client);
	IF v_answer IS NOT NULL AND p_r % 10 < 8 THEN
		INSERT INTO soak.held VALUES (p_phase, p_client, (v_answer->>'attempt_id')::uuid,
			(v_answer->>'job_id')::uuid,
			CASE p_r % 10 WHEN 4 THEN 'fail_r' WHEN 5 THEN 'fail_r' WHEN 6 THEN 'fail_n'
						  WHEN 7 THEN 'unknown' ELSE 'complete' END);
	END IF;
	RETURN 'claim';
END;
$$;

-- after the worker phases: claim everything due (nothing may be left)
CREATE FUNCTION soak.drain(p_phase text)
RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
	n int := 0;
BEGIN
	WHILE soak.claim_one(p_phase, 0) IS NOT NULL AND n < 100000 LOOP
		n := n + 1;
	END LOOP;
	RETURN n;
END;
$$;
