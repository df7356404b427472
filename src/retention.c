/*-------------------------------------------------------------------------
 *
 * retention.c
 *	  Keeping the tables small without ever running a key twice: purge()
 *	  of old final jobs (leaving one spent key each), the spent-key check of
 *	  submit(), key_retention, and purge_race_log().
 *
 * purge() works in two statements inside the caller's transaction (per
 * chunk of 1,000 jobs with a pause after each when idemjob.purge_pause is
 * set, so that it leaves the CPU to the application).  The
 * first selects up to max_jobs final jobs completed before now - older_than,
 * oldest first through the partial index jobs_final, and locks them FOR
 * UPDATE SKIP LOCKED: a job another transaction holds (cancel_job, a
 * start_attempt refused with IJ003, a concurrent purge) is skipped, never
 * waited for.  A final job with an attempt still started or unknown (a job
 * cancelled while its provider was working) is not purged either: its late
 * result must still find the attempt and leave its race-log row.  A
 * cancelled attempt can still report too, at any time: its id, read
 * version, provider and cancellation time, and the job's intent, final
 * version and winner (with its provider), stay in the job's spent_keys row
 * (open_attempts), where complete_attempt() finds them and logs the late
 * result as lost, with the race-log row it would have had before the
 * purge (commit.c).  C
 * computes each request's SHA-256 (ij_request_sha256, shared with submit),
 * then one statement deletes the locked jobs (their attempts go by ON
 * DELETE CASCADE) and inserts a spent_keys row per deleted job.  Race-log
 * rows have no foreign key to jobs and stay.
 *
 * submit() (jobs.c) looks the key up in spent_keys before its insert, so
 * that a replay of a spent key answers without writing a row (the replay
 * path costs about what a replay of a live key does; the probe costs the
 * other paths one primary-key lookup).  That look-up cannot see a purge
 * still in progress, so when the insert created a job the key is looked up
 * again, with the latest snapshot: a purge that deleted the old job while
 * the insert waited on the unique index has committed by then, so its spent
 * key is seen under any isolation level.  The error (IJ007 for the same
 * request, IJ001 for another) rolls the new job back.
 *
 * The request fingerprint: SHA-256 over
 *	   uint32 length of intent (network order) || intent bytes ||
 *	   uint32 length of provider (network order) || provider bytes ||
 *	   jsonb_out(params)
 * in the database encoding.  jsonb_out is canonical for key order and
 * whitespace but keeps a number's scale, so params written 1.0 before the
 * purge and 1 after it fingerprint differently (IJ001, not IJ007).
 *
 * Under an owner binding every function here sees and deletes the bound
 * owner's rows only.
 *
 * src/retention.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "common/cryptohash.h"
#include "common/sha2.h"
#include "datatype/timestamp.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "port/pg_bswap.h"
#include "utils/array.h"
#include "storage/bufmgr.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "idemjob.h"

PG_FUNCTION_INFO_V1(idemjob_purge);
PG_FUNCTION_INFO_V1(idemjob_purge_race_log);

/* purge()'s chunk when idemjob.purge_pause is set */
#define PURGE_CHUNK 1000

static IjPlan select_doomed = {
	"SELECT j.id, j.intent, j.provider, j.params"
	" FROM idemjob.jobs j"
	" WHERE j.state OPERATOR(pg_catalog.=) ANY"
	" ('{succeeded,failed,cancelled}'::idemjob.job_state[])"
	" AND j.completed_at OPERATOR(pg_catalog.<) (pg_catalog.now() OPERATOR(pg_catalog.-) $1)"
	" AND ($3::pg_catalog.text IS NULL OR j.owner_id OPERATOR(pg_catalog.=) $3)"
	" AND NOT EXISTS (SELECT FROM idemjob.attempts a"
	"  WHERE a.job_id OPERATOR(pg_catalog.=) j.id"
	"  AND a.state OPERATOR(pg_catalog.=) ANY ('{started,unknown}'::idemjob.attempt_state[]))"
	" ORDER BY j.completed_at"
	" LIMIT $2"
	" FOR UPDATE OF j SKIP LOCKED",
	3, {INTERVALOID, INT4OID, TEXTOID}, NULL, 0, false, NULL, 0
};

