/*-------------------------------------------------------------------------
 *
 * commit.c
 *	  Where a result is committed: complete_attempt(), the compare-and-swap
 *	  on (version, completed_by IS NULL), and the race log.
 *
 * The attempt row is locked first (its update, or FOR UPDATE), then the
 * job's, as in every state-machine function; two calls for the same
 * attempt serialize and the second sees the first's answer (I7).  The
 * result is checked against the intent's output contract before anything
 * is written; a violation is an answer ("rejected"), not an error.  Then a
 * single-table UPDATE of the job is the compare-and-swap (in the common
 * path, one statement with the attempt's own update):
 *
 *	 UPDATE jobs SET result = $r, ... WHERE id = $j AND version = $read_version
 *	   AND completed_by IS NULL
 *
 * Under READ COMMITTED, a concurrent writer of the same job makes this
 * statement wait for the row lock and then re-evaluate its WHERE clause on
 * the committed row (EvalPlanQual), so of any number of attempts returning
 * at once exactly one finds the slot empty and its version current: the
 * first to return wins, whatever order they started in.  The others get
 * "lost": their attempt becomes superseded, the payload is dropped, and one
 * race_log row keeps its SHA-256 and size.  The race log is written on
 * that losing path and, since 1.2, for a rejected result: every result that
 * was not committed is one row, which stands alone (intent, key, providers,
 * the payload with keep_dropped_results), so purge() loses nothing an audit
 * needs.
 *
 * A retried call finds the attempt already completed and answers from what
 * is stored: the winner's result is compared with the job's result, a
 * loser's or rejected result by its fingerprint.
 *
 * src/commit.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "common/cryptohash.h"
#include "common/sha2.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"

#include "idemjob.h"

PG_FUNCTION_INFO_V1(idemjob_complete_attempt);

/* what the winning compare-and-swap writes on the job: one list, two plans */
#define JOB_WON_SET(result, attempt) \
	" state = 'succeeded'::idemjob.job_state," \
	" result = " result ", completed_by = " attempt "," \
	" version = version OPERATOR(pg_catalog.+) 1," \
	" completed_at = pg_catalog.now(), updated_at = pg_catalog.now()"

/*
 * The compare-and-swap, and the winner's own update in the same statement
 * (one executor start instead of two).  The attempt row is already locked
 * by this transaction, so only the job's UPDATE can wait.
 */
static IjPlan cas = {
	"WITH cas AS ("
	"  UPDATE idemjob.jobs SET" JOB_WON_SET("$3", "$4")
	"  WHERE id OPERATOR(pg_catalog.=) $1" IJ_ROUTE("", 5)
	"  AND version OPERATOR(pg_catalog.=) $2"
	"  AND completed_by IS NULL"
	"  RETURNING version)"
	" UPDATE idemjob.attempts SET state = 'succeeded'::idemjob.attempt_state,"
	" finished_at = pg_catalog.now()"
	" FROM cas WHERE id OPERATOR(pg_catalog.=) $4" IJ_ROUTE("", 5)
	" RETURNING cas.version",
	5, {UUIDOID, INT8OID, JSONBOID, UUIDOID, INT4OID}, NULL, 0, false, NULL, 0
};

/*
 * The common path as one statement, attempt first: the attempt's update to
 * succeeded (which locks it) joined to its job as of the statement's
 * snapshot, then the compare-and-swap on that job.  A leased attempt not
 * yet confirmed, inside its lease, is confirmed by the same update (the
 * result is its confirmation); past its lease it takes the full path,
 * which refuses it (IJ008).
 * The attempt moves only if it may still win (started, unknown,
 * cancelled) and its job, as read, would take the result: its version is
 * the attempt's read version, no result is in, and its intent has no
 * contract whose check must come first ($3: the intents that have one,
 * from the contract cache).  $1 attempt, $2 result.  Under READ COMMITTED
 * a concurrent change of the attempt or the job is re-checked after the
 * lock wait (EvalPlanQual), as in the full path.  (Not by the job row's
 * ctid, cheaper to find: a TID scan's re-check refuses the newer version a
 * concurrent update made, so a result would lose to a mere mark_unknown.)
 *
 * No row: either nothing was written (the attempt may not win, or its job
 * would not take the result), or the job changed between the snapshot and
 * its lock (another result won, the job was cancelled or fenced): then
 * this statement has marked the attempt succeeded, and the full path finds
 * it so on a job it does not hold and records the loss (record_loss with
 * own_loss).
 */
