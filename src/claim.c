/*-------------------------------------------------------------------------
 *
 * claim.c
 *	  Claiming work: claim() takes due pending jobs and starts an attempt on
 *	  each; heartbeat() extends a started attempt's deadline.
 *
 * claim() is one statement: a CTE that selects the due pending jobs in
 * claim order (priority DESC, run_at, id: the partial index jobs_claim, or
 * jobs_claim_intent for a claim of one intent)
 * with FOR UPDATE SKIP LOCKED, moves each to running exactly as
 * start_attempt() does (attempt_count + 1, read_version = version), and
 * inserts the attempts.  SKIP LOCKED means a claimer never waits for a row
 * another transaction holds; a row that another claimer changed and
 * committed after this statement's snapshot is re-checked under its lock
 * (it is no longer pending, so it is left out).  Two claims never return
 * the same job: each job row is locked by at most one of them, and the
 * partial unique index attempts_one_in_doubt backs that up.
 *
 * With wait > 0 and nothing due, claim() polls inside the server: it sleeps
 * on its latch (CLAIM_POLL_MS at most) and runs the statement again.  Under
 * READ COMMITTED every SPI statement takes a new snapshot, so each poll
 * sees jobs committed since.  Under REPEATABLE READ or SERIALIZABLE it
 * would not, so a waiting claim is refused there (0A000).  Interrupts
 * (cancel, statement_timeout, terminate) are served after every sleep.
 * While it waits no row is locked and no transaction id is taken.
 *
 * A waiting claim compares run_at with the clock, not with now(), and
 * starts its attempts at the clock time it claims them: now() stays at the
 * start of the transaction, and a job scheduled during the wait must become
 * due, and a deadline must not already have passed when the answer is sent.
 *
 * With lease => true (the two-phase claim), each attempt gets a lease of
 * idemjob.claim_lease: the worker confirms it with begin_attempt()
 * immediately before it calls the provider, and an attempt not confirmed
 * in time is released (attempts.c).  A plain claim gives no lease.
 *
 * heartbeat() locks the attempt (FOR UPDATE) like every state-machine
 * function and moves only a started attempt's deadline; on a leased
 * attempt it is the confirmation.
 *
 * src/claim.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "idemjob.h"

PG_FUNCTION_INFO_V1(idemjob_claim);
PG_FUNCTION_INFO_V1(idemjob_claim_on);
PG_FUNCTION_INFO_V1(idemjob_heartbeat);

static Datum claim(FunctionCallInfo fcinfo, int a);
static bool claim_on_nodes(FunctionCallInfo fcinfo, Tuplestorestate *ts,
						   int32 max_jobs, int64 wait_us);
static bool claim_sleep(TimestampTz wait_end);
static int	claim_here(IjPlan *plan, const IjShardGroup *groups, int ngroups,
					   Datum *args, const char *nulls, Tuplestorestate *ts, int32 max_jobs);

#define CLAIM_MAX_JOBS	1000
#define CLAIM_POLL_MS	50

/*
 * $1 due cutoff, $2 intents (or the one intent), $3 bound owner (NULL:
 * any), $4 max_jobs, $5 worker, $6 started_at, $7 deadline (NULL: none),
 * $8 lease end (NULL: no lease).  The attempt goes to the job's current
 * provider: its own, or where its intent's route has moved it (routes.c).
 * The result columns are claim()'s, in order.  Three plans, one per intent
 * filter, so that each has an index in claim order: jobs_claim for any
 * intent, jobs_claim_intent for one; several intents filter jobs_claim.
 */
#define CLAIM_PICK(intent_filter, order, limit) \
	"SELECT id FROM idemjob.jobs" \
	"  WHERE state OPERATOR(pg_catalog.=) 'pending'::idemjob.job_state" \
	"  AND run_at OPERATOR(pg_catalog.<=) $1" \
	intent_filter \
	"  AND ($3::pg_catalog.text IS NULL OR owner_id OPERATOR(pg_catalog.=) $3)" \
	"  ORDER BY " order "priority DESC, run_at, id" \
	"  LIMIT " limit " FOR UPDATE SKIP LOCKED"
