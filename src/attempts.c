/*-------------------------------------------------------------------------
 *
 * attempts.c
 *	  The attempt state machine: start_attempt(), fail_attempt(),
 *	  mark_unknown(), cancel_attempt() and expire_attempts().
 *
 * Attempts: started -> unknown; started/unknown -> succeeded, superseded,
 * failed, cancelled; cancelled -> succeeded, superseded, failed.  Anything
 * else is IJ005.  A call repeated on the state it produced answers with the
 * row as stored (I7).
 *
 * Locking: a function that changes an attempt locks the attempt row first
 * (FOR UPDATE) and its job second, by an UPDATE whose WHERE clause says
 * which job states it may move, so a concurrent change to the job is
 * re-checked after the lock wait.  start_attempt() locks the job alone (it
 * inserts the attempt), so no two functions take the two row locks in
 * opposite orders.
 *
 * start_attempt() takes one statement on the common path: a CTE with the
 * UPDATE of a pending job on its own provider and the INSERT of the
 * attempt.  Anything
 * else (a job in flight, finished or missing, a failover) goes through a
 * locked read that decides the refusal in the contract's order: IJ006,
 * IJ003, IJ004, IJ002.  The partial unique index attempts_one_in_doubt makes
 * a second in-doubt attempt impossible whatever the C code does.
 *
 * src/attempts.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "datatype/timestamp.h"
#include "access/xact.h"
#include "commands/async.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "idemjob.h"

PG_FUNCTION_INFO_V1(idemjob_start_attempt);
PG_FUNCTION_INFO_V1(idemjob_fail_attempt);
PG_FUNCTION_INFO_V1(idemjob_mark_unknown);
PG_FUNCTION_INFO_V1(idemjob_set_retry_policy);
PG_FUNCTION_INFO_V1(idemjob_cancel_attempt);
PG_FUNCTION_INFO_V1(idemjob_expire_attempts);

#define FINAL_JOB_STATES "('{succeeded,failed,cancelled}'::idemjob.job_state[])"

/*
 * The fast path as one statement: the job's UPDATE and the attempt's
 * INSERT (one executor start instead of two).  $1 attempt id, $2 job id,
 * $3 provider (NULL: the job's), $4 worker, $5 deadline.  No row when the
 * job is not a pending job on that provider: nothing was written.
 */
static IjPlan start_fast_insert = {
	"WITH j AS ("
	"  UPDATE idemjob.jobs SET" IJ_JOB_STARTS_SET
	"  WHERE id OPERATOR(pg_catalog.=) $2"
	"  AND state OPERATOR(pg_catalog.=) 'pending'::idemjob.job_state"
	"  AND ($3::pg_catalog.text IS NULL OR provider OPERATOR(pg_catalog.=) $3)"
	"  RETURNING owner_id, provider, version, attempt_count)"
	" INSERT INTO idemjob.attempts"
	" (id, job_id, owner_id, attempt_no, provider, read_version, worker, deadline)"
	" SELECT $1, $2, j.owner_id, j.attempt_count, j.provider, j.version, $4, $5 FROM j"
	" RETURNING *",
	5, {UUIDOID, UUIDOID, TEXTOID, TEXTOID, TIMESTAMPTZOID}, NULL, 0
};

static IjPlan start_lock_job = {
	"SELECT state::pg_catalog.text, provider, intent, owner_id FROM idemjob.jobs"
	" WHERE id OPERATOR(pg_catalog.=) $1 FOR UPDATE",
	1, {UUIDOID}, NULL, 0
};

static IjPlan start_locked = {
	"UPDATE idemjob.jobs SET" IJ_JOB_STARTS_SET
	" WHERE id OPERATOR(pg_catalog.=) $1"
	" RETURNING owner_id, provider, version, attempt_count",
	1, {UUIDOID}, NULL, 0
};

static IjPlan find_in_doubt = {
	"SELECT id, state::pg_catalog.text, provider, worker, started_at, deadline"
	" FROM idemjob.attempts"
	" WHERE job_id OPERATOR(pg_catalog.=) $1"
	" AND state OPERATOR(pg_catalog.=) ANY ('{started,unknown}'::idemjob.attempt_state[])",
	1, {UUIDOID}, NULL, 0
};

