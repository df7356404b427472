/*-------------------------------------------------------------------------
 *
 * spi_plans.c
 *	  How the SQL functions reach the tables: SPI with plans prepared once
 *	  per backend.
 *
 * Each statement is an IjPlan with a fixed SQL text and parameter types.
 * The first execution in a backend prepares it and keeps it
 * (SPI_keepplan); later ones reuse it.  The plan cache re-analyzes the text
 * when the tables change (DROP and CREATE EXTENSION included) and re-plans
 * when statistics change, so a plan made while the tables were empty does
 * not outlive the first ANALYZE.  Every statement is a single-table one
 * keyed by a unique index, so the generic plan is an index scan at any
 * table size.  A statement whose generic plan is the right one but which
 * the plan cache would keep re-planning (a claim of one job, a CTE whose
 * generic cost it overestimates) asks for the generic plan outright
 * (cursor_options): re-planning a statement on every call costs more than
 * running it.
 *
 * Plans do not depend on statistics (since 1.2).  A plan cached while the
 * tables were small outlives a burst until the next ANALYZE: a claim whose
 * plan read every due job through another index and sorted them, or the
 * foreign-key check of each new attempt (PostgreSQL's own statement, also
 * cached per backend) as a sequential scan of jobs, took 50-180 ms at a
 * backlog of 100,000.  The statement's text cannot forbid a Sort or a
 * sequential scan, so ij_planner() plans the extension's statements, and
 * the foreign-key statements on its tables, as if enable_seqscan were off
 * (and jit: these statements are small, and a disabled path's cost would
 * pass jit_above_cost): a path that reads the whole table costs more than
 * any path an index provides, so each is the lookup through its index it
 * was written for, at any table size.  A statement run by ij_exec_in_order()
 * (a claim) is planned as if enable_sort were off too: its ORDER BY ...
 * LIMIT can then only be the index scan that gives that order, stopped
 * after LIMIT rows (jobs_claim, or jobs_claim_intent for one intent), not
 * a sort of every due job, whatever the statistics.  Only those: a
 * statement whose ORDER BY is best served by a sort of a few rows (a
 * worker's attempts, ORDER BY id) would otherwise walk a whole index in
 * that order.  A statement with no index to serve it still gets its sort
 * or scan (they are only made dearer), and the caller's own statements
 * are planned as the caller set them.  Only planning pays for this, which
 * a generic plan does once.
 *
 * A statement on an owner's rows says which owner_hash they have
 * (IJ_ROUTED, idemjob.h) in the routed layouts, partitioned or Citus
 * (ij_layout_routed): one partition read, one shard reached.  The callers
 * take it from the owner, or from the id they were given (which carries
 * it, docs/scaling.md); an id made before 1.2 carries none, and a call
 * given one finds nothing where it points, reads the row's own
 * (ij_reroute) and runs the statement again.  On plain tables the
 * condition is cut from the text and costs nothing.
 *
 * SPI keeps MVCC, constraints, foreign keys and the guard triggers intact:
 * the unique constraints, not the C code, are what make a second job or a
 * second in-doubt attempt impossible.
 *
 * While connected the functions run as the extension's owner (rights.c),
 * and the trusted-path depth is raised, so the raw-DML guards skip what the
 * calling function has already checked.
 *
 * Every name in every statement is qualified (tables, types, casts,
 * functions, OPERATOR(pg_catalog.=)): no search_path or pg_temp object can
 * stand in for one, whoever calls.
 *
 * src/spi_plans.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <ctype.h>

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "jit/jit.h"
#include "miscadmin.h"
#include "optimizer/cost.h"
#include "optimizer/planner.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/plancache.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "idemjob.h"

static planner_hook_type prev_planner = NULL;
static const IjShardGroup *route_group(IjPlan *p, Datum *values, const char *nulls);
/* ij_exec_in_order() is running its statement: plan it without sorts */
static bool in_order = false;

/*
 * A statement planned inside an idemjob function: its own (the text
 * ij_exec() is running) or the foreign-key checks and cascades PostgreSQL
 * runs on its tables ("... ONLY \"idemjob\".\"jobs\" ...").  A DBA's
 * trigger's statements are not.
 */
static bool
own_statement(const char *query_string)
{
	if (idemjob_trusted_depth <= 0 || query_string == NULL)
		return false;
	return query_string == guard_skip_text ||
		strstr(query_string, "ONLY \"idemjob\".") != NULL;
}

/* the planner as it would run without idemjob's hook */
static PlannedStmt *
plan_with_hooks(Query *parse, const char *query_string, int cursorOptions,
				ParamListInfo boundParams)
{
	if (prev_planner)
		return prev_planner(parse, query_string, cursorOptions, boundParams);
	return standard_planner(parse, query_string, cursorOptions, boundParams);
}