static IjPlan delete_doomed = {
	"WITH del AS ("
	"  DELETE FROM idemjob.jobs j"
	"  WHERE j.id OPERATOR(pg_catalog.=) ANY ($1)"
	"  RETURNING j.id, j.owner_id, j.idempotency_key, j.state, j.completed_at, j.version,"
	"  j.intent, j.completed_by, j.owner_hash)"
	" INSERT INTO idemjob.spent_keys (owner_id, idempotency_key, request_sha256,"
	" job_id, final_state, completed_at, purged_at, open_attempts, owner_hash)"
	" SELECT d.owner_id, d.idempotency_key, s.sha, d.id, d.state, d.completed_at,"
	" pg_catalog.now(),"
	" (SELECT pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object('id', a.id,"
	"   'read_version', a.read_version, 'provider', a.provider, 'job_version', d.version,"
	"   'cancelled_at', a.finished_at, 'intent', d.intent,"
	"   'winner_attempt_id', d.completed_by, 'winner_provider',"
	"   (SELECT w.provider FROM idemjob.attempts w"
	"    WHERE w.id OPERATOR(pg_catalog.=) d.completed_by)))"
	"  FROM idemjob.attempts a WHERE a.job_id OPERATOR(pg_catalog.=) d.id"
	"  AND a.state OPERATOR(pg_catalog.=) 'cancelled'::idemjob.attempt_state),"
	" d.owner_hash"
	" FROM del d JOIN ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2))"
	" AS s(id, sha)"
	" ON s.id OPERATOR(pg_catalog.=) d.id",
	2, {UUIDARRAYOID, BYTEAARRAYOID}, NULL, CURSOR_OPT_GENERIC_PLAN, false, NULL, 0
};

static IjPlan expire_spent_keys = {
	"DELETE FROM idemjob.spent_keys"
	" WHERE purged_at OPERATOR(pg_catalog.<) (pg_catalog.now() OPERATOR(pg_catalog.-) $1)"
	" AND ($2::pg_catalog.text IS NULL OR owner_id OPERATOR(pg_catalog.=) $2)",
	2, {INTERVALOID, TEXTOID}, NULL, 0, false, NULL, 0
};

static IjPlan delete_race_log = {
	"DELETE FROM idemjob.race_log"
	" WHERE logged_at OPERATOR(pg_catalog.<) (pg_catalog.now() OPERATOR(pg_catalog.-) $1)"
	" AND ($2::pg_catalog.text IS NULL OR owner_id OPERATOR(pg_catalog.=) $2)",
	2, {INTERVALOID, TEXTOID}, NULL, 0, false, NULL, 0
};

static IjPlan find_spent_key = {
	"SELECT request_sha256, job_id, final_state::pg_catalog.text, purged_at"
	" FROM idemjob.spent_keys"
	" WHERE owner_id OPERATOR(pg_catalog.=) $1"
	" AND idempotency_key OPERATOR(pg_catalog.=) $2" IJ_ROUTE("", 3),
	3, {TEXTOID, TEXTOID, INT4OID}, NULL, 0, false, NULL, 0
};

static void
sha_update(pg_cryptohash_ctx *ctx, const char *data, size_t len)
{
	if (pg_cryptohash_update(ctx, (const uint8 *) data, len) < 0)
		elog(ERROR, "could not compute SHA-256");
}

static void
sha_update_field(pg_cryptohash_ctx *ctx, const char *data, uint32 len)
{
	uint32		n = pg_hton32(len);

	sha_update(ctx, (const char *) &n, sizeof(n));
	sha_update(ctx, data, len);
}

/*
 * SHA-256 of a request (layout in the file header), as a bytea.
 */