static IjPlan complete_fast = {
	"WITH a AS ("
	"  UPDATE idemjob.attempts ta SET state = 'succeeded'::idemjob.attempt_state,"
	"  finished_at = pg_catalog.now(), lease_until = NULL"
	"  FROM idemjob.jobs j"
	"  WHERE ta.id OPERATOR(pg_catalog.=) $1" IJ_ROUTE("ta.", 4)
	"  AND ta.state OPERATOR(pg_catalog.=) ANY ('{started,unknown,cancelled}'::idemjob.attempt_state[])"
	"  AND (ta.lease_until IS NULL"
	"  OR ta.lease_until OPERATOR(pg_catalog.>=) $5)"
	"  AND j.id OPERATOR(pg_catalog.=) ta.job_id" IJ_ROUTE("j.", 4)
	"  AND j.version OPERATOR(pg_catalog.=) ta.read_version"
	"  AND j.completed_by IS NULL"
	"  AND j.intent OPERATOR(pg_catalog.<>) ALL ($3)"
	"  RETURNING ta.job_id, ta.read_version)"
	" UPDATE idemjob.jobs SET" JOB_WON_SET("$2", "$1")
	" WHERE (id, version) OPERATOR(pg_catalog.=) (SELECT job_id, read_version FROM a)"
	IJ_ROUTE("", 4)
	" AND completed_by IS NULL"
	" RETURNING version, id, owner_id",
	5, {UUIDOID, JSONBOID, TEXTARRAYOID, INT4OID, TIMESTAMPTZOID}, NULL, 0, false, NULL, 0
};

/*
 * After a loss the common path wrote: the attempt has left doubt if it was
 * in doubt, and its state before is not known here; the job goes back to
 * pending if it still waits on an attempt in doubt and none is left.
 */
static IjPlan release_if_free = {
	"UPDATE idemjob.jobs SET state = 'pending'::idemjob.job_state, updated_at = pg_catalog.now()"
	" WHERE id OPERATOR(pg_catalog.=) $1" IJ_ROUTE("", 2)
	" AND state OPERATOR(pg_catalog.=) ANY ('{running,in_doubt}'::idemjob.job_state[])"
	" AND NOT EXISTS (SELECT FROM idemjob.attempts"
	"  WHERE job_id OPERATOR(pg_catalog.=) $1" IJ_ROUTE("", 2)
	"  AND state OPERATOR(pg_catalog.=) ANY ('{started,unknown}'::idemjob.attempt_state[]))",
	2, {UUIDOID, INT4OID}, NULL, 0, false, NULL, 0
};

static IjPlan attempt_done = {
	"UPDATE idemjob.attempts SET state = $2::pg_catalog.text::idemjob.attempt_state,"
	" finished_at = pg_catalog.now(), result_sha256 = $3,"
	" error = COALESCE($4, error), dropped_result = $5"
	" WHERE id OPERATOR(pg_catalog.=) $1" IJ_ROUTE("", 6),
	6, {UUIDOID, TEXTOID, BYTEAOID, JSONBOID, JSONBOID, INT4OID}, NULL, 0, false, NULL, 0
};

/*
 * The race-log row of a result that was not committed (issue 21: a row
 * that stands alone, kept after purge()): the job's intent and key, the
 * loser's and the winner's providers, and the dropped result itself when
 * keep_dropped_results is on ($5).  One statement reads the job and the
 * attempt as they are now and writes the row.  $6 false: lost, reason
 * slot_taken when the job has a winner, else version_moved; true:
 * rejected (the contract refused it), whatever the job holds.  The moment
 * the attempt was out of the race: with a winner, the winner's commit
 * (jobs.completed_at), and late_by is logged_at minus it (the contract's
 * late_by, only for slot_taken); without one (version_moved), fenced_at:
 * its own cancellation (attempts.finished_at of a cancelled attempt:
 * cancel_attempt, the doubt policy or abandon_attempts, which fence it),
 * else the job's end (completed_at: cancel_job, or failed), else the job's
 * last change (updated_at); compensations.late_by is the one or the
 * other.  Neither for rejected: not a race.  Read before the attempt's
 * own update (which sets finished_at again).  logged_at is $8, the clock
 * read just before, or the job's last change when a transaction that
 * began after that read changed the job before this statement's snapshot
 * (its now() is then later): so a row is never fenced or won after it was
 * logged (late_by and logged_at - fenced_at >= 0), however long the gap
 * (a loaded server).  ON
 * CONFLICT: the one row per attempt (race_log_attempt_id) is never
 * written twice.
 */
