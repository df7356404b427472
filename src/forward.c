/*-------------------------------------------------------------------------
 *
 * forward.c
 *	  Under Citus, a call whose rows lie on another node sends itself there.
 *
 * distribute() registers the calls given an owner or an id as distributed
 * functions, and Citus sends such a call to the node that holds its rows
 * when the call is the whole statement and its argument a constant
 * (SELECT * FROM idemjob.submit('acme', ...)).  Anywhere else (an
 * argument read from a table or a variable, a call inside an expression,
 * PL/pgSQL, INSERT ... SELECT) Citus runs the function on the node the
 * client is connected to.  There its statements would go through Citus to
 * the shards, on whose node the guards refuse any write that no call of
 * that node makes, and a read would miss the lock the call needs.  So
 * such a call, before it connects, runs
 *
 *		SELECT * FROM idemjob.<name>(<each argument as a constant>)
 *
 * as the caller, which Citus sends (force-delegated: inside a transaction
 * block too, as a part of the caller's transaction) to the node holding
 * the rows, and returns what it answers.  That call finds its rows local
 * and runs there.  A call is sent on at most once: if Citus ran it here
 * again, it runs as it would have without this file.
 *
 * The calls that work on a node's own shards (claim, expiry, purge,
 * abandon_attempts) have no owner: on a node that holds no shard they run
 * on each node that holds some, through claim_on() (claim.c) and on_node()
 * (below), given a value of owner_hash whose rows lie on that node.
 *
 * Arguments travel as text literals with their type's qualified name, in
 * this session's settings (DateStyle, IntervalStyle) and read back in the
 * same ones: values of text, uuid, jsonb, interval, timestamptz, int4 and
 * boolean all survive that exactly.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/tuplestore.h"

#include "idemjob.h"

/* a call being sent on by this backend (not sent again) */
static int	forwarding = 0;

/* a value as SQL text: its type's output quoted as a literal, or NULL */
static void
append_value(StringInfo buf, Oid type, Datum value, bool isnull)
{
	Oid			out;
	bool		varlena;

	if (isnull)
	{
		appendStringInfoString(buf, "NULL");
		return;
	}
	getTypeOutputInfo(type, &out, &varlena);
	appendStringInfoString(buf, quote_literal_cstr(OidOutputFunctionCall(out, value)));
}

/* a value as a constant of its type, in SQL: 'text'::type, or NULL::type */
void
ij_append_literal(StringInfo buf, Oid type, Datum value, bool isnull)
{
	append_value(buf, type, value, isnull);
	appendStringInfo(buf, "::%s", format_type_be_qualified(type));
}

/*
 * Run sql, a call sent on, as a SELECT (connected): the rows it returned
 * are in SPI_tuptable.
 */
int
ij_forward_sql_rows(const char *sql)
{
	int			ret;

	forwarding++;
	PG_TRY();
	{
		ret = SPI_execute(sql, false, 0);
	}
	PG_FINALLY();
	{
		forwarding--;
	}
	PG_END_TRY();
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "SPI_execute failed for \"%s\": %s", sql, SPI_result_code_string(ret));
	return (int) SPI_processed;
}

/* SELECT * FROM the function called, with fcinfo's arguments as constants */
static char *
forward_sql(FunctionCallInfo fcinfo)
{
	Oid			fn = fcinfo->flinfo->fn_oid;
	Oid		   *argtypes;
	int			nargs;
	int			i;
	StringInfoData buf;

	(void) get_func_signature(fn, &argtypes, &nargs);
	if (nargs != fcinfo->nargs)
		elog(ERROR, "function %u called with %d arguments, declared with %d",
			 fn, fcinfo->nargs, nargs);
	initStringInfo(&buf);
	appendStringInfo(&buf, "SELECT * FROM %s(",
					 quote_qualified_identifier(get_namespace_name(get_func_namespace(fn)),
												get_func_name(fn)));
	for (i = 0; i < nargs; i++)
	{
		CHECK_FOR_INTERRUPTS();
		if (i > 0)
			appendStringInfoString(&buf, ", ");
		ij_append_literal(&buf, argtypes[i], fcinfo->args[i].value, fcinfo->args[i].isnull);
	}
	appendStringInfoChar(&buf, ')');
	return buf.data;
}

/*
 * The rows SPI_tuptable holds as the function's result: a set-returning
 * function's put in its tuplestore (*result unset), a composite's one row
 * as a datum in caller_cxt (a row of NULLs: the NULL it was).
 */