/* see the file header: no sequential scan (no sort) where an index serves */
static PlannedStmt *
ij_planner(Query *parse, const char *query_string, int cursorOptions,
		   ParamListInfo boundParams)
{
	bool		save_seqscan = enable_seqscan;
	bool		save_sort = enable_sort;
	bool		save_incremental_sort = enable_incremental_sort;
	bool		save_jit = jit_enabled;
	PlannedStmt *result;

	if (!own_statement(query_string))
		return plan_with_hooks(parse, query_string, cursorOptions, boundParams);

	enable_seqscan = false;
	/* a disabled path's cost would pass jit_above_cost: 0.5 s of JIT */
	jit_enabled = false;
	if (in_order && query_string == guard_skip_text)
	{
		enable_sort = false;
		enable_incremental_sort = false;
	}
	/* the settings come back whether planning ends or fails */
	PG_TRY();
	{
		result = plan_with_hooks(parse, query_string, cursorOptions, boundParams);
	}
	PG_CATCH();
	{
		enable_seqscan = save_seqscan;
		enable_sort = save_sort;
		enable_incremental_sort = save_incremental_sort;
		jit_enabled = save_jit;
		PG_RE_THROW();
	}
	PG_END_TRY();
	enable_seqscan = save_seqscan;
	enable_sort = save_sort;
	enable_incremental_sort = save_incremental_sort;
	jit_enabled = save_jit;
	return result;
}

/*
 * PostgreSQL keeps room for ten relation-cache callbacks per backend
 * (MAX_RELCACHE_CALLBACKS), shared by every loaded library: idemjob's five
 * caches with Citus's five and the plan cache's one failed with "out of
 * relcache_callback_list slots".  They take one slot, and this passes each
 * invalidation on to all of them.
 */
#define IJ_RELCACHE_FNS 8
static void (*relcache_fns[IJ_RELCACHE_FNS]) (Datum arg, Oid relid);
static int	relcache_nfns = 0;

static void
relcache_dispatch(Datum arg, Oid relid)
{
	int			i;

	for (i = 0; i < relcache_nfns; i++)
		relcache_fns[i] (arg, relid);
}

void
ij_relcache_register(void (*fn) (Datum arg, Oid relid))
{
	if (relcache_nfns >= IJ_RELCACHE_FNS)
		elog(ERROR, "too many idemjob relcache callbacks");
	if (relcache_nfns == 0)
		CacheRegisterRelcacheCallback(relcache_dispatch, (Datum) 0);
	relcache_fns[relcache_nfns++] = fn;
}

/*
 * The routed layouts: the per-owner tables partitioned by owner_hash
 * (idemjob.partitions), or distributed by it with Citus (distribute()).
 * There every statement that reads or changes an owner's rows says which
 * owner_hash they have (IJ_ROUTED), so that PostgreSQL prunes to one
 * partition and Citus routes to one shard; on plain tables that condition
 * would only cost its evaluation, and is left out.  Resolved once per
 * backend and again after a relcache invalidation of idemjob.jobs (its
 * DROP, or Citus distributing it).
 */
#define LAYOUT_UNKNOWN -1
#define LAYOUT_PLAIN 0
#define LAYOUT_PARTITIONED 1
#define LAYOUT_CITUS 2
static int	layout = LAYOUT_UNKNOWN;
static Oid	layout_jobs_relid = InvalidOid;

static int	n_local_groups = -1;	/* Citus: this node's shard groups; -1: to read */

static void
layout_inval(Datum arg, Oid relid)
{
	if (relid == InvalidOid || relid == layout_jobs_relid)
	{
		layout = LAYOUT_UNKNOWN;
		n_local_groups = -1;	/* Citus: read this node's shards again */
	}
}

/*
 * Whether Citus distributes the table.  Must be connected (it runs a
 * query: Citus's catalog has no syscache), so only the connected
 * functions below resolve the layout.
 */
