/*-------------------------------------------------------------------------
 *
 * jobs.c
 *	  The job table: submit() (one job per owner and idempotency key) and
 *	  cancel_job().
 *
 * submit() never checks before it inserts.  It inserts with ON CONFLICT ON
 * CONSTRAINT jobs_owner_key DO NOTHING (the key on (owner_id,
 * idempotency_key), with owner_hash added in the partitioned layout; named,
 * so that the statement fits either), so the unique constraint decides
 * which of several concurrent callers creates the job: the others wait in
 * the speculative insertion for the winner's transaction and, once it has
 * committed, read its row.  Under READ COMMITTED every statement takes a new
 * snapshot, so that row is visible; under REPEATABLE READ or SERIALIZABLE
 * the insert raises 40001 instead, and the caller retries (I7 makes that
 * safe).  If the row that conflicted is gone by the time it is read (a
 * finished job deleted concurrently), the insert is tried again.
 *
 * cancel_job() locks the job row (FOR UPDATE) before it decides, so it
 * serializes with start_attempt() and the result compare-and-swap.
 *
 * src/jobs.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"

#include "idemjob.h"

PG_FUNCTION_INFO_V1(idemjob_submit);
PG_FUNCTION_INFO_V1(idemjob_cancel_job);

static IjPlan insert_job = {
	"INSERT INTO idemjob.jobs (id, owner_id, idempotency_key, intent, params, provider,"
	" run_at, priority, max_attempts, owner_hash)"
	" VALUES ($1, $2, $3, $4, $5, $6, COALESCE($7, pg_catalog.now()), $8, $9, $10::idemjob.owner_hash)" IJ_ROUTE_PARAM(10)
	" ON CONFLICT ON CONSTRAINT jobs_owner_key DO NOTHING",
	10, {UUIDOID, TEXTOID, TEXTOID, TEXTOID, JSONBOID, TEXTOID, TIMESTAMPTZOID,
	INT4OID, INT4OID, INT4OID}, NULL, 0, false, NULL, 0
};

static IjPlan find_job = {
	"SELECT id, intent, params, provider, state, version, result"
	" FROM idemjob.jobs"
	" WHERE owner_id OPERATOR(pg_catalog.=) $1"
	" AND idempotency_key OPERATOR(pg_catalog.=) $2" IJ_ROUTE("", 3),
	3, {TEXTOID, TEXTOID, INT4OID}, NULL, 0, false, NULL, 0
};

static IjPlan lock_job = {
	"SELECT state::pg_catalog.text, owner_id FROM idemjob.jobs"
	" WHERE id OPERATOR(pg_catalog.=) $1" IJ_ROUTE("", 2) " FOR UPDATE",
	2, {UUIDOID, INT4OID}, NULL, 0, false, NULL, 0
};

static IjPlan job_row = {
	"SELECT * FROM idemjob.jobs WHERE id OPERATOR(pg_catalog.=) $1" IJ_ROUTE("", 2),
	2, {UUIDOID, INT4OID}, NULL, 0, false, NULL, 0
};

static IjPlan cancel_job = {
	"UPDATE idemjob.jobs SET state = 'cancelled'::idemjob.job_state,"
	" version = version OPERATOR(pg_catalog.+) 1,"
	" completed_at = pg_catalog.now(), updated_at = pg_catalog.now(),"
	" cancel_reason = $2"
	" WHERE id OPERATOR(pg_catalog.=) $1" IJ_ROUTE("", 3)
	" RETURNING *",
	3, {UUIDOID, TEXTOID, INT4OID}, NULL, 0, false, NULL, 0
};

/*
 * The job_state 'pending' of a new job, as a Datum of the result's state
 * column type: looked up once per backend (again for a re-created type),
 * so the insert needs no RETURNING.
 */
static Datum
pending_state(TupleDesc tupdesc)
{
	static Oid	typoid = InvalidOid;
	static Datum pending;
	Oid			t = TupleDescAttr(tupdesc, 2)->atttypid;

	if (t != typoid)
	{
		pending = DirectFunctionCall2(enum_in, CStringGetDatum("pending"),
									  ObjectIdGetDatum(t));
		typoid = t;
	}
	return pending;
}