#define CLAIM_SQL(job_match, order) \
	"WITH j AS (" \
	"  UPDATE idemjob.jobs t SET" IJ_JOB_STARTS_SET \
	"  WHERE t.id OPERATOR(pg_catalog.=) " job_match \
	"  RETURNING idemjob.uuid_v7(idemjob.owner_hash(t.id)) AS attempt_id, t.id, t.owner_id, t.intent," \
	"  t.params, COALESCE(t.next_provider, t.provider) AS provider," \
	"  t.attempt_count, t.version, t.priority, t.run_at, t.owner_hash)," \
	" a AS (" \
	"  INSERT INTO idemjob.attempts" \
	"  (id, job_id, owner_id, attempt_no, provider, read_version, worker, started_at," \
	"  deadline, lease_until, owner_hash)" \
	"  SELECT j.attempt_id, j.id, j.owner_id, j.attempt_count, j.provider, j.version," \
	"  $5, $6, $7, $8, j.owner_hash FROM j)" \
	" SELECT j.attempt_id, j.id, j.owner_id, j.intent, j.params, j.provider," \
	" j.attempt_count, j.version, $7 FROM j" \
	order

/*
 * The jobs are picked and locked by a sub-select of the UPDATE (an
 * InitPlan, as in the floor's claim): one job by a scalar sub-select, and
 * one row needs no sort; a batch by ARRAY(sub-select).
 */
#define CLAIM_ONE_JOB(intent_filter, order) \
	CLAIM_SQL("(" CLAIM_PICK(intent_filter, order, "1") ")", "")
#define CLAIM_BATCH(intent_filter, order) \
	CLAIM_SQL("ANY (ARRAY(" CLAIM_PICK(intent_filter, order, "$4") "))", \
			  " ORDER BY j.priority DESC, j.run_at, j.id")

/*
 * Two plans for each intent filter, both generic (planned once per
 * backend, and again only when the tables change): the planner cannot sort
 * or scan the table for them (ij_exec_in_order, spi_plans.c), so whatever the statistics and
 * whatever the LIMIT, each is the index scan in claim order (jobs_claim,
 * or jobs_claim_intent for one intent) under LockRows, stopped after
 * max_jobs rows; and re-planning on every call would cost more than
 * running it.  With several intents jobs_claim is walked with the intents
 * as a filter: it stops after max_jobs matches, but reads the due jobs of
 * other intents that come first in claim order on the way.
 * The attempt's columns come from j: the data-modifying CTE a runs to
 * completion whether or not the outer query reads it (an error in it
 * aborts the whole statement), so the result needs no join.
 */
#define CLAIM_ANY_TYPES {TIMESTAMPTZOID, TEXTARRAYOID, TEXTOID, INT4OID, TEXTOID, \
		TIMESTAMPTZOID, TIMESTAMPTZOID, TIMESTAMPTZOID}
#define CLAIM_ONE_TYPES {TIMESTAMPTZOID, TEXTOID, TEXTOID, INT4OID, TEXTOID, \
		TIMESTAMPTZOID, TIMESTAMPTZOID, TIMESTAMPTZOID}
/*
 * One intent: a range of one value, not "intent = $2", and intent first in
 * the order.  With an equality the planner drops intent from the order (a
 * constant), and jobs_claim, filtered, gives the same order: chosen on
 * statistics that say most due jobs are of this intent, it would read a
 * backlog of other intents' jobs.  As a range only jobs_claim_intent
 * (intent, priority DESC, run_at, id) gives the order without a sort.  The
 * column is COLLATE "C": >= and <= the same value is equality.
 */
#define FILTER_ONE "  AND intent OPERATOR(pg_catalog.>=) $2 AND intent OPERATOR(pg_catalog.<=) $2"
#define FILTER_SOME "  AND intent OPERATOR(pg_catalog.=) ANY ($2)"

