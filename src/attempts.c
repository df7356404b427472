/*-------------------------------------------------------------------------
 *
 * attempts.c
 *	  The attempt state machine: start_attempt(), fail_attempt(),
 *	  mark_unknown(), cancel_attempt(), expire_attempts(), and since 1.2
 *	  begin_attempt(), abandon_attempts() and set_retry_policy().
 *
 * Attempts: started -> unknown; started/unknown -> succeeded, superseded,
 * failed, cancelled; cancelled -> succeeded, superseded, failed.  Anything
 * else is IJ005.  A call repeated on the state it produced answers with the
 * row as stored (I7).
 *
 * The two-phase claim (1.2): an attempt of claim(lease => true) is started
 * with lease_until set, not yet sent.  begin_attempt(), or any result or
 * heartbeat, confirms it while the lease lasts (lease_until NULL; the
 * deadline kept, unless it passed meanwhile); past its lease every call is
 * IJ008 and writes nothing, and expire_attempts() (the sweeper) makes it
 * released: final, never sent, its job pending at once, nothing counted.
 * Both take the attempt's row lock, so exactly one of them happens.
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
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "idemjob.h"

PG_FUNCTION_INFO_V1(idemjob_start_attempt);
PG_FUNCTION_INFO_V1(idemjob_fail_attempt);
PG_FUNCTION_INFO_V1(idemjob_mark_unknown);
PG_FUNCTION_INFO_V1(idemjob_set_retry_policy);
PG_FUNCTION_INFO_V1(idemjob_cancel_attempt);
PG_FUNCTION_INFO_V1(idemjob_expire_attempts);
PG_FUNCTION_INFO_V1(idemjob_begin_attempt);
PG_FUNCTION_INFO_V1(idemjob_abandon_attempts);

#define FINAL_JOB_STATES "('{succeeded,failed,cancelled}'::idemjob.job_state[])"

/*
 * The fast path as one statement: the job's UPDATE and the attempt's
 * INSERT (one executor start instead of two).  $1 job id, $2 provider
 * (NULL: the job's), $3 worker, $4 deadline, $5 the attempt's id, made
 * here (an id made in the statement, by a volatile function, would keep
 * the planner from flattening its SELECT: 26,000 instructions a start).
 * No row when the job is not a pending job on that provider: nothing was
 * written.
 */
static IjPlan start_fast_insert = {
	"WITH j AS ("
	"  UPDATE idemjob.jobs SET" IJ_JOB_STARTS_SET
	"  WHERE id OPERATOR(pg_catalog.=) $1" IJ_ROUTE("", 6)
	"  AND state OPERATOR(pg_catalog.=) 'pending'::idemjob.job_state"
	"  AND (($2::pg_catalog.text IS NULL AND next_provider IS NULL)"
	"   OR provider OPERATOR(pg_catalog.=) $2)"
	"  RETURNING owner_id, provider, version, attempt_count, owner_hash)"
	" INSERT INTO idemjob.attempts"
	" (id, job_id, owner_id, attempt_no, provider, read_version, worker, deadline, owner_hash)"
	" SELECT $5, $1, j.owner_id, j.attempt_count, j.provider,"
	" j.version, $3, $4, j.owner_hash FROM j"
	" RETURNING *",
	6, {UUIDOID, TEXTOID, TEXTOID, TIMESTAMPTZOID, UUIDOID, INT4OID}, NULL, 0, false, NULL, 0
};

/*
 * An attempt's id: a new UUIDv7 that carries the last 32 bits of its job's
 * id, which are its owner's hash for a job made since 1.2 (so that an
 * attempt id leads where its job id does; docs/scaling.md).
 */
static Datum
new_attempt_id(Datum job_id)
{
	return UUIDPGetDatum(idemjob_new_uuid_with_hash(ij_owner_hash_of_id(DatumGetUUIDP(job_id))));
}

static IjPlan start_lock_job = {
	"SELECT state::pg_catalog.text, provider, intent, owner_id,"
	" COALESCE(next_provider, provider) FROM idemjob.jobs"
	" WHERE id OPERATOR(pg_catalog.=) $1" IJ_ROUTE("", 2) " FOR UPDATE",
	2, {UUIDOID, INT4OID}, NULL, 0, false, NULL, 0
};

static IjPlan start_locked = {
	"UPDATE idemjob.jobs SET" IJ_JOB_STARTS_SET
	" WHERE id OPERATOR(pg_catalog.=) $1" IJ_ROUTE("", 2)
	" RETURNING owner_id, provider, version, attempt_count, owner_hash",
	2, {UUIDOID, INT4OID}, NULL, 0, false, NULL, 0
};

static IjPlan find_in_doubt = {
	"SELECT id, state::pg_catalog.text, provider, worker, started_at, deadline"
	" FROM idemjob.attempts"
	" WHERE job_id OPERATOR(pg_catalog.=) $1" IJ_ROUTE("", 2)
	" AND state OPERATOR(pg_catalog.=) ANY ('{started,unknown}'::idemjob.attempt_state[])",
	2, {UUIDOID, INT4OID}, NULL, 0, false, NULL, 0
};

static IjPlan insert_attempt = {
	"INSERT INTO idemjob.attempts"
	" (id, job_id, owner_id, attempt_no, provider, read_version, worker, deadline, owner_hash)"
	" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::idemjob.owner_hash)" IJ_ROUTE_PARAM(9)
	" RETURNING *",
	9, {UUIDOID, UUIDOID, TEXTOID, INT4OID, TEXTOID, INT8OID, TEXTOID, TIMESTAMPTZOID,
	INT4OID}, NULL, 0, false, NULL, 0
};

static IjPlan attempt_row = {
	"SELECT * FROM idemjob.attempts WHERE id OPERATOR(pg_catalog.=) $1" IJ_ROUTE("", 2),
	2, {UUIDOID, INT4OID}, NULL, 0, false, NULL, 0
};

