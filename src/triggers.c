/*-------------------------------------------------------------------------
 *
 * triggers.c
 *	  Guards against raw DML (I8, CONTRACT.md "Raw DML"): one row-trigger
 *	  function per table (jobs, attempts, race_log, contracts,
 *	  certifications, spent_keys), the TRUNCATE guard, and the statement
 *	  trigger that invalidates the contract caches.
 *
 * Only the extension's owner and superusers can write the tables at all;
 * these triggers hold them to the contract too.  The extension's own
 * functions have already checked what they write: while one of them runs
 * (idemjob_trusted_depth > 0, raised in spi_plans.c) every guard returns at
 * once (the update guards are AFTER triggers, fired at the end of the
 * function's statement, still on the trusted path), and the statements the
 * functions run themselves do not call them at all (see "The extension's
 * own statements" below).  A limit of this design: a user-defined trigger
 * or rule on these tables that itself runs DML on them, fired from inside
 * an idemjob function, runs trusted too.
 *
 * Each function first checks where it fired: on the right table (schema
 * idemjob, by name), row-level, with the timing and events the upgrade
 * script declares.  Attached to any other table, or fired otherwise, it
 * raises 09000 before it reads a column.  On the hot path (every submit
 * fires the jobs insert guard) that check is one OID comparison and one
 * bit test: the table's OID and the attribute numbers of its columns are
 * cached per backend, and dropped by a relcache invalidation of the table
 * (ALTER, DROP, re-install) or any change to a schema.  The executor holds
 * a lock on the table while a trigger runs, so its shape cannot change
 * under a guard; each guard copies the attribute numbers before it calls
 * anything that could process invalidations.
 *
 * Off the trusted path (IJ005 for everything refused, with a DETAIL):
 *	 - UPDATE of jobs or attempts may change no column the extension
 *	   defines: not only those the contract names, but also
 *	   jobs.cancel_reason and attempts.result_sha256, which the functions
 *	   write and rely on (a retried complete_attempt() answers from the
 *	   fingerprint).  A column a DBA added to the table is theirs to
 *	   change.  A no-op assignment passes.  UPDATE of race_log, contracts,
 *	   certifications and spent_keys: refused outright.
 *	 - INSERT (a restore; COPY fires these triggers too) of a row that is
 *	   consistent on its own: required columns set, names of 1 to 255
 *	   bytes, states, versions and counters in range and in step with the
 *	   state machine (a final job has completed_at and a version moved
 *	   past 0; a succeeded one, and only it, a result and its winner; only
 *	   a failed one an error; an attempt has finished_at exactly when it
 *	   ended, no unknown_at while started, a fingerprint when superseded,
 *	   ...; a contract's schema compiles as define_contract() requires).
 *	   Counters stop one short of their type's maximum, so that the next
 *	   increment by a function cannot overflow.  The order of timestamps
 *	   written by different transactions is not checked: they are
 *	   transaction start times (now()), and a claim() that waited for a job
 *	   writes a started_at, updated_at and completed_at earlier than the
 *	   job's created_at; refusing those rows would lose them on restore.
 *	   Nor is a rule no function relies on (an unknown attempt without
 *	   unknown_at: 1.0 did not record it, and the in_doubt view falls back
 *	   to the deadline).  Whether a row agrees with other rows (an attempt
 *	   with its job) is left to the constraints.
 *	 - DELETE of a final job (its attempts go by ON DELETE CASCADE; the
 *	   race log stays); of a job not final, or of an attempt whose job
 *	   still exists: refused.  DELETE of contracts and certifications is
 *	   refused too (a contract can be replaced, never removed; a
 *	   certification is revoked, keeping its history); race_log and
 *	   spent_keys rows may be deleted.
 *	 - TRUNCATE of jobs, attempts, contracts, certifications: refused.
 *
 * src/triggers.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/partition.h"
#include "catalog/pg_class.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_trigger.h"
#include "catalog/pg_type.h"
#include "commands/event_trigger.h"
#include "commands/extension.h"
#include "commands/trigger.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "idemjob.h"
#include "validator.h"

PG_FUNCTION_INFO_V1(idemjob_jobs_guard);
PG_FUNCTION_INFO_V1(idemjob_attempts_guard);
PG_FUNCTION_INFO_V1(idemjob_race_log_guard);
PG_FUNCTION_INFO_V1(idemjob_contracts_guard);
PG_FUNCTION_INFO_V1(idemjob_certifications_guard);
PG_FUNCTION_INFO_V1(idemjob_spent_keys_guard);
PG_FUNCTION_INFO_V1(idemjob_truncate_guard);
PG_FUNCTION_INFO_V1(idemjob_contracts_changed);
PG_FUNCTION_INFO_V1(idemjob_ddl_guard);

#define SHA256_BYTES	32

/* column types that are not built in: resolved in schema idemjob */
#define JOB_STATE_TYPE		((Oid) 1)
#define ATTEMPT_STATE_TYPE	((Oid) 2)
#define OWNER_HASH_TYPE		((Oid) 3)	/* since 1.2 */

typedef struct GuardCol
{
	const char *name;
	Oid			type;
} GuardCol;

/* jobs */
enum
{
	J_ID, J_OWNER, J_KEY, J_INTENT, J_PARAMS, J_PROVIDER, J_STATE, J_VERSION,
	J_ATTEMPT_COUNT, J_COMPLETED_BY, J_RESULT, J_CREATED_AT, J_UPDATED_AT,
	J_COMPLETED_AT, J_CANCEL_REASON, J_PRIORITY, J_RUN_AT, J_MAX_ATTEMPTS,
	J_ERROR, J_NEXT_PROVIDER, J_OWNER_HASH, J_NCOLS
};
static const GuardCol jobs_cols[J_NCOLS] = {
	{"id", UUIDOID}, {"owner_id", TEXTOID}, {"idempotency_key", TEXTOID},
	{"intent", TEXTOID}, {"params", JSONBOID}, {"provider", TEXTOID},
	{"state", JOB_STATE_TYPE}, {"version", INT8OID},
	{"attempt_count", INT4OID}, {"completed_by", UUIDOID},
	{"result", JSONBOID}, {"created_at", TIMESTAMPTZOID},
	{"updated_at", TIMESTAMPTZOID}, {"completed_at", TIMESTAMPTZOID},
	{"cancel_reason", TEXTOID}, {"priority", INT4OID},
	{"run_at", TIMESTAMPTZOID}, {"max_attempts", INT4OID},
	{"error", JSONBOID}, {"next_provider", TEXTOID}, {"owner_hash", OWNER_HASH_TYPE}
};

/* attempts */
enum
{
	A_ID, A_JOB_ID, A_OWNER, A_ATTEMPT_NO, A_PROVIDER, A_STATE,
	A_READ_VERSION, A_WORKER, A_STARTED_AT, A_DEADLINE, A_FINISHED_AT,
	A_ERROR, A_RESULT_SHA256, A_UNKNOWN_AT, A_DROPPED_RESULT, A_LEASE_UNTIL,
	A_OWNER_HASH, A_NCOLS
};
static const GuardCol attempts_cols[A_NCOLS] = {
	{"id", UUIDOID}, {"job_id", UUIDOID}, {"owner_id", TEXTOID},
	{"attempt_no", INT4OID}, {"provider", TEXTOID},
	{"state", ATTEMPT_STATE_TYPE}, {"read_version", INT8OID},
	{"worker", TEXTOID}, {"started_at", TIMESTAMPTZOID},
	{"deadline", TIMESTAMPTZOID}, {"finished_at", TIMESTAMPTZOID},
	{"error", JSONBOID}, {"result_sha256", BYTEAOID},
	{"unknown_at", TIMESTAMPTZOID}, {"dropped_result", JSONBOID},
	{"lease_until", TIMESTAMPTZOID}, {"owner_hash", OWNER_HASH_TYPE}
};

/* race_log */
enum
{
	R_LOGGED_AT, R_JOB_ID, R_OWNER, R_ATTEMPT_ID, R_WINNER, R_EXPECTED,
	R_FOUND, R_REASON, R_SHA256, R_BYTES, R_LATE_BY, R_PROVIDER,
	R_INTENT, R_KEY, R_WINNER_PROVIDER, R_DROPPED_RESULT, R_FENCED_AT, R_OWNER_HASH,
	R_NCOLS
};
static const GuardCol race_log_cols[R_NCOLS] = {
	{"logged_at", TIMESTAMPTZOID}, {"job_id", UUIDOID},
	{"owner_id", TEXTOID}, {"attempt_id", UUIDOID},
	{"winner_attempt_id", UUIDOID}, {"expected_version", INT8OID},
	{"found_version", INT8OID}, {"reason", TEXTOID},
	{"result_sha256", BYTEAOID}, {"result_bytes", INT4OID},
	{"late_by", INTERVALOID}, {"provider", TEXTOID},
	{"intent", TEXTOID}, {"idempotency_key", TEXTOID},
	{"winner_provider", TEXTOID}, {"dropped_result", JSONBOID},
	{"fenced_at", TIMESTAMPTZOID}, {"owner_hash", OWNER_HASH_TYPE}
};