static IjPlan log_race = {
	"INSERT INTO idemjob.race_log (logged_at, job_id, owner_id, attempt_id,"
	" winner_attempt_id, expected_version, found_version, reason, result_sha256,"
	" result_bytes, late_by, provider, intent, idempotency_key, winner_provider,"
	" dropped_result, fenced_at, owner_hash)"
	" SELECT GREATEST(t.now, j.updated_at), j.id, a.owner_id, a.id, j.completed_by, a.read_version, j.version,"
	" CASE WHEN $6 THEN 'rejected'::pg_catalog.text"
	" WHEN j.completed_by IS NULL THEN 'version_moved'::pg_catalog.text"
	" ELSE 'slot_taken'::pg_catalog.text END,"
	" $3, $4,"
	" CASE WHEN NOT $6 AND j.completed_by IS NOT NULL"
	"  THEN GREATEST(t.now, j.updated_at) OPERATOR(pg_catalog.-) j.completed_at END,"
	" a.provider, j.intent, j.idempotency_key,"
	" (SELECT w.provider FROM idemjob.attempts w"
	"  WHERE w.id OPERATOR(pg_catalog.=) j.completed_by" IJ_ROUTE("w.", 7) "),"
	" $5,"
	" CASE WHEN $6 OR j.completed_by IS NOT NULL THEN NULL::pg_catalog.timestamptz"
	"  WHEN a.state OPERATOR(pg_catalog.=) 'cancelled'::idemjob.attempt_state THEN a.finished_at"
	"  ELSE COALESCE(j.completed_at, j.updated_at) END,"
	" a.owner_hash"
	" FROM (SELECT $8 AS now) t, idemjob.jobs j, idemjob.attempts a"
	" WHERE j.id OPERATOR(pg_catalog.=) $1 AND a.id OPERATOR(pg_catalog.=) $2"
	IJ_ROUTE("j.", 7) IJ_ROUTE("a.", 7)
	" ON CONFLICT DO NOTHING"
	" RETURNING found_version, winner_attempt_id",
	8, {UUIDOID, UUIDOID, BYTEAOID, INT4OID, JSONBOID, BOOLOID, INT4OID, TIMESTAMPTZOID}, NULL, 0, false, NULL, 0
};

/*
 * The tombstone purge() left for an attempt that could still report (a
 * cancelled one: its provider may answer late), in its job's spent_keys
 * row (retention.c): the job, its owner and key, the attempt's read
 * version, provider and cancellation time, the job's intent, final
 * version and winner.
 */
static IjPlan purged_attempt = {
	"SELECT s.job_id, s.owner_id, s.owner_hash::pg_catalog.int4"
	" FROM idemjob.spent_keys s"
	" WHERE s.open_attempts OPERATOR(pg_catalog.@>)"
	" pg_catalog.jsonb_build_array(pg_catalog.jsonb_build_object('id', $1))"
	" LIMIT 1" IJ_ROUTE_PARAM(2),
	2, {UUIDOID, INT4OID}, NULL, 0, false, NULL, 0
};

/*
 * A late result after purge(): the row complete_attempt() would have
 * written before it (log_race), from the tombstone.  $1 attempt, $2 sha,
 * $3 bytes, $4 the dropped result or NULL.
 */