#define LOCK_ATTEMPT_COLS(a) \
	a "job_id, " a "state::pg_catalog.text, " a "read_version, " a "result_sha256," \
	" " a "state OPERATOR(pg_catalog.=) 'started'::idemjob.attempt_state" \
	" AND " a "lease_until IS NOT NULL," \
	" COALESCE(" a "lease_until OPERATOR(pg_catalog.<) pg_catalog.clock_timestamp(), false)," \
	" " a "provider, " a "owner_id"
static IjPlan lock_attempt = {
	"SELECT " LOCK_ATTEMPT_COLS("")
	" FROM idemjob.attempts"
	" WHERE id OPERATOR(pg_catalog.=) $1" IJ_ROUTE("", 2) " FOR UPDATE",
	2, {UUIDOID, INT4OID}, NULL, 0, false, NULL, 0
};

/* the same, with the job's intent, for a result to check against its contract */
static IjPlan lock_attempt_intent = {
	"SELECT " LOCK_ATTEMPT_COLS("a.") ", j.intent"
	" FROM idemjob.attempts a JOIN idemjob.jobs j ON j.id OPERATOR(pg_catalog.=) a.job_id"
	" WHERE a.id OPERATOR(pg_catalog.=) $1" IJ_ROUTE("a.", 2) IJ_ROUTE("j.", 2)
	" FOR UPDATE OF a",
	2, {UUIDOID, INT4OID}, NULL, 0, false, NULL, 0
};

static IjPlan release_job = {
	"UPDATE idemjob.jobs SET state = 'pending'::idemjob.job_state, updated_at = pg_catalog.now()"
	" WHERE id OPERATOR(pg_catalog.=) $1" IJ_ROUTE("", 2)
	" AND state OPERATOR(pg_catalog.=) ANY ('{running,in_doubt}'::idemjob.job_state[])",
	2, {UUIDOID, INT4OID}, NULL, 0, false, NULL, 0
};

static IjPlan job_in_doubt = {
	"UPDATE idemjob.jobs SET state = 'in_doubt'::idemjob.job_state, updated_at = pg_catalog.now()"
	" WHERE id OPERATOR(pg_catalog.=) $1" IJ_ROUTE("", 2)
	" AND state OPERATOR(pg_catalog.=) ANY ('{pending,running}'::idemjob.job_state[])",
	2, {UUIDOID, INT4OID}, NULL, 0, false, NULL, 0
};

static IjPlan job_failed = {
	"UPDATE idemjob.jobs SET state = 'failed'::idemjob.job_state,"
	" version = version OPERATOR(pg_catalog.+) 1, error = $2,"
	" completed_at = pg_catalog.now(), updated_at = pg_catalog.now()"
	" WHERE id OPERATOR(pg_catalog.=) $1" IJ_ROUTE("", 3)
	" AND state OPERATOR(pg_catalog.<>) ALL " FINAL_JOB_STATES,
	3, {UUIDOID, JSONBOID, INT4OID}, NULL, 0, false, NULL, 0
};

/*
 * The retry policy, when an attempt ends without a winner and the job is
 * free again: the job is pending, due after backoff x 2^(attempts-1)
 * capped at backoff_max; or, once attempt_count has reached its
 * max_attempts, terminal failed.  Each of the three is the job's own
 * (max_attempts only), else its intent's in idemjob.retry_policies, else
 * the setting ($2, $3, $4, the backoffs in ms).  The intent's row is read
 * once, in the CTE.  Released attempts (never sent) are not counted, in
 * max_attempts or in the backoff.
 */
#define RETRY_COUNTED "(j.attempt_count OPERATOR(pg_catalog.-) r.n)"
#define RETRY_MS(col, setting) \
	"COALESCE(pg_catalog.date_part('epoch'::pg_catalog.text, p." col ")" \
	" OPERATOR(pg_catalog.*) 1000::pg_catalog.float8, " setting ")"
#define RETRY_V(col) "(SELECT v." col " FROM v)"
/*
 * v holds the decision and the values it writes, so that the UPDATE's
 * CASEs only read them: Citus refuses a CASE that calls a function which
 * is not immutable (timestamptz + interval, jsonb_build_object).
 */