/* contracts */
enum
{
	C_INTENT, C_VERSION, C_SCHEMA, C_UPDATED_AT, C_NCOLS
};
static const GuardCol contracts_cols[C_NCOLS] = {
	{"intent", TEXTOID}, {"version", INT4OID},
	{"output_schema", JSONBOID}, {"updated_at", TIMESTAMPTZOID}
};

/* certifications */
enum
{
	K_INTENT, K_PROVIDER, K_CONTRACT_VERSION, K_CERTIFIED_AT, K_EVIDENCE,
	K_REVOKED_AT, K_REVOKE_REASON, K_NCOLS
};
static const GuardCol certifications_cols[K_NCOLS] = {
	{"intent", TEXTOID}, {"provider", TEXTOID},
	{"contract_version", INT4OID}, {"certified_at", TIMESTAMPTZOID},
	{"evidence", JSONBOID}, {"revoked_at", TIMESTAMPTZOID},
	{"revoke_reason", TEXTOID}
};

/* spent_keys */
enum
{
	S_OWNER, S_KEY, S_SHA256, S_JOB_ID, S_FINAL_STATE, S_COMPLETED_AT,
	S_PURGED_AT, S_OWNER_HASH, S_NCOLS
};
static const GuardCol spent_keys_cols[S_NCOLS] = {
	{"owner_id", TEXTOID}, {"idempotency_key", TEXTOID},
	{"request_sha256", BYTEAOID}, {"job_id", UUIDOID},
	{"final_state", JOB_STATE_TYPE}, {"completed_at", TIMESTAMPTZOID},
	{"purged_at", TIMESTAMPTZOID}, {"owner_hash", OWNER_HASH_TYPE}
};

#define MAX_GUARD_COLS	J_NCOLS

/* the firings a guard is declared for: timing x event, row level */
#define EV_BEFORE_INSERT	0x01
#define EV_BEFORE_UPDATE	0x02
#define EV_BEFORE_DELETE	0x04
#define EV_AFTER_INSERT		0x08
#define EV_AFTER_UPDATE		0x10
#define EV_AFTER_DELETE		0x20

typedef enum
{
	T_JOBS, T_ATTEMPTS, T_RACE_LOG, T_CONTRACTS, T_CERTIFICATIONS,
	T_SPENT_KEYS, T_NTABLES
} GuardTableId;

typedef struct GuardTable
{
	const char *relname;
	const GuardCol *cols;
	int			ncols;
	int			events;			/* EV_* the row guard is declared for */
	const char *declared;		/* the same, for messages */
	const char *hint;			/* what to do instead */
} GuardTable;

/*
 * Per relation a guard has fired on, per backend: which table it is (the
 * table itself, one of its partitions, or one of its Citus shards), and the
 * attribute numbers of the columns the guard reads (a partition's may
 * differ from its parent's).
 */
typedef struct TableCache
{
	Oid			relid;			/* hash key; InvalidOid: not resolved */
	AttrNumber	attnums[MAX_GUARD_COLS];
} TableCache;

static const GuardTable tables[T_NTABLES] = {
	{"jobs", jobs_cols, J_NCOLS,
		EV_BEFORE_INSERT | EV_BEFORE_DELETE | EV_AFTER_UPDATE,
		"BEFORE INSERT OR DELETE, or AFTER UPDATE, FOR EACH ROW",
	"Change jobs through the idemjob functions; delete only final jobs."},
	{"attempts", attempts_cols, A_NCOLS,
		EV_BEFORE_INSERT | EV_BEFORE_DELETE | EV_AFTER_UPDATE,
		"BEFORE INSERT OR DELETE, or AFTER UPDATE, FOR EACH ROW",
	"Change attempts through the idemjob functions; they are deleted with their final job."},
	{"race_log", race_log_cols, R_NCOLS,
		EV_BEFORE_INSERT | EV_BEFORE_UPDATE,
		"BEFORE INSERT OR UPDATE FOR EACH ROW",
	"Race-log rows are written by idemjob.complete_attempt(); they may only be deleted."},
	{"contracts", contracts_cols, C_NCOLS,
		EV_BEFORE_INSERT | EV_BEFORE_UPDATE | EV_BEFORE_DELETE,
		"BEFORE INSERT OR UPDATE OR DELETE FOR EACH ROW",
	"Use idemjob.define_contract()."},
	{"certifications", certifications_cols, K_NCOLS,
		EV_BEFORE_INSERT | EV_BEFORE_UPDATE | EV_BEFORE_DELETE,
		"BEFORE INSERT OR UPDATE OR DELETE FOR EACH ROW",
	"Use idemjob.certify_provider() and idemjob.revoke_provider()."},
	{"spent_keys", spent_keys_cols, S_NCOLS,
		EV_BEFORE_INSERT | EV_BEFORE_UPDATE,
		"BEFORE INSERT OR UPDATE FOR EACH ROW",
	"Spent keys are written by idemjob.purge(); they may only be deleted."},
};

static TableCache last[T_NTABLES];	/* the last relation resolved, per table */
static HTAB *relations[T_NTABLES];	/* every relation resolved, per table */
static bool callbacks_registered = false;

/*
 * The job of an attempt, under the attempt's owner_hash (an attempt's is its
 * job's): in the partitioned layout one partition; under Citus the jobs
 * shard of the attempt's own shard group, a table of this node (ij_exec),
 * which a guard firing on a shard may read where a distributed query is
 * refused (rows Citus copies into the shards: distribute() over existing
 * rows, a restore into a distributed install).
 */
static IjPlan job_exists = {
	"SELECT 1 FROM idemjob.jobs WHERE id OPERATOR(pg_catalog.=) $1" IJ_ROUTE("", 2),
	2, {UUIDOID, INT4OID}, NULL, 0, false, NULL, 0
};

/*
 * The owner of an attempt's job: by its id alone, so that an attempt given
 * another owner finds it, and is refused as such; under Citus, where the
 * guard may read its own shard group only, under the attempt's owner_hash
 * (another owner's job is then not found: the foreign key refuses it)
 */
static IjPlan job_owner = {
	"SELECT owner_id FROM idemjob.jobs WHERE id OPERATOR(pg_catalog.=) $1",
	2, {UUIDOID, INT4OID}, NULL, 0, false, NULL, 0
};

static IjPlan job_owner_citus = {
	"SELECT owner_id FROM idemjob.jobs WHERE id OPERATOR(pg_catalog.=) $1" IJ_ROUTE("", 2),
	2, {UUIDOID, INT4OID}, NULL, 0, false, NULL, 0
};

static IjPlan contract_intent = {
	"SELECT intent FROM idemjob.contracts WHERE intent OPERATOR(pg_catalog.=) $1",
	1, {TEXTOID}, NULL, 0, false, NULL, 0
};

/* how long a restored row waits for its parent table's load to begin */
#define PARENT_WAIT_MS	10000
#define PARENT_POLL_MS	50

/*
 * Column 1 of the parent row of a row being inserted raw (a restore), as
 * text, or NULL when there is none.
 *
 * pg_restore -j loads the tables' data side by side, each table in a
 * transaction of its own, and does not make attempts wait for jobs, nor
 * certifications for contracts: a row whose parent is not there yet would
 * fail the foreign key, and COPY would lose the whole table.  So a missing
 * parent is looked for again after every transaction writing the parent
 * table (under Citus: the parent's shard of the row's owner, on this node:
 * owner_hash) has ended (a SHARE lock waits for them), and, while none has begun
 * writing it, every PARENT_POLL_MS up to PARENT_WAIT_MS.  A row with no
 * parent at all still fails its foreign key: after that one wait, which a
 * transaction makes once per parent table.  Only
 * raw inserts come here (the functions' own statements skip the guards),
 * and only when the parent is missing.
 */
static bool waited_for_jobs = false;	/* in this transaction */
static bool waited_for_contracts = false;

/* at the end of every transaction: the next one may wait again */
void
ij_guards_xact_end(void)
{
	waited_for_jobs = waited_for_contracts = false;
}

