/*-------------------------------------------------------------------------
 *
 * sweeper.c
 *	  The sweeper: a background worker per database listed in
 *	  idemjob.sweeper_databases that runs idemjob.expire_attempts() every
 *	  idemjob.sweeper_interval.
 *
 * With idemjob in shared_preload_libraries, one launcher is registered
 * ("idemjob sweeper launcher", connected to no database).  It starts a
 * dynamic background worker for each database in idemjob.sweeper_databases
 * and reads the list again on every reload, so a database added to it is
 * served at once and one removed is left; both settings are read on
 * reload (PGC_SIGHUP).  A sweeper that stopped (its database was dropped
 * or never existed, or it failed) is started again after a few seconds,
 * and, once it has stopped twice in a row soon after starting, a minute
 * after its previous start, so a missing database costs one line in the
 * log a minute.  Without the preload nothing here runs, and
 * the extension works the same: expire_attempts() can be scheduled with
 * pg_cron instead.
 *
 * Each sweeper connects to its database as the bootstrap superuser and
 * takes a session lock no SQL can take (an advisory lock of a class SQL's
 * functions do not use), so two sweepers never serve one database,
 * even if a restarted launcher starts one beside a sweeper still running;
 * the second one leaves.  Then it loops: sleep on its latch for the
 * interval, serve interrupts and a configuration reload (leaving when its
 * database is no longer listed), and run one round in a transaction of its
 * own.  A round does nothing while the server is in recovery or where the
 * extension is not installed; otherwise it switches to the extension's
 * owner (pg_extension.extowner) and calls expire_attempts()'s C code
 * directly.  SIGTERM ends the worker (die).  Sweepers show in
 * pg_stat_activity with backend_type "idemjob sweeper".
 *
 * src/sweeper.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lock.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/varlena.h"

#include "idemjob.h"

/* the launcher, if it fails, is started again after this */
#define LAUNCHER_RESTART_S	5
/* and looks at its sweepers at least this often, woken or not */
#define LAUNCHER_POLL_MS	5000
/*
 * A sweeper that stopped is started again SWEEPER_RESTART_S after its last
 * start; after two stops in a row within SWEEPER_RETRY_S of their starts
 * (a database that does not exist), SWEEPER_RETRY_S after it.
 */
#define SWEEPER_RESTART_S	5
#define SWEEPER_RETRY_S		60
/* how often a sweeper that is off (interval 0) looks at the setting again */
#define SWEEPER_IDLE_MS		10000
/* the most databases one launcher serves */
#define IJ_MAX_SWEEPERS		64
/* the lock a sweeper holds in its database (see ij_sweeper_main) */
#define SWEEPER_LOCK_KEY	0x494A5357	/* "IJSW" */
#define SWEEPER_LOCK_CLASS	3

PGDLLEXPORT void ij_sweeper_main(Datum main_arg);
PGDLLEXPORT void ij_sweeper_launcher_main(Datum main_arg);

/* the launcher's view of one database of the list */
typedef struct SweeperSlot
{
	char		dbname[NAMEDATALEN];
	BackgroundWorkerHandle *handle; /* NULL: never started */
	TimestampTz started;		/* when it was last started */
	bool		stop_seen;		/* its last stop was counted */
	int			quick_stops;	/* stops in a row within SWEEPER_RETRY_S of a start */
	bool		listed;			/* in the list as last read */
} SweeperSlot;

/*
 * What the launcher and the sweepers have in common: a process of this
 * library that connects (the launcher to no database) once recovery is
 * over.
 */
static void
describe_worker(BackgroundWorker *worker, const char *function, const char *type,
				int restart_time)
{
	memset(worker, 0, sizeof(*worker));
	worker->bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker->bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker->bgw_restart_time = restart_time;
	snprintf(worker->bgw_library_name, BGW_MAXLEN, "idemjob");
	snprintf(worker->bgw_function_name, BGW_MAXLEN, "%s", function);
	snprintf(worker->bgw_type, BGW_MAXLEN, "%s", type);
	worker->bgw_main_arg = (Datum) 0;
}

/*
 * Register the launcher (from _PG_init, after the settings are defined).
 * Only while shared_preload_libraries is being processed.
 */
void
ij_sweeper_init(void)
{
	BackgroundWorker worker;

	if (!process_shared_preload_libraries_in_progress)
		return;

	describe_worker(&worker, "ij_sweeper_launcher_main", "idemjob sweeper launcher",
					LAUNCHER_RESTART_S);
	snprintf(worker.bgw_name, BGW_MAXLEN, "idemjob sweeper launcher");
	RegisterBackgroundWorker(&worker);
}

/*
 * The databases of idemjob.sweeper_databases, in CurrentMemoryContext (a
 * list of pointers into one palloc'd copy of the setting).  A list that
 * does not parse names nothing; *valid says which it was.
 */