static IjPlan job_retry = {
	"WITH r AS (SELECT pg_catalog.count(*)::pg_catalog.int4 AS n FROM idemjob.attempts a"
	" WHERE a.job_id OPERATOR(pg_catalog.=) $1" IJ_ROUTE("a.", 6)
	" AND a.state OPERATOR(pg_catalog.=) 'released'::idemjob.attempt_state),"
	" v AS (SELECT " RETRY_COUNTED " OPERATOR(pg_catalog.>=)"
	" COALESCE(j.max_attempts, p.max_attempts, $2) AS spent,"
	" $7 OPERATOR(pg_catalog.+) pg_catalog.make_interval(0, 0, 0, 0, 0, 0,"
	" LEAST(" RETRY_MS("retry_backoff", "$3") " OPERATOR(pg_catalog.*) pg_catalog.power(2::pg_catalog.float8,"
	" LEAST(GREATEST(" RETRY_COUNTED " OPERATOR(pg_catalog.-) 1, 0), 60)::pg_catalog.float8), "
	RETRY_MS("retry_backoff_max", "$4") ")"
	" OPERATOR(pg_catalog./) 1000::pg_catalog.float8) AS retry_at,"
	" pg_catalog.jsonb_build_object('code'::pg_catalog.text, 'max_attempts'::pg_catalog.text,"
	" 'last'::pg_catalog.text, $5) AS spent_error"
	" FROM idemjob.jobs j CROSS JOIN r"
	" LEFT JOIN idemjob.retry_policies p ON p.intent OPERATOR(pg_catalog.=) j.intent"
	" WHERE j.id OPERATOR(pg_catalog.=) $1" IJ_ROUTE("j.", 6) ")"
	" UPDATE idemjob.jobs SET"
	" state = CASE WHEN " RETRY_V("spent") " THEN 'failed'::idemjob.job_state"
	" ELSE 'pending'::idemjob.job_state END,"
	" version = CASE WHEN " RETRY_V("spent") " THEN version OPERATOR(pg_catalog.+) 1"
	" ELSE version END,"
	" completed_at = CASE WHEN " RETRY_V("spent") " THEN $7 ELSE completed_at END,"
	" error = CASE WHEN " RETRY_V("spent") " THEN " RETRY_V("spent_error") " ELSE error END,"
	" run_at = CASE WHEN " RETRY_V("spent") " THEN run_at ELSE " RETRY_V("retry_at") " END,"
	" updated_at = pg_catalog.now()"
	" WHERE id OPERATOR(pg_catalog.=) $1" IJ_ROUTE("", 6)
	" AND state OPERATOR(pg_catalog.=) ANY ('{running,in_doubt}'::idemjob.job_state[])"
	" RETURNING state OPERATOR(pg_catalog.=) 'failed'::idemjob.job_state, intent,"
	" run_at OPERATOR(pg_catalog.<=) $7",
	7, {UUIDOID, INT4OID, FLOAT8OID, FLOAT8OID, JSONBOID, INT4OID, TIMESTAMPTZOID}, NULL, 0, false, NULL, 0
};

/* cancel_attempt: the job is free again, and due at once */
static IjPlan release_job_now = {
	"UPDATE idemjob.jobs SET state = 'pending'::idemjob.job_state,"
	" run_at = pg_catalog.now(), updated_at = pg_catalog.now()"
	" WHERE id OPERATOR(pg_catalog.=) $1" IJ_ROUTE("", 2)
	" AND state OPERATOR(pg_catalog.=) ANY ('{running,in_doubt}'::idemjob.job_state[])"
	" RETURNING intent",
	2, {UUIDOID, INT4OID}, NULL, 0, false, NULL, 0
};

/* a fence: only while the attempt's read version is still current */
static IjPlan job_fence = {
	"UPDATE idemjob.jobs SET version = version OPERATOR(pg_catalog.+) 1,"
	" updated_at = pg_catalog.now()"
	" WHERE id OPERATOR(pg_catalog.=) $1" IJ_ROUTE("", 3)
	" AND version OPERATOR(pg_catalog.=) $2"
	" AND state OPERATOR(pg_catalog.<>) ALL " FINAL_JOB_STATES,
	3, {UUIDOID, INT8OID, INT4OID}, NULL, 0, false, NULL, 0
};

static IjPlan set_attempt_state = {
	"UPDATE idemjob.attempts SET state = $2::pg_catalog.text::idemjob.attempt_state,"
	" error = $3, finished_at = CASE WHEN $4 THEN $6 ELSE finished_at END,"
	" unknown_at = CASE WHEN $2::pg_catalog.text OPERATOR(pg_catalog.=) 'unknown'::pg_catalog.text"
	" THEN $6 ELSE unknown_at END, lease_until = NULL"
	" WHERE id OPERATOR(pg_catalog.=) $1" IJ_ROUTE("", 5)
	" RETURNING *",
	6, {UUIDOID, TEXTOID, JSONBOID, BOOLOID, INT4OID, TIMESTAMPTZOID}, NULL, 0, false, NULL, 0
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
	"   AND l.lease_until IS NULL"
	"   AND ($1::pg_catalog.text IS NULL OR l.owner_id OPERATOR(pg_catalog.=) $1)"
	"   FOR UPDATE SKIP LOCKED))"
	"  AND state OPERATOR(pg_catalog.=) 'started'::idemjob.attempt_state"
	"  AND lease_until IS NULL"
	"  RETURNING job_id),"
	" y AS ("
	"  UPDATE idemjob.jobs j SET state = 'in_doubt'::idemjob.job_state, updated_at = pg_catalog.now()"
	"  FROM x WHERE j.id OPERATOR(pg_catalog.=) x.job_id"
	"  AND j.state OPERATOR(pg_catalog.=) 'running'::idemjob.job_state"
	"  RETURNING 1)"
	" SELECT pg_catalog.count(*)::pg_catalog.int4 FROM x",
	1, {TEXTOID}, NULL, 0, false, NULL, 0
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
	IjPlan	   *plan = with_intent ? &lock_attempt_intent : &lock_attempt;
	int			n;

	a->route = ij_id_route(attempt_id);
	n = ij_exec_id(plan, attempt_id, a->route);
	if (n == 0 && ij_reroute(true, attempt_id, &a->route))
		n = ij_exec_id(plan, attempt_id, a->route);
	if (n == 0 || !ij_owner_visible(ij_col_nn(0, 8)))
		return false;
	a->id = attempt_id;
	a->job_id = ij_col_nn(0, 1);
	a->state = TextDatumGetCString(ij_col_nn(0, 2));
	a->read_version = DatumGetInt64(ij_col_nn(0, 3));
	a->sha = ij_col(0, 4, &isnull);
	a->has_sha = !isnull;
	a->leased = DatumGetBool(ij_col_nn(0, 5));
	a->lease_over = DatumGetBool(ij_col_nn(0, 6));
	a->provider = ij_col_nn(0, 7);
	a->intent = with_intent ? ij_col_nn(0, 9) : (Datum) 0;
	return true;
}

/* the job's in-doubt attempt has left doubt: the job is free again */
void
ij_release_job(Datum job_id, int32 route)
{
	ij_exec_id(&release_job, job_id, route);
}