bytea *
ij_request_sha256(text *intent, text *provider, Jsonb *params)
{
	char	   *ptext = JsonbToCString(NULL, &params->root, VARSIZE(params));
	bytea	   *sha = palloc(VARHDRSZ + PG_SHA256_DIGEST_LENGTH);
	pg_cryptohash_ctx *ctx = pg_cryptohash_create(PG_SHA256);

	if (ctx == NULL || pg_cryptohash_init(ctx) < 0)
		elog(ERROR, "could not compute SHA-256");
	sha_update_field(ctx, VARDATA_ANY(intent), VARSIZE_ANY_EXHDR(intent));
	sha_update_field(ctx, VARDATA_ANY(provider), VARSIZE_ANY_EXHDR(provider));
	sha_update(ctx, ptext, strlen(ptext));
	if (pg_cryptohash_final(ctx, (uint8 *) VARDATA(sha), PG_SHA256_DIGEST_LENGTH) < 0)
		elog(ERROR, "could not compute SHA-256");
	pg_cryptohash_free(ctx);
	SET_VARSIZE(sha, VARHDRSZ + PG_SHA256_DIGEST_LENGTH);
	pfree(ptext);
	return sha;
}

/*
 * spent_keys' OID, looked up once per backend and forgotten on any
 * relcache invalidation of it (a DROP EXTENSION included); whether its
 * size says anything (see spent_keys_has_blocks); and whether the last
 * look found the table without a block.
 */
static Oid	spent_keys_relid = InvalidOid;
static bool spent_keys_sized = false;
static bool spent_keys_callback = false;
static bool spent_keys_seen_empty = false;

static void
spent_keys_inval(Datum arg, Oid relid)
{
	if (relid == InvalidOid || relid == spent_keys_relid)
		spent_keys_relid = InvalidOid;
}

/*
 * Could spent_keys hold a row?  An empty plain table has no block, so a
 * table without one holds none.  Only a plain table says so: the parent of
 * a partitioned spent_keys (idemjob.partitions) has no storage of its own,
 * and under Citus the table in the catalog is a shell whose rows are in
 * its shards (other tables, on other nodes): for those the answer is
 * always yes.  Citus is recognised by its extension being installed; it
 * can only make spent_keys a shell through DDL on it, which invalidates the
 * cached answer.
 */
static bool
spent_keys_has_blocks(void)
{
	Relation	rel;
	BlockNumber nblocks;

	if (!spent_keys_callback)
	{
		ij_relcache_register(spent_keys_inval);
		spent_keys_callback = true;
	}
	/* a table whose size says nothing, as last resolved: no need to open it */
	if (OidIsValid(spent_keys_relid) && !spent_keys_sized)
		return true;
	for (;;)
	{
		Oid			relid = spent_keys_relid;

		CHECK_FOR_INTERRUPTS();
		if (!OidIsValid(relid))
		{
			relid = get_relname_relid("spent_keys", get_namespace_oid("idemjob", false));
			if (!OidIsValid(relid))
				elog(ERROR, "table idemjob.spent_keys is missing");
		}
		/* NULL: dropped since it was looked up; look again */
		rel = try_table_open(relid, AccessShareLock);
		if (rel != NULL)
		{
			if (relid != spent_keys_relid)
				spent_keys_sized = rel->rd_rel->relkind == RELKIND_RELATION &&
					!OidIsValid(get_extension_oid("citus", true));
			spent_keys_relid = relid;
			break;
		}
		spent_keys_relid = InvalidOid;
	}
	if (!spent_keys_sized)
	{
		table_close(rel, NoLock);
		spent_keys_seen_empty = false;
		return true;
	}
	nblocks = RelationGetNumberOfBlocks(rel);
	table_close(rel, NoLock);
	spent_keys_seen_empty = (nblocks == 0);
	return nblocks > 0;
}

/*
 * Called by submit() (connected, trusted) before its insert (before =
 * true), and again when the insert created a job: if the key is spent,
 * raise IJ007 (same request) or IJ001.  Read with the latest snapshot, so
 * that a purge that committed while the insert waited is seen under
 * REPEATABLE READ and SERIALIZABLE too.
 *
 * The check after the insert is the guarantee; the one before only spares
 * a spent key's replay an insert that its error then undoes, and is
 * skipped while the last look found spent_keys empty.
 */
