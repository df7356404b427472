/*-------------------------------------------------------------------------
 *
 * await.c
 *	  Reading a job: job() returns its row, await_job() waits inside the
 *	  server until it is final or a timeout passes.
 *
 * await_job() polls: it reads the row, and while the job is not final it
 * sleeps on its latch for AWAIT_POLL_MS and reads again.  Under READ
 * COMMITTED each read is a new SPI statement with a new snapshot, so it
 * sees the commit that finishes the job at the next poll; under REPEATABLE
 * READ or SERIALIZABLE the snapshot would never move, so await_job()
 * refuses (0A000).  No lock is taken: the answer is the row as committed.
 * Interrupts are served after every sleep, so a cancel or
 * statement_timeout ends the wait at once with 57014.  No LISTEN is
 * needed, so it works through a pooler in transaction mode.
 *
 * Under an owner binding, another owner's job is absent (IJ006).
 *
 * src/await.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "idemjob.h"

PG_FUNCTION_INFO_V1(idemjob_job);
PG_FUNCTION_INFO_V1(idemjob_await_job);

#define AWAIT_POLL_MS	10
#define AWAIT_MAX_DAYS	((int64) 365 * 1000)

static IjPlan job_row = {
	"SELECT * FROM idemjob.jobs WHERE id OPERATOR(pg_catalog.=) $1" IJ_ROUTE("", 2),
	2, {UUIDOID, INT4OID}, NULL, 0, false, NULL, 0
};

/*
 * Read the job into result row 0; IJ006 when it is absent or another
 * owner's.  Returns its state as text.
 */
static char *
read_job(Datum job_id)
{
	TupleDesc	td;
	HeapTuple	tup;
	int32		route = ij_id_route(job_id);
	int			n;

	n = ij_exec_id(&job_row, job_id, route);
	if (n == 0 && ij_reroute(false, job_id, &route))
		n = ij_exec_id(&job_row, job_id, route);
	if (n == 1)
	{
		td = SPI_tuptable->tupdesc;
		tup = SPI_tuptable->vals[0];
		if (ij_owner_visible(ij_col_nn(0, SPI_fnumber(td, "owner_id"))))
			return SPI_getvalue(tup, td, SPI_fnumber(td, "state"));
	}
	ereport(ERROR,
			(errcode(ERRCODE_IJ_NOT_FOUND),
			 errmsg("job %s does not exist", ij_uuid_str(job_id)),
			 ij_errfields("jobs", psprintf("job_id=%s", ij_uuid_str(job_id)))));
	return NULL;				/* keep compiler quiet */
}

/*
 * idemjob.job(job_id) RETURNS idemjob.jobs
 */
Datum
idemjob_job(PG_FUNCTION_ARGS)
{
	IJ_ENTRY();
	Datum		result;

	ij_require(fcinfo, 0, "job_id");
	IJ_FORWARD(ij_id_route(PG_GETARG_DATUM(0)));
	ij_connect();
	(void) read_job(PG_GETARG_DATUM(0));
	result = ij_row_datum(0, fcinfo);
	ij_finish();
	PG_RETURN_DATUM(result);
}

/*
 * idemjob.await_job(job_id, timeout) RETURNS idemjob.jobs
 */
Datum
idemjob_await_job(PG_FUNCTION_ARGS)
{
	IJ_ENTRY();
	Datum		job_id;
	Interval   *timeout;
	Interval	zero;
	int64		timeout_us;
	TimestampTz end;
	Datum		result;

	ij_require(fcinfo, 0, "job_id");
	ij_require(fcinfo, 1, "timeout");
	job_id = PG_GETARG_DATUM(0);
	timeout = PG_GETARG_INTERVAL_P(1);
	memset(&zero, 0, sizeof(zero));
	if (DatumGetInt32(DirectFunctionCall2(interval_cmp,
										  IntervalPGetDatum(timeout),
										  IntervalPGetDatum(&zero))) < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument \"timeout\" must not be negative"),
				 errhint("Pass '0' to read the job without waiting.")));
	if (IsolationUsesXactSnapshot())
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("await_job is not supported under %s",
						IsolationIsSerializable() ? "SERIALIZABLE" : "REPEATABLE READ"),
				 errdetail("The transaction's snapshot would never show the job finishing."),
				 errhint("Call it under READ COMMITTED, or read the job with idemjob.job().")));

	/* a month counts 30 days; saturate far past any useful wait */
	if ((int64) timeout->month * DAYS_PER_MONTH + timeout->day > AWAIT_MAX_DAYS ||
		timeout->time > AWAIT_MAX_DAYS * USECS_PER_DAY)
		timeout_us = AWAIT_MAX_DAYS * USECS_PER_DAY;
	else
		timeout_us = ((int64) timeout->month * DAYS_PER_MONTH + timeout->day) *
			USECS_PER_DAY + timeout->time;
	timeout_us = ij_capped_wait(timeout_us);
	end = GetCurrentTimestamp() + timeout_us;
	IJ_FORWARD(ij_id_route(job_id));

	ij_connect();
	for (;;)
	{
		TimestampTz clock;
		long		sleep_ms;
		char	   *state = read_job(job_id);
		bool		final = ij_job_final(state);

		pfree(state);
		if (final)
			break;
		clock = GetCurrentTimestamp();
		if (clock >= end)
			break;
		SPI_freetuptable(SPI_tuptable);
		sleep_ms = (long) Min((end - clock + 999) / 1000, AWAIT_POLL_MS);
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 sleep_ms, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		ij_check_client();
	}
	result = ij_row_datum(0, fcinfo);
	ij_finish();
	PG_RETURN_DATUM(result);
}