static IjPlan insert_attempt = {
	"INSERT INTO idemjob.attempts"
	" (id, job_id, owner_id, attempt_no, provider, read_version, worker, deadline)"
	" VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"
	" RETURNING *",
	8, {UUIDOID, UUIDOID, TEXTOID, INT4OID, TEXTOID, INT8OID, TEXTOID, TIMESTAMPTZOID}, NULL, 0
};

static IjPlan attempt_row = {
	"SELECT * FROM idemjob.attempts WHERE id OPERATOR(pg_catalog.=) $1",
	1, {UUIDOID}, NULL, 0
};

static IjPlan lock_attempt = {
	"SELECT job_id, state::pg_catalog.text, read_version, result_sha256, owner_id"
	" FROM idemjob.attempts"
	" WHERE id OPERATOR(pg_catalog.=) $1 FOR UPDATE",
	1, {UUIDOID}, NULL, 0
};

/* the same, with the job's intent, for a result to check against its contract */
static IjPlan lock_attempt_intent = {
	"SELECT a.job_id, a.state::pg_catalog.text, a.read_version, a.result_sha256,"
	" a.owner_id, j.intent"
	" FROM idemjob.attempts a JOIN idemjob.jobs j ON j.id OPERATOR(pg_catalog.=) a.job_id"
	" WHERE a.id OPERATOR(pg_catalog.=) $1 FOR UPDATE OF a",
	1, {UUIDOID}, NULL, 0
};

static IjPlan release_job = {
	"UPDATE idemjob.jobs SET state = 'pending'::idemjob.job_state, updated_at = pg_catalog.now()"
	" WHERE id OPERATOR(pg_catalog.=) $1"
	" AND state OPERATOR(pg_catalog.=) ANY ('{running,in_doubt}'::idemjob.job_state[])",
	1, {UUIDOID}, NULL, 0
};

static IjPlan job_in_doubt = {
	"UPDATE idemjob.jobs SET state = 'in_doubt'::idemjob.job_state, updated_at = pg_catalog.now()"
	" WHERE id OPERATOR(pg_catalog.=) $1"
	" AND state OPERATOR(pg_catalog.=) ANY ('{pending,running}'::idemjob.job_state[])",
	1, {UUIDOID}, NULL, 0
};

static IjPlan job_failed = {
	"UPDATE idemjob.jobs SET state = 'failed'::idemjob.job_state,"
	" version = version OPERATOR(pg_catalog.+) 1, error = $2,"
	" completed_at = pg_catalog.now(), updated_at = pg_catalog.now()"
	" WHERE id OPERATOR(pg_catalog.=) $1"
	" AND state OPERATOR(pg_catalog.<>) ALL " FINAL_JOB_STATES,
	2, {UUIDOID, JSONBOID}, NULL, 0
};

/*
 * The retry policy, when an attempt ends without a winner and the job is
 * free again: the job is pending, due after backoff x 2^(attempts-1)
 * capped at backoff_max; or, once attempt_count has reached its
 * max_attempts, terminal failed.  Each of the three is the job's own
 * (max_attempts only), else its intent's in idemjob.retry_policies, else
 * the setting ($2, $3, $4, the backoffs in ms).  The intent's row is read
 * once, in the CTE.
 */
#define RETRY_SPENT "attempt_count OPERATOR(pg_catalog.>=)" \
	" COALESCE(max_attempts, (SELECT p.max_attempts FROM p), $2)"
#define RETRY_MS(col, setting) \
	"COALESCE((SELECT pg_catalog.date_part('epoch'::pg_catalog.text, p." col ")" \
	" OPERATOR(pg_catalog.*) 1000::pg_catalog.float8 FROM p), " setting ")"
