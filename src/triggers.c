/*-------------------------------------------------------------------------
 *
 * triggers.c
 *	  Guards against raw DML (I8): row triggers on idemjob.jobs and
 *	  idemjob.attempts that refuse, with IJ005, any change the state machine
 *	  forbids, and a TRUNCATE guard.
 *
 * The extension's own functions have already checked each transition, so
 * while one of them runs (idemjob_trusted_depth > 0, raised in
 * spi_plans.c) the guards return at once: the trusted path costs one
 * function call per row and no second round of checks.  A limit of this
 * design: a user-defined trigger on these tables that itself runs DML on
 * them, fired from inside an idemjob function, runs trusted too.
 *
 * Raw DML is refused when it would:
 *	 - insert a job in any state but a fresh pending one, or insert an
 *	   attempt at all (start_attempt() numbers attempts, reads the version
 *	   and checks certification);
 *	 - change a job's identity (id, owner, key, intent, params, provider,
 *	   created_at), rewrite a written result, write a result without its
 *	   winner (or the reverse), move a final job, or move a version or an
 *	   attempt count backwards (these stand in for CHECK constraints, which
 *	   would be re-parsed at every statement of the trusted path too);
 *	 - change an attempt's identity or move it along a transition the
 *	   state machine does not have (which also rules out a second attempt
 *	   in doubt: nothing re-enters started or unknown).  A transition it
 *	   has moves the job's derived state along, as the functions do;
 *	 - delete a job that is not final, or an attempt on its own.  Deleting
 *	   a final job deletes its attempts and race log through ON DELETE
 *	   CASCADE: the attempt guard lets a delete through when its job is
 *	   already gone.
 *
 * src/triggers.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/inval.h"
#include "utils/rel.h"

#include "idemjob.h"

PG_FUNCTION_INFO_V1(idemjob_jobs_guard);
PG_FUNCTION_INFO_V1(idemjob_attempts_guard);
PG_FUNCTION_INFO_V1(idemjob_truncate_guard);
PG_FUNCTION_INFO_V1(idemjob_contracts_changed);

static IjPlan job_exists = {
	"SELECT 1 FROM idemjob.jobs WHERE id OPERATOR(pg_catalog.=) $1",
	1, {UUIDOID}, NULL
};

static TriggerData *
trigger_data(FunctionCallInfo fcinfo)
{
	if (!CALLED_AS_TRIGGER(fcinfo))
		elog(ERROR, "idemjob guard called outside a trigger");
	return (TriggerData *) fcinfo->context;
}

static Datum
trigger_result(TriggerData *td)
{
	if (TRIGGER_FIRED_BY_UPDATE(td->tg_event))
		return PointerGetDatum(td->tg_newtuple);
	return PointerGetDatum(td->tg_trigtuple);
}

static Datum
col(TriggerData *td, HeapTuple tuple, const char *name, bool *isnull)
{
	TupleDesc	desc = RelationGetDescr(td->tg_relation);
	int			attno = SPI_fnumber(desc, name);

	if (attno <= 0)
		elog(ERROR, "column \"%s\" not found", name);
	return heap_getattr(tuple, attno, desc, isnull);
}

/* the old and the new row hold the same value (NULLs included) */
static bool
unchanged(TriggerData *td, const char *name)
{
	TupleDesc	desc = RelationGetDescr(td->tg_relation);
	int			attno = SPI_fnumber(desc, name);
	Form_pg_attribute att = TupleDescAttr(desc, attno - 1);
	bool		n1,
				n2;
	Datum		d1 = heap_getattr(td->tg_trigtuple, attno, desc, &n1);
	Datum		d2 = heap_getattr(td->tg_newtuple, attno, desc, &n2);

	if (n1 || n2)
		return n1 == n2;
	return datum_image_eq(d1, d2, att->attbyval, att->attlen);
}

static char *
state_of(TriggerData *td, HeapTuple tuple)
{
	bool		isnull;
	Datum		d = col(td, tuple, "state", &isnull);

	if (isnull)
		return "null";
	return DatumGetCString(DirectFunctionCall1(enum_out, d));
}