static List *
sweeper_list(bool *valid)
{
	char	   *raw = pstrdup(idemjob_sweeper_databases ? idemjob_sweeper_databases : "");
	List	   *dbs;

	*valid = SplitGUCList(raw, ',', &dbs);
	return *valid ? dbs : NIL;
}

/* Is dbname in idemjob.sweeper_databases? */
static bool
sweeper_listed(const char *dbname)
{
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext,
											  "idemjob sweeper list",
											  ALLOCSET_SMALL_SIZES);
	MemoryContext old = MemoryContextSwitchTo(cxt);
	bool		valid;
	bool		found = false;
	ListCell   *lc;

	foreach(lc, sweeper_list(&valid))
	{
		if (strcmp((char *) lfirst(lc), dbname) == 0)
			found = true;
	}
	MemoryContextSwitchTo(old);
	MemoryContextDelete(cxt);
	return found;
}

/*
 * Start the sweeper of one database, as a dynamic background worker whose
 * state changes wake the launcher.
 */
static void
start_sweeper(SweeperSlot *slot)
{
	BackgroundWorker worker;
	MemoryContext old;
	bool		ok;

	describe_worker(&worker, "ij_sweeper_main", "idemjob sweeper", BGW_NEVER_RESTART);
	snprintf(worker.bgw_name, BGW_MAXLEN, "idemjob sweeper for database %s", slot->dbname);
	strlcpy(worker.bgw_extra, slot->dbname, BGW_EXTRALEN);
	worker.bgw_notify_pid = MyProcPid;

	if (slot->handle)
		pfree(slot->handle);
	slot->handle = NULL;
	slot->started = GetCurrentTimestamp();
	/* the handle outlives the pass */
	old = MemoryContextSwitchTo(TopMemoryContext);
	ok = RegisterDynamicBackgroundWorker(&worker, &slot->handle);
	MemoryContextSwitchTo(old);
	if (!ok)
		ereport(WARNING,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("could not start the idemjob sweeper for database \"%s\"",
						slot->dbname),
				 errhint("Raise max_worker_processes; it is tried again in %d seconds.",
						 SWEEPER_RETRY_S)));
}

/*
 * One pass of the launcher: read the list, forget the databases no longer
 * in it (their sweepers leave by themselves on the reload), and start the
 * sweeper of each listed database that has none running and was not
 * started in the last SWEEPER_RETRY_S.  Returns the milliseconds until
 * the next start it may have to make (at most SWEEPER_RETRY_S).  Runs in a
 * memory context the caller resets.
 */
static long
launcher_pass(SweeperSlot *slots, int *nslots, bool warn)
{
	bool		valid;
	List	   *dbs = sweeper_list(&valid);
	ListCell   *lc;
	TimestampTz now = GetCurrentTimestamp();
	long		next_ms = SWEEPER_RETRY_S * 1000L;
	int			i;

	if (!valid && warn)
		ereport(WARNING,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("idemjob.sweeper_databases is not a valid list: no sweeper started"),
				 errhint("Name the databases separated by commas, e.g. 'app,reports'.")));

	for (i = 0; i < *nslots; i++)
		slots[i].listed = false;
	foreach(lc, dbs)
	{
		char	   *db = (char *) lfirst(lc);

		CHECK_FOR_INTERRUPTS();
		if (strlen(db) >= NAMEDATALEN)
		{
			if (warn)
				ereport(WARNING,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("database name \"%s\" in idemjob.sweeper_databases is too long", db)));
			continue;
		}
		for (i = 0; i < *nslots; i++)
			if (strcmp(slots[i].dbname, db) == 0)
				break;
		if (i == *nslots)
		{
			if (*nslots >= IJ_MAX_SWEEPERS)
			{
				if (warn)
					ereport(WARNING,
							(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
							 errmsg("idemjob.sweeper_databases names more than %d databases: \"%s\" is not served",
									IJ_MAX_SWEEPERS, db)));
				continue;
			}
			memset(&slots[i], 0, sizeof(SweeperSlot));
			strlcpy(slots[i].dbname, db, NAMEDATALEN);
			(*nslots)++;
		}
		slots[i].listed = true;
	}

	/* forget what is no longer listed; keep the order of the rest */
	for (i = 0; i < *nslots;)
	{
		if (slots[i].listed)
		{
			i++;
			continue;
		}
		if (slots[i].handle)
			pfree(slots[i].handle);
		memmove(&slots[i], &slots[i + 1], sizeof(SweeperSlot) * (*nslots - i - 1));
		(*nslots)--;
	}

	for (i = 0; i < *nslots; i++)
	{
		SweeperSlot *slot = &slots[i];
		pid_t		pid;
		long		since_ms = 0;
		long		delay_ms = 0;

		CHECK_FOR_INTERRUPTS();
		if (slot->handle)
		{
			if (GetBackgroundWorkerPid(slot->handle, &pid) != BGWH_STOPPED)
				continue;
			since_ms = TimestampDifferenceMilliseconds(slot->started, now);
			if (!slot->stop_seen)
			{
				slot->stop_seen = true;
				slot->quick_stops = since_ms < SWEEPER_RETRY_S * 1000L ?
					slot->quick_stops + 1 : 0;
			}
			delay_ms = (slot->quick_stops >= 2 ? SWEEPER_RETRY_S : SWEEPER_RESTART_S) * 1000L;
		}
		if (since_ms >= delay_ms)
		{
			start_sweeper(slot);
			slot->stop_seen = false;
		}
		else
			next_ms = Min(next_ms, delay_ms - since_ms);
	}
	return next_ms;
}