static IjPlan job_retry = {
	"WITH p AS (SELECT r.max_attempts, r.retry_backoff, r.retry_backoff_max"
	" FROM idemjob.retry_policies r, idemjob.jobs j"
	" WHERE j.id OPERATOR(pg_catalog.=) $1 AND r.intent OPERATOR(pg_catalog.=) j.intent)"
	" UPDATE idemjob.jobs SET"
	" state = CASE WHEN " RETRY_SPENT " THEN 'failed'::idemjob.job_state"
	" ELSE 'pending'::idemjob.job_state END,"
	" version = CASE WHEN " RETRY_SPENT " THEN version OPERATOR(pg_catalog.+) 1"
	" ELSE version END,"
	" completed_at = CASE WHEN " RETRY_SPENT " THEN pg_catalog.now() ELSE completed_at END,"
	" error = CASE WHEN " RETRY_SPENT " THEN pg_catalog.jsonb_build_object("
	" 'code'::pg_catalog.text, 'max_attempts'::pg_catalog.text, 'last'::pg_catalog.text, $5)"
	" ELSE error END,"
	" run_at = CASE WHEN " RETRY_SPENT " THEN run_at"
	" ELSE pg_catalog.now() OPERATOR(pg_catalog.+) pg_catalog.make_interval(0, 0, 0, 0, 0, 0,"
	" LEAST(" RETRY_MS("retry_backoff", "$3") " OPERATOR(pg_catalog.*) pg_catalog.power(2::pg_catalog.float8,"
	" LEAST(GREATEST(attempt_count OPERATOR(pg_catalog.-) 1, 0), 60)::pg_catalog.float8), "
	RETRY_MS("retry_backoff_max", "$4") ")"
	" OPERATOR(pg_catalog./) 1000::pg_catalog.float8) END,"
	" updated_at = pg_catalog.now()"
	" WHERE id OPERATOR(pg_catalog.=) $1"
	" AND state OPERATOR(pg_catalog.=) ANY ('{running,in_doubt}'::idemjob.job_state[])"
	" RETURNING state::pg_catalog.text, intent,"
	" run_at OPERATOR(pg_catalog.<=) pg_catalog.now()",
	5, {UUIDOID, INT4OID, FLOAT8OID, FLOAT8OID, JSONBOID}, NULL, 0
};

/* cancel_attempt: the job is free again, and due at once */
static IjPlan release_job_now = {
	"UPDATE idemjob.jobs SET state = 'pending'::idemjob.job_state,"
	" run_at = pg_catalog.now(), updated_at = pg_catalog.now()"
	" WHERE id OPERATOR(pg_catalog.=) $1"
	" AND state OPERATOR(pg_catalog.=) ANY ('{running,in_doubt}'::idemjob.job_state[])"
	" RETURNING intent",
	1, {UUIDOID}, NULL, 0
};

/* a fence: only while the attempt's read version is still current */
static IjPlan job_fence = {
	"UPDATE idemjob.jobs SET version = version OPERATOR(pg_catalog.+) 1,"
	" updated_at = pg_catalog.now()"
	" WHERE id OPERATOR(pg_catalog.=) $1 AND version OPERATOR(pg_catalog.=) $2"
	" AND state OPERATOR(pg_catalog.<>) ALL " FINAL_JOB_STATES,
	2, {UUIDOID, INT8OID}, NULL, 0
};

static IjPlan set_attempt_state = {
	"UPDATE idemjob.attempts SET state = $2::pg_catalog.text::idemjob.attempt_state,"
	" error = $3, finished_at = CASE WHEN $4 THEN pg_catalog.now() ELSE finished_at END,"
	" unknown_at = CASE WHEN $2::pg_catalog.text OPERATOR(pg_catalog.=) 'unknown'::pg_catalog.text"
	" THEN pg_catalog.now() ELSE unknown_at END"
	" WHERE id OPERATOR(pg_catalog.=) $1"
	" RETURNING *",
	4, {UUIDOID, TEXTOID, JSONBOID, BOOLOID}, NULL, 0
};

/*
 * Expiry passes over attempts whose rows another transaction holds (a
 * worker in the middle of a heartbeat or a result, in an open transaction):
 * the next round takes them, and one held row never stops expiry for every
 * other tenant.
 */
static IjPlan expire = {
	"WITH x AS ("
	"  UPDATE idemjob.attempts"
	"  SET state = 'unknown'::idemjob.attempt_state, unknown_at = pg_catalog.now(),"
	"  error = '{\"code\": \"unknown\", \"reason\": \"deadline\"}'::pg_catalog.jsonb"
	"  WHERE id OPERATOR(pg_catalog.=) ANY (ARRAY("
	"   SELECT l.id FROM idemjob.attempts l"
	"   WHERE l.state OPERATOR(pg_catalog.=) 'started'::idemjob.attempt_state"
	"   AND l.deadline OPERATOR(pg_catalog.<) pg_catalog.now()"
	"   AND ($1::pg_catalog.text IS NULL OR l.owner_id OPERATOR(pg_catalog.=) $1)"
	"   FOR UPDATE SKIP LOCKED))"
	"  AND state OPERATOR(pg_catalog.=) 'started'::idemjob.attempt_state"
	"  RETURNING job_id),"
	" y AS ("
	"  UPDATE idemjob.jobs j SET state = 'in_doubt'::idemjob.job_state, updated_at = pg_catalog.now()"
	"  FROM x WHERE j.id OPERATOR(pg_catalog.=) x.job_id"
	"  AND j.state OPERATOR(pg_catalog.=) 'running'::idemjob.job_state"
	"  RETURNING 1)"
	" SELECT pg_catalog.count(*)::pg_catalog.int4 FROM x",
	1, {TEXTOID}, NULL, 0
};