static bool
citus_distributed(Oid relid)
{
	Oid			argtypes[1] = {OIDOID};
	Datum		values[1];

	if (!OidIsValid(get_extension_oid("citus", true)))
		return false;
	values[0] = ObjectIdGetDatum(relid);
	if (SPI_execute_with_args("SELECT FROM pg_catalog.pg_dist_partition"
							  " WHERE logicalrelid OPERATOR(pg_catalog.=) $1",
							  1, argtypes, values, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read pg_dist_partition");
	return SPI_processed > 0;
}

static int
current_layout(void)
{
	static bool callback = false;
	Oid			nsp;

	if (layout != LAYOUT_UNKNOWN)
		return layout;
	if (!callback)
	{
		ij_relcache_register(layout_inval);
		callback = true;
	}
	nsp = get_namespace_oid("idemjob", true);
	layout_jobs_relid = OidIsValid(nsp) ? get_relname_relid("jobs", nsp) : InvalidOid;
	if (OidIsValid(layout_jobs_relid) && citus_distributed(layout_jobs_relid))
		layout = LAYOUT_CITUS;
	else if (OidIsValid(layout_jobs_relid) &&
			 get_rel_relkind(layout_jobs_relid) == RELKIND_PARTITIONED_TABLE)
		layout = LAYOUT_PARTITIONED;
	else
		layout = LAYOUT_PLAIN;
	return layout;
}

bool
ij_layout_routed(void)
{
	return current_layout() != LAYOUT_PLAIN;
}

/* distributed by Citus; must be connected */
bool
ij_layout_citus(void)
{
	return current_layout() == LAYOUT_CITUS;
}

/*
 * Whether this transaction is a part of a Citus transaction another node
 * began (a call force-delegated here inside its transaction block): Citus
 * may end it with PREPARE TRANSACTION.  Citus names its own connections
 * "citus_internal gpid=..."; a client that names itself so only loses its
 * own notifications.  Must be connected.
 */
bool
ij_in_prepared_transaction(void)
{
	return IsTransactionBlock() && application_name != NULL &&
		strncmp(application_name, "citus_internal", strlen("citus_internal")) == 0 &&
		current_layout() == LAYOUT_CITUS;
}

/* sql without its IJ_ROUTED parts, in TopMemoryContext */
static char *
unrouted_sql(const char *sql)
{
	StringInfoData buf;
	const char *p = sql;
	const char *start;
	char	   *result;

	initStringInfo(&buf);
	while ((start = strstr(p, " /*routed*/")) != NULL)
	{
		const char *end = strstr(start, "/*end*/");

		CHECK_FOR_INTERRUPTS();
		if (end == NULL)
			elog(ERROR, "unterminated routed part in \"%s\"", sql);
		appendBinaryStringInfo(&buf, p, start - p);
		p = end + strlen("/*end*/");
	}
	appendStringInfoString(&buf, p);
	result = MemoryContextStrdup(TopMemoryContext, buf.data);
	pfree(buf.data);
	return result;
}

void
ij_planner_init(void)
{
	prev_planner = planner_hook;
	planner_hook = ij_planner;
}

void
ij_connect(void)
{
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	ij_switch_user();
	idemjob_trusted_depth++;
}

void
ij_finish(void)
{
	idemjob_trusted_depth--;
	ij_unswitch_user();
	if (SPI_finish() != SPI_OK_FINISH)
		elog(ERROR, "SPI_finish failed");
}

/*
 * p's plan, prepared at its first use in this backend from the text for
 * the layout in place (IJ_ROUTED), and again when the layout changed.
 */
SPIPlanPtr
ij_prepared(IjPlan *p)
{
	bool		routed = ij_layout_routed();

	/* prepared for the other layout: prepare it again */
	if (p->plan != NULL && p->routed != routed)
	{
		SPIPlanPtr	old = p->plan;

		p->plan = NULL;
		SPI_freeplan(old);
	}
	if (p->plan == NULL)
	{
		const char *sql = p->sql;
		SPIPlanPtr	plan;

		if (!routed && strstr(sql, " /*routed*/") != NULL)
		{
			if (p->sql_unrouted == NULL)
				p->sql_unrouted = unrouted_sql(p->sql);
			sql = p->sql_unrouted;
		}
		/*
		 * Partitioned: a custom plan prunes to the one partition at planning,
		 * which the plan cache prices below the generic plan (priced over
		 * every partition) and so makes again at every call, at the cost of
		 * planning over the partitions each time.  The generic plan prunes
		 * at executor start, to the same partition.  Not under Citus, which
		 * routes a statement by the values of its parameters.
		 */
		plan = SPI_prepare_cursor(sql, p->nargs, p->argtypes,
								  p->cursor_options |
								  (routed && current_layout() == LAYOUT_PARTITIONED &&
								   strstr(sql, " /*routed*/") != NULL ?
								   CURSOR_OPT_GENERIC_PLAN : 0));
		if (plan == NULL)
			elog(ERROR, "SPI_prepare failed for \"%s\": %s",
				 sql, SPI_result_code_string(SPI_result));
		if (SPI_keepplan(plan) != 0)
			elog(ERROR, "SPI_keepplan failed");
		p->plan = plan;
		p->routed = routed;
	}
	return p->plan;
}

/*
 * Execute p with the given parameters and return SPI_processed.
 *
 * Always to completion (tcount 0): a data-modifying statement stopped
 * after its first RETURNING row would skip its AFTER STATEMENT triggers.
 * Every statement here is keyed by a unique index anyway.
 */
static int
run_plan(SPIPlanPtr plan, const char *sql, Datum *values, const char *nulls)
{
	int			ret;

	/* the guards skip this statement, and only it (triggers.c) */
	guard_skip_text = ((CachedPlanSource *)
					   linitial(SPI_plan_get_plan_sources(plan)))->query_string;
	ret = SPI_execute_plan(plan, values, nulls, false, 0);
	guard_skip_text = NULL;
	if (ret < 0)
		elog(ERROR, "SPI_execute_plan failed for \"%s\": %s",
			 sql, SPI_result_code_string(ret));
	return (int) SPI_processed;
}

/*
 * Under Citus, a statement on one owner's rows whose shard is on this node
 * (a call Citus delegated here, docs/scaling.md#citus) runs on that shard
 * group as a plain statement of this node (ij_exec_on): Citus neither
 * plans it again nor routes it, and a call force-delegated into a
 * coordinator's transaction (whose statements Citus would require to name
 * the call's argument itself) can run it.  Elsewhere Citus routes it.
 */
int
ij_exec(IjPlan *p, Datum *values, const char *nulls)
{
	if (current_layout() == LAYOUT_CITUS)
	{
		const IjShardGroup *g = route_group(p, values, nulls);

		if (g != NULL)
			return ij_exec_on(p, g, values, nulls);
	}
	return run_plan(ij_prepared(p), p->sql, values, nulls);
}

/*
 * Citus: the statements that read many owners at once (claim, expiry,
 * purge) run on each node over that node's own shards, one shard group at
 * a time, and a statement on one owner's rows runs on its group when the
 * group is on this node (ij_exec): the text with each table named by its
 * shard (idemjob.jobs -> idemjob.jobs_102008) and each reference table by
 * this node's copy, prepared once per backend and shard group.  A
 * shard is a plain table of the node, so these statements keep their
 * plans, their row locks and SKIP LOCKED, and fire the guards' shard
 * copies, which return at once on the trusted path.
 */
static const char *const shard_tables[IJ_SHARD_TABLES + IJ_REF_TABLES] = {
	"idemjob.jobs", "idemjob.attempts", "idemjob.race_log", "idemjob.spent_keys",
	/* reference tables: this node's copy, so that nothing leaves the node */
	"idemjob.contracts", "idemjob.certifications", "idemjob.capabilities",
	"idemjob.owner_bindings", "idemjob.retry_policies", "idemjob.routes"
};

/* the shard of table in the group of j's shard (co-located: the same range) */
#define CO_LOCATED(alias, table) \
	" LATERAL (SELECT '" table "_' OPERATOR(pg_catalog.||) d.shardid AS shard_name" \
	"  FROM pg_catalog.pg_dist_shard d" \
	"  WHERE d.logicalrelid OPERATOR(pg_catalog.=) 'idemjob." table "'::pg_catalog.regclass" \
	"  AND d.shardminvalue OPERATOR(pg_catalog.=) j.shardminvalue) " alias
static IjPlan local_shard_groups = {
	"SELECT pg_catalog.format('idemjob.%I', j.shard_name), pg_catalog.format('idemjob.%I', a.shard_name),"
	" pg_catalog.format('idemjob.%I', r.shard_name), pg_catalog.format('idemjob.%I', s.shard_name),"
	" j.shardminvalue::pg_catalog.int4, j.shardmaxvalue::pg_catalog.int4"
	" FROM (SELECT d.shardminvalue, d.shardmaxvalue, 'jobs_' OPERATOR(pg_catalog.||) d.shardid AS shard_name"
	"  FROM pg_catalog.pg_dist_shard d JOIN pg_catalog.pg_dist_placement p"
	"  ON p.shardid OPERATOR(pg_catalog.=) d.shardid"
	"  WHERE d.logicalrelid OPERATOR(pg_catalog.=) 'idemjob.jobs'::pg_catalog.regclass"
	"  AND p.groupid OPERATOR(pg_catalog.=) (SELECT groupid FROM pg_catalog.pg_dist_local_group)) j,"
	CO_LOCATED("a", "attempts") "," CO_LOCATED("r", "race_log") "," CO_LOCATED("s", "spent_keys")
	" ORDER BY j.shard_name",
	0, {InvalidOid}, NULL, 0, false, NULL, 0
};

/* this node's copy of each reference table (NULL: none here) */
#define LOCAL_COPY(table) \
	" (SELECT pg_catalog.format('idemjob.%I', '" table "_' OPERATOR(pg_catalog.||) d.shardid)" \
	"  FROM pg_catalog.pg_dist_shard d JOIN pg_catalog.pg_dist_placement p" \
	"  ON p.shardid OPERATOR(pg_catalog.=) d.shardid" \
	"  WHERE d.logicalrelid OPERATOR(pg_catalog.=) 'idemjob." table "'::pg_catalog.regclass" \
	"  AND p.groupid OPERATOR(pg_catalog.=) (SELECT groupid FROM pg_catalog.pg_dist_local_group))"
static IjPlan local_reference_copies = {
	"SELECT" LOCAL_COPY("contracts") "," LOCAL_COPY("certifications") "," LOCAL_COPY("capabilities") ","
	LOCAL_COPY("owner_bindings") "," LOCAL_COPY("retry_policies") "," LOCAL_COPY("routes"),
	0, {InvalidOid}, NULL, 0, false, NULL, 0
};

/*
 * This node's shard groups, read once per backend and again after a
 * relcache invalidation of idemjob.jobs (Citus sends one when a placement
 * of its shards changes): in their own memory context, reset only when
 * they are read again, so that an invalidation in the middle of a call
 * frees nothing the call still holds.
 */
static MemoryContext groups_cxt = NULL;
static IjShardGroup *local_groups = NULL;

static void
read_local_groups(void)
{
	int			n;
	int			i;
	int			t;
	char	   *refs[IJ_REF_TABLES];

	if (groups_cxt == NULL)
		groups_cxt = AllocSetContextCreate(TopMemoryContext, "idemjob shard groups",
										   ALLOCSET_SMALL_SIZES);
	MemoryContextReset(groups_cxt);
	/* (SPI leaves its own context current: allocate in groups_cxt by name) */
	run_plan(ij_prepared(&local_reference_copies), local_reference_copies.sql, NULL, NULL);
	for (t = 0; t < IJ_REF_TABLES; t++)
	{
		bool		isnull;
		Datum		d = ij_col(0, t + 1, &isnull);

		refs[t] = isnull ? NULL : MemoryContextStrdup(groups_cxt, TextDatumGetCString(d));
	}
	n = run_plan(ij_prepared(&local_shard_groups), local_shard_groups.sql, NULL, NULL);
	local_groups = MemoryContextAllocZero(groups_cxt, sizeof(IjShardGroup) * Max(n, 1));
	for (i = 0; i < n; i++)
	{
		for (t = 0; t < IJ_SHARD_TABLES; t++)
			local_groups[i].names[t] = MemoryContextStrdup(groups_cxt,
														   TextDatumGetCString(ij_col_nn(i, t + 1)));
		for (t = 0; t < IJ_REF_TABLES; t++)
			local_groups[i].names[IJ_SHARD_TABLES + t] = refs[t];
		local_groups[i].min = DatumGetInt32(ij_col_nn(i, IJ_SHARD_TABLES + 1));
		local_groups[i].max = DatumGetInt32(ij_col_nn(i, IJ_SHARD_TABLES + 2));
	}
	n_local_groups = n;
}

/*
 * Where a statement on many owners runs: under Citus, this node's shard
 * groups of the four tables, with its copies of the reference tables
 * (none on a node that holds no shard, a
 * coordinator without shards); elsewhere one group with no names, the
 * tables themselves (ij_exec_on runs the statement as it is).  Must be
 * connected; the array, a copy, lives until ij_finish().
 */
int
ij_local_shard_groups(IjShardGroup **groups)
{
	int			i;
	int			t;

	if (current_layout() != LAYOUT_CITUS)
	{
		*groups = palloc0(sizeof(IjShardGroup));
		return 1;
	}
	if (n_local_groups < 0)
		read_local_groups();
	*groups = palloc(sizeof(IjShardGroup) * Max(n_local_groups, 1));
	for (i = 0; i < n_local_groups; i++)
	{
		(*groups)[i] = local_groups[i];
		for (t = 0; t < IJ_SHARD_TABLES + IJ_REF_TABLES; t++)
			if (local_groups[i].names[t] != NULL)
				(*groups)[i].names[t] = pstrdup(local_groups[i].names[t]);
	}
	return n_local_groups;
}

/*
 * The parameter that holds a statement's owner_hash: the one its routed
 * conditions (IJ_ROUTE) or an INSERT's mark (IJ_ROUTE_PARAM) name, when
 * they all name the same; -1 when it names none or several.
 */
static int
route_param_of(const char *sql)
{
	static const char *const marks[] = {
		"owner_hash OPERATOR(pg_catalog.=) $", "/*route $"
	};
	int			found = -1;
	int			m;

	for (m = 0; m < (int) lengthof(marks); m++)
	{
		const char *p = sql;

		while ((p = strstr(p, marks[m])) != NULL)
		{
			int			n;

			CHECK_FOR_INTERRUPTS();
			p += strlen(marks[m]);
			n = atoi(p);
			if (n <= 0 || (found > 0 && n != found))
				return -1;
			found = n;
		}
	}
	return found;
}

/*
 * Citus: the shard group of this node that holds the rows p's parameters
 * route it to, or NULL (no owner_hash in p, or its shard is on another
 * node).  Citus places a row by the hash of its owner_hash with int4's
 * hash function (owner_hash hashes as an int4), in the shard whose range
 * holds that hash.
 */
static const IjShardGroup *
local_group_of(int32 owner_hash)
{
	int32		hash;
	int			i;

	if (n_local_groups < 0)
		read_local_groups();
	hash = DatumGetInt32(DirectFunctionCall1(hashint4, Int32GetDatum(owner_hash)));
	for (i = 0; i < n_local_groups; i++)
		if (hash >= local_groups[i].min && hash <= local_groups[i].max)
			return &local_groups[i];
	return NULL;
}

/* g's relation of table ("jobs", "contracts", ...), InvalidOid: none here */
Oid
ij_group_relid(const IjShardGroup *g, const char *table)
{
	int			t;

	for (t = 0; t < IJ_SHARD_TABLES + IJ_REF_TABLES; t++)
		if (strcmp(shard_tables[t] + strlen("idemjob."), table) == 0)
			break;
	if (g == NULL || t == IJ_SHARD_TABLES + IJ_REF_TABLES || g->names[t] == NULL)
		return InvalidOid;
	/* the qualified name, as format('idemjob.%I') made it */
	return DatumGetObjectId(DirectFunctionCall1(regclassin, CStringGetDatum(g->names[t])));
}

/*
 * Citus: the shard of jobs on this node that holds owner_hash's rows, or
 * InvalidOid (another layout, or the shard is elsewhere).  Must be
 * connected.
 */
Oid
ij_local_jobs_shard(int32 owner_hash)
{
	if (!ij_layout_citus())
		return InvalidOid;
	return ij_group_relid(local_group_of(owner_hash), "jobs");
}

/*
 * Citus: this node's copies of the reference tables, as the shard group
 * ij_exec_on() reads them in (its first: every group names the same
 * copies), or NULL (another layout, or a node holding no shard group).
 * Must be connected; valid until the groups are read again.
 */
const IjShardGroup *
ij_local_copies(void)
{
	if (!ij_layout_citus())
		return NULL;
	if (n_local_groups < 0)
		read_local_groups();
	return n_local_groups > 0 ? &local_groups[0] : NULL;
}

static const IjShardGroup *
route_group(IjPlan *p, Datum *values, const char *nulls)
{
	if (p->route_param == 0)
		p->route_param = route_param_of(p->sql);
	if (p->route_param < 0 || values == NULL ||
		(nulls != NULL && nulls[p->route_param - 1] == 'n'))
		return NULL;
	return local_group_of(DatumGetInt32(values[p->route_param - 1]));
}

/*
 * Citus, on a node that holds no shard (a coordinator without shards): a
 * value of owner_hash for each node that does, whose rows lie there, in
 * *hashes (palloc'd); how many.  -1 elsewhere.  Must be connected.
 */
static IjPlan other_nodes = {
	"SELECT DISTINCT ON (p.groupid) d.shardminvalue::pg_catalog.int4, d.shardmaxvalue::pg_catalog.int4"
	" FROM pg_catalog.pg_dist_shard d JOIN pg_catalog.pg_dist_placement p"
	" ON p.shardid OPERATOR(pg_catalog.=) d.shardid"
	" WHERE d.logicalrelid OPERATOR(pg_catalog.=) 'idemjob.jobs'::pg_catalog.regclass"
	" ORDER BY p.groupid, d.shardid",
	0, {InvalidOid}, NULL, 0, false, NULL, 0
};

int
ij_shard_nodes(int32 **hashes)
{
	int			n;
	int			i;

	if (current_layout() != LAYOUT_CITUS)
		return -1;
	if (n_local_groups < 0)
		read_local_groups();
	if (n_local_groups > 0)
		return -1;
	n = run_plan(ij_prepared(&other_nodes), other_nodes.sql, NULL, NULL);
	*hashes = palloc(sizeof(int32) * Max(n, 1));
	for (i = 0; i < n; i++)
	{
		int32		min = DatumGetInt32(ij_col_nn(i, 1));
		int32		max = DatumGetInt32(ij_col_nn(i, 2));
		int32		v;

		/* the first value that hashes into the shard's range (about shard-count tries) */
		for (v = 0; v < PG_INT32_MAX; v++)
		{
			int32		hash = DatumGetInt32(DirectFunctionCall1(hashint4, Int32GetDatum(v)));

			CHECK_FOR_INTERRUPTS();
			if (hash >= min && hash <= max)
				break;
		}
		(*hashes)[i] = v;
	}
	return n;
}

/*
 * Whether this node may be one that holds no shard (ij_shard_nodes() must
 * connect to tell): false at once when the layout is known not to be
 * Citus's, or this node's groups are known
 */
bool
ij_maybe_shardless(void)
{
	if (layout == LAYOUT_PLAIN || layout == LAYOUT_PARTITIONED)
		return false;
	return !(layout == LAYOUT_CITUS && n_local_groups > 0);
}

/*
 * Whether owner_hash's rows are on another node: under Citus, when no
 * shard group of this node holds them.  Answered at once once the layout
 * (and under Citus this node's groups) are known; else connects (as the
 * caller) to read them.
 */
bool
ij_rows_elsewhere(int32 owner_hash)
{
	bool		elsewhere;

	if (layout == LAYOUT_PLAIN || layout == LAYOUT_PARTITIONED)
		return false;
	if (layout == LAYOUT_CITUS && n_local_groups >= 0)
		return local_group_of(owner_hash) == NULL;
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	elsewhere = current_layout() == LAYOUT_CITUS && local_group_of(owner_hash) == NULL;
	SPI_finish();
	return elsewhere;
}

/*
 * sql with each of the four tables named by its shard in g, and a
 * constraint named by ON CONFLICT ON CONSTRAINT by its copy on that shard
 * (Citus appends the shard's id: jobs_owner_key_102008)
 */
static char *
shard_sql(const char *sql, const IjShardGroup *g)
{
	StringInfoData buf;
	const char *p = sql;

	initStringInfo(&buf);
	while (*p)
	{
		int			t;
		bool		done = false;

		CHECK_FOR_INTERRUPTS();
		for (t = 0; t < IJ_SHARD_TABLES + IJ_REF_TABLES && !done; t++)
		{
			size_t		len = strlen(shard_tables[t]);
			const char *table = shard_tables[t] + strlen("idemjob.");

			if (g->names[t] == NULL)
				continue;		/* a reference table with no copy here */

			/* the table's name as a whole word, not a prefix of another */
			if (strncmp(p, shard_tables[t], len) == 0 &&
				!(isalnum((unsigned char) p[len]) || p[len] == '_'))
			{
				appendStringInfoString(&buf, g->names[t]);
				p += len;
				done = true;
			}
			/* ON CONSTRAINT <table>_<name>: the shard's own */
			else if (strncmp(p, "ON CONSTRAINT ", 14) == 0 &&
					 strncmp(p + 14, table, strlen(table)) == 0 &&
					 p[14 + strlen(table)] == '_')
			{
				const char *end = p + 14;

				while (isalnum((unsigned char) *end) || *end == '_')
					end++;
				appendBinaryStringInfo(&buf, p, end - p);
				appendStringInfoString(&buf, strrchr(g->names[t], '_'));
				p = end;
				done = true;
			}
		}
		if (!done)
			appendStringInfoChar(&buf, *p++);
	}
	return buf.data;
}

/* the plans of statements on shard groups, kept per backend */
typedef struct ShardPlan
{
	IjPlan	   *p;
	char	   *jobs_shard;
	SPIPlanPtr	plan;
	char	   *sql;
} ShardPlan;
static List *shard_plans = NIL;	/* of ShardPlan *, in TopMemoryContext */

/* p's plan on shard group g, prepared at its first use in this backend */
static ShardPlan *
shard_plan(IjPlan *p, const IjShardGroup *g)
{
	ListCell   *lc;
	ShardPlan  *sp = NULL;

	foreach(lc, shard_plans)
	{
		ShardPlan  *x = (ShardPlan *) lfirst(lc);

		CHECK_FOR_INTERRUPTS();
		if (x->p == p && strcmp(x->jobs_shard, g->names[0]) == 0)
		{
			sp = x;
			break;
		}
	}
	if (sp == NULL)
	{
		char	   *sql = shard_sql(p->sql, g);
		SPIPlanPtr	plan = SPI_prepare_cursor(sql, p->nargs, p->argtypes, p->cursor_options);
		MemoryContext old;

		if (plan == NULL)
			elog(ERROR, "SPI_prepare failed for \"%s\": %s",
				 sql, SPI_result_code_string(SPI_result));
		if (SPI_keepplan(plan) != 0)
			elog(ERROR, "SPI_keepplan failed");
		old = MemoryContextSwitchTo(TopMemoryContext);
		sp = palloc(sizeof(ShardPlan));
		sp->p = p;
		sp->jobs_shard = pstrdup(g->names[0]);
		sp->sql = pstrdup(sql);
		sp->plan = plan;
		shard_plans = lappend(shard_plans, sp);
		MemoryContextSwitchTo(old);
		pfree(sql);
	}
	return sp;
}

/* ij_exec() of p on shard group g (NULL or no names: the tables themselves) */
int
ij_exec_on(IjPlan *p, const IjShardGroup *g, Datum *values, const char *nulls)
{
	ShardPlan  *sp;

	if (g == NULL || g->names[0] == NULL)
		return ij_exec(p, values, nulls);
	sp = shard_plan(p, g);
	return run_plan(sp->plan, sp->sql, values, nulls);
}

/*
 * ij_exec() of a read-only statement (its first row only) with the latest
 * snapshot, not the statement's own: a check that must see what committed
 * while the caller waited, under REPEATABLE READ and SERIALIZABLE too.
 */
int
ij_exec_latest(IjPlan *p, Datum *values, const char *nulls)
{
	SPIPlanPtr	plan = NULL;
	const char *sql = p->sql;
	int			ret;

	if (current_layout() == LAYOUT_CITUS)
	{
		const IjShardGroup *g = route_group(p, values, nulls);

		if (g != NULL)
		{
			ShardPlan  *sp = shard_plan(p, g);

			plan = sp->plan;
			sql = sp->sql;
		}
	}
	if (plan == NULL)
		plan = ij_prepared(p);
	ret = SPI_execute_snapshot(plan, values, nulls, GetLatestSnapshot(),
							   InvalidSnapshot, true, false, 1);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "SPI_execute_snapshot failed for \"%s\": %s",
			 sql, SPI_result_code_string(ret));
	return (int) SPI_processed;
}

/* now(): the transaction's start, as a timestamptz Datum */
Datum
ij_now_datum(void)
{
	return TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());
}