/* completed_by and result are both NULL or both set */
static bool
result_and_winner_together(TriggerData *td, HeapTuple tuple)
{
	bool		winner_null;
	bool		result_null;

	col(td, tuple, "completed_by", &winner_null);
	col(td, tuple, "result", &result_null);
	return winner_null == result_null;
}

static void
refuse(TriggerData *td, HeapTuple tuple, const char *what, const char *detail)
{
	bool		isnull;
	Datum		id = col(td, tuple, "id", &isnull);

	ereport(ERROR,
			(errcode(ERRCODE_IJ_INVALID_TRANSITION),
			 errmsg("%s %s is refused", what,
					isnull ? "(no id)" : ij_uuid_str(id)),
			 errdetail("%s", detail),
			 errhint("Change jobs and attempts through the idemjob functions.")));
}

static void
check_identity(TriggerData *td, const char *what, const char *const *cols)
{
	for (; *cols; cols++)
		if (!unchanged(td, *cols))
			refuse(td, td->tg_trigtuple, what,
				   psprintf("Column \"%s\" is part of the row's identity and cannot change.", *cols));
}

Datum
idemjob_jobs_guard(PG_FUNCTION_ARGS)
{
	TriggerData *td = trigger_data(fcinfo);
	static const char *const identity[] = {
		"id", "owner_id", "idempotency_key", "intent", "params", "provider",
		"created_at", NULL
	};

	if (idemjob_trusted_depth > 0)
		return trigger_result(td);

	if (TRIGGER_FIRED_BY_INSERT(td->tg_event))
	{
		HeapTuple	t = td->tg_trigtuple;
		bool		isnull;

		if (strcmp(state_of(td, t), "pending") != 0 ||
			DatumGetInt64(col(td, t, "version", &isnull)) != 0 ||
			DatumGetInt32(col(td, t, "attempt_count", &isnull)) != 0 ||
			(col(td, t, "completed_by", &isnull), !isnull) ||
			(col(td, t, "result", &isnull), !isnull) ||
			(col(td, t, "completed_at", &isnull), !isnull))
			refuse(td, t, "insert of job",
				   "A job must be inserted pending, at version 0, with no attempts and no result; use idemjob.submit().");
	}
	else if (TRIGGER_FIRED_BY_UPDATE(td->tg_event))
	{
		char	   *old_state = state_of(td, td->tg_trigtuple);
		char	   *new_state = state_of(td, td->tg_newtuple);
		bool		isnull;
		int64		old_version;
		int64		new_version;

		check_identity(td, "update of job", identity);

		old_version = DatumGetInt64(col(td, td->tg_trigtuple, "version", &isnull));
		new_version = DatumGetInt64(col(td, td->tg_newtuple, "version", &isnull));
		if (new_version < old_version)
			refuse(td, td->tg_trigtuple, "update of job",
				   psprintf("Its version would go back from " INT64_FORMAT " to " INT64_FORMAT ".",
							old_version, new_version));

		if (ij_job_final(old_state) && strcmp(old_state, new_state) != 0)
			refuse(td, td->tg_trigtuple, "update of job",
				   psprintf("The job is %s, a final state; it cannot become %s.",
							old_state, new_state));

		col(td, td->tg_trigtuple, "completed_by", &isnull);
		if (!isnull && (!unchanged(td, "completed_by") || !unchanged(td, "result")))
			refuse(td, td->tg_trigtuple, "update of job",
				   "Its result was written by a winning attempt and cannot be rewritten.");
		if (!result_and_winner_together(td, td->tg_newtuple))
			refuse(td, td->tg_trigtuple, "update of job",
				   "A result and the attempt that won it (completed_by) are written together.");
		if (DatumGetInt32(col(td, td->tg_newtuple, "attempt_count", &isnull)) <
			DatumGetInt32(col(td, td->tg_trigtuple, "attempt_count", &isnull)))
			refuse(td, td->tg_trigtuple, "update of job",
				   "Its attempt count cannot go back.");
	}
	else if (TRIGGER_FIRED_BY_DELETE(td->tg_event))
	{
		char	   *state = state_of(td, td->tg_trigtuple);

		if (!ij_job_final(state))
			refuse(td, td->tg_trigtuple, "delete of job",
				   psprintf("The job is %s; only a succeeded, failed or cancelled job can be deleted.",
							state));
	}

	return trigger_result(td);
}