static char *
parent_row(IjPlan *lookup, IjPlan *local_lookup, Datum *key, const char *parent,
		   bool local_copy)
{
	bool	   *waited_once = strcmp(parent, "jobs") == 0 ?
		&waited_for_jobs : &waited_for_contracts;
	int			waited = 0;

	for (;;)
	{
		char	   *found = NULL;
		Oid			relid;
		bool		citus;
		const IjShardGroup *copies;

		ij_connect();

		/*
		 * Under Citus the row may be in a shard, whose guard may read its
		 * own shard group only (local_lookup, whose key[1] is the row's
		 * owner_hash), and a load writes the parent's shard, not the table
		 * itself: the jobs shard of the owner's group on this node, when it
		 * is here.  A row Citus copies into this node's copy of a
		 * reference table (local_copy) has its parent in this node's copy
		 * of the parent table, which a load through the coordinator writes
		 * in a transaction of its own here.
		 */
		citus = local_lookup != NULL && ij_layout_citus();
		copies = local_copy ? ij_local_copies() : NULL;
		relid = citus ? ij_local_jobs_shard(DatumGetInt32(key[1])) :
			ij_group_relid(copies, parent);
		if (ij_exec_on(citus ? local_lookup : lookup, copies, key, NULL) > 0)
			found = TextDatumGetCString(ij_col_nn(0, 1));
		ij_finish();

		/*
		 * One wait per transaction and parent table: once the parent's load
		 * is over (or never began), a row still without a parent is an
		 * orphan, and its foreign key decides at once; a load of orphans
		 * does not wait PARENT_WAIT_MS a row.
		 */
		if (found != NULL || *waited_once || waited >= PARENT_WAIT_MS)
		{
			if (found == NULL)
				*waited_once = true;
			return found;
		}

		if (!OidIsValid(relid))
			relid = get_relname_relid(parent, get_namespace_oid("idemjob", false));
		if (!ConditionalLockRelationOid(relid, ShareLock))
		{
			/* a load of the parent is under way: wait for its end */
			LockRelationOid(relid, ShareLock);
			UnlockRelationOid(relid, ShareLock);
			*waited_once = true;	/* look once more, then no more */
			continue;
		}
		UnlockRelationOid(relid, ShareLock);
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 PARENT_POLL_MS, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		waited += PARENT_POLL_MS;
	}
}

/* one firing of a guard, after the checks of where it fired */
typedef struct Guard
{
	TriggerData *td;
	const GuardTable *t;
	TupleDesc	desc;
	HeapTuple	row;			/* the new row (INSERT), else the old one */
	bool		modified;		/* row is a copy the guard completed */
	const char *op;				/* "insert", "update", "delete" */
	AttrNumber	attnums[MAX_GUARD_COLS];
} Guard;

/*
 * Cache invalidation
 */
static void
guards_relcache_callback(Datum arg, Oid relid)
{
	int			i;

	for (i = 0; i < T_NTABLES; i++)
	{
		if (relid == InvalidOid || last[i].relid == relid)
			last[i].relid = InvalidOid;
		if (relations[i] == NULL)
			continue;
		if (relid == InvalidOid)
		{
			hash_destroy(relations[i]);
			relations[i] = NULL;
		}
		else
			(void) hash_search(relations[i], &relid, HASH_REMOVE, NULL);
	}
}

static void
guards_syscache_callback(Datum arg, int cacheid, uint32 hashvalue)
{
	guards_relcache_callback(arg, InvalidOid);
}

/*
 * The extension's own statements do not fire the guards
 *
 * On the trusted path every guard returns at once, but PostgreSQL still
 * pays for calling it: a BEFORE row trigger is a function call per row, and
 * an AFTER UPDATE row trigger queues an event that, at the end of the
 * statement, fetches the old and the new row again before the call.  For
 * complete_attempt() (an attempt and its job updated) that was about 10,000
 * instructions of about 416,000.  So for the statements ij_exec() runs,
 * and only those, an ExecutorStart hook disables the guard triggers in the
 * statement's private copy of each result relation's trigger list
 * (InitResultRelInfo copies the relcache's, per statement): the relation's
 * triggers, and every other statement, are untouched.
 *
 * A statement is the extension's own when its source text is the very
 * string of one of its prepared plans (ij_exec() names it in
 * guard_skip_text before it runs it, and SPI hands that pointer to the
 * executor) and the trusted path is raised; no statement a caller sends,
 * nor one a trigger or a foreign key runs inside an idemjob function, has
 * that pointer.  Only the six guard functions are disabled (by OID, looked
 * up in schema idemjob); foreign keys, the contracts' statement trigger and
 * any trigger a DBA added still fire.
 */
static const char *const guard_functions[] = {
	"jobs_guard", "attempts_guard", "race_log_guard", "contracts_guard",
	"certifications_guard", "spent_keys_guard",
	/* the extension's other trigger functions (not skipped) */
	"truncate_guard", "contracts_changed"
};
#define N_ROW_GUARDS 6
static Oid	guard_oids[lengthof(guard_functions)];
static bool guard_oids_valid = false;
static ExecutorStart_hook_type prev_executor_start = NULL;

const char *guard_skip_text = NULL;

static void
guard_oids_callback(Datum arg, int cacheid, uint32 hashvalue)
{
	guard_oids_valid = false;
}

static bool
is_guard_function(Oid foid)
{
	int			i;

	if (!guard_oids_valid)
	{
		Oid			nsp = get_namespace_oid("idemjob", true);
		oidvector  *noargs = buildoidvector(NULL, 0);

		for (i = 0; i < (int) lengthof(guard_functions); i++)
			guard_oids[i] = !OidIsValid(nsp) ? InvalidOid :
				GetSysCacheOid3(PROCNAMEARGSNSP, Anum_pg_proc_oid,
								CStringGetDatum(guard_functions[i]),
								PointerGetDatum(noargs),
								ObjectIdGetDatum(nsp));
		pfree(noargs);
		guard_oids_valid = true;
	}
	for (i = 0; i < (int) lengthof(guard_functions); i++)
		if (OidIsValid(foid) && foid == guard_oids[i])
			return i < N_ROW_GUARDS;
	return false;
}

/* is foid one of the extension's own trigger functions? */
static bool
is_own_trigger_function(Oid foid)
{
	int			i;

	(void) is_guard_function(InvalidOid);	/* look the OIDs up */
	for (i = 0; i < (int) lengthof(guard_functions); i++)
		if (OidIsValid(foid) && foid == guard_oids[i])
			return true;
	return false;
}

/*
 * Will the statement fire a trigger that is not the extension's own (a
 * DBA's)?  A foreign key's internal triggers run queries that name
 * everything with its schema.
 */
static bool
fires_foreign_triggers(ResultRelInfo *rri)
{
	TriggerDesc *td = rri->ri_TrigDesc;
	int			i;

	if (td == NULL)
		return false;
	for (i = 0; i < td->numtriggers; i++)
	{
		Trigger    *t = &td->triggers[i];

		if (!t->tgisinternal && t->tgenabled != TRIGGER_DISABLED &&
			!is_own_trigger_function(t->tgfoid))
			return true;
	}
	return false;
}

static void
skip_guards(ResultRelInfo *rri)
{
	TriggerDesc *td = rri->ri_TrigDesc;
	bool		found = false;
	int			i;

	if (td == NULL)
		return;
	for (i = 0; i < td->numtriggers; i++)
	{
		Trigger    *t = &td->triggers[i];

		/* internal: a foreign key's (the guards are CREATE TRIGGER's) */
		if (!t->tgisinternal && TRIGGER_FOR_ROW(t->tgtype) &&
			t->tgenabled != TRIGGER_DISABLED && is_guard_function(t->tgfoid))
		{
			t->tgenabled = TRIGGER_DISABLED;
			found = true;
		}
	}
	if (!found)
		return;

	/*
	 * The row-level flags, as the relcache sets them, over the triggers
	 * still enabled: with no other BEFORE INSERT row trigger, say, the
	 * executor does not even look.
	 */
	td->trig_insert_before_row = td->trig_insert_after_row =
		td->trig_insert_instead_row = false;
	td->trig_update_before_row = td->trig_update_after_row =
		td->trig_update_instead_row = false;
	td->trig_delete_before_row = td->trig_delete_after_row =
		td->trig_delete_instead_row = false;
	for (i = 0; i < td->numtriggers; i++)
	{
		Trigger    *t = &td->triggers[i];
		int16		type = t->tgtype;

		if (!TRIGGER_FOR_ROW(type) || t->tgenabled == TRIGGER_DISABLED)
			continue;
		if (TRIGGER_FOR_INSERT(type))
		{
			td->trig_insert_before_row |= TRIGGER_FOR_BEFORE(type);
			td->trig_insert_after_row |= TRIGGER_FOR_AFTER(type);
			td->trig_insert_instead_row |= TRIGGER_FOR_INSTEAD(type);
		}
		if (TRIGGER_FOR_UPDATE(type))
		{
			td->trig_update_before_row |= TRIGGER_FOR_BEFORE(type);
			td->trig_update_after_row |= TRIGGER_FOR_AFTER(type);
			td->trig_update_instead_row |= TRIGGER_FOR_INSTEAD(type);
		}
		if (TRIGGER_FOR_DELETE(type))
		{
			td->trig_delete_before_row |= TRIGGER_FOR_BEFORE(type);
			td->trig_delete_after_row |= TRIGGER_FOR_AFTER(type);
			td->trig_delete_instead_row |= TRIGGER_FOR_INSTEAD(type);
		}
	}
}

/*
 * Inside an idemjob function, a statement that is not the function's own
 * (a DBA's trigger, a rule, a foreign key check) may not reach a temporary
 * table.  The pinned search_path lists pg_temp last, and PostgreSQL still
 * searches it for relations: a trigger naming a table without its schema
 * would otherwise find the caller's temporary table of that name, whose own
 * triggers and rules, the caller's code, would run as the extension's owner.
 */