/* IJ001: the key was used for another request; detail says what differs */
static void
key_conflict(text *key, text *owner_id, Datum job_id, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_IJ_IDEMPOTENCY_CONFLICT),
			 errmsg("idempotency key \"%s\" of owner \"%s\" was already used for another request",
					text_to_cstring(key), text_to_cstring(owner_id)),
			 errdetail("%s", detail),
			 ij_errfields("jobs", psprintf("job_id=%s", ij_uuid_str(job_id))),
			 errhint("Use a new idempotency key for a new request, or resend the original request unchanged.")));
}

/*
 * idemjob.submit(owner_id, idempotency_key, intent, params, provider)
 *		RETURNS TABLE(job_id, created, state, version, result)
 */
Datum
idemjob_submit(PG_FUNCTION_ARGS)
{
	IJ_ENTRY();
	text	   *owner_id;
	text	   *key;
	text	   *intent;
	text	   *provider;
	Jsonb	   *params;
	Datum		args[10];
	char		nulls[10] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};
	int32		owner_hash;
	bool		due;
	Datum		out[5];
	bool		outnull[5] = {false, false, false, false, true};
	TupleDesc	tupdesc;
	int			tries;

	/* arguments first: 22004, then 22023 */
	ij_require(fcinfo, 0, "owner_id");
	ij_require(fcinfo, 1, "idempotency_key");
	ij_require(fcinfo, 2, "intent");
	ij_require(fcinfo, 3, "params");
	ij_require(fcinfo, 6, "priority");
	owner_id = ij_name_arg(fcinfo, 0, "owner_id", false);
	key = ij_name_arg(fcinfo, 1, "idempotency_key", false);
	intent = ij_name_arg(fcinfo, 2, "intent", false);
	params = ij_jsonb_arg(fcinfo, 3, "params", false);
	provider = ij_name_arg(fcinfo, 4, "provider", true);
	if (provider == NULL)
		provider = cstring_to_text(idemjob_default_provider);
	/* scheduling: not part of the request (a replay ignores them) */
	if (!PG_ARGISNULL(7) && PG_GETARG_INT32(7) < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument \"max_attempts\" must be at least 1"),
				 errhint("Pass NULL to use idemjob.max_attempts.")));
	ij_check_submit_owner(owner_id);

	tupdesc = ij_result_tupdesc(fcinfo);

	/* the job's id carries its owner_hash (docs/scaling.md) */
	owner_hash = ij_owner_hash(owner_id);
	IJ_FORWARD(owner_hash);
	args[0] = UUIDPGetDatum(idemjob_new_uuid_with_hash(owner_hash));
	args[9] = Int32GetDatum(owner_hash);
	args[1] = PointerGetDatum(owner_id);
	args[2] = PointerGetDatum(key);
	args[3] = PointerGetDatum(intent);
	args[4] = JsonbPGetDatum(params);
	args[5] = PointerGetDatum(provider);
	args[6] = PG_ARGISNULL(5) ? (Datum) 0 : PG_GETARG_DATUM(5);
	nulls[6] = PG_ARGISNULL(5) ? 'n' : ' ';
	args[7] = PG_GETARG_DATUM(6);
	args[8] = PG_ARGISNULL(7) ? (Datum) 0 : PG_GETARG_DATUM(7);
	nulls[8] = PG_ARGISNULL(7) ? 'n' : ' ';
	due = PG_ARGISNULL(5) ||
		PG_GETARG_TIMESTAMPTZ(5) <= GetCurrentTransactionStartTimestamp();

	ij_connect();
	/* a spent key answers before the insert (retention.c) */
	ij_check_spent_key(owner_id, key, intent, provider, params, true);
	for (tries = 0;; tries++)
	{
		Datum		j_intent,
					j_params,
					j_provider;
		Datum		fargs[3];

		if (ij_exec(&insert_job, args, nulls) == 1)
		{
			out[0] = args[0];
			out[1] = BoolGetDatum(true);
			out[2] = pending_state(tupdesc);
			out[3] = Int64GetDatum(0);
			/* a purged job's key is spent: IJ007 or IJ001 (retention.c) */
			ij_check_spent_key(owner_id, key, intent, provider, params, false);
			if (due)
				ij_notify_due(text_to_cstring(intent));
			break;
		}

		fargs[0] = args[1];
		fargs[1] = args[2];
		fargs[2] = args[9];
		if (ij_exec(&find_job, fargs, NULL) == 0)
		{
			/* the conflicting job was deleted meanwhile: insert again */
			if (tries < 10)
				continue;
			elog(ERROR, "could not insert or find job for idempotency key \"%s\"",
				 text_to_cstring(key));
		}

		j_intent = ij_col_nn(0, 2);
		j_params = ij_col_nn(0, 3);
		j_provider = ij_col_nn(0, 4);

		if (!ij_text_eq(j_intent, intent))
			key_conflict(key, owner_id, ij_col_nn(0, 1),
						 psprintf("Job %s has intent \"%s\"; this request has intent \"%s\".",
								  ij_uuid_str(ij_col_nn(0, 1)),
								  TextDatumGetCString(j_intent),
								  text_to_cstring(intent)));
		if (!DatumGetBool(DirectFunctionCall2(jsonb_eq, j_params,
											  JsonbPGetDatum(params))))
			key_conflict(key, owner_id, ij_col_nn(0, 1),
						 psprintf("Job %s has different params.",
								  ij_uuid_str(ij_col_nn(0, 1))));
		if (!ij_text_eq(j_provider, provider))
			key_conflict(key, owner_id, ij_col_nn(0, 1),
						 psprintf("Job %s has provider \"%s\"; this request has provider \"%s\".",
								  ij_uuid_str(ij_col_nn(0, 1)),
								  TextDatumGetCString(j_provider),
								  text_to_cstring(provider)));

		out[0] = ij_col_nn(0, 1);
		out[1] = BoolGetDatum(false);
		out[2] = ij_col_nn(0, 5);
		out[3] = ij_col_nn(0, 6);
		out[4] = ij_col(0, 7, &outnull[4]);
		break;
	}

	/* the row copies every value out of SPI memory */
	ij_return_row(fcinfo, out, outnull);
	ij_finish();
	return (Datum) 0;
}