bool
ij_in_doubt(const char *attempt_state)
{
	return strcmp(attempt_state, "started") == 0 ||
		strcmp(attempt_state, "unknown") == 0;
}

bool
ij_job_final(const char *job_state)
{
	return strcmp(job_state, "succeeded") == 0 ||
		strcmp(job_state, "failed") == 0 ||
		strcmp(job_state, "cancelled") == 0;
}

/*
 * Lock an attempt row; IJ006 when there is none.  Must be connected.
 */
void
ij_lock_attempt(Datum attempt_id, IjAttempt *a)
{
	ij_lock_attempt_ex(attempt_id, a, false);
}

/*
 * with_intent: also read the job's intent (a->intent), in the same
 * statement, for complete_attempt's contract check; the job row is read,
 * not locked.
 */
void
ij_lock_attempt_ex(Datum attempt_id, IjAttempt *a, bool with_intent)
{
	if (!ij_try_lock_attempt(attempt_id, a, with_intent))
		ij_attempt_not_found(attempt_id);
}

void
ij_attempt_not_found(Datum attempt_id)
{
	ereport(ERROR,
			(errcode(ERRCODE_IJ_NOT_FOUND),
			 errmsg("attempt %s does not exist", ij_uuid_str(attempt_id)),
			 ij_errfields("attempts", psprintf("attempt_id=%s", ij_uuid_str(attempt_id)))));
}

/* ij_lock_attempt_ex(), but false where it would answer IJ006 */
bool
ij_try_lock_attempt(Datum attempt_id, IjAttempt *a, bool with_intent)
{
	bool		isnull;

	if (ij_exec(with_intent ? &lock_attempt_intent : &lock_attempt, &attempt_id, NULL) == 0 ||
		!ij_owner_visible(ij_col_nn(0, 5)))
		return false;
	a->id = attempt_id;
	a->job_id = ij_col_nn(0, 1);
	a->state = TextDatumGetCString(ij_col_nn(0, 2));
	a->read_version = DatumGetInt64(ij_col_nn(0, 3));
	a->sha = ij_col(0, 4, &isnull);
	a->has_sha = !isnull;
	a->intent = with_intent ? ij_col_nn(0, 6) : (Datum) 0;
	return true;
}

/* the job's in-doubt attempt has left doubt: the job is free again */
void
ij_release_job(Datum job_id)
{
	ij_exec(&release_job, &job_id, NULL);
}

/*
 * Notifications, sent at commit (NOTIFY semantics): "idemjob" with the
 * intent when a job becomes due now, "idemjob_done" with the job id when a
 * job becomes final.
 */
void
ij_notify_due(const char *intent)
{
	if (idemjob_notify == IJ_NOTIFY_FULL)
		Async_Notify("idemjob", intent);
	else if (idemjob_notify == IJ_NOTIFY_WAKE)
		Async_Notify("idemjob", "");
}

void
ij_notify_done(Datum job_id)
{
	if (idemjob_notify == IJ_NOTIFY_FULL)
		Async_Notify("idemjob_done", ij_uuid_str(job_id));
	else if (idemjob_notify == IJ_NOTIFY_WAKE)
		Async_Notify("idemjob_done", "");
}

/*
 * The job's attempt ended without a winner (a retryable failure, a
 * rejected result): apply the retry policy.  error is the attempt's.
 */
void
ij_job_retry(Datum job_id, Jsonb *error)
{
	Datum		args[5];
	char	   *state;

	args[0] = job_id;
	args[1] = Int32GetDatum(idemjob_max_attempts);
	args[2] = Float8GetDatum((double) idemjob_retry_backoff_ms);
	args[3] = Float8GetDatum((double) idemjob_retry_backoff_max_ms);
	args[4] = JsonbPGetDatum(error);
	if (ij_exec(&job_retry, args, NULL) == 0)
		return;
	state = TextDatumGetCString(ij_col_nn(0, 1));
	if (strcmp(state, "failed") == 0)
		ij_notify_done(job_id);
	else if (DatumGetBool(ij_col_nn(0, 3)))
		ij_notify_due(TextDatumGetCString(ij_col_nn(0, 2)));
}