static void
refuse_temp_relations(PlannedStmt *stmt)
{
	ListCell   *lc;

	foreach(lc, stmt->rtable)
	{
		RangeTblEntry *rte = (RangeTblEntry *) lfirst(lc);

		if (rte->rtekind == RTE_RELATION &&
			get_rel_persistence(rte->relid) == RELPERSISTENCE_TEMP)
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("temporary table \"%s\" cannot be used while idemjob runs as its owner",
							get_rel_name(rte->relid)),
					 errdetail("A trigger or rule on idemjob's tables reached a temporary table of the calling session."),
					 errhint("Name every table in such a trigger with its schema.")));
	}
}

static void
guards_executor_start(QueryDesc *queryDesc, int eflags)
{
	if (idemjob_trusted_depth > 0 && queryDesc->sourceText != guard_skip_text &&
		queryDesc->plannedstmt != NULL)
		refuse_temp_relations(queryDesc->plannedstmt);

	if (prev_executor_start)
		prev_executor_start(queryDesc, eflags);
	else
		standard_ExecutorStart(queryDesc, eflags);

	if (idemjob_trusted_depth > 0 && queryDesc->estate != NULL)
	{
		ListCell   *lc;

		/* a DBA's trigger is about to run as the owner: pin search_path */
		foreach(lc, queryDesc->estate->es_opened_result_relations)
		{
			if (fires_foreign_triggers((ResultRelInfo *) lfirst(lc)))
			{
				ij_pin_search_path();
				break;
			}
		}
		if (guard_skip_text != NULL && queryDesc->sourceText == guard_skip_text)
			foreach(lc, queryDesc->estate->es_opened_result_relations)
				skip_guards((ResultRelInfo *) lfirst(lc));
	}
}

void
ij_guards_init(void)
{
	CacheRegisterSyscacheCallback(PROCOID, guard_oids_callback, (Datum) 0);
	prev_executor_start = ExecutorStart_hook;
	ExecutorStart_hook = guards_executor_start;
}

/*
 * Where a guard fired
 */
/* the guard function's qualified name, for messages */
static char *
func_name(FunctionCallInfo fcinfo)
{
	Oid			fn = fcinfo->flinfo->fn_oid;

	return quote_qualified_identifier(get_namespace_name(get_func_namespace(fn)),
									  get_func_name(fn));
}

static TriggerData *
trigger_data(FunctionCallInfo fcinfo)
{
	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("function %s was not called by the trigger manager",
						func_name(fcinfo))));
	return (TriggerData *) fcinfo->context;
}

static const char *
describe_firing(TriggerEvent ev)
{
	const char *timing;
	const char *what;

	if (TRIGGER_FIRED_BEFORE(ev))
		timing = "BEFORE";
	else if (TRIGGER_FIRED_AFTER(ev))
		timing = "AFTER";
	else
		timing = "INSTEAD OF";
	if (TRIGGER_FIRED_BY_INSERT(ev))
		what = "INSERT";
	else if (TRIGGER_FIRED_BY_UPDATE(ev))
		what = "UPDATE";
	else if (TRIGGER_FIRED_BY_DELETE(ev))
		what = "DELETE";
	else
		what = "TRUNCATE";
	return psprintf("%s %s FOR EACH %s", timing, what,
					TRIGGER_FIRED_FOR_ROW(ev) ? "ROW" : "STATEMENT");
}

static void
wrong_table(FunctionCallInfo fcinfo, TriggerData *td, const char *guarded)
{
	Relation	rel = td->tg_relation;

	ereport(ERROR,
			(errcode(ERRCODE_TRIGGERED_ACTION_EXCEPTION),
			 errmsg("trigger function %s guards %s only",
					func_name(fcinfo), guarded),
			 errdetail("Trigger \"%s\" fired it on table \"%s\".",
					   td->tg_trigger->tgname, RelationGetRelationName(rel)),
			 errhint("Drop trigger \"%s\".", td->tg_trigger->tgname)));
}

static void
wrong_firing(FunctionCallInfo fcinfo, TriggerData *td, const char *declared)
{
	ereport(ERROR,
			(errcode(ERRCODE_TRIGGERED_ACTION_EXCEPTION),
			 errmsg("trigger function %s must be fired %s",
					func_name(fcinfo), declared),
			 errdetail("Trigger \"%s\" fired it %s on table \"%s\".",
					   td->tg_trigger->tgname, describe_firing(td->tg_event),
					   RelationGetRelationName(td->tg_relation)),
			 errhint("Re-create the extension's triggers (ALTER EXTENSION idemjob UPDATE, or a re-install).")));
}

static Oid
ext_type(const char *name, Oid nsp)
{
	return GetSysCacheOid2(TYPENAMENSP, Anum_pg_type_oid,
						   CStringGetDatum(name), ObjectIdGetDatum(nsp));
}

/* idemjob.<relname> itself */
static bool
is_named(Oid relid, Oid nsp, const char *relname)
{
	char	   *name = get_rel_name(relid);

	return name != NULL && get_rel_namespace(relid) == nsp &&
		strcmp(name, relname) == 0;
}

/*
 * Is rel one of the relations that hold the rows of idemjob.<relname>: the
 * table itself (plain, or partitioned: idemjob.partitions), a partition
 * of it at any level, or, where Citus is installed, one of its shards
 * (idemjob.<relname>_<shard id>, which only the extension's owner can
 * create in schema idemjob)?
 */
static bool
holds_rows_of(Relation rel, Oid nsp, const char *relname)
{
	char		kind = rel->rd_rel->relkind;
	const char *name = RelationGetRelationName(rel);
	size_t		len = strlen(relname);

	if (kind != RELKIND_RELATION && kind != RELKIND_PARTITIONED_TABLE)
		return false;
	if (rel->rd_rel->relispartition)
	{
		List	   *ancestors = get_partition_ancestors(RelationGetRelid(rel));

		return ancestors != NIL &&
			is_named(llast_oid(ancestors), nsp, relname);
	}
	if (RelationGetNamespace(rel) != nsp)
		return false;
	if (strcmp(name, relname) == 0)
		return true;
	if (strncmp(name, relname, len) == 0 && name[len] == '_' &&
		name[len + 1] != '\0' &&
		strspn(name + len + 1, "0123456789") == strlen(name + len + 1))
		return OidIsValid(get_extension_oid("citus", true));
	return false;
}

/* holds_rows_of() for the functions of other files */
bool
ij_holds_rows_of(Relation rel, const char *relname)
{
	Oid			nsp = get_namespace_oid("idemjob", true);

	return OidIsValid(nsp) && holds_rows_of(rel, nsp, relname);
}

/*
 * Is rel a relation of tables[which]?  Compares the OID of the last one
 * resolved, then looks in the ones resolved before; on a miss, checks what
 * the relation is, then finds every column the guard reads (by name, with
 * its type) and caches their attribute numbers.
 */