void
ij_check_spent_key(text *owner_id, text *key, text *intent, text *provider,
				   Jsonb *params, bool before)
{
	Datum		args[3];
	bytea	   *stored;
	bytea	   *sha;
	char	   *job;
	char	   *state;
	char	   *purged_at;

	/*
	 * Most databases never purge: an empty spent_keys has no block, and
	 * the look-up is skipped.  A purge extends the table before it commits,
	 * and a submit that raced it waited for that commit on the job's key.
	 */
	if (before && spent_keys_seen_empty)
		return;
	if (!spent_keys_has_blocks())
		return;

	args[0] = PointerGetDatum(owner_id);
	args[1] = PointerGetDatum(key);
	args[2] = Int32GetDatum(ij_owner_hash(owner_id));
	if (ij_exec_latest(&find_spent_key, args, NULL) == 0)
		return;

	stored = DatumGetByteaPP(ij_col_nn(0, 1));
	job = ij_uuid_str(ij_col_nn(0, 2));
	state = TextDatumGetCString(ij_col_nn(0, 3));
	purged_at = DatumGetCString(DirectFunctionCall1(timestamptz_out,
													ij_col_nn(0, 4)));
	sha = ij_request_sha256(intent, provider, params);

	if (VARSIZE_ANY_EXHDR(stored) == PG_SHA256_DIGEST_LENGTH &&
		memcmp(VARDATA_ANY(stored), VARDATA(sha), PG_SHA256_DIGEST_LENGTH) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_IJ_KEY_EXPIRED),
				 errmsg("idempotency key \"%s\" of owner \"%s\" belongs to a purged job",
						text_to_cstring(key), text_to_cstring(owner_id)),
				 errdetail("Job %s ended %s and was purged at %s; its outcome is no longer stored.",
						   job, state, purged_at),
				 ij_errfields("spent_keys", psprintf("job_id=%s state=%s", job, state)),
				 errhint("The request was already run once; look its outcome up in your own records, or use a new idempotency key to run it again.")));
	ereport(ERROR,
			(errcode(ERRCODE_IJ_IDEMPOTENCY_CONFLICT),
			 errmsg("idempotency key \"%s\" of owner \"%s\" was already used for another request",
					text_to_cstring(key), text_to_cstring(owner_id)),
			 errdetail("Job %s, purged at %s after it ended %s, had another intent, provider or params (params are compared by their canonical text once purged, so 1.0 and 1 differ).",
					   job, purged_at, state),
			 ij_errfields("spent_keys", psprintf("job_id=%s state=%s", job, state)),
			 errhint("Use a new idempotency key for a new request, or resend the original request unchanged.")));
}

/* interval argument argno: required, not negative */
static Datum
interval_arg(FunctionCallInfo fcinfo, int argno, const char *name)
{
	Interval	zero;
	Datum		arg;

	ij_require(fcinfo, argno, name);
	arg = PG_GETARG_DATUM(argno);
	memset(&zero, 0, sizeof(zero));
	if (DatumGetBool(DirectFunctionCall2(interval_lt, arg,
										 IntervalPGetDatum(&zero))))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not be negative", name),
				 errdetail("It is %s.",
						   DatumGetCString(DirectFunctionCall1(interval_out, arg))),
				 errhint("Give how old a row must be to go, such as '30 days'.")));
	/* now() - arg, as the statements compute it: 22023, not 22008 */
	(void) ij_time_before(GetCurrentTransactionStartTimestamp(),
						  DatumGetIntervalP(arg), name);
	return arg;
}

/*
 * idemjob.purge(older_than interval, max_jobs int DEFAULT 10000) RETURNS int
 */