/* ij_exec() of a statement with two parameters: an id and its owner_hash */
int
ij_exec_id(IjPlan *p, Datum id, int32 route)
{
	Datum		args[2];

	args[0] = id;
	args[1] = Int32GetDatum(route);
	return ij_exec(p, args, NULL);
}

/* the owner_hash a job or attempt id carries (docs/scaling.md) */
int32
ij_id_route(Datum id)
{
	return ij_owner_hash_of_id(DatumGetUUIDP(id));
}

static IjPlan job_route_of = {
	"SELECT owner_hash::pg_catalog.int4 FROM idemjob.jobs WHERE id OPERATOR(pg_catalog.=) $1",
	1, {UUIDOID}, NULL, 0, false, NULL, 0
};
static IjPlan attempt_route_of = {
	"SELECT owner_hash::pg_catalog.int4 FROM idemjob.attempts WHERE id OPERATOR(pg_catalog.=) $1",
	1, {UUIDOID}, NULL, 0, false, NULL, 0
};

/*
 * A routed statement given an id found no row under *route, the owner_hash
 * the id carries.  An id made before 1.2 carries none: in a routed layout,
 * read the row's own owner_hash (from every partition, or every shard) into
 * *route, and answer true if the statement is worth running again under
 * it.  False: plain tables (the statement did not look by route), no row
 * with this id (of a job; attempt: of an attempt), or its owner_hash is
 * *route already.  Under Citus every id carries its owner_hash
 * (distribute() takes empty tables only), and a call sent to its node
 * could not read the other nodes' shards anyway.
 */