void
ij_sweeper_launcher_main(Datum main_arg)
{
	SweeperSlot *slots;
	int			nslots = 0;
	bool		warn = true;
	MemoryContext pass_cxt;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	/*
	 * No database: a connection to the shared catalogs only, as PostgreSQL's
	 * logical replication launcher makes, so that it shows in
	 * pg_stat_activity and its latch is set when the postmaster signals a
	 * sweeper's start or stop (bgw_notify_pid).
	 */
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);

	slots = MemoryContextAllocZero(TopMemoryContext, sizeof(SweeperSlot) * IJ_MAX_SWEEPERS);
	pass_cxt = AllocSetContextCreate(TopMemoryContext, "idemjob sweeper launcher",
									 ALLOCSET_DEFAULT_SIZES);
	for (;;)
	{
		MemoryContext old = MemoryContextSwitchTo(pass_cxt);
		long		timeout = launcher_pass(slots, &nslots, warn);

		MemoryContextSwitchTo(old);
		MemoryContextReset(pass_cxt);
		warn = false;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 Min(Max(timeout, 100), LAUNCHER_POLL_MS), PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			warn = true;
		}
	}
}

/*
 * One round: expire_attempts() in a transaction of its own, as the
 * extension's owner.  The C function is called, not a name: schema idemjob
 * is the owner's (ij_extension_owner() checks it), but the worker connects
 * as the bootstrap superuser, and no object anyone put anywhere runs with
 * those rights.
 */
static void
sweep(void)
{
	Oid			save_user;
	int			save_sec;

	if (RecoveryInProgress())
		return;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());

	if (OidIsValid(get_extension_oid("idemjob", true)))
	{
		pgstat_report_activity(STATE_RUNNING, "idemjob sweeper: expire_attempts()");
		GetUserIdAndSecContext(&save_user, &save_sec);
		SetUserIdAndSecContext(ij_extension_owner(),
							   save_sec | SECURITY_LOCAL_USERID_CHANGE |
							   SECURITY_RESTRICTED_OPERATION);
		(void) ij_expire_attempts(NULL);
		SetUserIdAndSecContext(save_user, save_sec);
	}

	PopActiveSnapshot();
	CommitTransactionCommand();
	pgstat_report_stat(false);
	pgstat_report_activity(STATE_IDLE, NULL);
}

void
ij_sweeper_main(Datum main_arg)
{
	char		dbname[BGW_EXTRALEN];
	LOCKTAG		tag;

	memcpy(dbname, MyBgworkerEntry->bgw_extra, BGW_EXTRALEN);
	dbname[BGW_EXTRALEN - 1] = '\0';

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	BackgroundWorkerInitializeConnection(dbname, NULL, 0);
	pgstat_report_appname("idemjob sweeper");

	/*
	 * One sweeper per database: a session lock no SQL statement can take
	 * (advisory locks taken from SQL have class 1 or 2), released however
	 * the process exits (ShutdownPostgres releases every user lock).
	 */
	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, SWEEPER_LOCK_KEY, 0, SWEEPER_LOCK_CLASS);
	if (LockAcquire(&tag, ExclusiveLock, true, true) == LOCKACQUIRE_NOT_AVAIL)
	{
		ereport(DEBUG1,
				(errmsg("idemjob sweeper for database \"%s\" is already running", dbname)));
		proc_exit(0);
	}

	ereport(LOG,
			(errmsg("idemjob sweeper started for database \"%s\"", dbname)));

	for (;;)
	{
		long		timeout = idemjob_sweeper_interval_ms > 0 ?
			idemjob_sweeper_interval_ms : SWEEPER_IDLE_MS;

		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 timeout, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();

		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			if (!sweeper_listed(dbname))
			{
				ereport(LOG,
						(errmsg("idemjob sweeper for database \"%s\" stops: the database is no longer in idemjob.sweeper_databases",
								dbname)));
				proc_exit(0);
			}
		}
		if (idemjob_sweeper_interval_ms > 0)
			sweep();
	}
}