/* the state machine of attempts: may an attempt go from -> to? */
static bool
attempt_transition_ok(const char *from, const char *to)
{
	if (strcmp(from, to) == 0)
		return true;
	if (strcmp(from, "started") == 0)
		return strcmp(to, "started") != 0;
	if (strcmp(from, "unknown") == 0 || strcmp(from, "cancelled") == 0)
		return strcmp(to, "succeeded") == 0 ||
			strcmp(to, "superseded") == 0 ||
			strcmp(to, "failed") == 0 ||
			(strcmp(from, "unknown") == 0 && strcmp(to, "cancelled") == 0);
	return false;				/* succeeded, superseded, failed are final */
}

Datum
idemjob_attempts_guard(PG_FUNCTION_ARGS)
{
	TriggerData *td = trigger_data(fcinfo);
	static const char *const identity[] = {
		"id", "job_id", "owner_id", "attempt_no", "provider", "read_version",
		"worker", "started_at", NULL
	};

	if (idemjob_trusted_depth > 0)
		return trigger_result(td);

	if (TRIGGER_FIRED_BY_INSERT(td->tg_event))
		refuse(td, td->tg_trigtuple, "insert of attempt",
			   "Attempts are numbered, versioned and checked for certification by idemjob.start_attempt().");
	else if (TRIGGER_FIRED_BY_UPDATE(td->tg_event))
	{
		char	   *from = state_of(td, td->tg_trigtuple);
		char	   *to = state_of(td, td->tg_newtuple);
		bool		isnull;

		check_identity(td, "update of attempt", identity);
		if (!attempt_transition_ok(from, to))
			refuse(td, td->tg_trigtuple, "update of attempt",
				   psprintf("An attempt cannot go from %s to %s.", from, to));
		col(td, td->tg_trigtuple, "result_sha256", &isnull);
		if (!isnull && !unchanged(td, "result_sha256"))
			refuse(td, td->tg_trigtuple, "update of attempt",
				   "The fingerprint of its result cannot be rewritten.");

		/* keep the job's derived state in step, as the functions do */
		if (strcmp(from, to) != 0)
		{
			Datum		job_id = col(td, td->tg_trigtuple, "job_id", &isnull);

			ij_connect();
			if (strcmp(to, "unknown") == 0)
				ij_job_in_doubt(job_id);
			else if (ij_in_doubt(from))
				ij_release_job(job_id);
			ij_finish();
		}
	}
	else if (TRIGGER_FIRED_BY_DELETE(td->tg_event))
	{
		bool		isnull;
		Datum		job_id = col(td, td->tg_trigtuple, "job_id", &isnull);
		int			n;

		/* a cascade from its job's delete finds the job gone */
		ij_connect();
		n = ij_exec(&job_exists, &job_id, NULL);
		ij_finish();
		if (n > 0)
			refuse(td, td->tg_trigtuple, "delete of attempt",
				   "An attempt is deleted only with its job, once the job is final.");
	}

	return trigger_result(td);
}

Datum
idemjob_truncate_guard(PG_FUNCTION_ARGS)
{
	TriggerData *td = trigger_data(fcinfo);

	if (idemjob_trusted_depth == 0)
		ereport(ERROR,
				(errcode(ERRCODE_IJ_INVALID_TRANSITION),
				 errmsg("truncate of %s is refused",
						RelationGetRelationName(td->tg_relation)),
				 errdetail("It would delete jobs that are not final."),
				 errhint("Delete final jobs with DELETE, or drop the extension.")));
	return PointerGetDatum(NULL);
}

/*
 * Statement trigger on idemjob.contracts: compiled contracts are cached per
 * backend (contracts.c); a relcache invalidation of the table, sent at
 * commit to every backend, drops them.
 */
Datum
idemjob_contracts_changed(PG_FUNCTION_ARGS)
{
	TriggerData *td = trigger_data(fcinfo);

	CacheInvalidateRelcacheByRelid(RelationGetRelid(td->tg_relation));
	return PointerGetDatum(NULL);
}
