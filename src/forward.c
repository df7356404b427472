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
 * Arguments travel as text literals with their type's qualified name, in
 * this session's settings (DateStyle, IntervalStyle) and read back in the
 * same ones: values of text, uuid, jsonb, interval, timestamptz, int4 and
 * boolean all survive that exactly.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/tuplestore.h"

#include "idemjob.h"

/* a call being sent on by this backend (not sent again) */
static int	forwarding = 0;

/* a value as a constant of its type, in SQL: 'text'::type, or NULL::type */
void
ij_append_literal(StringInfo buf, Oid type, Datum value, bool isnull)
{
	if (isnull)
		appendStringInfoString(buf, "NULL");
	else
	{
		Oid			out;
		bool		varlena;

		getTypeOutputInfo(type, &out, &varlena);
		appendStringInfoString(buf, quote_literal_cstr(OidOutputFunctionCall(out, value)));
	}
	appendStringInfo(buf, "::%s", format_type_be_qualified(type));
}

/* whether this backend is sending a call on (which is not sent again) */
bool
ij_forwarding(void)
{
	return forwarding > 0;
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
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
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
		Tuplestorestate *ts;
		MemoryContext old;

		if (rsinfo == NULL || !IsA(rsinfo, ReturnSetInfo) ||
			!(rsinfo->allowedModes & SFRM_Materialize))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("set-valued function called in context that cannot accept a set")));
		desc = rsinfo->expectedDesc ? rsinfo->expectedDesc : ij_result_tupdesc(fcinfo);
		if (desc->natts != spi_desc->natts)
			elog(ERROR, "a forwarded call answered %d columns, not %d",
				 spi_desc->natts, desc->natts);
		old = MemoryContextSwitchTo(rsinfo->econtext->ecxt_per_query_memory);
		ts = tuplestore_begin_heap(false, false, work_mem);
		values = palloc(sizeof(Datum) * desc->natts);
		nulls = palloc(sizeof(bool) * desc->natts);
		for (row = 0; row < SPI_processed; row++)
		{
			CHECK_FOR_INTERRUPTS();
			heap_deform_tuple(SPI_tuptable->vals[row], spi_desc, values, nulls);
			tuplestore_putvalues(ts, desc, values, nulls);
		}
		MemoryContextSwitchTo(old);
		rsinfo->returnMode = SFRM_Materialize;
		rsinfo->setResult = ts;
		rsinfo->setDesc = NULL;
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
