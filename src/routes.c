/*-------------------------------------------------------------------------
 *
 * routes.c
 *	  Failover routed by the server (since 1.2): set_route(), and the
 *	  provider a job moves to when an attempt ends without a result that
 *	  counts.
 *
 * An intent's route (idemjob.routes) is the order of providers its jobs
 * fail over to.  A job's sequence is its own provider (jobs.provider, part
 * of the request), then the route's providers other than it, in order,
 * keeping only those certified for the intent at its current contract
 * version (I4) when idemjob.require_certified_failover is on.  When an
 * attempt on provider P fails (retryably), is rejected, or leaves doubt
 * without a result (cancel_attempt, the doubt policy, abandon_attempts),
 * the job's current provider (jobs.next_provider, NULL meaning its own)
 * becomes the provider after P in that sequence, wrapping around to the
 * start.  claim() and start_attempt(job, NULL) start the next attempt
 * there; no worker keeps a failover list.  An attempt released unconfirmed
 * was never sent and moves nothing.
 *
 * Certification is checked when a job moves; revoke_provider() and a new
 * contract version send the jobs routed to a provider that lost it back to
 * their own provider, so claim() needs no check of its own.
 *
 * src/routes.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"

#include "idemjob.h"

PG_FUNCTION_INFO_V1(idemjob_set_route);

#define ROUTE_MAX_PROVIDERS	16

/* the job's own provider, intent and route (no row: no route) */
static IjPlan job_route = {
	"SELECT j.provider, j.intent, r.providers FROM idemjob.jobs j"
	" JOIN idemjob.routes r ON r.intent OPERATOR(pg_catalog.=) j.intent"
	" WHERE j.id OPERATOR(pg_catalog.=) $1" IJ_ROUTE("j.", 2),
	2, {UUIDOID, INT4OID}, NULL, 0, false, NULL, 0
};

static IjPlan set_next = {
	"UPDATE idemjob.jobs SET next_provider = $2"
	" WHERE id OPERATOR(pg_catalog.=) $1" IJ_ROUTE("", 3)
	" AND next_provider IS DISTINCT FROM $2",
	3, {UUIDOID, TEXTOID, INT4OID}, NULL, 0, false, NULL, 0
};

/*
 * Jobs not yet final routed to a provider ($2; NULL: any) of an intent go
 * back to their own provider.  The pending ones through jobs_claim_intent,
 * the others through jobs_in_flight (one arm of the OR each).
 */
static IjPlan forget = {
	"UPDATE idemjob.jobs SET next_provider = NULL"
	" WHERE intent OPERATOR(pg_catalog.=) $1"
	" AND (state OPERATOR(pg_catalog.=) 'pending'::idemjob.job_state"
	" OR state OPERATOR(pg_catalog.=) ANY ('{running,in_doubt}'::idemjob.job_state[]))"
	" AND next_provider IS NOT NULL"
	" AND ($2::pg_catalog.text IS NULL OR next_provider OPERATOR(pg_catalog.=) $2)",
	2, {TEXTOID, TEXTOID}, NULL, 0, false, NULL, 0
};

static IjPlan upsert_route = {
	"INSERT INTO idemjob.routes AS r (intent, providers) VALUES ($1, $2)"
	" ON CONFLICT (intent) DO UPDATE SET providers = EXCLUDED.providers,"
	" updated_at = CASE WHEN r.providers OPERATOR(pg_catalog.=) EXCLUDED.providers"
	" THEN r.updated_at ELSE $3 END"
	" RETURNING r.*",
	3, {TEXTOID, TEXTARRAYOID, TIMESTAMPTZOID}, NULL, 0, false, NULL, 0
};

/*
 * The job's attempt on failed_provider ended without a result that
 * counts: move the job to the next provider of its sequence.  Must be
 * connected; the job row is locked by the caller's update.
 */