#define TOMB(key) "(e.value OPERATOR(pg_catalog.->>) '" key "')"
static IjPlan log_purged_race = {
	"INSERT INTO idemjob.race_log (logged_at, job_id, owner_id, attempt_id,"
	" winner_attempt_id, expected_version, found_version, reason, result_sha256,"
	" result_bytes, late_by, provider, intent, idempotency_key, winner_provider,"
	" dropped_result, fenced_at, owner_hash)"
	" SELECT t.now, s.job_id, s.owner_id, $1, " TOMB("winner_attempt_id") "::pg_catalog.uuid,"
	" COALESCE(" TOMB("read_version") "::pg_catalog.int8, 0),"
	" COALESCE(" TOMB("job_version") "::pg_catalog.int8, 0),"
	" CASE WHEN " TOMB("winner_attempt_id") " IS NULL THEN 'version_moved'::pg_catalog.text"
	" ELSE 'slot_taken'::pg_catalog.text END,"
	" $2, $3,"
	" CASE WHEN " TOMB("winner_attempt_id") " IS NOT NULL"
	"  THEN t.now OPERATOR(pg_catalog.-) s.completed_at END,"
	" " TOMB("provider") ", " TOMB("intent") ", s.idempotency_key, " TOMB("winner_provider") ","
	" $4,"
	" CASE WHEN " TOMB("winner_attempt_id") " IS NULL"
	"  THEN COALESCE(" TOMB("cancelled_at") "::pg_catalog.timestamptz, s.completed_at) END,"
	" s.owner_hash"
	" FROM (SELECT $5 AS now) t,"
	" idemjob.spent_keys s, pg_catalog.jsonb_array_elements(s.open_attempts) e"
	" WHERE s.open_attempts OPERATOR(pg_catalog.@>)"
	" pg_catalog.jsonb_build_array(pg_catalog.jsonb_build_object('id', $1))"
	" AND " TOMB("id") " OPERATOR(pg_catalog.=) $1::pg_catalog.text"
	" LIMIT 1"
	" ON CONFLICT DO NOTHING"
	" RETURNING job_id, found_version, winner_attempt_id" IJ_ROUTE_PARAM(6),
	6, {UUIDOID, BYTEAOID, INT4OID, JSONBOID, TIMESTAMPTZOID, INT4OID}, NULL, 0, false, NULL, 0
};

static IjPlan race_sha = {
	"SELECT result_sha256 FROM idemjob.race_log WHERE attempt_id OPERATOR(pg_catalog.=) $1"
	IJ_ROUTE("", 2),
	2, {UUIDOID, INT4OID}, NULL, 0, false, NULL, 0
};

static IjPlan job_answer = {
	"SELECT version, result, completed_by FROM idemjob.jobs"
	" WHERE id OPERATOR(pg_catalog.=) $1" IJ_ROUTE("", 2),
	2, {UUIDOID, INT4OID}, NULL, 0, false, NULL, 0
};

static IjPlan race_answer = {
	"SELECT found_version, winner_attempt_id FROM idemjob.race_log"
	" WHERE attempt_id OPERATOR(pg_catalog.=) $1" IJ_ROUTE("", 2),
	2, {UUIDOID, INT4OID}, NULL, 0, false, NULL, 0
};

/*
 * The race-log fingerprint: SHA-256 of the result's canonical jsonb text
 * (jsonb_out) and that text's length in bytes.
 */
bytea *
ij_result_fingerprint(Jsonb *result, int32 *nbytes)
{
	char	   *text = JsonbToCString(NULL, &result->root, VARSIZE(result));
	size_t		len = strlen(text);
	bytea	   *sha = palloc(VARHDRSZ + PG_SHA256_DIGEST_LENGTH);
	pg_cryptohash_ctx *ctx = pg_cryptohash_create(PG_SHA256);

	if (pg_cryptohash_init(ctx) < 0 ||
		pg_cryptohash_update(ctx, (uint8 *) text, len) < 0 ||
		pg_cryptohash_final(ctx, (uint8 *) VARDATA(sha), PG_SHA256_DIGEST_LENGTH) < 0)
		elog(ERROR, "could not compute SHA-256");
	pg_cryptohash_free(ctx);
	SET_VARSIZE(sha, VARHDRSZ + PG_SHA256_DIGEST_LENGTH);
	if (nbytes)
		*nbytes = (int32) len;
	pfree(text);
	return sha;
}

static bool
bytea_datum_eq(Datum a, bytea *b)
{
	bytea	   *ba = DatumGetByteaPP(a);

	return VARSIZE_ANY_EXHDR(ba) == VARSIZE_ANY_EXHDR(b) &&
		memcmp(VARDATA_ANY(ba), VARDATA_ANY(b), VARSIZE_ANY_EXHDR(b)) == 0;
}

/* byte-identical jsonb: the same canonical text */
static bool
jsonb_datum_identical(Datum a, Jsonb *b)
{
	Jsonb	   *ja = DatumGetJsonbP(a);

	return VARSIZE(ja) == VARSIZE(b) && memcmp(ja, b, VARSIZE(b)) == 0;
}

/*
 * Write the race-log row of a result that was not committed (log_race);
 * the row's found_version and winner go to out[2], out[3].
 */