/* the job's attempt is now unknown: the job is in doubt */
void
ij_job_in_doubt(Datum job_id)
{
	ij_exec(&job_in_doubt, &job_id, NULL);
}

static void
invalid_transition(IjAttempt *a, const char *to, const char *hint)
{
	ereport(ERROR,
			(errcode(ERRCODE_IJ_INVALID_TRANSITION),
			 errmsg("attempt %s cannot become %s", ij_uuid_str(a->id), to),
			 errdetail("The attempt is %s.", a->state),
			 hint ? errhint("%s", hint) : 0,
			 ij_errfields("attempts", psprintf("attempt_id=%s job_id=%s state=%s",
											   ij_uuid_str(a->id), ij_uuid_str(a->job_id), a->state))));
}

/* write an attempt's new state and note; leaves the row as result row 0 */
static void
set_state(IjAttempt *a, const char *state, Jsonb *note, bool finished)
{
	Datum		args[4];

	args[0] = a->id;
	args[1] = ij_text_datum(state);
	args[2] = JsonbPGetDatum(note);
	args[3] = BoolGetDatum(finished);
	ij_exec(&set_attempt_state, args, NULL);
}

/*
 * idemjob.start_attempt(job_id, provider, timeout, worker)
 *		RETURNS idemjob.attempts
 */