static IjPlan claim_plans[3][2] = {
	{	/* any intent */
		{CLAIM_ONE_JOB("", ""), 8, CLAIM_ANY_TYPES, NULL, CURSOR_OPT_GENERIC_PLAN, false, NULL, 0},
		{CLAIM_BATCH("", ""), 8, CLAIM_ANY_TYPES, NULL, CURSOR_OPT_GENERIC_PLAN, false, NULL, 0}
	},
	{	/* one intent */
		{CLAIM_ONE_JOB(FILTER_ONE, "intent, "), 8, CLAIM_ONE_TYPES, NULL, CURSOR_OPT_GENERIC_PLAN, false, NULL, 0},
		{CLAIM_BATCH(FILTER_ONE, "intent, "), 8, CLAIM_ONE_TYPES, NULL, CURSOR_OPT_GENERIC_PLAN, false, NULL, 0}
	},
	{	/* several intents */
		{CLAIM_ONE_JOB(FILTER_SOME, ""), 8, CLAIM_ANY_TYPES, NULL, CURSOR_OPT_GENERIC_PLAN, false, NULL, 0},
		{CLAIM_BATCH(FILTER_SOME, ""), 8, CLAIM_ANY_TYPES, NULL, CURSOR_OPT_GENERIC_PLAN, false, NULL, 0}
	}
};

static IjPlan heartbeat = {
	"UPDATE idemjob.attempts SET deadline = $2"
	" WHERE id OPERATOR(pg_catalog.=) $1" IJ_ROUTE("", 3)
	" RETURNING *",
	3, {UUIDOID, TIMESTAMPTZOID, INT4OID}, NULL, 0, false, NULL, 0
};

static bool
interval_positive(Interval *i)
{
	Interval	zero;

	memset(&zero, 0, sizeof(zero));
	return DatumGetInt32(DirectFunctionCall2(interval_cmp,
											 IntervalPGetDatum(i),
											 IntervalPGetDatum(&zero))) > 0;
}

static bool
interval_negative(Interval *i)
{
	Interval	zero;

	memset(&zero, 0, sizeof(zero));
	return DatumGetInt32(DirectFunctionCall2(interval_cmp,
											 IntervalPGetDatum(i),
											 IntervalPGetDatum(&zero))) < 0;
}

/* an interval in microseconds (a month is 30 days), saturating */
static int64
interval_usecs(Interval *i)
{
	int64		days = (int64) i->month * DAYS_PER_MONTH + i->day;

	/* far past any useful wait: a thousand years */
	if (days > 365 * 1000 || i->time > (int64) 365 * 1000 * USECS_PER_DAY)
		return (int64) 365 * 1000 * USECS_PER_DAY;
	return days * USECS_PER_DAY + i->time;
}

/* a timeout argument: NULL means idemjob.attempt_timeout (0: none) */
static Interval *
timeout_arg(FunctionCallInfo fcinfo, int argno, const char *name)
{
	Interval   *timeout = NULL;

	if (!PG_ARGISNULL(argno))
	{
		timeout = PG_GETARG_INTERVAL_P(argno);
		if (!interval_positive(timeout))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("argument \"%s\" must be positive", name),
					 errhint("Pass NULL to use idemjob.attempt_timeout.")));
	}
	else if (idemjob_attempt_timeout_ms > 0)
	{
		timeout = palloc0(sizeof(Interval));
		timeout->time = (TimeOffset) idemjob_attempt_timeout_ms * 1000;
	}
	return timeout;
}

/*
 * Set up a materialized result for fcinfo (the cached row type).  The
 * tuplestore lives in the query's memory.
 */