static void
log_dropped(IjAttempt *a, Jsonb *result, bytea *sha, int32 nbytes,
			bool rejected, Datum *out, bool *outnull)
{
	Datum		args[8];
	char		nulls[8];

	memset(nulls, ' ', sizeof(nulls));
	args[0] = a->job_id;
	args[1] = a->id;
	args[2] = PointerGetDatum(sha);
	args[3] = Int32GetDatum(nbytes);
	/* keep_dropped_results: the payload itself, for compensation */
	args[4] = JsonbPGetDatum(result);
	nulls[4] = idemjob_keep_dropped_results ? ' ' : 'n';
	args[5] = BoolGetDatum(rejected);
	args[6] = Int32GetDatum(a->route);
	args[7] = TimestampTzGetDatum(GetCurrentTimestamp());
	if (ij_exec(&log_race, args, nulls) == 0)
	{
		/* a row for this attempt already (restored): answer from it */
		if (ij_exec_id(&race_answer, a->id, a->route) == 0)
			elog(ERROR, "job %s of attempt %s vanished",
				 ij_uuid_str(a->job_id), ij_uuid_str(a->id));
	}
	out[2] = ij_col_nn(0, 1);
	out[3] = ij_col(0, 2, &outnull[3]);
}

/*
 * Lost: the attempt is superseded, its payload dropped (kept only with
 * keep_dropped_results) and its fingerprint logged with what it found on
 * the job.  out[2], out[3] get the answer's job_version and winner.
 * own_loss: the common path marked the attempt succeeded before losing the
 * compare-and-swap, so its state before is not a->state.
 */
static void
record_loss(IjAttempt *a, Jsonb *result, bool own_loss, Datum *out, bool *outnull)
{
	int32		nbytes;
	bytea	   *sha = ij_result_fingerprint(result, &nbytes);
	Datum		args[6];
	char		nulls[6];

	log_dropped(a, result, sha, nbytes, false, out, outnull);

	args[0] = a->id;
	args[1] = ij_text_datum("superseded");
	args[2] = PointerGetDatum(sha);
	args[3] = (Datum) 0;
	memset(nulls, ' ', sizeof(nulls));
	nulls[3] = 'n';
	/* keep_dropped_results: the losing payload, for compensation */
	args[4] = JsonbPGetDatum(result);
	nulls[4] = idemjob_keep_dropped_results ? ' ' : 'n';
	args[5] = Int32GetDatum(a->route);
	ij_exec(&attempt_done, args, nulls);

	if (own_loss)
		ij_exec_id(&release_if_free, a->job_id, a->route);
	else if (ij_in_doubt(a->state))
		ij_release_job(a->job_id, a->route);
}

static void
already_completed(IjAttempt *a)
{
	ereport(ERROR,
			(errcode(ERRCODE_IJ_IDEMPOTENCY_CONFLICT),
			 errmsg("attempt %s was already completed with a different result",
					ij_uuid_str(a->id)),
			 errdetail("The attempt is %s; a result is accepted once per attempt.", a->state),
			 ij_errfields("attempts", psprintf("attempt_id=%s job_id=%s state=%s",
											   ij_uuid_str(a->id), ij_uuid_str(a->job_id), a->state)),
			 errhint("Resend the original result to learn the outcome.")));
}

/*
 * A late result for an attempt whose job purge() deleted (since 1.2): lost,
 * logged in the race log against the tombstone purge() left (I10), never
 * IJ006 with no trace.  False when there is no such tombstone.  Sent again,
 * the same answer (I7); another result is IJ001.
 */