void
ij_route_advance(Datum job_id, int32 route, Datum failed_provider)
{
	char	   *own;
	char	   *intent;
	char	   *failed = TextDatumGetCString(failed_provider);
	Datum	   *elems;
	bool	   *elnulls;
	int			nelems;
	const char *seq[ROUTE_MAX_PROVIDERS + 1];
	int			nseq = 0;
	int			at = -1;
	int			i;
	Datum		args[3];
	char		nulls[3] = {' ', ' ', ' '};

	if (ij_exec_id(&job_route, job_id, route) == 0)
		return;
	own = TextDatumGetCString(ij_col_nn(0, 1));
	intent = TextDatumGetCString(ij_col_nn(0, 2));
	deconstruct_array(DatumGetArrayTypeP(ij_col_nn(0, 3)), TEXTOID, -1, false,
					  TYPALIGN_INT, &elems, &elnulls, &nelems);

	seq[nseq++] = own;
	for (i = 0; i < nelems && nseq <= ROUTE_MAX_PROVIDERS; i++)
	{
		char	   *p;

		CHECK_FOR_INTERRUPTS();
		if (elnulls[i])
			continue;
		p = TextDatumGetCString(elems[i]);
		if (strcmp(p, own) != 0)
			seq[nseq++] = p;
	}
	for (i = 0; i < nseq; i++)
		if (strcmp(seq[i], failed) == 0)
			at = i;

	/* the next provider after the failed one that may take the job */
	for (i = 1; i <= nseq; i++)
	{
		const char *next = seq[(at + i + nseq) % nseq];

		CHECK_FOR_INTERRUPTS();
		if (strcmp(next, own) == 0 || !idemjob_require_certified_failover ||
			ij_provider_certified(intent, next))
		{
			args[0] = job_id;
			args[1] = strcmp(next, own) == 0 ? (Datum) 0 : ij_text_datum(next);
			nulls[1] = strcmp(next, own) == 0 ? 'n' : ' ';
			args[2] = Int32GetDatum(route);
			ij_exec(&set_next, args, nulls);
			return;
		}
	}
}

/* a provider (NULL: every provider) of an intent lost its certification */
void
ij_route_forget(const char *intent, const char *provider)
{
	Datum		args[2];
	char		nulls[2] = {' ', ' '};

	args[0] = ij_text_datum(intent);
	args[1] = provider ? ij_text_datum(provider) : (Datum) 0;
	nulls[1] = provider ? ' ' : 'n';
	ij_exec(&forget, args, nulls);
}

/*
 * idemjob.set_route(intent, providers) RETURNS idemjob.routes
 *
 * The intent's failover order, written whole; '{}' leaves its jobs on
 * their own provider.  Again with the same providers: the row as stored.
 */
Datum
idemjob_set_route(PG_FUNCTION_ARGS)
{
	IJ_ENTRY();
	Datum		args[3];
	ArrayType  *providers;
	Datum	   *elems;
	bool	   *elnulls;
	int			nelems;
	int			i;
	Datum		result;

	ij_require(fcinfo, 1, "providers");
	args[0] = PointerGetDatum(ij_name_arg(fcinfo, 0, "intent", false));
	providers = PG_GETARG_ARRAYTYPE_P(1);
	if (ARR_NDIM(providers) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument \"providers\" must be a one-dimensional array")));
	deconstruct_array(providers, TEXTOID, -1, false, TYPALIGN_INT,
					  &elems, &elnulls, &nelems);
	if (nelems > ROUTE_MAX_PROVIDERS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a route names at most %d providers", ROUTE_MAX_PROVIDERS),
				 errdetail("It names %d.", nelems)));
	for (i = 0; i < nelems; i++)
	{
		int			len;
		int			j;

		CHECK_FOR_INTERRUPTS();
		if (elnulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("argument \"providers\" must not contain NULL")));
		len = VARSIZE_ANY_EXHDR(DatumGetPointer(elems[i]));
		if (len < 1 || len > IDEMJOB_MAX_NAME_BYTES)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("provider %d of the route must be 1 to %d bytes long",
							i + 1, IDEMJOB_MAX_NAME_BYTES)));
		for (j = 0; j < i; j++)
			if ((int) VARSIZE_ANY_EXHDR(DatumGetPointer(elems[j])) == len &&
				memcmp(VARDATA_ANY(DatumGetPointer(elems[i])),
					   VARDATA_ANY(DatumGetPointer(elems[j])), len) == 0)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("provider \"%s\" is named twice in the route",
								TextDatumGetCString(elems[i]))));
	}
	args[1] = PointerGetDatum(providers);
	args[2] = IJ_NOW_DATUM();

	ij_connect();
	ij_exec(&upsert_route, args, NULL);
	result = ij_row_datum(0, fcinfo);
	ij_finish();
	PG_RETURN_DATUM(result);
}