Datum
idemjob_start_attempt(PG_FUNCTION_ARGS)
{
	Datum		job_id;
	text	   *provider;
	text	   *worker;
	Interval   *timeout = NULL;
	Datum		deadline = (Datum) 0;
	Datum		args[8];
	char		nulls[8] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};
	Datum		result;

	ij_require(fcinfo, 0, "job_id");
	job_id = PG_GETARG_DATUM(0);
	provider = ij_name_arg(fcinfo, 1, "provider", true);
	if (!PG_ARGISNULL(2))
	{
		Interval	zero;

		timeout = PG_GETARG_INTERVAL_P(2);
		memset(&zero, 0, sizeof(zero));
		if (DatumGetInt32(DirectFunctionCall2(interval_cmp,
											  IntervalPGetDatum(timeout),
											  IntervalPGetDatum(&zero))) <= 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("argument \"timeout\" must be positive"),
					 errhint("Pass NULL to use idemjob.attempt_timeout.")));
	}
	else if (idemjob_attempt_timeout_ms > 0)
	{
		timeout = palloc0(sizeof(Interval));
		timeout->time = (TimeOffset) idemjob_attempt_timeout_ms * 1000;
	}
	worker = ij_name_arg(fcinfo, 3, "worker", true);
	if (timeout != NULL)
		deadline = ij_deadline_after(GetCurrentTransactionStartTimestamp(),
									 timeout, "timeout");

	ij_connect();

	/* a pending job on its own provider: one statement, and done */
	args[0] = UUIDPGetDatum(idemjob_new_uuid());
	args[1] = job_id;
	args[2] = provider ? PointerGetDatum(provider) : (Datum) 0;
	nulls[2] = provider ? ' ' : 'n';
	args[3] = worker ? PointerGetDatum(worker) : (Datum) 0;
	nulls[3] = worker ? ' ' : 'n';
	args[4] = deadline;
	nulls[4] = timeout ? ' ' : 'n';
	if (ij_exec(&start_fast_insert, args, nulls) == 1)
	{
		/* another owner's job: the error undoes the statement */
		if (!ij_owner_visible(ij_col_nn(0, SPI_fnumber(SPI_tuptable->tupdesc, "owner_id"))))
			ereport(ERROR,
					(errcode(ERRCODE_IJ_NOT_FOUND),
					 errmsg("job %s does not exist", ij_uuid_str(job_id)),
					 ij_errfields("jobs", psprintf("job_id=%s", ij_uuid_str(job_id)))));
		result = ij_row_datum(0, fcinfo);
		ij_finish();
		PG_RETURN_DATUM(result);
	}
	memset(nulls, ' ', sizeof(nulls));

	{
		char	   *state;
		Datum		job_provider;
		char	   *intent;

		/* not a pending job on its own provider: decide under a row lock */
		if (ij_exec(&start_lock_job, &job_id, NULL) == 0 ||
			!ij_owner_visible(ij_col_nn(0, 4)))
			ereport(ERROR,
					(errcode(ERRCODE_IJ_NOT_FOUND),
					 errmsg("job %s does not exist", ij_uuid_str(job_id)),
					 ij_errfields("jobs", psprintf("job_id=%s", ij_uuid_str(job_id)))));
		state = TextDatumGetCString(ij_col_nn(0, 1));
		job_provider = ij_col_nn(0, 2);
		intent = TextDatumGetCString(ij_col_nn(0, 3));
		if (provider == NULL)
			provider = DatumGetTextPP(job_provider);

		if (ij_job_final(state))
			ereport(ERROR,
					(errcode(ERRCODE_IJ_JOB_FINISHED),
					 errmsg("job %s is already finished", ij_uuid_str(job_id)),
					 errdetail("The job is %s; no new attempt can start.", state),
					 ij_errfields("jobs", psprintf("job_id=%s state=%s", ij_uuid_str(job_id), state)),
					 errhint("Read the job's outcome, or submit a new request with a new idempotency key.")));

		if (!ij_text_eq(job_provider, provider) &&
			idemjob_require_certified_failover &&
			!ij_provider_certified(intent, text_to_cstring(provider)))
			ereport(ERROR,
					(errcode(ERRCODE_IJ_PROVIDER_NOT_CERTIFIED),
					 errmsg("provider \"%s\" is not certified for intent \"%s\"",
							text_to_cstring(provider), intent),
					 errdetail("Job %s targets provider \"%s\"; a failover must go to a provider certified under the intent's current output contract.",
							   ij_uuid_str(job_id), TextDatumGetCString(job_provider)),
					 ij_errfields("jobs", psprintf("job_id=%s", ij_uuid_str(job_id))),
					 errhint("Certify the provider with idemjob.certify_provider() after it passes the contract's tests.")));

		if (ij_exec(&find_in_doubt, &job_id, NULL) > 0)
		{
			bool		wnull;
			Datum		a_worker = ij_col(0, 4, &wnull);
			bool		dnull;
			Datum		a_deadline = ij_col(0, 6, &dnull);
			Datum		a_id = ij_col_nn(0, 1);
			char	   *a_state = TextDatumGetCString(ij_col_nn(0, 2));

			/* I7: the same worker retrying learns its own attempt */
			if (worker != NULL && !wnull &&
				ij_text_eq(a_worker, worker) &&
				ij_text_eq(ij_col_nn(0, 3), provider))
			{
				ij_exec(&attempt_row, &a_id, NULL);
				result = ij_row_datum(0, fcinfo);
				ij_finish();
				PG_RETURN_DATUM(result);
			}

			ereport(ERROR,
					(errcode(ERRCODE_IJ_ATTEMPT_IN_DOUBT),
					 errmsg("job %s has an attempt in doubt", ij_uuid_str(job_id)),
					 errdetail("Attempt %s is %s%s%s.", ij_uuid_str(a_id), a_state,
							   dnull ? "" : ", deadline ",
							   dnull ? "" : DatumGetCString(DirectFunctionCall1(timestamptz_out, a_deadline))),
					 ij_errfields("attempts",
								  psprintf("job_id=%s attempt_id=%s state=%s%s%s retry_after=%d",
										   ij_uuid_str(job_id), ij_uuid_str(a_id), a_state,
										   dnull ? "" : " deadline=",
										   dnull ? "" : ij_iso_utc(DatumGetTimestampTz(a_deadline)),
										   ij_retry_after(!dnull, dnull ? 0 : DatumGetTimestampTz(a_deadline)))),
					 errhint("Wait for its result, or resolve it with idemjob.complete_attempt(), idemjob.fail_attempt() or idemjob.cancel_attempt() before starting another.")));
		}

		if (ij_exec(&start_locked, &job_id, NULL) != 1)
			elog(ERROR, "locked job %s vanished", ij_uuid_str(job_id));
	}

	args[0] = UUIDPGetDatum(idemjob_new_uuid());
	args[1] = job_id;
	args[2] = ij_col_nn(0, 1);	/* owner_id */
	args[3] = ij_col_nn(0, 4);	/* attempt_no = new attempt_count */
	args[4] = provider ? PointerGetDatum(provider) : ij_col_nn(0, 2);
	args[5] = ij_col_nn(0, 3);	/* read_version */
	args[6] = worker ? PointerGetDatum(worker) : (Datum) 0;
	args[7] = deadline;
	memset(nulls, ' ', sizeof(nulls));
	nulls[6] = worker ? ' ' : 'n';
	nulls[7] = timeout ? ' ' : 'n';
	ij_exec(&insert_attempt, args, nulls);

	result = ij_row_datum(0, fcinfo);
	ij_finish();
	PG_RETURN_DATUM(result);
}