static bool
is_table(Relation rel, GuardTableId which)
{
	const GuardTable *t = &tables[which];
	TupleDesc	desc = RelationGetDescr(rel);
	Oid			relid = RelationGetRelid(rel);
	Oid			nsp;
	TableCache	entry;
	TableCache *found;
	int			i;

	if (relid == last[which].relid)
		return true;

	if (!callbacks_registered)
	{
		ij_relcache_register(guards_relcache_callback);
		CacheRegisterSyscacheCallback(NAMESPACEOID, guards_syscache_callback, (Datum) 0);
		callbacks_registered = true;
	}
	if (relations[which] != NULL &&
		(found = hash_search(relations[which], &relid, HASH_FIND, NULL)) != NULL)
	{
		last[which] = *found;
		return true;
	}

	nsp = get_namespace_oid("idemjob", true);
	if (!OidIsValid(nsp) || !holds_rows_of(rel, nsp, t->relname))
		return false;

	memset(&entry, 0, sizeof(entry));

	for (i = 0; i < t->ncols; i++)
	{
		const GuardCol *c = &t->cols[i];
		int			attno = SPI_fnumber(desc, c->name);
		Oid			type = c->type;

		CHECK_FOR_INTERRUPTS();
		if (type == JOB_STATE_TYPE)
			type = ext_type("job_state", nsp);
		else if (type == ATTEMPT_STATE_TYPE)
			type = ext_type("attempt_state", nsp);
		else if (type == OWNER_HASH_TYPE)
			type = ext_type("owner_hash", nsp);
		if (attno <= 0 || TupleDescAttr(desc, attno - 1)->atttypid != type)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("table idemjob.%s has no column \"%s\" of type %s",
							t->relname, c->name,
							OidIsValid(type) ? format_type_be(type) : "(missing)"),
					 errhint("Update the extension: ALTER EXTENSION idemjob UPDATE.")));
		entry.attnums[i] = (AttrNumber) attno;
	}
	entry.relid = relid;
	if (relations[which] == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(Oid);
		ctl.entrysize = sizeof(TableCache);
		ctl.hcxt = TopMemoryContext;
		relations[which] = hash_create("idemjob guarded relations", 16, &ctl,
									   HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	found = hash_search(relations[which], &relid, HASH_ENTER, NULL);
	*found = entry;
	last[which] = entry;
	return true;
}

static int
firing_bit(TriggerEvent ev)
{
	int			bit;

	if (!TRIGGER_FIRED_FOR_ROW(ev) || TRIGGER_FIRED_INSTEAD(ev))
		return 0;
	if (TRIGGER_FIRED_BY_INSERT(ev))
		bit = EV_BEFORE_INSERT;
	else if (TRIGGER_FIRED_BY_UPDATE(ev))
		bit = EV_BEFORE_UPDATE;
	else if (TRIGGER_FIRED_BY_DELETE(ev))
		bit = EV_BEFORE_DELETE;
	else
		return 0;
	return TRIGGER_FIRED_AFTER(ev) ? bit << 3 : bit;
}

/*
 * Start a row guard: check the table and the firing, then return false on
 * the trusted path (the caller returns at once), else fill *g.
 */
static bool
guard_begin(FunctionCallInfo fcinfo, GuardTableId which, Guard *g)
{
	TriggerData *td = trigger_data(fcinfo);
	const GuardTable *t = &tables[which];

	if (!is_table(td->tg_relation, which))
		wrong_table(fcinfo, td, psprintf("table idemjob.%s", t->relname));
	if ((firing_bit(td->tg_event) & t->events) == 0)
		wrong_firing(fcinfo, td, t->declared);

	if (idemjob_trusted_depth > 0)
		return false;

	g->td = td;
	g->t = t;
	g->desc = RelationGetDescr(td->tg_relation);
	g->row = td->tg_trigtuple;
	g->modified = false;
	memcpy(g->attnums, last[which].attnums, sizeof(g->attnums));
	if (TRIGGER_FIRED_BY_INSERT(td->tg_event))
		g->op = "insert";
	else if (TRIGGER_FIRED_BY_UPDATE(td->tg_event))
		g->op = "update";
	else
		g->op = "delete";
	return true;
}

static Datum
trigger_result(FunctionCallInfo fcinfo)
{
	TriggerData *td = (TriggerData *) fcinfo->context;

	if (TRIGGER_FIRED_BY_UPDATE(td->tg_event))
		return PointerGetDatum(td->tg_newtuple);
	return PointerGetDatum(td->tg_trigtuple);
}

/* the row a guard that checked it returns: the one it completed, if it did */
static Datum
guard_result(FunctionCallInfo fcinfo, Guard *g)
{
	if (g->modified)
		return PointerGetDatum(g->row);
	return trigger_result(fcinfo);
}

/*
 * Reading the row
 */
static Datum
get(Guard *g, int col, bool *isnull)
{
	return heap_getattr(g->row, g->attnums[col], g->desc, isnull);
}

static bool
is_null(Guard *g, int col)
{
	bool		isnull;

	(void) get(g, col, &isnull);
	return isnull;
}

/* a name or key, quoted and clipped, for a message */
static char *
label_text(Guard *g, int col)
{
	bool		isnull;
	Datum		d = get(g, col, &isnull);
	char	   *s;
	int			len;

	if (isnull)
		return "NULL";
	s = TextDatumGetCString(d);
	len = strlen(s);
	if (len > 64)
		return psprintf("\"%.*s...\"", pg_mbcliplen(s, len, 64), s);
	return psprintf("\"%s\"", s);
}

static char *
label_uuid(Guard *g, int col)
{
	bool		isnull;
	Datum		d = get(g, col, &isnull);

	return isnull ? "(no id)" : ij_uuid_str(d);
}

/* what the row is, for the message */
static char *
row_label(Guard *g)
{
	switch (g->t - tables)
	{
		case T_JOBS:
			return psprintf("job %s", label_uuid(g, J_ID));
		case T_ATTEMPTS:
			return psprintf("attempt %s", label_uuid(g, A_ID));
		case T_RACE_LOG:
			return psprintf("the race-log row of attempt %s",
							label_uuid(g, R_ATTEMPT_ID));
		case T_CONTRACTS:
			return psprintf("the contract of intent %s",
							label_text(g, C_INTENT));
		case T_CERTIFICATIONS:
			return psprintf("the certification of provider %s for intent %s",
							label_text(g, K_PROVIDER), label_text(g, K_INTENT));
		case T_SPENT_KEYS:
			return psprintf("the spent key %s of owner %s",
							label_text(g, S_KEY), label_text(g, S_OWNER));
	}
	return "a row";
}

static void refuse(Guard *g, const char *fmt,...) pg_attribute_printf(2, 3);

static void
refuse(Guard *g, const char *fmt,...)
{
	va_list		args;
	char	   *detail;

	va_start(args, fmt);
	detail = ij_vformat(fmt, args);
	va_end(args);
	ereport(ERROR,
			(errcode(ERRCODE_IJ_INVALID_TRANSITION),
			 errmsg("%s of %s is refused", g->op, row_label(g)),
			 errdetail_internal("%s", detail),
			 errhint("%s", g->t->hint)));
}

static const char *
colname(Guard *g, int col)
{
	return g->t->cols[col].name;
}

/* a column that must be set */
static Datum
need(Guard *g, int col)
{
	bool		isnull;
	Datum		d = get(g, col, &isnull);

	if (isnull)
		refuse(g, "Column \"%s\" is NULL.", colname(g, col));
	return d;
}

/* an identifier: 1 to 255 bytes (NULL only where allowed) */
static void
check_name(Guard *g, int col, bool nullable)
{
	bool		isnull;
	Datum		d = get(g, col, &isnull);
	int			len;

	if (isnull)
	{
		if (!nullable)
			refuse(g, "Column \"%s\" is NULL.", colname(g, col));
		return;
	}
	len = VARSIZE_ANY_EXHDR(DatumGetTextPP(d));
	if (len < 1 || len > IDEMJOB_MAX_NAME_BYTES)
		refuse(g, "Column \"%s\" is %d bytes long; names are 1 to %d bytes.",
			   colname(g, col), len, IDEMJOB_MAX_NAME_BYTES);
}

static void
check_sha256(Guard *g, int col)
{
	int			len = VARSIZE_ANY_EXHDR(DatumGetByteaPP(need(g, col)));

	if (len != SHA256_BYTES)
		refuse(g, "Column \"%s\" is %d bytes long; a SHA-256 is %d.",
			   colname(g, col), len, SHA256_BYTES);
}

static int64
int8_in_range(Guard *g, int col, int64 min, int64 max)
{
	int64		v = DatumGetInt64(need(g, col));

	if (v < min || v > max)
		refuse(g, "Column \"%s\" is " INT64_FORMAT "; it must lie between " INT64_FORMAT " and " INT64_FORMAT ".",
			   colname(g, col), v, min, max);
	return v;
}

static int32
int4_in_range(Guard *g, int col, int32 min, int32 max)
{
	int32		v = DatumGetInt32(need(g, col));

	if (v < min || v > max)
		refuse(g, "Column \"%s\" is %d; it must lie between %d and %d.",
			   colname(g, col), v, min, max);
	return v;
}

static char *
state_label(Guard *g, int col)
{
	return DatumGetCString(DirectFunctionCall1(enum_out, need(g, col)));
}

static bool
is_one_of(const char *s, const char *const *set)
{
	for (; *set; set++)
		if (strcmp(s, *set) == 0)
			return true;
	return false;
}

static const char *const final_job_states[] = {
	"succeeded", "failed", "cancelled", NULL
};

/* the old and the new row hold the same value (NULLs included) */
static bool
unchanged(Guard *g, int col)
{
	AttrNumber	attno = g->attnums[col];
	Form_pg_attribute att = TupleDescAttr(g->desc, attno - 1);
	bool		n1,
				n2;
	Datum		d1 = heap_getattr(g->td->tg_trigtuple, attno, g->desc, &n1);
	Datum		d2 = heap_getattr(g->td->tg_newtuple, attno, g->desc, &n2);

	if (n1 || n2)
		return n1 == n2;
	return datum_image_eq(d1, d2, att->attbyval, att->attlen);
}

/* UPDATE of jobs or attempts: no column the extension defines may change */
static void
check_update(Guard *g)
{
	int			i;

	for (i = 0; i < g->t->ncols; i++)
	{
		CHECK_FOR_INTERRUPTS();
		if (!unchanged(g, i))
			refuse(g, "Column \"%s\" of idemjob.%s is written by the idemjob functions only.",
				   colname(g, i), g->t->relname);
	}
}

/* UPDATE of the other tables */
static void
refuse_update(Guard *g)
{
	refuse(g, "Rows of idemjob.%s are never updated by raw SQL.",
		   g->t->relname);
}

/*
 * A row's owner_hash (since 1.2) is idemjob.owner_hash(owner_id), wherever
 * the row comes from.  A row inserted without one (raw DML, a restore of a
 * dump taken before 1.2 with its column list) gets it here, before the NOT
 * NULL constraint is checked (in the partitioned layout it is refused
 * instead: PostgreSQL picks a row's partition before any trigger runs); a
 * row with another one is refused: it would lie in a partition or on a
 * shard its owner's calls never look in.  The id is not checked against
 * it: ids made before 1.2 carry none, and the calls find them all the same.
 */
static void
check_owner_hash(Guard *g, int hash_col, int owner_col)
{
	int32		owner_hash = ij_owner_hash(DatumGetTextPP(need(g, owner_col)));
	bool		isnull;
	Datum		d = get(g, hash_col, &isnull);

	if (isnull && g->td->tg_relation->rd_rel->relispartition)
		refuse(g, "Column \"owner_hash\" is NULL: in the partitioned layout a row needs it to find its partition, before any trigger runs; give idemjob.owner_hash(owner_id).");
	if (isnull)
	{
		int			attno = g->attnums[hash_col];
		Datum		value = Int32GetDatum(owner_hash);
		bool		null = false;

		g->row = heap_modify_tuple_by_cols(g->row, g->desc, 1, &attno,
										   &value, &null);
		g->modified = true;
	}
	else if (DatumGetInt32(d) != owner_hash)
		refuse(g, "Column \"owner_hash\" is %d; the owner_hash of owner %s is %d.",
			   DatumGetInt32(d), label_text(g, owner_col), owner_hash);
}

/*
 * jobs
 */
static void
check_job_insert(Guard *g)
{
	char	   *state;
	bool		final;
	bool		succeeded;
	int64		version;
	int32		attempt_count;

	need(g, J_ID);
	check_name(g, J_OWNER, false);
	check_name(g, J_KEY, false);
	check_name(g, J_INTENT, false);
	check_name(g, J_PROVIDER, false);
	check_name(g, J_NEXT_PROVIDER, true);
	check_owner_hash(g, J_OWNER_HASH, J_OWNER);
	need(g, J_PARAMS);
	need(g, J_CREATED_AT);
	need(g, J_UPDATED_AT);
	need(g, J_PRIORITY);
	need(g, J_RUN_AT);

	state = state_label(g, J_STATE);
	final = is_one_of(state, final_job_states);
	succeeded = strcmp(state, "succeeded") == 0;

	version = int8_in_range(g, J_VERSION, 0, PG_INT64_MAX - 1);
	attempt_count = int4_in_range(g, J_ATTEMPT_COUNT, 0, PG_INT32_MAX - 1);
	if (!is_null(g, J_MAX_ATTEMPTS))
		int4_in_range(g, J_MAX_ATTEMPTS, 1, PG_INT32_MAX);

	if (final != !is_null(g, J_COMPLETED_AT))
		refuse(g, final ? "The job is %s, a final state, but has no completed_at."
			   : "The job is %s, not final, but has a completed_at.", state);
	if (final && version < 1)
		refuse(g, "The job is %s at version 0; ending a job moves its version.", state);
	if (succeeded != !is_null(g, J_COMPLETED_BY) ||
		succeeded != !is_null(g, J_RESULT))
		refuse(g, succeeded ? "The job is succeeded but lacks its result or its winner (completed_by)."
			   : "The job is %s; only a succeeded job has a result and a winner (completed_by).",
			   state);
	if (!is_null(g, J_ERROR) && strcmp(state, "failed") != 0)
		refuse(g, "The job is %s; only a failed job has an error.", state);
	if (attempt_count == 0 && strcmp(state, "pending") != 0 &&
		strcmp(state, "cancelled") != 0)
		refuse(g, "The job is %s with no attempt.", state);
}

Datum
idemjob_jobs_guard(PG_FUNCTION_ARGS)
{
	Guard		g;

	if (!guard_begin(fcinfo, T_JOBS, &g))
		return trigger_result(fcinfo);

	if (TRIGGER_FIRED_BY_INSERT(g.td->tg_event))
		check_job_insert(&g);
	else if (TRIGGER_FIRED_BY_UPDATE(g.td->tg_event))
		check_update(&g);
	else
	{
		char	   *state = state_label(&g, J_STATE);

		if (!is_one_of(state, final_job_states))
			refuse(&g, "The job is %s; only a succeeded, failed or cancelled job can be deleted.",
				   state);
	}
	return guard_result(fcinfo, &g);
}

/*
 * attempts
 */
static void
check_attempt_insert(Guard *g)
{
	static const char *const ended[] = {
		"succeeded", "superseded", "failed", "cancelled", "released", NULL
	};
	static const char *const leased[] = {"started", "released", NULL};
	static const char *const returned[] = {"superseded", "failed", NULL};
	char	   *state;

	need(g, A_ID);
	need(g, A_JOB_ID);
	check_name(g, A_OWNER, false);
	check_name(g, A_PROVIDER, false);
	check_name(g, A_WORKER, true);
	check_owner_hash(g, A_OWNER_HASH, A_OWNER);
	need(g, A_STARTED_AT);
	int4_in_range(g, A_ATTEMPT_NO, 1, PG_INT32_MAX);
	int8_in_range(g, A_READ_VERSION, 0, PG_INT64_MAX - 1);

	state = state_label(g, A_STATE);
	if (is_one_of(state, ended) == is_null(g, A_FINISHED_AT))
		refuse(g, is_null(g, A_FINISHED_AT)
			   ? "The attempt is %s, an end state, but has no finished_at."
			   : "The attempt is %s, not ended, but has a finished_at.", state);
	if (strcmp(state, "started") == 0 && !is_null(g, A_UNKNOWN_AT))
		refuse(g, "The attempt is started but has an unknown_at: it never went unknown.");
	if (!is_null(g, A_LEASE_UNTIL) && !is_one_of(state, leased))
		refuse(g, "The attempt is %s; only a started attempt not yet confirmed, or a released one, has a lease (lease_until).", state);
	if (strcmp(state, "released") == 0 &&
		(is_null(g, A_LEASE_UNTIL) || !is_null(g, A_UNKNOWN_AT)))
		refuse(g, "The attempt is released: it had a lease (lease_until) and never went unknown.");
	if (!is_null(g, A_RESULT_SHA256))
	{
		if (!is_one_of(state, returned))
			refuse(g, "The attempt is %s; only a superseded or rejected (failed) attempt keeps a result fingerprint.", state);
		check_sha256(g, A_RESULT_SHA256);
	}
	else if (strcmp(state, "superseded") == 0)
		refuse(g, "The attempt is superseded but has no result fingerprint (result_sha256).");
	if (!is_null(g, A_DROPPED_RESULT) && !is_one_of(state, returned))
		refuse(g, "The attempt is %s; only a superseded or rejected (failed) attempt keeps a dropped result.", state);

	/*
	 * The attempt's owner is its job's: the owner binding reads it on the
	 * calls made with an attempt id.  (No job: the foreign key says so.)
	 */
	{
		Datum		key[2] = {need(g, A_JOB_ID), need(g, A_OWNER_HASH)};
		char	   *owner = parent_row(&job_owner, &job_owner_citus, key, "jobs", false);

		if (owner != NULL &&
			strcmp(owner, TextDatumGetCString(need(g, A_OWNER))) != 0)
			refuse(g, "The attempt's owner_id is not its job's.");
	}
}

Datum
idemjob_attempts_guard(PG_FUNCTION_ARGS)
{
	Guard		g;

	if (!guard_begin(fcinfo, T_ATTEMPTS, &g))
		return trigger_result(fcinfo);

	if (TRIGGER_FIRED_BY_INSERT(g.td->tg_event))
		check_attempt_insert(&g);
	else if (TRIGGER_FIRED_BY_UPDATE(g.td->tg_event))
		check_update(&g);
	else
	{
		Datum		key[2] = {need(&g, A_JOB_ID), need(&g, A_OWNER_HASH)};
		int			n;

		/* a cascade from its job's delete finds the job gone */
		ij_connect();
		n = ij_exec(&job_exists, key, NULL);
		ij_finish();
		if (n > 0)
			refuse(&g, "An attempt is deleted only with its job, once the job is final.");
	}
	return guard_result(fcinfo, &g);
}

/*
 * race_log
 */
Datum
idemjob_race_log_guard(PG_FUNCTION_ARGS)
{
	Guard		g;
	char	   *reason;
	int64		expected;
	int64		found;

	if (!guard_begin(fcinfo, T_RACE_LOG, &g))
		return trigger_result(fcinfo);
	if (TRIGGER_FIRED_BY_UPDATE(g.td->tg_event))
		refuse_update(&g);

	need(&g, R_LOGGED_AT);
	need(&g, R_JOB_ID);
	check_name(&g, R_OWNER, false);
	check_owner_hash(&g, R_OWNER_HASH, R_OWNER);
	check_name(&g, R_PROVIDER, false);
	/* since 1.2; NULL in rows of jobs purged before 1.2 */
	check_name(&g, R_INTENT, true);
	check_name(&g, R_KEY, true);
	check_name(&g, R_WINNER_PROVIDER, true);
	need(&g, R_ATTEMPT_ID);
	if (!is_null(&g, R_WINNER) &&
		!DatumGetBool(DirectFunctionCall2(uuid_ne, need(&g, R_WINNER),
										  need(&g, R_ATTEMPT_ID))))
		refuse(&g, "The attempt (attempt_id) cannot be its own winner.");
	if (is_null(&g, R_WINNER) && !is_null(&g, R_WINNER_PROVIDER))
		refuse(&g, "A winner_provider needs its winner (winner_attempt_id).");
	reason = TextDatumGetCString(need(&g, R_REASON));
	expected = int8_in_range(&g, R_EXPECTED, 0, PG_INT64_MAX - 1);
	found = int8_in_range(&g, R_FOUND, 0, PG_INT64_MAX);
	if (strcmp(reason, "slot_taken") == 0)
	{
		if (is_null(&g, R_WINNER))
			refuse(&g, "Reason slot_taken names the winner (winner_attempt_id).");
		if (!is_null(&g, R_FENCED_AT))
			refuse(&g, "Reason slot_taken has no fenced_at (its late_by counts from the winner).");
	}
	else if (strcmp(reason, "version_moved") == 0)
	{
		/* late since the fence: fenced_at (1.2), never late_by (the contract) */
		if (!is_null(&g, R_WINNER) || !is_null(&g, R_LATE_BY))
			refuse(&g, "Reason version_moved has no winner_attempt_id and no late_by.");
	}
	else if (strcmp(reason, "rejected") == 0)
	{
		/* not a race: the contract refused it, the version may not have moved */
		if (!is_null(&g, R_LATE_BY) || !is_null(&g, R_FENCED_AT))
			refuse(&g, "Reason rejected has no late_by and no fenced_at.");
		if (found < expected)
			refuse(&g, "found_version " INT64_FORMAT " is before expected_version " INT64_FORMAT ".",
				   found, expected);
	}
	else
		refuse(&g, "Reason \"%s\" is not slot_taken, version_moved or rejected.",
			   reason);
	if (strcmp(reason, "rejected") != 0 && found <= expected)
		refuse(&g, "A late result lost to a version that moved past the one it read: found_version " INT64_FORMAT " is not past expected_version " INT64_FORMAT ".",
			   found, expected);
	check_sha256(&g, R_SHA256);
	int4_in_range(&g, R_BYTES, 1, PG_INT32_MAX);
	if (!is_null(&g, R_DROPPED_RESULT))
	{
		/* the payload kept is the one fingerprinted */
		int32		nbytes;
		bytea	   *sha = ij_result_fingerprint(DatumGetJsonbP(need(&g, R_DROPPED_RESULT)),
												&nbytes);

		if (nbytes != DatumGetInt32(need(&g, R_BYTES)) ||
			memcmp(VARDATA(sha), VARDATA_ANY(DatumGetByteaPP(need(&g, R_SHA256))),
				   SHA256_BYTES) != 0)
			refuse(&g, "Column \"dropped_result\" is not the result of result_sha256 and result_bytes.");
	}

	return guard_result(fcinfo, &g);
}

/*
 * contracts
 */

/*
 * Does the schema compile as define_contract() requires?  A row that does
 * not is taken all the same, with a WARNING: it may be a contract an older
 * version accepted (1.0 stored some 1.1 refuses), or one at the depth limit
 * that a restoring session, with less stack, cannot compile again.
 * Refusing it would make COPY lose every contract and certification of the
 * dump; taken, it refuses the results of its intent (22023 at
 * complete_attempt) until an admin defines a new version.
 */
static void
check_schema(Guard *g, Jsonb *schema)
{
	MemoryContext tmp = AllocSetContextCreate(CurrentMemoryContext,
											  "idemjob schema check",
											  ALLOCSET_DEFAULT_SIZES);
	MemoryContext oldcxt = MemoryContextSwitchTo(tmp);

	PG_TRY();
	{
		(void) ij_schema_compile(schema);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(oldcxt);
		edata = CopyErrorData();
		/* cancels, out-of-memory and the like go up as they are */
		if (edata->sqlerrcode != ERRCODE_INVALID_PARAMETER_VALUE &&
			edata->sqlerrcode != ERRCODE_STATEMENT_TOO_COMPLEX)
			PG_RE_THROW();
		FlushErrorState();
		ereport(WARNING,
				(errcode(edata->sqlerrcode),
				 errmsg("the contract of intent \"%s\" does not compile: %s",
						TextDatumGetCString(need(g, C_INTENT)), edata->message),
				 errdetail("The row is kept; complete_attempt() refuses results of this intent until a new version is defined.")));
	}
	PG_END_TRY();
	MemoryContextSwitchTo(oldcxt);
	MemoryContextDelete(tmp);
}

/*
 * Under Citus contracts and certifications are reference tables: a write
 * an idemjob function makes on one node reaches every other node's copy
 * (idemjob.<table>_<shard id>) as a statement of a connection Citus opened
 * (application_name "citus_internal gpid=..."), where no idemjob function
 * runs.  Such a write is the function's when it comes on such a connection
 * as the extension's owner (the role the function ran as, and the only one
 * that may write these tables at all); the guard lets it through.  The
 * owner, connected to a node and naming itself so, could write a copy by
 * hand: it could also disable the triggers.
 */
static bool
citus_replicated_write(Relation rel, const char *relname)
{
	const char *name = RelationGetRelationName(rel);

	return application_name != NULL &&
		strncmp(application_name, "citus_internal gpid=", strlen("citus_internal gpid=")) == 0 &&
		strcmp(name, relname) != 0 && ij_holds_rows_of(rel, relname) &&
		GetUserId() == ij_extension_owner();
}

Datum
idemjob_contracts_guard(PG_FUNCTION_ARGS)
{
	Guard		g;

	if (!guard_begin(fcinfo, T_CONTRACTS, &g) ||
		citus_replicated_write(g.td->tg_relation, "contracts"))
		return trigger_result(fcinfo);
	if (TRIGGER_FIRED_BY_UPDATE(g.td->tg_event))
		refuse_update(&g);
	if (TRIGGER_FIRED_BY_DELETE(g.td->tg_event))
		refuse(&g, "A contract is replaced by a new version, never removed: its certifications and the results it checks depend on it.");

	check_name(&g, C_INTENT, false);
	int4_in_range(&g, C_VERSION, 1, PG_INT32_MAX - 1);
	need(&g, C_UPDATED_AT);
	check_schema(&g, DatumGetJsonbP(need(&g, C_SCHEMA)));

	return trigger_result(fcinfo);
}

/*
 * certifications
 */
Datum
idemjob_certifications_guard(PG_FUNCTION_ARGS)
{
	Guard		g;

	if (!guard_begin(fcinfo, T_CERTIFICATIONS, &g))
		return trigger_result(fcinfo);
	if (citus_replicated_write(g.td->tg_relation, "certifications"))
	{
		/*
		 * In a parallel restore through the coordinator this node's copy of
		 * contracts may still be loading: wait for it (the foreign key
		 * between the two copies says the rest)
		 */
		if (TRIGGER_FIRED_BY_INSERT(g.td->tg_event) && !is_null(&g, K_INTENT))
		{
			Datum		key = need(&g, K_INTENT);

			(void) parent_row(&contract_intent, NULL, &key, "contracts", true);
		}
		return trigger_result(fcinfo);
	}
	if (TRIGGER_FIRED_BY_UPDATE(g.td->tg_event))
		refuse_update(&g);
	if (TRIGGER_FIRED_BY_DELETE(g.td->tg_event))
		refuse(&g, "A certification is revoked, keeping its history, not deleted.");

	check_name(&g, K_INTENT, false);
	check_name(&g, K_PROVIDER, false);
	int4_in_range(&g, K_CONTRACT_VERSION, 1, PG_INT32_MAX - 1);
	need(&g, K_CERTIFIED_AT);
	if (is_null(&g, K_REVOKED_AT) != is_null(&g, K_REVOKE_REASON))
		refuse(&g, "A revoked certification has both revoked_at and revoke_reason; one in force has neither.");
	/* a parallel restore: wait for the contracts' load (the foreign key says the rest) */
	if (TRIGGER_FIRED_BY_INSERT(g.td->tg_event))
	{
		Datum		key = need(&g, K_INTENT);

		(void) parent_row(&contract_intent, NULL, &key, "contracts", false);
	}

	return trigger_result(fcinfo);
}

/*
 * spent_keys
 */
Datum
idemjob_spent_keys_guard(PG_FUNCTION_ARGS)
{
	Guard		g;
	char	   *state;

	if (!guard_begin(fcinfo, T_SPENT_KEYS, &g))
		return trigger_result(fcinfo);
	if (TRIGGER_FIRED_BY_UPDATE(g.td->tg_event))
		refuse_update(&g);

	check_name(&g, S_OWNER, false);
	check_name(&g, S_KEY, false);
	check_owner_hash(&g, S_OWNER_HASH, S_OWNER);
	check_sha256(&g, S_SHA256);
	need(&g, S_JOB_ID);
	need(&g, S_COMPLETED_AT);
	need(&g, S_PURGED_AT);
	state = state_label(&g, S_FINAL_STATE);
	if (!is_one_of(state, final_job_states))
		refuse(&g, "Column \"final_state\" is %s; only a final job is purged.", state);

	return guard_result(fcinfo, &g);
}

/*
 * Statement trigger BEFORE TRUNCATE on jobs, attempts, contracts and
 * certifications.
 */
Datum
idemjob_truncate_guard(PG_FUNCTION_ARGS)
{
	static const struct
	{
		GuardTableId which;
		const char *detail;
	}			guarded[] = {
		{T_JOBS, "It would delete jobs that are not final."},
		{T_ATTEMPTS, "It would delete attempts whose jobs remain."},
		{T_CONTRACTS, "It would remove output contracts; a contract is replaced by a new version, never removed."},
		{T_CERTIFICATIONS, "It would delete certifications; a certification is revoked, not deleted."},
	};
	TriggerData *td = trigger_data(fcinfo);
	Relation	rel = td->tg_relation;
	int			i;

	for (i = 0; i < (int) lengthof(guarded); i++)
		if (is_table(rel, guarded[i].which))
			break;
	if (i == (int) lengthof(guarded))
		wrong_table(fcinfo, td, "tables idemjob.jobs, attempts, contracts and certifications");
	if (!TRIGGER_FIRED_BY_TRUNCATE(td->tg_event) ||
		!TRIGGER_FIRED_BEFORE(td->tg_event))
		wrong_firing(fcinfo, td, "BEFORE TRUNCATE FOR EACH STATEMENT");

	if (idemjob_trusted_depth == 0)
		ereport(ERROR,
				(errcode(ERRCODE_IJ_INVALID_TRANSITION),
				 errmsg("truncate of idemjob.%s is refused",
						RelationGetRelationName(rel)),
				 errdetail("%s", guarded[i].detail),
				 errhint("%s", tables[guarded[i].which].hint)));
	return PointerGetDatum(NULL);
}

/*
 * Statement trigger on idemjob.contracts: compiled contracts are cached per
 * backend (contracts.c); a relcache invalidation of the table, sent at
 * commit to every backend, drops them.  Under Citus the trigger fires on
 * each node's copy (idemjob.contracts_<shard id>), and the caches watch
 * idemjob.contracts: that table is invalidated too.
 */
Datum
idemjob_contracts_changed(PG_FUNCTION_ARGS)
{
	TriggerData *td = trigger_data(fcinfo);
	Oid			shell;

	if (!is_table(td->tg_relation, T_CONTRACTS))
		wrong_table(fcinfo, td, "table idemjob.contracts");
	if (TRIGGER_FIRED_FOR_ROW(td->tg_event) || !TRIGGER_FIRED_AFTER(td->tg_event))
		wrong_firing(fcinfo, td, "AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE FOR EACH STATEMENT");

	CacheInvalidateRelcacheByRelid(RelationGetRelid(td->tg_relation));
	shell = get_relname_relid("contracts", RelationGetNamespace(td->tg_relation));
	if (OidIsValid(shell) && shell != RelationGetRelid(td->tg_relation))
		CacheInvalidateRelcacheByRelid(shell);
	return PointerGetDatum(NULL);
}

/*
 * Event trigger idemjob_ddl_guard (since 1.2): ALTER TABLE may not add,
 * drop, rename or retype a column of the extension's tables outside the
 * extension's own scripts.  pg_dump writes a configuration table's rows
 * with every column it has, but not the ALTER TABLE that made a column the
 * extension did not create: the restore's COPY then fails, and loses every
 * row of the table.  A superuser who must can disable the event trigger.
 */
static bool
is_column_change(Node *stmt)
{
	ListCell   *lc;

	if (IsA(stmt, RenameStmt))
		return ((RenameStmt *) stmt)->renameType == OBJECT_COLUMN;
	if (!IsA(stmt, AlterTableStmt))
		return false;
	foreach(lc, ((AlterTableStmt *) stmt)->cmds)
	{
		AlterTableCmd *cmd = (AlterTableCmd *) lfirst(lc);

		if (cmd->subtype == AT_AddColumn || cmd->subtype == AT_DropColumn ||
			cmd->subtype == AT_AlterColumnType)
			return true;
	}
	return false;
}

/* DROP EXTENSION naming idemjob */
static bool
drops_idemjob(Node *stmt)
{
	ListCell   *lc;

	if (!IsA(stmt, DropStmt) || ((DropStmt *) stmt)->removeType != OBJECT_EXTENSION)
		return false;
	foreach(lc, ((DropStmt *) stmt)->objects)
	{
		Node	   *name = (Node *) lfirst(lc);

		if (IsA(name, String) && strcmp(strVal(name), "idemjob") == 0)
			return true;
	}
	return false;
}

/*
 * DROP EXTENSION idemjob on a Citus coordinator.  Citus's own drop trigger
 * (sql_drop) reads each dropped distributed table's shard ranges through
 * the type of its distribution column, idemjob.owner_hash, which the same
 * DROP has removed by then (Citus 13.2: "cache lookup failed for type");
 * and this node's copies of the reference tables carry triggers that call
 * the extension's functions.  So before the drop each of the extension's
 * Citus tables becomes a plain table again, by the steps that trigger takes
 * for a dropped table: its metadata removed from the workers, its shards
 * dropped, its own metadata removed.  All of it in the drop's transaction:
 * a drop that fails (objects of the caller's depend on the extension)
 * leaves the install distributed.  On a worker (the coordinator sends the
 * drop there after this) there is nothing left to do.
 */
static void
citus_tables_before_drop(void)
{
	bool		isnull;
	int			guc_level;
	Oid			ext = get_extension_oid("idemjob", true);

	/*
	 * This runs before the drop checks its rights: for anyone but the
	 * extension's owner, nothing (the drop then refuses them)
	 */
	if (!OidIsValid(ext) || !object_ownercheck(ExtensionRelationId, ext, GetUserId()) ||
		!OidIsValid(get_extension_oid("citus", true)))
		return;
	/* the caller's objects out of reach; the shards' own cascades unsaid */
	guc_level = NewGUCNestLevel();
	(void) set_config_option("search_path", "pg_catalog, pg_temp", PGC_USERSET,
							 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	(void) set_config_option("client_min_messages", "warning", PGC_USERSET,
							 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	SPI_connect();
	if (SPI_execute("SELECT pg_catalog.citus_is_coordinator()", true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not ask Citus for this node's role");
	if (DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull)) &&
		SPI_execute("SELECT pg_catalog.master_remove_distributed_table_metadata_from_workers(c.oid, n.nspname, c.relname),"
					" pg_catalog.citus_drop_all_shards(c.oid, n.nspname, c.relname, false),"
					" pg_catalog.master_remove_partition_metadata(c.oid, n.nspname, c.relname)"
					" FROM pg_catalog.pg_dist_partition p"
					" JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) p.logicalrelid"
					" JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace"
					" WHERE n.nspname OPERATOR(pg_catalog.=) 'idemjob'",
					false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not remove idemjob's tables from Citus");
	SPI_finish();
	AtEOXact_GUC(true, guc_level);
}

Datum
idemjob_ddl_guard(PG_FUNCTION_ARGS)
{
	EventTriggerData *trigdata;
	Node	   *stmt;
	RangeVar   *rv;
	Oid			relid;
	Oid			nsp;

	if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_TRIGGERED_ACTION_EXCEPTION),
				 errmsg("idemjob.ddl_guard() is an event trigger function")));
	trigdata = (EventTriggerData *) fcinfo->context;
	stmt = trigdata->parsetree;
	if (stmt != NULL && drops_idemjob(stmt))
	{
		citus_tables_before_drop();
		PG_RETURN_VOID();
	}
	if (creating_extension || IsBinaryUpgrade || stmt == NULL || !is_column_change(stmt))
		PG_RETURN_VOID();

	rv = IsA(stmt, RenameStmt) ? ((RenameStmt *) stmt)->relation :
		((AlterTableStmt *) stmt)->relation;
	if (rv == NULL)
		PG_RETURN_VOID();
	relid = RangeVarGetRelid(rv, NoLock, true);
	nsp = get_namespace_oid("idemjob", true);
	if (!OidIsValid(relid) || !OidIsValid(nsp) || get_rel_namespace(relid) != nsp)
		PG_RETURN_VOID();
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("the columns of idemjob.%s belong to extension idemjob", get_rel_name(relid)),
			 errdetail("pg_dump would write this table's rows with a column that its restore does not create, and the restore would lose them all."),
			 errhint("Keep your own columns in a table of your own that references this one.")));
	PG_RETURN_VOID();
}