bool
ij_reroute(bool attempt, Datum id, int32 *route)
{
	int32		found;

	if (!ij_layout_routed() || current_layout() == LAYOUT_CITUS ||
		ij_exec(attempt ? &attempt_route_of : &job_route_of, &id, NULL) == 0)
		return false;
	found = DatumGetInt32(ij_col_nn(0, 1));
	if (found == *route)
		return false;
	*route = found;
	return true;
}

/*
 * ij_exec() for a statement whose ORDER BY ... LIMIT an index must serve in
 * order (a claim): planned, when it is, without sorts (see the file header).
 */
int
ij_exec_in_order(IjPlan *p, const IjShardGroup *g, Datum *values, const char *nulls)
{
	int			n;

	in_order = true;
	PG_TRY();
	{
		n = ij_exec_on(p, g, values, nulls);
	}
	PG_CATCH();
	{
		in_order = false;
		PG_RE_THROW();
	}
	PG_END_TRY();
	in_order = false;
	return n;
}

/* column col (1-based) of result row row */
Datum
ij_col(int row, int col, bool *isnull)
{
	return SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc,
						 col, isnull);
}

/* same, for a column that cannot be NULL */
Datum
ij_col_nn(int row, int col)
{
	bool		isnull;
	Datum		d = ij_col(row, col, &isnull);

	if (isnull)
		elog(ERROR, "unexpected null in column %d of \"%s\"", col,
			 SPI_fname(SPI_tuptable->tupdesc, col));
	return d;
}