Datum
idemjob_purge(PG_FUNCTION_ARGS)
{
	IJ_ENTRY();
	Datum		older_than;
	int32		max_jobs;
	text	   *bound;
	Datum		args[3];
	char		nulls[3] = {' ', ' ', ' '};
	int			n;
	int			i;
	int			purged = 0;
	int			spent = 0;
	int			chunk;
	Datum	   *ids;
	Datum	   *shas;
	IjShardGroup *groups;
	int			ngroups;
	int			g;

	older_than = interval_arg(fcinfo, 0, "older_than");
	ij_require(fcinfo, 1, "max_jobs");
	max_jobs = PG_GETARG_INT32(1);
	if (max_jobs < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_jobs must be at least 1"),
				 errdetail("It is %d.", max_jobs)));
	bound = ij_bound_owner();
	IJ_ON_SHARD_NODES("purge", 1);

	ij_connect();

	/*
	 * With idemjob.purge_pause, in chunks of PURGE_CHUNK jobs with a pause
	 * after each (the locks taken so far are on deleted rows only);
	 * without, in one.
	 */
	chunk = idemjob_purge_pause_ms > 0 ? Min(max_jobs, PURGE_CHUNK) : max_jobs;
	/* the tables, or under Citus each of this node's shard groups */
	ngroups = ij_local_shard_groups(&groups);
	for (g = 0; g < ngroups && purged < max_jobs; g++)
	{
		const IjShardGroup *group = &groups[g];

		for (;;)
		{
			int			want = Min(chunk, max_jobs - purged);

			CHECK_FOR_INTERRUPTS();
			args[0] = older_than;
			args[1] = Int32GetDatum(want);
			args[2] = PointerGetDatum(bound);
			nulls[0] = ' ';
			nulls[1] = ' ';
			nulls[2] = bound ? ' ' : 'n';
			n = ij_exec_on(&select_doomed, group, args, nulls);
			if (n == 0)
				break;

			ids = palloc(n * sizeof(Datum));
			shas = palloc(n * sizeof(Datum));
			for (i = 0; i < n; i++)
			{
				CHECK_FOR_INTERRUPTS();
				ids[i] = ij_col_nn(i, 1);
				shas[i] = PointerGetDatum(
					ij_request_sha256(DatumGetTextPP(ij_col_nn(i, 2)),
									  DatumGetTextPP(ij_col_nn(i, 3)),
									  DatumGetJsonbP(ij_col_nn(i, 4))));
			}
			args[0] = PointerGetDatum(construct_array(ids, n, UUIDOID,
													  UUID_LEN, false,
													  TYPALIGN_CHAR));
			args[1] = PointerGetDatum(construct_array(shas, n, BYTEAOID,
													  -1, false, TYPALIGN_INT));
			/* the arrays hold copies: a chunk's rows go before the next */
			SPI_freetuptable(SPI_tuptable);
			pfree(ids);
			pfree(shas);
			purged += ij_exec_on(&delete_doomed, group, args, NULL);
			pfree(DatumGetPointer(args[0]));
			pfree(DatumGetPointer(args[1]));
			if (n < want || purged >= max_jobs)
				break;

			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 idemjob_purge_pause_ms, PG_WAIT_EXTENSION);
			ResetLatch(MyLatch);
		}
	}

	if (idemjob_key_retention_s > 0)
	{
		Interval   *keep = palloc0(sizeof(Interval));

		keep->time = (int64) idemjob_key_retention_s * USECS_PER_SEC;
		args[0] = IntervalPGetDatum(keep);
		args[1] = PointerGetDatum(bound);
		nulls[0] = ' ';
		nulls[1] = bound ? ' ' : 'n';
		for (g = 0; g < ngroups; g++)
		{
			CHECK_FOR_INTERRUPTS();
			spent += ij_exec_on(&expire_spent_keys, &groups[g], args, nulls);
		}
	}

	ij_finish();
	ij_log_pass(IJ_LOG_PURGE, purged, spent, 0);
	PG_RETURN_INT32(purged);
}

/*
 * idemjob.purge_race_log(older_than interval) RETURNS int
 */
Datum
idemjob_purge_race_log(PG_FUNCTION_ARGS)
{
	IJ_ENTRY();
	Datum		args[2];
	char		nulls[2] = {' ', ' '};
	text	   *bound;
	int			n = 0;
	IjShardGroup *groups;
	int			ngroups;
	int			g;

	args[0] = interval_arg(fcinfo, 0, "older_than");
	bound = ij_bound_owner();
	args[1] = PointerGetDatum(bound);
	nulls[1] = bound ? ' ' : 'n';
	IJ_ON_SHARD_NODES("purge_race_log", -1);

	ij_connect();
	ngroups = ij_local_shard_groups(&groups);
	for (g = 0; g < ngroups; g++)
	{
		CHECK_FOR_INTERRUPTS();
		n += ij_exec_on(&delete_race_log, &groups[g], args, nulls);
	}
	ij_finish();
	ij_log_pass(IJ_LOG_PURGE_RACE_LOG, n, 0, 0);
	PG_RETURN_INT32(n);
}