static Tuplestorestate *
materialize(FunctionCallInfo fcinfo, TupleDesc *tupdesc)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MemoryContext oldcxt;
	Tuplestorestate *ts;

	if (rsinfo == NULL || !IsA(rsinfo, ReturnSetInfo) ||
		!(rsinfo->allowedModes & SFRM_Materialize))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("set-valued function called in context that cannot accept a set")));
	*tupdesc = ij_result_tupdesc(fcinfo);
	oldcxt = MemoryContextSwitchTo(rsinfo->econtext->ecxt_per_query_memory);
	ts = tuplestore_begin_heap(false, false, work_mem);
	rsinfo->returnMode = SFRM_Materialize;
	rsinfo->setResult = ts;
	/* the executor frees setDesc after the call: give it a copy */
	rsinfo->setDesc = CreateTupleDescCopy(*tupdesc);
	MemoryContextSwitchTo(oldcxt);
	return ts;
}

/*
 * idemjob.claim(worker, intents, max_jobs, timeout, wait, lease)
 *		RETURNS TABLE(attempt_id, job_id, owner_id, intent, params, provider,
 *					  attempt_no, read_version, deadline)
 */
Datum
idemjob_claim(PG_FUNCTION_ARGS)
{
	return claim(fcinfo, 0);
}

/*
 * idemjob.claim_on(node, worker, intents, max_jobs, timeout, wait, lease)
 *		RETURNS the same as claim()
 *
 * claim() on the node that holds the rows of owner_hash node: under Citus
 * (distribute() registers it by node), what claim() on a node with no
 * shards calls on each node that has some (claim_on_nodes()).  Elsewhere
 * node changes nothing.
 */
Datum
idemjob_claim_on(PG_FUNCTION_ARGS)
{
	return claim(fcinfo, 1);
}

/* claim() with its arguments from fcinfo's argument a on */
static Datum
claim(FunctionCallInfo fcinfo, int a)
{
	IJ_ENTRY();
	text	   *worker;
	int32		max_jobs;
	Interval   *timeout;
	Interval   *wait;
	int64		wait_us;
	text	   *owner;
	TimestampTz wait_end = 0;
	Tuplestorestate *ts;
	TupleDesc	tupdesc;
	Datum		args[8];
	char		nulls[8] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};
	bool		lease;
	IjPlan	   *plan;
	int			n;
	IjShardGroup *groups;
	int			ngroups;

	/* arguments first: 22004, then 22023 */
	if (a > 0)
		ij_require(fcinfo, 0, "node");
	ij_require(fcinfo, a + 0, "worker");
	ij_require(fcinfo, a + 2, "max_jobs");
	ij_require(fcinfo, a + 4, "wait");
	ij_require(fcinfo, a + 5, "lease");
	lease = PG_GETARG_BOOL(a + 5);
	worker = ij_name_arg(fcinfo, a + 0, "worker", false);
	max_jobs = PG_GETARG_INT32(a + 2);
	if (max_jobs < 1 || max_jobs > CLAIM_MAX_JOBS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument \"max_jobs\" must be between 1 and %d", CLAIM_MAX_JOBS),
				 errdetail("It is %d.", max_jobs)));
	timeout = timeout_arg(fcinfo, a + 3, "timeout");
	if (timeout != NULL)
		(void) ij_deadline_after(GetCurrentTransactionStartTimestamp(), timeout, "timeout");
	wait = PG_GETARG_INTERVAL_P(a + 4);
	if (interval_negative(wait))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument \"wait\" must not be negative"),
				 errhint("Pass '0' to answer at once.")));
	wait_us = ij_capped_wait(interval_usecs(wait));
	if (wait_us > 0 && IsolationUsesXactSnapshot())
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("a waiting claim is not supported under %s",
						IsolationIsSerializable() ? "SERIALIZABLE" : "REPEATABLE READ"),
				 errdetail("The transaction's snapshot would never show a job submitted during the wait."),
				 errhint("Claim under READ COMMITTED, or pass wait => '0'.")));
	owner = ij_bound_owner();

	ts = materialize(fcinfo, &tupdesc);
	if (a == 0 && claim_on_nodes(fcinfo, ts, max_jobs, wait_us))
		return (Datum) 0;

	if (wait_us > 0)
		wait_end = GetCurrentTimestamp() + wait_us;

	if (PG_ARGISNULL(a + 1))
	{
		plan = claim_plans[0];
		args[1] = (Datum) 0;
		nulls[1] = 'n';
	}
	else
	{
		ArrayType  *intents = PG_GETARG_ARRAYTYPE_P(a + 1);
		Datum	   *elems;
		bool	   *elnulls;
		int			nelems;

		deconstruct_array(intents, TEXTOID, -1, false, TYPALIGN_INT,
						  &elems, &elnulls, &nelems);
		if (nelems == 1 && !elnulls[0])
		{
			plan = claim_plans[1];
			args[1] = elems[0];
		}
		else
		{
			plan = claim_plans[2];
			args[1] = PointerGetDatum(intents);
		}
	}
	if (max_jobs > 1)
		plan++;
	args[2] = owner ? PointerGetDatum(owner) : (Datum) 0;
	nulls[2] = owner ? ' ' : 'n';
	args[3] = Int32GetDatum(max_jobs);
	args[4] = PointerGetDatum(worker);
	nulls[6] = timeout ? ' ' : 'n';
	nulls[7] = lease ? ' ' : 'n';

	ij_connect();
	ngroups = ij_local_shard_groups(&groups);
	for (;;)
	{
		TimestampTz base;
		TimestampTz clock;

		/* a waiting claim lives by the clock; see the file header */
		base = GetCurrentTransactionStartTimestamp();
		if (wait_us > 0)
		{
			clock = GetCurrentTimestamp();
			if (clock > base)
				base = clock;
		}
		args[0] = TimestampTzGetDatum(base);
		args[5] = TimestampTzGetDatum(base);
		args[6] = timeout ? ij_deadline_after(base, timeout, "timeout") : (Datum) 0;
		args[7] = lease ? TimestampTzGetDatum(TimestampTzPlusMilliseconds(base, idemjob_claim_lease_ms))
			: (Datum) 0;

		n = claim_here(plan, groups, ngroups, args, nulls, ts, max_jobs);
		if (n > 0 || wait_us == 0 || !claim_sleep(wait_end))
			break;
	}

	ij_finish();

	return (Datum) 0;
}