/*
 * The calling function's result row type, blessed, kept until a relation
 * changes.  get_call_result_type() rebuilds it from pg_proc on every call
 * (for RETURNS TABLE, by decoding the argument arrays), which costs as much
 * as a small query.  The cache is keyed by function OID, so a re-created
 * extension gets new entries; any relcache invalidation (an ALTER TABLE of
 * idemjob.jobs or attempts, whose row types several functions return, by
 * the DBA or by ALTER EXTENSION UPDATE in another session) empties it, so a
 * connection open across the change does not build rows with the old
 * column count.  The descriptors it held may be in use by a call in
 * progress (the invalidation can arrive while one waits for a lock), so
 * they are freed at the end of the transaction.
 */
static struct
{
	Oid			fn_oid;
	TupleDesc	tupdesc;
}			rowtypes[16];
static int	nrowtypes = 0;
static bool rowtypes_stale = false;
static List *rowtypes_dead = NIL;	/* in TopMemoryContext */

static void
rowtypes_inval_callback(Datum arg, Oid relid)
{
	rowtypes_stale = true;
}

void
ij_rowtypes_init(void)
{
	ij_relcache_register(rowtypes_inval_callback);
}

/* at the end of every transaction: free the descriptors dropped in it */
void
ij_rowtypes_xact_end(void)
{
	ListCell   *lc;

	if (rowtypes_dead == NIL)
		return;
	foreach(lc, rowtypes_dead)
		FreeTupleDesc((TupleDesc) lfirst(lc));
	list_free(rowtypes_dead);
	rowtypes_dead = NIL;
}