static bool
purged_attempt_lost(Datum attempt_id, Jsonb *result, Datum *out, bool *outnull)
{
	IjAttempt	a;
	int32		nbytes;
	bytea	   *sha;
	Datum		args[6];
	char		nulls[6];

	if (ij_exec_id(&purged_attempt, attempt_id, ij_id_route(attempt_id)) == 0 ||
		!ij_owner_visible(ij_col_nn(0, 2)))
		return false;
	a.id = attempt_id;
	a.job_id = ij_col_nn(0, 1);
	a.state = "superseded";
	a.route = DatumGetInt32(ij_col_nn(0, 3));
	out[1] = a.job_id;

	sha = ij_result_fingerprint(result, &nbytes);
	if (ij_exec_id(&race_sha, attempt_id, a.route) == 0)
	{
		memset(nulls, ' ', sizeof(nulls));
		args[0] = attempt_id;
		args[1] = PointerGetDatum(sha);
		args[2] = Int32GetDatum(nbytes);
		args[3] = JsonbPGetDatum(result);
		nulls[3] = idemjob_keep_dropped_results ? ' ' : 'n';
		args[4] = TimestampTzGetDatum(GetCurrentTimestamp());
		args[5] = Int32GetDatum(a.route);
		if (ij_exec(&log_purged_race, args, nulls) == 1)
		{
			out[1] = ij_col_nn(0, 1);
			out[2] = ij_col_nn(0, 2);
			out[3] = ij_col(0, 3, &outnull[3]);
			return true;
		}

		/*
		 * Nothing written: the same attempt's result sent twice at once (the
		 * other call's row committed while this one waited on
		 * race_log_attempt_id: answer from it, as a retry), or key_retention
		 * deleted the tombstone meanwhile (no such attempt any more).  A
		 * snapshot that cannot see the other row (REPEATABLE READ) retries.
		 */
		if (ij_exec_id(&race_sha, attempt_id, a.route) == 0)
		{
			if (ij_exec_id(&purged_attempt, attempt_id, a.route) == 0)
				return false;
			ereport(ERROR,
					(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					 errmsg("could not serialize access due to a concurrent result for attempt %s",
							ij_uuid_str(attempt_id)),
					 errhint("Retry the transaction.")));
		}
	}
	if (!bytea_datum_eq(ij_col_nn(0, 1), sha))
		already_completed(&a);
	ij_exec_id(&race_answer, attempt_id, a.route);
	out[2] = ij_col_nn(0, 1);
	out[3] = ij_col(0, 2, &outnull[3]);
	return true;
}

/*
 * idemjob.complete_attempt(attempt_id, result)
 *		RETURNS TABLE(outcome, job_id, job_version, winner_attempt_id)
 */
