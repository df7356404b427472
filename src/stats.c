/*-------------------------------------------------------------------------
 *
 * stats.c
 *	  provider_stats(since): what each provider did over a recent window,
 *	  cheap enough for a dashboard to ask every few seconds.
 *
 * The view idemjob.provider_stats aggregates every attempt present, so
 * its cost grows with the history purge() has not yet removed.  This
 * function reads only the window:
 *
 * - the attempts started in the last `since`, walking attempts_pkey from
 *	 the lowest id a UUIDv7 made at now() - since can have (uuidv7.c: the
 *	 id's high 48 bits are the Unix time in milliseconds when it was made,
 *	 which is never before the attempt's started_at, the transaction's
 *	 start), then keeping those whose started_at is in the window: no
 *	 index of its own, so nothing added to every attempt's insert; each
 *	 attempt's intent is read from its job by primary key (a subquery, so
 *	 that no estimate can turn it into a hash of every job);
 * - the race-log rows logged in the window, through race_log_logged_at:
 *	 races_lost and how late the losers were.
 *
 * Counts are per (intent, provider), as in the view, with the view's
 * columns first; percentiles are rounded to 0.1 ms.  The statements run
 * as the extension's owner (the caller needs EXECUTE only, as the monitor
 * capability grants), and under an owner binding count the bound owner's
 * rows only.  A race-log row keeps its intent after purge (since 1.2; a
 * row logged before 1.2 whose job was purged has none: NULL).
 *
 * src/stats.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "datatype/timestamp.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"
#include "utils/uuid.h"

#include "idemjob.h"

PG_FUNCTION_INFO_V1(idemjob_provider_stats);

/*
 * $1: the lowest attempt id of the window, $2: its start, $3: the bound
 * owner or NULL.  A custom plan each time: the id's range decides between
 * an index walk and a scan, and only its value tells how wide it is.  An
 * attempt's job is read under its owner_hash too: Citus joins the two
 * distributed tables on their distribution column only.
 */