static Datum
forward_result(FunctionCallInfo fcinfo, MemoryContext caller_cxt)
{
	TupleDesc	spi_desc = SPI_tuptable->tupdesc;
	TupleDesc	desc;
	Datum	   *values;
	bool	   *nulls;
	uint64		row;
	int			i;
	int			col;
	bool		all_null = true;

	/* (a function in FROM gets a ReturnSetInfo whether it returns a set or not) */
	if (fcinfo->flinfo->fn_retset)
	{
		Tuplestorestate *ts = ij_result_store(fcinfo, &desc);

		if (desc->natts != spi_desc->natts)
			elog(ERROR, "a forwarded call answered %d columns, not %d",
				 spi_desc->natts, desc->natts);
		values = palloc(sizeof(Datum) * desc->natts);
		nulls = palloc(sizeof(bool) * desc->natts);
		for (row = 0; row < SPI_processed; row++)
		{
			CHECK_FOR_INTERRUPTS();
			heap_deform_tuple(SPI_tuptable->vals[row], spi_desc, values, nulls);
			tuplestore_putvalues(ts, desc, values, nulls);
		}
		return (Datum) 0;
	}

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "a forwarded call must return a row");
	if (SPI_processed != 1)
		elog(ERROR, "a forwarded call answered " UINT64_FORMAT " rows", SPI_processed);
	values = palloc(sizeof(Datum) * desc->natts);
	nulls = palloc(sizeof(bool) * desc->natts);
	/* SELECT * leaves out the row type's dropped columns */
	for (i = 0, col = 1; i < desc->natts; i++)
	{
		CHECK_FOR_INTERRUPTS();
		if (TupleDescAttr(desc, i)->attisdropped)
		{
			values[i] = (Datum) 0;
			nulls[i] = true;
			continue;
		}
		if (col > spi_desc->natts)
			elog(ERROR, "a forwarded call answered %d columns, fewer than its row type's",
				 spi_desc->natts);
		values[i] = SPI_getbinval(SPI_tuptable->vals[0], spi_desc, col++, &nulls[i]);
		all_null &= nulls[i];
	}
	if (col <= spi_desc->natts)
		elog(ERROR, "a forwarded call answered %d columns, more than its row type's",
			 spi_desc->natts);
	if (all_null)
	{
		fcinfo->isnull = true;
		return (Datum) 0;
	}
	{
		MemoryContext old = MemoryContextSwitchTo(caller_cxt);
		HeapTuple	tup = heap_form_tuple(BlessTupleDesc(desc), values, nulls);
		Datum		d = HeapTupleGetDatum(tup);

		MemoryContextSwitchTo(old);
		return d;
	}
}

/*
 * Under Citus, when owner_hash's rows lie on another node and the call is
 * not one this backend sent on already: run it there (see above), set
 * *result to its answer and answer true.  False: run it here.  Called
 * before the call connects (as the caller, with its arguments checked).
 */
bool
ij_forward(FunctionCallInfo fcinfo, int32 owner_hash, Datum *result)
{
	MemoryContext caller_cxt = CurrentMemoryContext;
	char	   *sql;

	if (forwarding > 0 || !ij_rows_elsewhere(owner_hash))
		return false;
	sql = forward_sql(fcinfo);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	(void) ij_forward_sql_rows(sql);
	*result = forward_result(fcinfo, caller_cxt);
	SPI_finish();
	return true;
}

/*
 * Citus, on a node that holds no shard, for a call not sent on already:
 * connects and sets *nodes to a value of owner_hash for each node that
 * holds some (ij_shard_nodes); how many.  -1, not connected, elsewhere.
 */
int
ij_connect_shard_nodes(int32 **nodes)
{
	int			n;

	if (forwarding > 0 || !ij_maybe_shardless())
		return -1;
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	n = ij_shard_nodes(nodes);
	if (n < 0)
		SPI_finish();
	return n;
}

/*
 * The calls that work on this node's shards only, which a node without
 * shards runs on every node that has some through idemjob.on_node(), and
 * the types of their arguments
 */
typedef struct NodeCall
{
	const char *name;
	int			nargs;
	const char *types[2];
} NodeCall;

static const NodeCall node_calls[] = {
	{"expire_attempts", 0, {NULL, NULL}},
	{"abandon_attempts", 1, {"pg_catalog.text", NULL}},
	{"purge", 2, {"pg_catalog.interval", "pg_catalog.int4"}},
	{"purge_race_log", 1, {"pg_catalog.interval", NULL}},
};

/*
 * Citus, on a node that holds no shard (a coordinator without shards): the
 * call (one of node_calls, fcinfo its arguments) run on each node that
 * holds some, through on_node() with a value of owner_hash whose rows lie
 * there, as the caller, inside the caller's transaction (Citus sends each
 * there); *total: the sum of their answers.  limit_arg >= 0: that argument
 * (an int4) is the most the call may do in all, each node asked for what
 * the nodes before it left.  False elsewhere: run it here.
 */