/*
 * idemjob.fail_attempt(attempt_id, error, retryable) RETURNS idemjob.attempts
 */
Datum
idemjob_fail_attempt(PG_FUNCTION_ARGS)
{
	IjAttempt	a;
	Jsonb	   *error;
	bool		retryable;
	Datum		result;

	ij_require(fcinfo, 0, "attempt_id");
	ij_require(fcinfo, 2, "retryable");
	error = ij_jsonb_arg(fcinfo, 1, "error", true);
	retryable = PG_GETARG_BOOL(2);
	if (error == NULL)
		error = ij_note("failed", NULL);

	ij_connect();
	ij_lock_attempt(PG_GETARG_DATUM(0), &a);

	if (strcmp(a.state, "failed") == 0)
		ij_exec(&attempt_row, &a.id, NULL);	/* I7 */
	else if (ij_in_doubt(a.state))
	{
		set_state(&a, "failed", error, true);
		if (retryable)
			ij_job_retry(a.job_id, error);
		else
		{
			Datum		fargs[2];

			fargs[0] = a.job_id;
			fargs[1] = JsonbPGetDatum(error);
			if (ij_exec(&job_failed, fargs, NULL) == 1)
				ij_notify_done(a.job_id);
		}
		ij_exec(&attempt_row, &a.id, NULL);
	}
	else
		invalid_transition(&a, "failed",
						   strcmp(a.state, "cancelled") == 0 ?
						   "A cancelled attempt fails only by returning a result that breaks the output contract." : NULL);

	result = ij_row_datum(0, fcinfo);
	ij_finish();
	PG_RETURN_DATUM(result);
}

/*
 * idemjob.mark_unknown(attempt_id, reason) RETURNS idemjob.attempts
 */
Datum
idemjob_mark_unknown(PG_FUNCTION_ARGS)
{
	IjAttempt	a;
	Jsonb	   *note;
	Datum		result;

	ij_require(fcinfo, 0, "attempt_id");
	ij_require(fcinfo, 1, "reason");
	note = ij_note("unknown", text_to_cstring(PG_GETARG_TEXT_PP(1)));
	ij_check_payload(JsonbPGetDatum(note), "reason");

	ij_connect();
	ij_lock_attempt(PG_GETARG_DATUM(0), &a);

	if (strcmp(a.state, "unknown") == 0)
		ij_exec(&attempt_row, &a.id, NULL);	/* I7 */
	else if (strcmp(a.state, "started") == 0)
	{
		set_state(&a, "unknown", note, false);
		ij_job_in_doubt(a.job_id);
		ij_exec(&attempt_row, &a.id, NULL);
	}
	else
		invalid_transition(&a, "unknown",
						   "Only a started attempt can be marked unknown.");

	result = ij_row_datum(0, fcinfo);
	ij_finish();
	PG_RETURN_DATUM(result);
}

/*
 * idemjob.cancel_attempt(attempt_id, reason, fence) RETURNS idemjob.attempts
 */
Datum
idemjob_cancel_attempt(PG_FUNCTION_ARGS)
{
	IjAttempt	a;
	Jsonb	   *note;
	bool		fence;
	Datum		result;
	Datum		args[2];

	ij_require(fcinfo, 0, "attempt_id");
	ij_require(fcinfo, 1, "reason");
	ij_require(fcinfo, 2, "fence");
	note = ij_note("cancelled", text_to_cstring(PG_GETARG_TEXT_PP(1)));
	ij_check_payload(JsonbPGetDatum(note), "reason");
	fence = PG_GETARG_BOOL(2);

	ij_connect();
	ij_lock_attempt(PG_GETARG_DATUM(0), &a);

	if (ij_in_doubt(a.state))
	{
		set_state(&a, "cancelled", note, true);
		if (ij_exec(&release_job_now, &a.job_id, NULL) == 1)
			ij_notify_due(TextDatumGetCString(ij_col_nn(0, 1)));
	}
	else if (strcmp(a.state, "cancelled") != 0)
		invalid_transition(&a, "cancelled",
						   "Only an attempt that is started or unknown can be cancelled.");

	/*
	 * A fence moves the job's version past the attempt's read version, so
	 * its result can never win.  Where it has moved already, the attempt is
	 * fenced and nothing changes (I7); a final job's version never moves.
	 */
	if (fence)
	{
		args[0] = a.job_id;
		args[1] = Int64GetDatum(a.read_version);
		ij_exec(&job_fence, args, NULL);
	}

	ij_exec(&attempt_row, &a.id, NULL);
	result = ij_row_datum(0, fcinfo);
	ij_finish();
	PG_RETURN_DATUM(result);
}