/*
 * A waiting claim between two polls: sleeps on the latch until the next
 * (CLAIM_POLL_MS at most), then serves interrupts and checks the client is
 * still there.  False, without sleeping, once wait_end has passed.
 */
static bool
claim_sleep(TimestampTz wait_end)
{
	TimestampTz clock = GetCurrentTimestamp();
	long		sleep_ms;

	if (clock >= wait_end)
		return false;
	sleep_ms = (long) Min((wait_end - clock + 999) / 1000, CLAIM_POLL_MS);
	(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
					 sleep_ms, PG_WAIT_EXTENSION);
	ResetLatch(MyLatch);
	CHECK_FOR_INTERRUPTS();
	ij_check_client();
	return true;
}

/*
 * Citus, on a node that holds no shard (a coordinator without shards): the
 * claim asks each node that holds some in turn, through claim_on() with a
 * value of owner_hash whose rows lie there, as the caller (Citus sends the
 * call there, inside the caller's transaction); each is asked for what the
 * nodes before it left of max_jobs, from a node one further on at each
 * round.  A waiting claim asks them all again after each sleep.  False
 * elsewhere: claim here.
 */
static bool
claim_on_nodes(FunctionCallInfo fcinfo, Tuplestorestate *ts, int32 max_jobs, int64 wait_us)
{
	static int	next_node = 0;
	TimestampTz wait_end = GetCurrentTimestamp() + wait_us;
	Oid		   *argtypes;
	int			nargs;
	int32	   *nodes;
	int			nnodes;

	nnodes = ij_connect_shard_nodes(&nodes);
	if (nnodes < 0)
		return false;
	(void) get_func_signature(fcinfo->flinfo->fn_oid, &argtypes, &nargs);
	for (;;)
	{
		int32		total = 0;
		int			i;

		for (i = 0; i < nnodes && total < max_jobs; i++)
		{
			StringInfoData sql;
			int			arg;
			int			n;
			int			r;

			CHECK_FOR_INTERRUPTS();
			initStringInfo(&sql);
			appendStringInfo(&sql, "SELECT * FROM idemjob.claim_on('%d'::idemjob.owner_hash",
							 nodes[(next_node + i) % nnodes]);
			for (arg = 0; arg < nargs; arg++)
			{
				appendStringInfoString(&sql, ", ");
				if (arg == 2)	/* max_jobs: what is left */
					ij_append_literal(&sql, argtypes[arg], Int32GetDatum(max_jobs - total), false);
				else if (arg == 4)	/* wait: this node waits */
					appendStringInfoString(&sql, "'0'::pg_catalog.interval");
				else
					ij_append_literal(&sql, argtypes[arg], fcinfo->args[arg].value,
									  fcinfo->args[arg].isnull);
			}
			appendStringInfoChar(&sql, ')');
			n = ij_forward_sql_rows(sql.data);
			for (r = 0; r < n; r++)
				tuplestore_puttuple(ts, SPI_tuptable->vals[r]);
			SPI_freetuptable(SPI_tuptable);
			total += n;
		}
		if (nnodes > 0)
			next_node = (next_node + 1) % nnodes;
		if (total > 0 || wait_us == 0 || !claim_sleep(wait_end))
			break;
	}
	SPI_finish();
	return true;
}