bool
ij_on_shard_nodes(FunctionCallInfo fcinfo, const char *call, int limit_arg, int32 *total)
{
	int32	   *nodes;
	int			nnodes;
	Oid		   *argtypes;
	int			nargs;
	int			n;
	int			i;

	nnodes = ij_connect_shard_nodes(&nodes);
	if (nnodes < 0)
		return false;
	(void) get_func_signature(fcinfo->flinfo->fn_oid, &argtypes, &nargs);
	*total = 0;
	for (n = 0; n < nnodes; n++)
	{
		StringInfoData sql;
		bool		isnull;
		Datum		d;

		CHECK_FOR_INTERRUPTS();
		initStringInfo(&sql);
		appendStringInfo(&sql, "SELECT * FROM idemjob.on_node('%d'::idemjob.owner_hash, %s, ARRAY[",
						 nodes[n], quote_literal_cstr(call));
		for (i = 0; i < nargs; i++)
		{
			if (i > 0)
				appendStringInfoString(&sql, ", ");
			if (i == limit_arg && !fcinfo->args[i].isnull)
				appendStringInfo(&sql, "'%d'", DatumGetInt32(fcinfo->args[i].value) - *total);
			else
				append_value(&sql, argtypes[i], fcinfo->args[i].value, fcinfo->args[i].isnull);
		}
		/* in FROM: Citus sends no call in a select list from inside a function */
		appendStringInfoString(&sql, "]::pg_catalog.text[])");
		if (ij_forward_sql_rows(sql.data) != 1)
			elog(ERROR, "idemjob.on_node() answered no row");
		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
		if (!isnull)
			*total += DatumGetInt32(d);
		SPI_freetuptable(SPI_tuptable);
		if (limit_arg >= 0 && !fcinfo->args[limit_arg].isnull &&
			*total >= DatumGetInt32(fcinfo->args[limit_arg].value))
			break;
	}
	SPI_finish();
	return true;
}

/*
 * idemjob.on_node(node owner_hash, call text, args text[]) RETURNS int4
 *
 * Runs idemjob.<call>(args) on the node that holds the rows of owner_hash
 * node (distribute() registers it by node), as the caller, whose rights on
 * that function decide; call is one of node_calls, each argument the text
 * of a value of its type.  What a node without shards calls on each node
 * with some (ij_on_shard_nodes()); anywhere else it is the call itself.
 */
PG_FUNCTION_INFO_V1(idemjob_on_node);

Datum
idemjob_on_node(PG_FUNCTION_ARGS)
{
	IJ_ENTRY();
	const NodeCall *nc = NULL;
	char	   *call;
	ArrayType  *arr;
	Datum	   *elems;
	bool	   *elnulls;
	int			nelems;
	Oid			argtypes[2] = {TEXTOID, TEXTOID};
	Datum		values[2];
	char		nulls[2] = {' ', ' '};
	StringInfoData sql;
	bool		isnull;
	Datum		result;
	int			i;

	ij_require(fcinfo, 0, "node");
	ij_require(fcinfo, 1, "call");
	ij_require(fcinfo, 2, "args");
	call = text_to_cstring(PG_GETARG_TEXT_PP(1));
	for (i = 0; i < (int) lengthof(node_calls); i++)
		if (strcmp(call, node_calls[i].name) == 0)
			nc = &node_calls[i];
	if (nc == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("idemjob.on_node() does not run \"%s\"", call),
				 errhint("It runs expire_attempts, abandon_attempts, purge and purge_race_log.")));
	arr = PG_GETARG_ARRAYTYPE_P(2);
	if (ARR_NDIM(arr) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument \"args\" must be a one-dimensional array")));
	deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &elems, &elnulls, &nelems);
	if (nelems != nc->nargs)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("idemjob.%s takes %d arguments, not %d", nc->name, nc->nargs, nelems)));

	initStringInfo(&sql);
	appendStringInfo(&sql, "SELECT idemjob.%s(", nc->name);
	for (i = 0; i < nelems; i++)
	{
		values[i] = elems[i];
		nulls[i] = elnulls[i] ? 'n' : ' ';
		appendStringInfo(&sql, "%s$%d::%s", i > 0 ? ", " : "", i + 1, nc->types[i]);
	}
	appendStringInfoChar(&sql, ')');

	/* as the caller: its rights on the call decide */
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute_with_args(sql.data, nelems, argtypes, values, nulls, false, 0) != SPI_OK_SELECT ||
		SPI_processed != 1)
		elog(ERROR, "could not run idemjob.%s", nc->name);
	result = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	SPI_finish();
	if (isnull)
		PG_RETURN_NULL();
	PG_RETURN_DATUM(result);
}