/*
 * idemjob.expire_attempts() RETURNS integer
 */
Datum
idemjob_expire_attempts(PG_FUNCTION_ARGS)
{
	/* a bound caller: its own only */
	PG_RETURN_INT32(ij_expire_attempts(ij_bound_owner()));
}

/* expire_attempts() for owner (NULL: every owner); the sweeper calls it */
int32
ij_expire_attempts(text *owner)
{
	int32		n;
	Datum		arg = PointerGetDatum(owner);

	ij_connect();
	ij_exec(&expire, &arg, owner ? NULL : "n");
	n = DatumGetInt32(ij_col_nn(0, 1));
	ij_finish();
	return n;
}

/*
 * set_retry_policy: an intent's row of idemjob.retry_policies, written
 * whole (a NULL falls back to the setting).  updated_at moves only when a
 * value does, so a repeated call answers the same (I7).
 */
#define SAME(col) "(r." col " OPERATOR(pg_catalog.=) EXCLUDED." col \
	" OR (r." col " IS NULL AND EXCLUDED." col " IS NULL))"
static IjPlan set_policy = {
	"INSERT INTO idemjob.retry_policies AS r"
	" (intent, max_attempts, retry_backoff, retry_backoff_max)"
	" VALUES ($1, $2, $3, $4)"
	" ON CONFLICT (intent) DO UPDATE SET"
	" max_attempts = EXCLUDED.max_attempts,"
	" retry_backoff = EXCLUDED.retry_backoff,"
	" retry_backoff_max = EXCLUDED.retry_backoff_max,"
	" updated_at = CASE WHEN " SAME("max_attempts") " AND " SAME("retry_backoff")
	" AND " SAME("retry_backoff_max") " THEN r.updated_at ELSE pg_catalog.now() END"
	" RETURNING r.intent, r.max_attempts, r.retry_backoff, r.retry_backoff_max, r.updated_at",
	4, {TEXTOID, INT4OID, INTERVALOID, INTERVALOID}, NULL, 0
};

/* an interval argument that may be NULL, else not negative */
static void
backoff_arg(FunctionCallInfo fcinfo, int argno, const char *name)
{
	Interval	zero;

	if (PG_ARGISNULL(argno))
		return;
	memset(&zero, 0, sizeof(zero));
	if (DatumGetBool(DirectFunctionCall2(interval_lt, PG_GETARG_DATUM(argno),
										 IntervalPGetDatum(&zero))))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument \"%s\" must not be negative", name),
				 errhint("Pass '0' to retry at once, or NULL to use idemjob.%s.", name)));
}

Datum
idemjob_set_retry_policy(PG_FUNCTION_ARGS)
{
	Datum		args[4];
	char		nulls[4] = {' ', ' ', ' ', ' '};
	Datum		result;
	int			i;

	args[0] = PointerGetDatum(ij_name_arg(fcinfo, 0, "intent", false));
	if (!PG_ARGISNULL(1) && PG_GETARG_INT32(1) < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument \"max_attempts\" must be at least 1"),
				 errhint("Pass NULL to use idemjob.max_attempts.")));
	backoff_arg(fcinfo, 2, "retry_backoff");
	backoff_arg(fcinfo, 3, "retry_backoff_max");
	for (i = 1; i < 4; i++)
	{
		args[i] = PG_ARGISNULL(i) ? (Datum) 0 : PG_GETARG_DATUM(i);
		nulls[i] = PG_ARGISNULL(i) ? 'n' : ' ';
	}

	ij_connect();
	ij_exec(&set_policy, args, nulls);
	result = ij_row_datum(0, fcinfo);
	ij_finish();
	PG_RETURN_DATUM(result);
}