static IjPlan window_stats = {
	"WITH a AS ("
	" SELECT (SELECT j.intent FROM idemjob.jobs j"
	"		  WHERE j.owner_hash OPERATOR(pg_catalog.=) a.owner_hash"
	"		  AND j.id OPERATOR(pg_catalog.=) a.job_id) AS intent,"
	"	 a.provider, a.state, a.error, a.started_at, a.finished_at"
	" FROM idemjob.attempts a"
	" WHERE a.id OPERATOR(pg_catalog.>=) $1"
	"	AND a.started_at OPERATOR(pg_catalog.>=) $2"
	"	AND ($3::pg_catalog.text IS NULL OR a.owner_id OPERATOR(pg_catalog.=) $3)"
	"), s AS ("
	" SELECT a.intent, a.provider,"
	"	pg_catalog.count(*) AS attempts,"
	"	pg_catalog.count(*) FILTER (WHERE a.state OPERATOR(pg_catalog.=) 'succeeded'::idemjob.attempt_state) AS succeeded,"
	"	pg_catalog.count(*) FILTER (WHERE a.state OPERATOR(pg_catalog.=) 'superseded'::idemjob.attempt_state) AS superseded,"
	"	pg_catalog.count(*) FILTER (WHERE a.state OPERATOR(pg_catalog.=) 'failed'::idemjob.attempt_state"
	"		AND (a.error OPERATOR(pg_catalog.->>) 'code') OPERATOR(pg_catalog.=) 'contract_violation') AS rejected,"
	"	pg_catalog.count(*) FILTER (WHERE a.state OPERATOR(pg_catalog.=) 'failed'::idemjob.attempt_state"
	"		AND (a.error OPERATOR(pg_catalog.->>) 'code') IS DISTINCT FROM 'contract_violation') AS failed,"
	"	pg_catalog.count(*) FILTER (WHERE a.state OPERATOR(pg_catalog.=) ANY"
	"		('{started,unknown}'::idemjob.attempt_state[])) AS in_doubt,"
	"	pg_catalog.count(*) FILTER (WHERE a.state OPERATOR(pg_catalog.=) 'cancelled'::idemjob.attempt_state) AS cancelled,"
	"	pg_catalog.percentile_cont(0.5::pg_catalog.float8) WITHIN GROUP (ORDER BY"
	"		pg_catalog.date_part('epoch'::pg_catalog.text,"
	"			a.finished_at OPERATOR(pg_catalog.-) a.started_at) OPERATOR(pg_catalog.*) 1000::pg_catalog.float8)"
	"		FILTER (WHERE a.state OPERATOR(pg_catalog.=) 'succeeded'::idemjob.attempt_state) AS p50,"
	"	pg_catalog.percentile_cont(0.95::pg_catalog.float8) WITHIN GROUP (ORDER BY"
	"		pg_catalog.date_part('epoch'::pg_catalog.text,"
	"			a.finished_at OPERATOR(pg_catalog.-) a.started_at) OPERATOR(pg_catalog.*) 1000::pg_catalog.float8)"
	"		FILTER (WHERE a.state OPERATOR(pg_catalog.=) 'succeeded'::idemjob.attempt_state) AS p95,"
	"	pg_catalog.max(a.started_at) AS last_started_at,"
	"	pg_catalog.count(*) FILTER (WHERE a.state OPERATOR(pg_catalog.=) 'released'::idemjob.attempt_state) AS released"
	" FROM a GROUP BY a.intent, a.provider"
	"), r AS ("

	/* the row's own intent (1.2: kept after purge; the update filled it) */
	" SELECT r.intent,"
	"	 r.provider,"
	"	pg_catalog.count(*) AS races_lost,"
	"	pg_catalog.percentile_cont(0.5::pg_catalog.float8) WITHIN GROUP (ORDER BY"
	"		pg_catalog.date_part('epoch'::pg_catalog.text,"
	"			COALESCE(r.late_by, r.logged_at OPERATOR(pg_catalog.-) r.fenced_at)) OPERATOR(pg_catalog.*) 1000::pg_catalog.float8) AS p50,"
	"	pg_catalog.percentile_cont(0.95::pg_catalog.float8) WITHIN GROUP (ORDER BY"
	"		pg_catalog.date_part('epoch'::pg_catalog.text,"
	"			COALESCE(r.late_by, r.logged_at OPERATOR(pg_catalog.-) r.fenced_at)) OPERATOR(pg_catalog.*) 1000::pg_catalog.float8) AS p95"
	" FROM idemjob.race_log r"
	" WHERE r.logged_at OPERATOR(pg_catalog.>=) $2"
	"	AND r.reason OPERATOR(pg_catalog.=) ANY ('{slot_taken,version_moved}'::pg_catalog.text[])"
	"	AND ($3::pg_catalog.text IS NULL OR r.owner_id OPERATOR(pg_catalog.=) $3)"
	" GROUP BY 1, 2"
	")"
	" SELECT COALESCE(s.intent, r.intent)::pg_catalog.text,"
	"	COALESCE(s.provider, r.provider)::pg_catalog.text,"
	"	COALESCE(s.attempts, 0), COALESCE(s.succeeded, 0), COALESCE(s.superseded, 0),"
	"	COALESCE(s.rejected, 0), COALESCE(s.failed, 0), COALESCE(s.in_doubt, 0),"
	"	COALESCE(s.cancelled, 0),"
	"	pg_catalog.round(s.p50::pg_catalog.numeric, 1),"
	"	pg_catalog.round(s.p95::pg_catalog.numeric, 1),"
	"	s.last_started_at, COALESCE(s.released, 0),"
	"	COALESCE(r.races_lost, 0),"
	"	pg_catalog.round(r.p50::pg_catalog.numeric, 1),"
	"	pg_catalog.round(r.p95::pg_catalog.numeric, 1)"
	" FROM s FULL JOIN r ON r.intent OPERATOR(pg_catalog.=) s.intent"
	"	AND r.provider OPERATOR(pg_catalog.=) s.provider"
	" ORDER BY 1, 2",
	3, {UUIDOID, TIMESTAMPTZOID, TEXTOID}, NULL, CURSOR_OPT_CUSTOM_PLAN, false, NULL, 0
};