Datum
idemjob_complete_attempt(PG_FUNCTION_ARGS)
{
	IJ_ENTRY();
	IjAttempt	a;
	Jsonb	   *result;
	Jsonb	   *violation = NULL;
	const char *outcome;
	Datum		out[4];
	bool		outnull[4] = {false, false, false, false};
	Datum		args[9];
	char		nulls[9];
	int32		route;

	ij_require(fcinfo, 0, "attempt_id");
	ij_require(fcinfo, 1, "result");
	result = ij_jsonb_arg(fcinfo, 1, "result", false);
	IJ_FORWARD(ij_id_route(PG_GETARG_DATUM(0)));

	ij_connect();

	args[0] = PG_GETARG_DATUM(0);
	args[1] = JsonbPGetDatum(result);
	args[2] = ij_contract_intents();
	route = ij_id_route(args[0]);
	args[3] = Int32GetDatum(route);
	/* the clock as a value: Citus refuses a volatile function in the WHERE of an UPDATE */
	args[4] = TimestampTzGetDatum(GetCurrentTimestamp());
	if (ij_exec(&complete_fast, args, NULL) == 1)
	{
		/* another owner's attempt: the error undoes the statement */
		if (!ij_owner_visible(ij_col_nn(0, 3)))
			ereport(ERROR,
					(errcode(ERRCODE_IJ_NOT_FOUND),
					 errmsg("attempt %s does not exist", ij_uuid_str(args[0])),
					 ij_errfields("attempts", psprintf("attempt_id=%s", ij_uuid_str(args[0])))));
		outcome = "won";
		out[1] = ij_col_nn(0, 2);
		out[2] = ij_col_nn(0, 1);
		out[3] = args[0];
		ij_notify_done(out[1]);
		goto answer;
	}

	/* with the intent when some contract may apply: one statement */
	if (!ij_try_lock_attempt(PG_GETARG_DATUM(0), &a, ij_contracts_any()))
	{
		if (!purged_attempt_lost(PG_GETARG_DATUM(0), result, out, outnull))
			ij_attempt_not_found(PG_GETARG_DATUM(0));
		outcome = "lost";
		goto answer;
	}
	out[1] = a.job_id;
	/* a leased attempt: this result is its confirmation, or IJ008 */
	ij_confirm_lease(&a, false);

	if (strcmp(a.state, "succeeded") == 0)
	{
		bool		winner_null;
		Datum		winner;

		ij_exec_id(&job_answer, a.job_id, a.route);
		winner = ij_col(0, 3, &winner_null);
		if (winner_null || !DatumGetBool(DirectFunctionCall2(uuid_eq, winner, a.id)))
		{
			/*
			 * Succeeded, on a job it did not win: only the common path
			 * above leaves an attempt so (every committed succeeded attempt
			 * is its job's completed_by), when the job changed between its
			 * snapshot and its lock.  This call lost.
			 */
			outcome = "lost";
			record_loss(&a, result, true, out, outnull);
			goto answer;
		}
		/* I7: the winner again */
		if (!jsonb_datum_identical(ij_col_nn(0, 2), result))
			already_completed(&a);
		outcome = "won";
		out[2] = ij_col_nn(0, 1);
		out[3] = a.id;
	}
	else if (a.has_sha)
	{
		/* I7: a loser or a rejected result again */
		if (!bytea_datum_eq(a.sha, ij_result_fingerprint(result, NULL)))
			already_completed(&a);
		if (strcmp(a.state, "superseded") == 0)
		{
			outcome = "lost";
			if (ij_exec_id(&race_answer, a.id, a.route) == 1)
			{
				out[2] = ij_col_nn(0, 1);
				out[3] = ij_col(0, 2, &outnull[3]);
			}
			else
			{
				/* the race log was pruned: answer from the job */
				ij_exec_id(&job_answer, a.job_id, a.route);
				out[2] = ij_col_nn(0, 1);
				out[3] = ij_col(0, 3, &outnull[3]);
			}
		}
		else
		{
			outcome = "rejected";
			ij_exec_id(&job_answer, a.job_id, a.route);
			out[2] = ij_col_nn(0, 1);
			outnull[3] = true;
		}
	}
	else if (strcmp(a.state, "failed") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_IJ_INVALID_TRANSITION),
				 errmsg("attempt %s cannot complete", ij_uuid_str(a.id)),
				 errdetail("The attempt already failed."),
				 ij_errfields("attempts", psprintf("attempt_id=%s job_id=%s state=failed",
												   ij_uuid_str(a.id), ij_uuid_str(a.job_id))),
				 errhint("Start a new attempt if the job is still pending.")));
	else if (!ij_check_result_contract(a.job_id, a.intent, a.route, result, &violation))
	{
		/* a result that breaks the contract never wins: rejected */
		Datum		err = DirectFunctionCall2(jsonb_concat,
											  JsonbPGetDatum(ij_note("contract_violation", NULL)),
											  JsonbPGetDatum(violation));
		int32		nbytes;
		bytea	   *sha = ij_result_fingerprint(result, &nbytes);

		/* audited as every result that is not committed: one race-log row */
		log_dropped(&a, result, sha, nbytes, true, out, outnull);
		args[0] = a.id;
		args[1] = ij_text_datum("failed");
		args[2] = PointerGetDatum(sha);
		args[3] = err;
		/* keep_dropped_results: the rejected payload, for compensation */
		args[4] = JsonbPGetDatum(result);
		memset(nulls, ' ', sizeof(nulls));
		nulls[4] = idemjob_keep_dropped_results ? ' ' : 'n';
		args[5] = Int32GetDatum(a.route);
		ij_exec(&attempt_done, args, nulls);
		/* the retry policy: backoff, or failed at max_attempts */
		if (ij_in_doubt(a.state))
			ij_job_retry(a.job_id, a.route, a.provider, DatumGetJsonbP(args[3]));
		ij_exec_id(&job_answer, a.job_id, a.route);
		outcome = "rejected";
		out[2] = ij_col_nn(0, 1);
		outnull[3] = true;
	}
	else
	{
		args[0] = a.job_id;
		args[1] = Int64GetDatum(a.read_version);
		args[2] = JsonbPGetDatum(result);
		args[3] = a.id;
		args[4] = Int32GetDatum(a.route);
		if (ij_exec(&cas, args, NULL) == 1)
		{
			outcome = "won";
			out[2] = ij_col_nn(0, 1);
			out[3] = a.id;
			ij_notify_done(a.job_id);
		}
		else
		{
			/* lost: drop the payload, keep its fingerprint */
			outcome = "lost";
			record_loss(&a, result, false, out, outnull);
		}
	}

answer:
	/* SPI's result rows live until ij_finish(): the row copies them */
	out[0] = ij_text_datum(outcome);
	ij_return_row(fcinfo, out, outnull);
	ij_finish();
	return (Datum) 0;
}