/*
 * idemjob.cancel_job(job_id, reason) RETURNS idemjob.jobs
 */
Datum
idemjob_cancel_job(PG_FUNCTION_ARGS)
{
	IJ_ENTRY();
	Datum		args[3];
	char	   *state;
	Datum		result;
	int32		route;
	int			n;

	ij_require(fcinfo, 0, "job_id");
	ij_require(fcinfo, 1, "reason");
	ij_check_payload(PG_GETARG_DATUM(1), "reason");	/* capped as the others are */
	args[0] = PG_GETARG_DATUM(0);
	args[1] = PG_GETARG_DATUM(1);
	route = ij_id_route(args[0]);
	IJ_FORWARD(route);

	ij_connect();
	n = ij_exec_id(&lock_job, args[0], route);
	if (n == 0 && ij_reroute(false, args[0], &route))
		n = ij_exec_id(&lock_job, args[0], route);
	if (n == 0 || !ij_owner_visible(ij_col_nn(0, 2)))
		ereport(ERROR,
				(errcode(ERRCODE_IJ_NOT_FOUND),
				 errmsg("job %s does not exist", ij_uuid_str(args[0])),
				 ij_errfields("jobs", psprintf("job_id=%s", ij_uuid_str(args[0])))));
	state = TextDatumGetCString(ij_col_nn(0, 1));

	if (strcmp(state, "cancelled") == 0)
		ij_exec_id(&job_row, args[0], route);	/* I7: the answer as stored */
	else if (strcmp(state, "succeeded") == 0 || strcmp(state, "failed") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_IJ_JOB_FINISHED),
				 errmsg("job %s is already finished", ij_uuid_str(args[0])),
				 errdetail("The job is %s; a finished job cannot be cancelled.", state),
				 ij_errfields("jobs", psprintf("job_id=%s state=%s", ij_uuid_str(args[0]), state))));
	else
	{
		args[2] = Int32GetDatum(route);
		ij_exec(&cancel_job, args, NULL);
		ij_notify_done(args[0]);
	}

	result = ij_row_datum(0, fcinfo);
	ij_finish();
	PG_RETURN_DATUM(result);
}