/*
 * Claim on the tables (one group with no names), or, under Citus, on this
 * node's shard groups in turn, each asked for what the groups before it left of
 * max_jobs ($4), from a group one further on at each call so that no
 * group's jobs wait behind another's: the claim order holds within a shard
 * group, not across them (docs/scaling.md#citus).  The rows go to ts (the
 * tuplestore copies them out of SPI memory); returns how many.
 */
static int
claim_here(IjPlan *plan, const IjShardGroup *groups, int ngroups,
		   Datum *args, const char *nulls, Tuplestorestate *ts, int32 max_jobs)
{
	static int	next_group = 0;
	int			total = 0;
	int			g;
	int			i;

	for (g = 0; g < ngroups && total < max_jobs; g++)
	{
		const IjShardGroup *group = &groups[(next_group + g) % ngroups];
		int			n;

		CHECK_FOR_INTERRUPTS();
		args[3] = Int32GetDatum(max_jobs - total);
		n = ij_exec_in_order(plan, group, args, nulls);
		for (i = 0; i < n; i++)
			tuplestore_puttuple(ts, SPI_tuptable->vals[i]);
		SPI_freetuptable(SPI_tuptable);
		total += n;
	}
	if (ngroups > 0)
		next_group = (next_group + 1) % ngroups;
	return total;
}

/*
 * idemjob.heartbeat(attempt_id, extend) RETURNS idemjob.attempts
 */
Datum
idemjob_heartbeat(PG_FUNCTION_ARGS)
{
	IJ_ENTRY();
	IjAttempt	a;
	Interval   *extend;
	Datum		args[3];
	char		nulls[3] = {' ', ' ', ' '};
	Datum		result;

	ij_require(fcinfo, 0, "attempt_id");
	extend = timeout_arg(fcinfo, 1, "extend");
	args[0] = PG_GETARG_DATUM(0);
	if (extend != NULL)
		args[1] = ij_deadline_after(GetCurrentTransactionStartTimestamp(), extend, "extend");
	else
	{
		args[1] = (Datum) 0;
		nulls[1] = 'n';
	}
	IJ_FORWARD(ij_id_route(args[0]));

	ij_connect();
	ij_lock_attempt(args[0], &a);
	/* a heartbeat is a confirmation too (two-phase claim) */
	ij_confirm_lease(&a, false);
	if (strcmp(a.state, "started") != 0)
		ij_not_started(&a, "be extended", "Only a started attempt has a deadline to extend.");
	args[2] = Int32GetDatum(a.route);
	ij_exec(&heartbeat, args, nulls);
	result = ij_row_datum(0, fcinfo);
	ij_finish();
	PG_RETURN_DATUM(result);
}