/* forget every cached row type; free them at the end of the transaction */
static void
rowtypes_drop(void)
{
	MemoryContext oldcxt = MemoryContextSwitchTo(TopMemoryContext);
	int			i;

	for (i = 0; i < nrowtypes; i++)
		rowtypes_dead = lappend(rowtypes_dead, rowtypes[i].tupdesc);
	MemoryContextSwitchTo(oldcxt);
	nrowtypes = 0;
	rowtypes_stale = false;
}

TupleDesc
ij_result_tupdesc(FunctionCallInfo fcinfo)
{
	Oid			fn_oid = fcinfo->flinfo->fn_oid;
	TupleDesc	tupdesc;
	MemoryContext oldcxt;
	int			i;

	if (rowtypes_stale || nrowtypes == lengthof(rowtypes))
		rowtypes_drop();
	for (i = 0; i < nrowtypes; i++)
		if (rowtypes[i].fn_oid == fn_oid)
			return rowtypes[i].tupdesc;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	oldcxt = MemoryContextSwitchTo(TopMemoryContext);
	tupdesc = BlessTupleDesc(CreateTupleDescCopy(tupdesc));
	MemoryContextSwitchTo(oldcxt);

	rowtypes[nrowtypes].fn_oid = fn_oid;
	rowtypes[nrowtypes].tupdesc = tupdesc;
	nrowtypes++;
	return tupdesc;
}

