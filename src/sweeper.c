/*-------------------------------------------------------------------------
 *
 * sweeper.c
 *	  The sweeper: a background worker per database listed in
 *	  idemjob.sweeper_databases that runs idemjob.expire_attempts() every
 *	  idemjob.sweeper_interval.
 *
 * The workers are registered when idemjob is loaded by
 * shared_preload_libraries, one per database named in the setting at that
 * time (changing the list takes a restart; the interval is re-read on every
 * reload).  Without the preload nothing here runs, and the extension works
 * the same: expire_attempts() can be scheduled with pg_cron instead.
 *
 * Each worker connects to its database as the bootstrap superuser, then
 * loops: sleep on its latch for the interval, serve interrupts and a
 * configuration reload, and run one round in a transaction of its own.  A
 * round does nothing while the server is in recovery or where the extension
 * is not installed; otherwise it switches to the extension's owner
 * (pg_extension.extowner) and calls expire_attempts()'s C code directly.  SIGTERM ends the worker (die); if it dies any
 * other way the postmaster starts it again after SWEEPER_RESTART_S seconds.
 * It shows in pg_stat_activity with backend_type "idemjob sweeper".
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
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/snapmgr.h"
#include "utils/varlena.h"

#include "idemjob.h"

#define SWEEPER_RESTART_S	5
/* how often a sweeper that is off (interval 0) looks at the setting again */
#define SWEEPER_IDLE_MS		10000

PGDLLEXPORT void ij_sweeper_main(Datum main_arg);

/*
 * Register the sweepers (from _PG_init, after the settings are defined).
 * Only while shared_preload_libraries is being processed.
 */
void
ij_sweeper_init(void)
{
	char	   *raw;
	List	   *dbs;
	ListCell   *lc;

	if (!process_shared_preload_libraries_in_progress)
		return;
	if (idemjob_sweeper_databases == NULL || idemjob_sweeper_databases[0] == '\0')
		return;

	raw = pstrdup(idemjob_sweeper_databases);
	if (!SplitGUCList(raw, ',', &dbs))
	{
		ereport(WARNING,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("idemjob.sweeper_databases is not a valid list: no sweeper started"),
				 errhint("Name the databases separated by commas, e.g. 'app,reports'.")));
		return;
	}

	foreach(lc, dbs)
	{
		char	   *db = (char *) lfirst(lc);
		BackgroundWorker worker;

		if (strlen(db) >= BGW_EXTRALEN || strlen(db) >= NAMEDATALEN)
		{
			ereport(WARNING,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("database name \"%s\" in idemjob.sweeper_databases is too long", db)));
			continue;
		}
		memset(&worker, 0, sizeof(worker));
		worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
		worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
		worker.bgw_restart_time = SWEEPER_RESTART_S;
		snprintf(worker.bgw_library_name, BGW_MAXLEN, "idemjob");
		snprintf(worker.bgw_function_name, BGW_MAXLEN, "ij_sweeper_main");
		snprintf(worker.bgw_name, BGW_MAXLEN, "idemjob sweeper for database %s", db);
		snprintf(worker.bgw_type, BGW_MAXLEN, "idemjob sweeper");
		strlcpy(worker.bgw_extra, db, BGW_EXTRALEN);
		worker.bgw_main_arg = (Datum) 0;
		worker.bgw_notify_pid = 0;
		RegisterBackgroundWorker(&worker);
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

	memcpy(dbname, MyBgworkerEntry->bgw_extra, BGW_EXTRALEN);
	dbname[BGW_EXTRALEN - 1] = '\0';

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	BackgroundWorkerInitializeConnection(dbname, NULL, 0);
	pgstat_report_appname("idemjob sweeper");

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
		}
		if (idemjob_sweeper_interval_ms > 0)
			sweep();
	}
}