/*
 * The lowest UUIDv7 made at or after ts: its Unix milliseconds, then
 * zeros (below every version, variant and random bits).  Before 1970: the
 * nil UUID.
 */
static pg_uuid_t *
lowest_uuid_at(TimestampTz ts)
{
	pg_uuid_t  *uuid = palloc0(sizeof(pg_uuid_t));
	int64		unix_ms;
	int			i;

	/* TimestampTz counts microseconds since 2000-01-01 */
	unix_ms = ts / 1000 + (int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY * 1000;
	if (ts < 0 && ts % 1000 != 0)
		unix_ms--;				/* floor, not truncation */
	if (unix_ms <= 0)
		return uuid;
	if (unix_ms >= ((int64) 1 << 48))
		unix_ms = ((int64) 1 << 48) - 1;
	for (i = 0; i < 6; i++)
		uuid->data[i] = (unsigned char) (unix_ms >> (8 * (5 - i)));
	return uuid;
}

/*
 * idemjob.provider_stats(since interval) RETURNS TABLE(intent, provider,
 *		attempts, succeeded, superseded, rejected, failed, in_doubt,
 *		cancelled, p50_ms, p95_ms, last_started_at, released, races_lost,
 *		late_by_p50_ms, late_by_p95_ms)
 */
Datum
idemjob_provider_stats(PG_FUNCTION_ARGS)
{
	IJ_ENTRY();
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Interval	zero;
	Datum		since;
	TimestampTz start;
	text	   *bound;
	Datum		args[3];
	char		nulls[3] = {' ', ' ', ' '};
	TupleDesc	tupdesc;
	Tuplestorestate *ts;
	MemoryContext oldcxt;
	int			n;
	int			i;

	/* arguments first: 22004, then 22023 */
	ij_require(fcinfo, 0, "since");
	since = PG_GETARG_DATUM(0);
	memset(&zero, 0, sizeof(zero));
	if (DatumGetBool(DirectFunctionCall2(interval_lt, since,
										 IntervalPGetDatum(&zero))))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("since must not be negative"),
				 errdetail("It is %s.",
						   DatumGetCString(DirectFunctionCall1(interval_out, since))),
				 errhint("Give the window to look back over, such as '5 minutes'.")));
	start = DatumGetTimestampTz(ij_time_before(GetCurrentTransactionStartTimestamp(),
											   DatumGetIntervalP(since), "since"));

	if (rsinfo == NULL || !IsA(rsinfo, ReturnSetInfo) ||
		!(rsinfo->allowedModes & SFRM_Materialize))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("set-valued function called in context that cannot accept a set")));

	args[0] = UUIDPGetDatum(lowest_uuid_at(start));
	args[1] = TimestampTzGetDatum(start);
	bound = ij_bound_owner();
	args[2] = PointerGetDatum(bound);
	nulls[2] = bound ? ' ' : 'n';

	ij_connect();
	n = ij_exec(&window_stats, args, nulls);

	tupdesc = ij_result_tupdesc(fcinfo);
	oldcxt = MemoryContextSwitchTo(rsinfo->econtext->ecxt_per_query_memory);
	ts = tuplestore_begin_heap(false, false, work_mem);
	rsinfo->returnMode = SFRM_Materialize;
	rsinfo->setResult = ts;
	rsinfo->setDesc = CreateTupleDescCopy(tupdesc);
	MemoryContextSwitchTo(oldcxt);

	/* the tuplestore copies each row out of SPI memory */
	for (i = 0; i < n; i++)
	{
		CHECK_FOR_INTERRUPTS();
		tuplestore_puttuple(ts, SPI_tuptable->vals[i]);
	}
	ij_finish();

	return (Datum) 0;
}