/*
 * Result row row as the function's composite result, copied out of SPI
 * memory into the caller's.  The statement must return the table's
 * columns in order (RETURNING *).
 */
Datum
ij_row_datum(int row, FunctionCallInfo fcinfo)
{
	return PointerGetDatum(SPI_returntuple(SPI_tuptable->vals[row],
										   ij_result_tupdesc(fcinfo)));
}

/*
 * A set-returning function's result in materialize mode: one call, no
 * per-call memory context, no second call to say "done".  The tuplestore,
 * in the query's memory, copies each row put in it (out of SPI memory
 * too).  *tupdesc: the row type the executor expects (the function's
 * result type), or the cached one.
 */
Tuplestorestate *
ij_result_store(FunctionCallInfo fcinfo, TupleDesc *tupdesc)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Tuplestorestate *ts;
	MemoryContext oldcxt;

	if (rsinfo == NULL || !IsA(rsinfo, ReturnSetInfo) ||
		!(rsinfo->allowedModes & SFRM_Materialize))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("set-valued function called in context that cannot accept a set")));
	*tupdesc = rsinfo->expectedDesc ? rsinfo->expectedDesc : ij_result_tupdesc(fcinfo);
	oldcxt = MemoryContextSwitchTo(rsinfo->econtext->ecxt_per_query_memory);
	ts = tuplestore_begin_heap(false, false, work_mem);
	MemoryContextSwitchTo(oldcxt);
	rsinfo->returnMode = SFRM_Materialize;
	rsinfo->setResult = ts;
	rsinfo->setDesc = NULL;
	return ts;
}

/* one row as a set-returning function's whole result (ij_result_store) */
void
ij_return_row(FunctionCallInfo fcinfo, Datum *values, bool *nulls)
{
	TupleDesc	tupdesc;
	Tuplestorestate *ts = ij_result_store(fcinfo, &tupdesc);

	tuplestore_putvalues(ts, tupdesc, values, nulls);
}