/*
 * Notifications, sent at commit (NOTIFY semantics): "idemjob" with the
 * intent when a job becomes due now, "idemjob_done" with the job id when a
 * job becomes final.  None from a call Citus sent into another node's
 * transaction block, which may end in PREPARE TRANSACTION, and PostgreSQL
 * cannot prepare a transaction that notified: waiting claims and
 * await_job() poll anyway (docs/scaling.md#citus).
 */
void
ij_notify_due(const char *intent)
{
	if (ij_in_prepared_transaction())
		return;
	if (idemjob_notify == IJ_NOTIFY_FULL)
		Async_Notify("idemjob", intent);
	else if (idemjob_notify == IJ_NOTIFY_WAKE)
		Async_Notify("idemjob", "");
}

void
ij_notify_done(Datum job_id)
{
	if (ij_in_prepared_transaction())
		return;
	if (idemjob_notify == IJ_NOTIFY_FULL)
		Async_Notify("idemjob_done", ij_uuid_str(job_id));
	else if (idemjob_notify == IJ_NOTIFY_WAKE)
		Async_Notify("idemjob_done", "");
}

/*
 * The job's attempt ended without a winner (a retryable failure, a
 * rejected result, a doubt given up): apply the retry policy.  provider
 * and error are the attempt's.
 */
void
ij_job_retry(Datum job_id, int32 route, Datum provider, Jsonb *error)
{
	Datum		args[7];

	args[0] = job_id;
	args[1] = Int32GetDatum(idemjob_max_attempts);
	args[2] = Float8GetDatum((double) idemjob_retry_backoff_ms);
	args[3] = Float8GetDatum((double) idemjob_retry_backoff_max_ms);
	args[4] = JsonbPGetDatum(error);
	args[5] = Int32GetDatum(route);
	args[6] = IJ_NOW_DATUM();
	if (ij_exec(&job_retry, args, NULL) == 0)
		return;
	/* failed: the job's last attempt was spent */
	if (DatumGetBool(ij_col_nn(0, 1)))
	{
		ij_notify_done(job_id);
		return;
	}
	if (DatumGetBool(ij_col_nn(0, 3)))
		ij_notify_due(TextDatumGetCString(ij_col_nn(0, 2)));
	/* the next attempt goes to the next provider of the intent's route */
	ij_route_advance(job_id, route, provider);
}

/* the job's attempt is now unknown: the job is in doubt */
void
ij_job_in_doubt(Datum job_id, int32 route)
{
	ij_exec_id(&job_in_doubt, job_id, route);
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
	Datum		args[6];

	args[0] = a->id;
	args[1] = ij_text_datum(state);
	args[2] = JsonbPGetDatum(note);
	args[3] = BoolGetDatum(finished);
	args[4] = Int32GetDatum(a->route);
	args[5] = IJ_NOW_DATUM();
	ij_exec(&set_attempt_state, args, NULL);
}

/*
 * idemjob.start_attempt(job_id, provider, timeout, worker)
 *		RETURNS idemjob.attempts
 */
Datum
idemjob_start_attempt(PG_FUNCTION_ARGS)
{
	IJ_ENTRY();
	Datum		job_id;
	text	   *provider;
	text	   *worker;
	Interval   *timeout = NULL;
	Datum		deadline = (Datum) 0;
	Datum		args[9];
	char		nulls[9] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};
	Datum		result;
	int32		route;
	int			n;

	ij_require(fcinfo, 0, "job_id");
	job_id = PG_GETARG_DATUM(0);
	route = ij_id_route(job_id);
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
	IJ_FORWARD(route);

	ij_connect();

	/* a pending job on its own provider: one statement, and done */
	args[0] = job_id;
	args[1] = provider ? PointerGetDatum(provider) : (Datum) 0;
	nulls[1] = provider ? ' ' : 'n';
	args[2] = worker ? PointerGetDatum(worker) : (Datum) 0;
	nulls[2] = worker ? ' ' : 'n';
	args[3] = deadline;
	nulls[3] = timeout ? ' ' : 'n';
	args[4] = new_attempt_id(job_id);
	args[5] = Int32GetDatum(route);
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
		n = ij_exec_id(&start_lock_job, job_id, route);
		if (n == 0 && ij_reroute(false, job_id, &route))
			n = ij_exec_id(&start_lock_job, job_id, route);
		if (n == 0 || !ij_owner_visible(ij_col_nn(0, 4)))
			ereport(ERROR,
					(errcode(ERRCODE_IJ_NOT_FOUND),
					 errmsg("job %s does not exist", ij_uuid_str(job_id)),
					 ij_errfields("jobs", psprintf("job_id=%s", ij_uuid_str(job_id)))));
		state = TextDatumGetCString(ij_col_nn(0, 1));
		job_provider = ij_col_nn(0, 2);
		intent = TextDatumGetCString(ij_col_nn(0, 3));
		/* NULL: the job's current provider (its own, or routed) */
		if (provider == NULL)
			provider = DatumGetTextPP(ij_col_nn(0, 5));

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

		if (ij_exec_id(&find_in_doubt, job_id, route) > 0)
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
				ij_exec_id(&attempt_row, a_id, route);
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

		if (ij_exec_id(&start_locked, job_id, route) != 1)
			elog(ERROR, "locked job %s vanished", ij_uuid_str(job_id));
	}

	args[8] = ij_col_nn(0, 5);	/* the job's owner_hash */
	args[0] = new_attempt_id(job_id);
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
	IJ_ENTRY();
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
	IJ_FORWARD(ij_id_route(PG_GETARG_DATUM(0)));

	ij_connect();
	ij_lock_attempt(PG_GETARG_DATUM(0), &a);
	ij_confirm_lease(&a, false);

	if (strcmp(a.state, "failed") == 0)
		ij_exec_id(&attempt_row, a.id, a.route);	/* I7 */
	else if (ij_in_doubt(a.state))
	{
		set_state(&a, "failed", error, true);
		if (retryable)
			ij_job_retry(a.job_id, a.route, a.provider, error);
		else
		{
			Datum		fargs[3];

			fargs[0] = a.job_id;
			fargs[1] = JsonbPGetDatum(error);
			fargs[2] = Int32GetDatum(a.route);
			if (ij_exec(&job_failed, fargs, NULL) == 1)
				ij_notify_done(a.job_id);
		}
		ij_exec_id(&attempt_row, a.id, a.route);
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
	IJ_ENTRY();
	IjAttempt	a;
	Jsonb	   *note;
	Datum		result;

	ij_require(fcinfo, 0, "attempt_id");
	ij_require(fcinfo, 1, "reason");
	note = ij_note("unknown", text_to_cstring(PG_GETARG_TEXT_PP(1)));
	ij_check_payload(JsonbPGetDatum(note), "reason");
	IJ_FORWARD(ij_id_route(PG_GETARG_DATUM(0)));

	ij_connect();
	ij_lock_attempt(PG_GETARG_DATUM(0), &a);
	ij_confirm_lease(&a, false);

	if (strcmp(a.state, "unknown") == 0)
		ij_exec_id(&attempt_row, a.id, a.route);	/* I7 */
	else if (strcmp(a.state, "started") == 0)
	{
		set_state(&a, "unknown", note, false);
		ij_job_in_doubt(a.job_id, a.route);
		ij_exec_id(&attempt_row, a.id, a.route);
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
	IJ_ENTRY();
	IjAttempt	a;
	Jsonb	   *note;
	bool		fence;
	Datum		result;
	Datum		args[3];

	ij_require(fcinfo, 0, "attempt_id");
	ij_require(fcinfo, 1, "reason");
	ij_require(fcinfo, 2, "fence");
	note = ij_note("cancelled", text_to_cstring(PG_GETARG_TEXT_PP(1)));
	ij_check_payload(JsonbPGetDatum(note), "reason");
	fence = PG_GETARG_BOOL(2);
	IJ_FORWARD(ij_id_route(PG_GETARG_DATUM(0)));

	ij_connect();
	ij_lock_attempt(PG_GETARG_DATUM(0), &a);

	if (ij_in_doubt(a.state))
	{
		set_state(&a, "cancelled", note, true);
		if (ij_exec_id(&release_job_now, a.job_id, a.route) == 1)
		{
			ij_notify_due(TextDatumGetCString(ij_col_nn(0, 1)));
			/* a doubt ended without a result: the route's next provider */
			ij_route_advance(a.job_id, a.route, a.provider);
		}
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
		args[2] = Int32GetDatum(a.route);
		ij_exec(&job_fence, args, NULL);
	}

	ij_exec_id(&attempt_row, a.id, a.route);
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
	IJ_ENTRY();
	IJ_ON_SHARD_NODES("expire_attempts", -1);
	/* a bound caller: its own only */
	PG_RETURN_INT32(ij_expire_attempts(ij_bound_owner()));
}

/*
 * Two-phase claim (since 1.2).  An attempt claimed with a lease is started
 * but not yet sent: the worker confirms it immediately before it calls the
 * provider.  Confirmation and release both lock the attempt row, so exactly
 * one of them happens: a released attempt was never confirmed, hence never
 * sent, and is refused any later confirmation or result (IJ008).
 */
/*
 * The deadline on confirmation: as the claim set it, unless it passed while
 * the attempt waited to be sent (a timeout shorter than the wait); then the
 * whole timeout again from now.  Unchanged, lease_until is the only column
 * the confirmation changes, and no index has it: a HOT update.
 */
#define BEGIN_DEADLINE(a, now) \
	"CASE WHEN " a "deadline OPERATOR(pg_catalog.<) " now \
	" THEN " now " OPERATOR(pg_catalog.+)" \
	" (" a "deadline OPERATOR(pg_catalog.-) " a "started_at)" \
	" ELSE " a "deadline END"

static IjPlan confirm_lease = {
	"UPDATE idemjob.attempts SET lease_until = NULL,"
	" deadline = CASE WHEN $2 THEN " BEGIN_DEADLINE("", "$4") " ELSE deadline END"
	" WHERE id OPERATOR(pg_catalog.=) $1" IJ_ROUTE("", 3),
	4, {UUIDOID, BOOLOID, INT4OID, TIMESTAMPTZOID}, NULL, 0, false, NULL, 0
};

/* the leases that ended unconfirmed: released, their jobs due at once */
#define RELEASE_SQL(pick, route_x, route_y) \
	"WITH x AS (" \
	"  UPDATE idemjob.attempts SET state = 'released'::idemjob.attempt_state," \
	"  finished_at = pg_catalog.now(), error = pg_catalog.jsonb_build_object(" \
	"  'code'::pg_catalog.text, 'released'::pg_catalog.text, 'reason'::pg_catalog.text," \
	"  'not confirmed before its claim lease ended'::pg_catalog.text)" \
	"  WHERE id OPERATOR(pg_catalog.=) " pick route_x \
	"  AND state OPERATOR(pg_catalog.=) 'started'::idemjob.attempt_state" \
	"  AND lease_until IS NOT NULL" \
	"  RETURNING job_id)," \
	" y AS (" \
	"  UPDATE idemjob.jobs j SET state = 'pending'::idemjob.job_state," \
	"  run_at = pg_catalog.now(), updated_at = pg_catalog.now()" \
	"  FROM x WHERE j.id OPERATOR(pg_catalog.=) x.job_id" route_y \
	"  AND j.state OPERATOR(pg_catalog.=) 'running'::idemjob.job_state" \
	"  RETURNING j.intent)" \
	" SELECT (SELECT pg_catalog.count(*)::pg_catalog.int4 FROM x)," \
	" ARRAY(SELECT DISTINCT y.intent FROM y)"
static IjPlan release_expired = {
	RELEASE_SQL("ANY (ARRAY("
				"   SELECT l.id FROM idemjob.attempts l"
				"   WHERE l.state OPERATOR(pg_catalog.=) 'started'::idemjob.attempt_state"
				"   AND l.lease_until IS NOT NULL"
				"   AND l.lease_until OPERATOR(pg_catalog.<) pg_catalog.now()"
				"   AND ($1::pg_catalog.text IS NULL OR l.owner_id OPERATOR(pg_catalog.=) $1)"
				"   FOR UPDATE SKIP LOCKED))", "", ""),
	1, {TEXTOID}, NULL, 0, false, NULL, 0
};
/* one attempt, already locked (abandon_attempts) */
static IjPlan release_one = {
	RELEASE_SQL("$1", IJ_ROUTE("", 2), IJ_ROUTE("j.", 2)),
	2, {UUIDOID, INT4OID}, NULL, 0, false, NULL, 0
};

/* the doubt policy: unknown for longer than the intent allows */
static IjPlan over_policy = {
	"SELECT a.id FROM idemjob.attempts a"
	" JOIN idemjob.jobs j ON j.id OPERATOR(pg_catalog.=) a.job_id"
	" JOIN idemjob.retry_policies p ON p.intent OPERATOR(pg_catalog.=) j.intent"
	" WHERE a.state OPERATOR(pg_catalog.=) 'unknown'::idemjob.attempt_state"
	" AND p.fence_unknown_after IS NOT NULL"
	" AND a.unknown_at OPERATOR(pg_catalog.<)"
	" (pg_catalog.now() OPERATOR(pg_catalog.-) p.fence_unknown_after)"
	" AND ($1::pg_catalog.text IS NULL OR a.owner_id OPERATOR(pg_catalog.=) $1)"
	" ORDER BY a.unknown_at LIMIT 1000"
	" FOR UPDATE OF a SKIP LOCKED",
	1, {TEXTOID}, NULL, 0, false, NULL, 0
};

/*
 * begin_attempt's common path, one statement: a leased attempt inside its
 * lease, of a job not final, confirmed (BEGIN_DEADLINE).  No row: the full path decides (I7, IJ003, IJ005, IJ008).
 */
static IjPlan begin_fast = {
	"UPDATE idemjob.attempts a SET lease_until = NULL,"
	" deadline = " BEGIN_DEADLINE("a.", "$4")
	" FROM idemjob.jobs j"
	" WHERE a.id OPERATOR(pg_catalog.=) $1" IJ_ROUTE("a.", 2)
	" AND a.state OPERATOR(pg_catalog.=) 'started'::idemjob.attempt_state"
	" AND a.lease_until OPERATOR(pg_catalog.>=) $3"
	" AND j.id OPERATOR(pg_catalog.=) a.job_id" IJ_ROUTE("j.", 2)
	" AND j.state OPERATOR(pg_catalog.=) ANY ('{pending,running,in_doubt}'::idemjob.job_state[])"
	" RETURNING a.*",
	4, {UUIDOID, INT4OID, TIMESTAMPTZOID, TIMESTAMPTZOID}, NULL, 0, false, NULL, 0
};

static IjPlan job_state = {
	"SELECT state::pg_catalog.text FROM idemjob.jobs WHERE id OPERATOR(pg_catalog.=) $1"
	IJ_ROUTE("", 2),
	2, {UUIDOID, INT4OID}, NULL, 0, false, NULL, 0
};

/* a worker's attempts in flight or in doubt, in a fixed order */
static IjPlan worker_attempts = {
	"SELECT a.id FROM idemjob.attempts a"
	" WHERE a.worker OPERATOR(pg_catalog.=) $1"
	" AND a.state OPERATOR(pg_catalog.=) ANY ('{started,unknown}'::idemjob.attempt_state[])"
	" AND ($2::pg_catalog.text IS NULL OR a.owner_id OPERATOR(pg_catalog.=) $2)"
	" ORDER BY a.id",
	2, {TEXTOID, TEXTOID}, NULL, 0, false, NULL, 0
};

/* IJ005 for a call that needs a started attempt: "attempt X cannot <verb>" */
void
ij_not_started(IjAttempt *a, const char *verb, const char *hint)
{
	ereport(ERROR,
			(errcode(ERRCODE_IJ_INVALID_TRANSITION),
			 errmsg("attempt %s cannot %s", ij_uuid_str(a->id), verb),
			 errdetail("The attempt is %s.", a->state),
			 ij_errfields("attempts", psprintf("attempt_id=%s job_id=%s state=%s",
											   ij_uuid_str(a->id), ij_uuid_str(a->job_id), a->state)),
			 errhint("%s", hint)));
}

void
ij_lease_expired(IjAttempt *a)
{
	bool		released = strcmp(a->state, "released") == 0;

	ereport(ERROR,
			(errcode(ERRCODE_IJ_LEASE_EXPIRED),
			 errmsg("attempt %s was not confirmed within its claim lease", ij_uuid_str(a->id)),
			 released ? errdetail("The attempt was released: it was never sent, and its job is free for a new attempt.")
			 : errdetail("Its lease has ended; the sweeper or idemjob.expire_attempts() releases it."),
			 ij_errfields("attempts", psprintf("attempt_id=%s job_id=%s state=%s",
											   ij_uuid_str(a->id), ij_uuid_str(a->job_id), a->state)),
			 errhint("Do not call the provider for this attempt; claim again.")));
}

/*
 * A call on a leased attempt: the confirmation, if the lease has not ended
 * (shift_deadline: begin_attempt() renews a deadline that passed while
 * the attempt waited, BEGIN_DEADLINE); IJ008 if it has, or if the attempt was
 * released.  Nothing on an attempt without a lease.
 */
void
ij_confirm_lease(IjAttempt *a, bool shift_deadline)
{
	Datum		args[4];

	if (strcmp(a->state, "released") == 0 || (a->leased && a->lease_over))
		ij_lease_expired(a);
	if (!a->leased)
		return;
	args[0] = a->id;
	args[1] = BoolGetDatum(shift_deadline);
	args[2] = Int32GetDatum(a->route);
	args[3] = IJ_NOW_DATUM();
	ij_exec(&confirm_lease, args, NULL);
	a->leased = false;
}

/* the released jobs are due now: tell the waiting workers */
static int32
released(void)
{
	int32		n = DatumGetInt32(ij_col_nn(0, 1));
	ArrayType  *intents = DatumGetArrayTypeP(ij_col_nn(0, 2));
	Datum	   *elems;
	bool	   *elnulls;
	int			nelems;
	int			i;

	deconstruct_array(intents, TEXTOID, -1, false, TYPALIGN_INT,
					  &elems, &elnulls, &nelems);
	for (i = 0; i < nelems; i++)
		ij_notify_due(TextDatumGetCString(elems[i]));
	return n;
}

static int32
release_leases(const IjShardGroup *group, Datum *owner, const char *nulls)
{
	ij_exec_on(&release_expired, group, owner, nulls);
	return released();
}

/*
 * Give up an attempt in doubt whose work may have happened: cancelled and
 * fenced (its result can never win; a late one is logged as lost), and the
 * job retried under its retry policy (counted, backoff, max_attempts) on
 * the route's next provider.  The attempt is locked.
 */
static void
give_up(IjAttempt *a, const char *reason)
{
	Jsonb	   *note = ij_note("cancelled", reason);
	Datum		args[3];

	set_state(a, "cancelled", note, true);
	args[0] = a->job_id;
	args[1] = Int64GetDatum(a->read_version);
	args[2] = Int32GetDatum(a->route);
	ij_exec(&job_fence, args, NULL);
	ij_job_retry(a->job_id, a->route, a->provider, note);
}

/* ids of the rows an SPI query returned (column 1), copied */
static Datum *
result_ids(int n)
{
	Datum	   *ids = palloc(sizeof(Datum) * Max(n, 1));
	int			i;

	for (i = 0; i < n; i++)
	{
		pg_uuid_t  *u = palloc(sizeof(pg_uuid_t));

		memcpy(u, DatumGetUUIDP(ij_col_nn(i, 1)), sizeof(pg_uuid_t));
		ids[i] = UUIDPGetDatum(u);
	}
	return ids;
}

static int32
fence_by_policy(const IjShardGroup *group, Datum *owner, const char *nulls)
{
	int			n = ij_exec_on(&over_policy, group, owner, nulls);
	Datum	   *ids = result_ids(n);
	int			i;
	int32		done = 0;

	for (i = 0; i < n; i++)
	{
		IjAttempt	a;

		CHECK_FOR_INTERRUPTS();
		if (!ij_try_lock_attempt(ids[i], &a, false) ||
			strcmp(a.state, "unknown") != 0)
			continue;
		give_up(&a, "unknown for longer than its intent's fence_unknown_after");
		done++;
	}
	return done;
}

/*
 * idemjob.begin_attempt(attempt_id) RETURNS idemjob.attempts
 *
 * The worker's confirmation, immediately before it calls the provider.
 */
Datum
idemjob_begin_attempt(PG_FUNCTION_ARGS)
{
	IJ_ENTRY();
	IjAttempt	a;
	Datum		id;
	Datum		result;
	Datum		args[4];

	ij_require(fcinfo, 0, "attempt_id");

	id = PG_GETARG_DATUM(0);
	IJ_FORWARD(ij_id_route(id));
	ij_connect();
	args[0] = id;
	args[1] = Int32GetDatum(ij_id_route(id));
	/* the clock as a value: Citus refuses a volatile function in the WHERE of an UPDATE */
	args[2] = TimestampTzGetDatum(GetCurrentTimestamp());
	args[3] = IJ_NOW_DATUM();
	if (ij_exec(&begin_fast, args, NULL) == 1)
	{
		/* another owner's attempt: the error undoes the statement */
		if (!ij_owner_visible(ij_col_nn(0, 3)))
			ij_attempt_not_found(id);
		result = ij_row_datum(0, fcinfo);
		ij_finish();
		PG_RETURN_DATUM(result);
	}
	ij_lock_attempt(id, &a);
	/* a job that ended meanwhile (cancel_job): nothing to send */
	if (a.leased && ij_exec_id(&job_state, a.job_id, a.route) == 1)
	{
		char	   *state = TextDatumGetCString(ij_col_nn(0, 1));

		if (ij_job_final(state))
			ereport(ERROR,
					(errcode(ERRCODE_IJ_JOB_FINISHED),
					 errmsg("job %s is already finished", ij_uuid_str(a.job_id)),
					 errdetail("The job is %s; attempt %s must not be sent.", state, ij_uuid_str(a.id)),
					 ij_errfields("jobs", psprintf("job_id=%s state=%s", ij_uuid_str(a.job_id), state)),
					 errhint("Drop the attempt; its lease ends and it is released.")));
	}
	ij_confirm_lease(&a, true);
	if (strcmp(a.state, "started") != 0)
		ij_not_started(&a, "begin",
					   "Only a started attempt is sent; this one has already ended or is in doubt.");
	ij_exec_id(&attempt_row, a.id, a.route);
	result = ij_row_datum(0, fcinfo);
	ij_finish();
	PG_RETURN_DATUM(result);
}

/*
 * idemjob.abandon_attempts(worker) RETURNS integer
 *
 * A restarted worker gives up what it left behind: each of its attempts
 * still started or unknown is released (leased and unconfirmed: never
 * sent), or given up (cancelled, fenced, retried).  Under an owner
 * binding, the bound owner's only.  The number of attempts changed.
 */
Datum
idemjob_abandon_attempts(PG_FUNCTION_ARGS)
{
	IJ_ENTRY();
	text	   *owner;
	Datum		args[2];
	char		nulls[2] = {' ', ' '};
	Datum	   *ids;
	int			n;
	int			i;
	int32		done = 0;
	IjShardGroup *groups;
	int			ngroups;
	int			g;

	args[0] = PointerGetDatum(ij_name_arg(fcinfo, 0, "worker", false));
	owner = ij_bound_owner();
	args[1] = PointerGetDatum(owner);
	nulls[1] = owner ? ' ' : 'n';
	IJ_ON_SHARD_NODES("abandon_attempts", -1);

	ij_connect();
	/* the tables (-1), or under Citus each of this node's shard groups */
	ngroups = ij_local_shard_groups(&groups);
	for (g = 0; g < ngroups; g++)
	{
		CHECK_FOR_INTERRUPTS();
		n = ij_exec_on(&worker_attempts, &groups[g], args, nulls);
		ids = result_ids(n);
		for (i = 0; i < n; i++)
		{
			IjAttempt	a;

			CHECK_FOR_INTERRUPTS();
			/* each under its lock: a result may have come in meanwhile */
			if (!ij_try_lock_attempt(ids[i], &a, false) || !ij_in_doubt(a.state))
				continue;
			if (a.leased)
			{
				ij_exec_id(&release_one, a.id, a.route);
				(void) released();
			}
			else
				give_up(&a, "abandoned by its worker");
			done++;
		}
	}
	ij_finish();
	PG_RETURN_INT32(done);
}

/*
 * expire_attempts() for owner (NULL: every owner); the sweeper calls it.
 * Three steps, each over rows nobody else holds: leased attempts not
 * confirmed in time are released, started attempts past their deadline
 * become unknown, and attempts unknown for longer than their intent's
 * fence_unknown_after are given up.  The number of attempts changed.
 */
int32
ij_expire_attempts(text *owner)
{
	int32		released = 0;
	int32		expired = 0;
	int32		fenced = 0;
	Datum		arg = PointerGetDatum(owner);
	const char *nulls = owner ? NULL : "n";
	IjShardGroup *groups;
	int			ngroups;
	int			g;

	ij_connect();
	/* the tables, or under Citus each of this node's shard groups */
	ngroups = ij_local_shard_groups(&groups);
	for (g = 0; g < ngroups; g++)
	{
		const IjShardGroup *group = &groups[g];

		CHECK_FOR_INTERRUPTS();
		released += release_leases(group, &arg, nulls);
		ij_exec_on(&expire, group, &arg, nulls);
		expired += DatumGetInt32(ij_col_nn(0, 1));
		fenced += fence_by_policy(group, &arg, nulls);
	}
	ij_finish();
	ij_log_pass(IJ_LOG_SWEEPER, released, expired, fenced);
	return released + expired + fenced;
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
	" (intent, max_attempts, retry_backoff, retry_backoff_max, fence_unknown_after)"
	" VALUES ($1, $2, $3, $4, $5)"
	" ON CONFLICT (intent) DO UPDATE SET"
	" max_attempts = EXCLUDED.max_attempts,"
	" retry_backoff = EXCLUDED.retry_backoff,"
	" retry_backoff_max = EXCLUDED.retry_backoff_max,"
	" fence_unknown_after = EXCLUDED.fence_unknown_after,"
	" updated_at = CASE WHEN " SAME("max_attempts") " AND " SAME("retry_backoff")
	" AND " SAME("retry_backoff_max") " AND " SAME("fence_unknown_after")
	" THEN r.updated_at ELSE $6 END"
	" RETURNING r.intent, r.max_attempts, r.retry_backoff, r.retry_backoff_max, r.updated_at,"
	" r.fence_unknown_after",
	6, {TEXTOID, INT4OID, INTERVALOID, INTERVALOID, INTERVALOID, TIMESTAMPTZOID}, NULL, 0, false, NULL, 0
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
	IJ_ENTRY();
	Datum		args[6];
	char		nulls[6] = {' ', ' ', ' ', ' ', ' ', ' '};
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
	if (!PG_ARGISNULL(2) && !PG_ARGISNULL(3) &&
		DatumGetBool(DirectFunctionCall2(interval_gt, PG_GETARG_DATUM(2),
										 PG_GETARG_DATUM(3))))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument \"retry_backoff\" must not be longer than \"retry_backoff_max\""),
				 errhint("With one of them NULL, the delay is capped at the longest one when it is used.")));
	if (!PG_ARGISNULL(4))
	{
		Interval	zero;

		memset(&zero, 0, sizeof(zero));
		if (!DatumGetBool(DirectFunctionCall2(interval_gt, PG_GETARG_DATUM(4),
											  IntervalPGetDatum(&zero))))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("argument \"fence_unknown_after\" must be positive"),
					 errhint("Pass NULL to leave attempts in doubt for an operator.")));
	}
	for (i = 1; i < 5; i++)
	{
		args[i] = PG_ARGISNULL(i) ? (Datum) 0 : PG_GETARG_DATUM(i);
		nulls[i] = PG_ARGISNULL(i) ? 'n' : ' ';
	}

	args[5] = IJ_NOW_DATUM();
	nulls[5] = ' ';
	ij_connect();
	ij_exec(&set_policy, args, nulls);
	result = ij_row_datum(0, fcinfo);
	ij_finish();
	PG_RETURN_DATUM(result);
}
