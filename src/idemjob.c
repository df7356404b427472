/*-------------------------------------------------------------------------
 *
 * idemjob.c
 *	  Module entry point: settings, the trusted-path flag, the argument
 *	  checks every SQL function shares, and two helpers: a message formatted
 *	  from a va_list, a hash table keyed by strings.
 *
 * Every SQL function checks its arguments before it touches a table, in the
 * contract's order: NULLs (22004), then values (22023), then ids (IJ006),
 * then the state machine.  The helpers here raise the first two.
 *
 * The trusted-path depth (idemjob_trusted_depth) is raised by the SQL
 * functions around their own DML so that the row guards in triggers.c do
 * not check a transition twice.  It is backend-local, raised and lowered
 * with the switch to the extension's owner (rights.c), and brought back to
 * that depth whenever a (sub)transaction aborts, so an error can never
 * leave it raised.
 *
 * src/idemjob.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/detoast.h"
#include "access/xact.h"
#include "common/hashfn.h"
#include "lib/stringinfo.h"
#include "libpq/libpq.h"
#include "libpq/libpq-be.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/dest.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"

#include "idemjob.h"

PG_MODULE_MAGIC;

int			idemjob_attempt_timeout_ms = 5 * 60 * 1000;
char	   *idemjob_default_provider = NULL;
int			idemjob_max_payload_bytes = 1024 * 1024;
bool		idemjob_require_certified_failover = true;
int			idemjob_max_attempts = 25;
int			idemjob_retry_backoff_ms = 1000;
int			idemjob_retry_backoff_max_ms = 60 * 60 * 1000;
bool		idemjob_keep_dropped_results = false;
int			idemjob_key_retention_s = 0;
int			idemjob_purge_pause_ms = 0;
int			idemjob_sweeper_interval_ms = 1000;
int			idemjob_max_wait_ms = 60 * 1000;
int			idemjob_max_payload_depth = 512;
static int	idemjob_partitions = 0;	/* read by the scripts only */
int			idemjob_claim_lease_ms = 5000;
char	   *idemjob_sweeper_databases = NULL;
int			idemjob_notify = IJ_NOTIFY_WAKE;

/* idemjob.notify; 1.1's boolean values keep their meaning */
static const struct config_enum_entry notify_options[] = {
	{"off", IJ_NOTIFY_OFF, false},
	{"wake", IJ_NOTIFY_WAKE, false},
	{"full", IJ_NOTIFY_FULL, false},
	{"on", IJ_NOTIFY_FULL, true},
	{"true", IJ_NOTIFY_FULL, true},
	{"yes", IJ_NOTIFY_FULL, true},
	{"1", IJ_NOTIFY_FULL, true},
	{"false", IJ_NOTIFY_OFF, true},
	{"no", IJ_NOTIFY_OFF, true},
	{"0", IJ_NOTIFY_OFF, true},
	{NULL, 0, false}
};

int			idemjob_trusted_depth = 0;

void		_PG_init(void);

static bool
check_default_provider(char **newval, void **extra, GucSource source)
{
	size_t		len = *newval ? strlen(*newval) : 0;

	if (len == 0 || len > IDEMJOB_MAX_NAME_BYTES)
	{
		GUC_check_errdetail("idemjob.default_provider must be between 1 and %d bytes long.",
							IDEMJOB_MAX_NAME_BYTES);
		return false;
	}
	return true;
}

static void
idemjob_xact_callback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_PARALLEL_COMMIT ||
		event == XACT_EVENT_PREPARE || event == XACT_EVENT_ABORT ||
		event == XACT_EVENT_PARALLEL_ABORT)
	{
		ij_rowtypes_xact_end();
		ij_guards_xact_end();
	}
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT)
	{
		ij_rights_abort(InvalidSubTransactionId);
		idemjob_trusted_depth = 0;
		guard_skip_text = NULL;
	}
}

static void
idemjob_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
						 SubTransactionId parentSubid, void *arg)
{
	if (event == SUBXACT_EVENT_ABORT_SUB)
	{
		/*
		 * Only the levels opened in the aborted subtransaction end: an
		 * idemjob function around it (whose statement fired a trigger with
		 * an EXCEPTION block) is still running, trusted, as its owner.
		 */
		ij_rights_abort(mySubid);
		idemjob_trusted_depth = ij_switch_depth();
		guard_skip_text = NULL;
	}
}

/*
 * Durations.  The eight time settings are strings read by
 * parse_duration(): '0', a number with one of PostgreSQL's time units
 * ('500ms', '30s', '5min', '1h', '90d', as postgresql.conf takes them), or
 * an interval as PostgreSQL's interval input reads it ('90 days',
 * '1 hour 30 minutes', 'PT5M'; a month counts 30 days).  A number without
 * a unit other than 0 is refused: 1.1's integer settings read it in their
 * own unit (milliseconds for most, seconds for key_retention), a trap that
 * now fails loudly.  SHOW writes a value as it was set.  The check hooks
 * never throw: the interval is decoded with the non-throwing
 * ParseDateTime/DecodeInterval that interval_in itself calls.
 */
typedef struct DurationSetting
{
	const char *name;
	const char *short_desc;
	const char *long_desc;
	int		   *var;			/* the value, in unit */
	const char *boot;			/* the default, as SHOW writes it */
	int			unit;			/* GUC_UNIT_MS or GUC_UNIT_S */
	int			min;
	int			max;
	GucContext	context;
} DurationSetting;

enum
{
	D_ATTEMPT_TIMEOUT,
	D_RETRY_BACKOFF,
	D_RETRY_BACKOFF_MAX,
	D_KEY_RETENTION,
	D_PURGE_PAUSE,
	D_MAX_WAIT,
	D_CLAIM_LEASE,
	D_SWEEPER_INTERVAL,
	N_DURATIONS
};

static const DurationSetting durations[N_DURATIONS] = {
	[D_ATTEMPT_TIMEOUT] = {"idemjob.attempt_timeout",
		"Deadline given to an attempt started without a timeout.",
		"0 means no deadline. A duration with a unit ('5min') or an interval ('5 minutes').",
	&idemjob_attempt_timeout_ms, "5min", GUC_UNIT_MS, 0, INT_MAX, PGC_USERSET},
	[D_RETRY_BACKOFF] = {"idemjob.retry_backoff",
		"Delay before the first retry of a failed or rejected attempt; it doubles with each attempt.",
		"0 retries at once. At most idemjob.retry_backoff_max (SET refuses more; elsewhere the delay is capped).",
	&idemjob_retry_backoff_ms, "1s", GUC_UNIT_MS, 0, INT_MAX, PGC_SUSET},
	[D_RETRY_BACKOFF_MAX] = {"idemjob.retry_backoff_max",
		"Longest delay before a retry.",
		"At least idemjob.retry_backoff (SET refuses less).",
	&idemjob_retry_backoff_max_ms, "1h", GUC_UNIT_MS, 0, INT_MAX, PGC_SUSET},
	[D_KEY_RETENTION] = {"idemjob.key_retention",
		"How long purge() keeps the spent key of a purged job.",
		"0 keeps spent keys forever. A duration with a unit ('90d') or an interval ('90 days').",
	&idemjob_key_retention_s, "0", GUC_UNIT_S, 0, INT_MAX, PGC_SUSET},
	[D_PURGE_PAUSE] = {"idemjob.purge_pause",
		"Pause of purge() after each 1,000 jobs it deletes, to leave the CPU to other work.",
		"0 purges without a pause.",
	&idemjob_purge_pause_ms, "0", GUC_UNIT_MS, 0, 10000, PGC_SUSET},
	[D_MAX_WAIT] = {"idemjob.max_wait",
		"Longest wait of claim(wait) and await_job(timeout); longer ones end then.",
		"A waiting call holds its snapshot for as long as it waits. 0: no call waits.",
	&idemjob_max_wait_ms, "1min", GUC_UNIT_MS, 0, INT_MAX, PGC_SUSET},
	[D_CLAIM_LEASE] = {"idemjob.claim_lease",
		"Time a worker has to confirm an attempt taken by claim(lease => true) before it is released.",
		"The worker confirms with begin_attempt() immediately before it calls the provider; an attempt not confirmed by then was never sent.",
	&idemjob_claim_lease_ms, "5s", GUC_UNIT_MS, 1, INT_MAX, PGC_USERSET},
	[D_SWEEPER_INTERVAL] = {"idemjob.sweeper_interval",
		"How often the sweeper runs expire_attempts() (with idemjob in shared_preload_libraries).",
		"0 turns the sweeper off.",
	&idemjob_sweeper_interval_ms, "1s", GUC_UNIT_MS, 0, INT_MAX, PGC_SIGHUP},
};

/* the settings' strings, owned by the GUC machinery */
static char *duration_strings[N_DURATIONS];

/* v (in unit) as SHOW writes an integer setting of that unit: 0, 90d, 1500ms */
static void
format_duration(char *buf, size_t len, int64 v, int unit)
{
	static const struct
	{
		const char *name;
		int64		ms;
	}			units[] = {{"d", 86400000}, {"h", 3600000}, {"min", 60000}, {"s", 1000}, {"ms", 1}};
	int64		ms = unit == GUC_UNIT_S ? v * 1000 : v;
	size_t		i;

	if (v == 0)
	{
		snprintf(buf, len, "0");
		return;
	}
	for (i = 0; i < lengthof(units); i++)
		if (ms % units[i].ms == 0)
		{
			snprintf(buf, len, INT64_FORMAT "%s", ms / units[i].ms, units[i].name);
			return;
		}
}

/*
 * value as a duration in unit (rounded), or false with GUC_check_errdetail
 * set.  Never throws.
 */
static bool
parse_duration(const char *value, int unit, int64 *result)
{
	char	   *end;
	double		num;
	int			ival;
	const char *hintmsg = NULL;
	char		workbuf[MAXDATELEN + 1];
	char	   *field[MAXDATEFIELDS];
	int			ftype[MAXDATEFIELDS];
	int			nf;
	int			dtype = 0;
	int			dterr;
	struct pg_itm_in itm;
	Interval	iv;
	double		us;

	/* a bare number: only 0 */
	num = strtod(value, &end);
	if (end != value && !isinf(num) && !isnan(num))
	{
		while (isspace((unsigned char) *end))
			end++;
		if (*end == '\0')
		{
			if (num == 0)
			{
				*result = 0;
				return true;
			}
			GUC_check_errdetail("A duration needs a unit: a number alone is refused (1.1 read it in %s).",
								unit == GUC_UNIT_S ? "seconds" : "milliseconds");
			GUC_check_errhint("Write it with a unit, as in '30s', '500ms' or '90d', or as an interval, as in '90 days'.");
			return false;
		}
	}
	/* a number with a unit, as postgresql.conf takes an integer setting's */
	if (parse_int(value, &ival, unit, &hintmsg))
	{
		*result = ival;
		return true;
	}
	/* an interval, as interval_in reads it (without throwing) */
	dterr = ParseDateTime(value, workbuf, sizeof(workbuf), field, ftype,
						  MAXDATEFIELDS, &nf);
	if (dterr == 0)
		dterr = DecodeInterval(field, ftype, nf, INTERVAL_FULL_RANGE, &dtype, &itm);
	if (dterr == DTERR_BAD_FORMAT && strlen(value) < sizeof(workbuf))
	{
		strlcpy(workbuf, value, sizeof(workbuf));
		dterr = DecodeISO8601Interval(workbuf, &dtype, &itm);
	}
	if (dterr != 0 || dtype != DTK_DELTA || itmin2interval(&itm, &iv) != 0)
	{
		GUC_check_errdetail("A duration is a number with a unit (us, ms, s, min, h, d) or an interval.");
		GUC_check_errhint("For example '500ms', '30s', '5min', '90d' or '90 days'.");
		return false;
	}
	us = (double) iv.time + (double) iv.day * USECS_PER_DAY +
		(double) iv.month * DAYS_PER_MONTH * USECS_PER_DAY;
	us = rint(us / (unit == GUC_UNIT_S ? USECS_PER_SEC : 1000));
	/* out of int's range: out of the setting's, which check_duration says */
	*result = (int64) Max(Min(us, (double) PG_INT64_MAX / 2), (double) PG_INT64_MIN / 2);
	return true;
}

static bool
check_duration(int i, char **newval, GucSource source)
{
	const DurationSetting *d = &durations[i];
	int64		v;
	char		lo[32],
				hi[32];

	if (*newval == NULL || !parse_duration(*newval, d->unit, &v))
		return false;
	if (v < d->min || v > d->max)
	{
		format_duration(lo, sizeof(lo), d->min, d->unit);
		format_duration(hi, sizeof(hi), d->max, d->unit);
		GUC_check_errdetail("%s must be between %s and %s.", d->name, lo, hi);
		return false;
	}

	/*
	 * retry_backoff <= retry_backoff_max, where both are known: in a SET
	 * (or set_config(), or a function's SET clause), against the other's
	 * value in this session.  A configuration file, ALTER SYSTEM, ALTER
	 * ROLE/DATABASE ... SET and the connection's options set them one at
	 * a time, in an order no hook can see; there the retry delay is capped
	 * at retry_backoff_max when it is used (attempts.c).
	 */
	if (source == PGC_S_SESSION && (i == D_RETRY_BACKOFF || i == D_RETRY_BACKOFF_MAX))
	{
		int64		backoff = i == D_RETRY_BACKOFF ? v : idemjob_retry_backoff_ms;
		int64		max = i == D_RETRY_BACKOFF_MAX ? v : idemjob_retry_backoff_max_ms;

		if (backoff > max)
		{
			format_duration(lo, sizeof(lo), backoff, GUC_UNIT_MS);
			format_duration(hi, sizeof(hi), max, GUC_UNIT_MS);
			GUC_check_errdetail("idemjob.retry_backoff (%s) must not be longer than idemjob.retry_backoff_max (%s).",
								lo, hi);
			GUC_check_errhint("Set idemjob.retry_backoff_max first when you raise both.");
			return false;
		}
	}
	return true;
}

static void
assign_duration(int i, const char *newval)
{
	int64		v = 0;

	/* checked already: parses the same way again */
	if (newval != NULL && parse_duration(newval, durations[i].unit, &v))
		*durations[i].var = (int) v;
}

#define DURATION_HOOKS(i) \
static bool \
check_duration_##i(char **newval, void **extra, GucSource source) \
{ \
	return check_duration(i, newval, source); \
} \
static void \
assign_duration_##i(const char *newval, void *extra) \
{ \
	assign_duration(i, newval); \
}
DURATION_HOOKS(0)
DURATION_HOOKS(1)
DURATION_HOOKS(2)
DURATION_HOOKS(3)
DURATION_HOOKS(4)
DURATION_HOOKS(5)
DURATION_HOOKS(6)
DURATION_HOOKS(7)
StaticAssertDecl(N_DURATIONS == 8, "one DURATION_HOOKS line per duration setting");

static const GucStringCheckHook duration_checks[N_DURATIONS] = {
	check_duration_0, check_duration_1, check_duration_2, check_duration_3,
	check_duration_4, check_duration_5, check_duration_6, check_duration_7
};
static const GucStringAssignHook duration_assigns[N_DURATIONS] = {
	assign_duration_0, assign_duration_1, assign_duration_2, assign_duration_3,
	assign_duration_4, assign_duration_5, assign_duration_6, assign_duration_7
};

static void
define_durations(void)
{
	int			i;

	for (i = 0; i < N_DURATIONS; i++)
		DefineCustomStringVariable(durations[i].name, durations[i].short_desc,
								   durations[i].long_desc, &duration_strings[i],
								   durations[i].boot, durations[i].context, 0,
								   duration_checks[i], duration_assigns[i], NULL);
}

void
_PG_init(void)
{
	define_durations();

	DefineCustomStringVariable("idemjob.default_provider",
							   "Provider given to a job submitted without one.",
							   NULL,
							   &idemjob_default_provider,
							   "default",
							   PGC_USERSET,
							   0,
							   check_default_provider, NULL, NULL);

	DefineCustomIntVariable("idemjob.max_payload_bytes",
							"Largest jsonb argument accepted, in bytes of the uncompressed datum.",
							NULL,
							&idemjob_max_payload_bytes,
							1024 * 1024,
							1, MaxAllocSize / 2,
							PGC_SUSET,
							GUC_UNIT_BYTE,
							NULL, NULL, NULL);

	DefineCustomBoolVariable("idemjob.require_certified_failover",
							 "Refuse attempts on a provider other than the job's unless it is certified for the intent.",
							 NULL,
							 &idemjob_require_certified_failover,
							 true,
							 PGC_SUSET,
							 0,
							 NULL, NULL, NULL);

	/* read by the install and update scripts only (docs/scaling.md) */
	DefineCustomIntVariable("idemjob.partitions",
							"Hash partitions by owner_hash of jobs, attempts, race_log and spent_keys made by CREATE EXTENSION or the update to 1.2; 0: plain tables.",
							"Read only while the extension's script runs: changing it later changes no table.",
							&idemjob_partitions,
							0,
							0, 1024,
							PGC_SUSET,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("idemjob.max_attempts",
							"Attempts a job gets before a failure or rejection ends it failed, when submitted without max_attempts.",
							NULL,
							&idemjob_max_attempts,
							25,
							1, INT_MAX,
							PGC_SUSET,
							0,
							NULL, NULL, NULL);

	DefineCustomBoolVariable("idemjob.keep_dropped_results",
							 "Keep the result of a superseded or rejected attempt in attempts.dropped_result.",
							 "Results may hold personal data; off by default.",
							 &idemjob_keep_dropped_results,
							 false,
							 PGC_SUSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomStringVariable("idemjob.owner_binding",
							   "Ties the session's calls to one owner: off, role, setting:NAME or setting:NAME/KEY.",
							   "Usually set per role with ALTER ROLE ... SET.",
							   &idemjob_owner_binding,
							   "off",
							   PGC_SUSET,
							   0,
							   ij_check_owner_binding, NULL, NULL);

	DefineCustomEnumVariable("idemjob.notify",
							 "Notifications idemjob and idemjob_done at commit: off, wake (no payload) or full.",
							 "Any role that can connect can LISTEN, so only full sends intents and job ids; each notifying commit takes a cluster-wide lock.",
							 &idemjob_notify,
							 IJ_NOTIFY_WAKE,
							 notify_options,
							 PGC_SUSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("idemjob.max_payload_depth",
							"Deepest nesting of arrays and objects in a jsonb argument.",
							"A restore parses every stored value again, with less stack: keep this far below what the server can parse.",
							&idemjob_max_payload_depth,
							512,
							1, 100000,
							PGC_SUSET,
							0,
							NULL, NULL, NULL);

	DefineCustomStringVariable("idemjob.sweeper_databases",
							   "Databases the sweeper runs in, comma-separated (with idemjob in shared_preload_libraries).",
							   NULL,
							   &idemjob_sweeper_databases,
							   "",
							   PGC_SIGHUP,
							   GUC_LIST_INPUT,
							   NULL, NULL, NULL);

	MarkGUCPrefixReserved("idemjob");

	ij_contracts_init();
	ij_rowtypes_init();
	ij_rights_init();
	ij_guards_init();
	ij_planner_init();
	RegisterXactCallback(idemjob_xact_callback, NULL);
	RegisterSubXactCallback(idemjob_subxact_callback, NULL);
	ij_sweeper_init();
}


/*
 * Summary lines in the server log, at LOG, for the passes that changed
 * something: expire_attempts() (the sweeper's rounds, or a call), purge(),
 * purge_race_log().  Never more
 * than one line per kind a minute per backend: a pass that ends less than
 * a minute after its kind's last line adds its counts to the next one,
 * which is written by the first pass (of that kind, in that backend) a
 * minute or more after the last line, by ij_log_flush() (the sweeper calls
 * it every round, so its counts wait at most a minute and one interval),
 * or when the backend exits.  A line says how many passes it sums and
 * over how long.  Lines are written when a pass ends, before its
 * transaction commits.
 */
#define IJ_LOG_EVERY_MS	60000

typedef struct LogSummary
{
	const char *what;			/* "sweeper", "purge", "purge_race_log" */
	const char *labels[3];		/* the counts' words, NULL past the last */
	int64		sum[3];
	int			passes;			/* summed since the last line */
	TimestampTz first;			/* the first of them */
	TimestampTz last_line;		/* 0: none yet */
} LogSummary;

static LogSummary log_summaries[IJ_LOG_KINDS] = {
	[IJ_LOG_SWEEPER] = {"expire_attempts", {"leased attempts released", "started attempts past their deadline now unknown", "unknown attempts fenced"}},
	[IJ_LOG_PURGE] = {"purge", {"finished jobs purged", "spent keys deleted", NULL}},
	[IJ_LOG_PURGE_RACE_LOG] = {"purge_race_log", {"race-log rows deleted", NULL, NULL}},
};
static bool log_exit_registered = false;

static void
log_summary_write(LogSummary *l, TimestampTz now)
{
	StringInfoData buf;
	int			i;
	long		secs;
	int			usecs;

	initStringInfo(&buf);
	for (i = 0; i < 3 && l->labels[i] != NULL; i++)
		appendStringInfo(&buf, "%s" INT64_FORMAT " %s", i > 0 ? ", " : "",
						 l->sum[i], l->labels[i]);
	TimestampDifference(l->first, now, &secs, &usecs);
	ereport(LOG,
			(errmsg("idemjob %s: %s", l->what, buf.data),
			 errdetail("%d %s over %ld s; at most one such line a minute.",
					   l->passes, l->passes == 1 ? "pass" : "passes summed", secs),
			 errhidestmt(true)));
	pfree(buf.data);
	memset(l->sum, 0, sizeof(l->sum));
	l->passes = 0;
	l->last_line = now;
}

/* the line of kind, if one is waiting and a minute has passed (or force) */
static void
log_summary_flush(LogSummary *l, bool force)
{
	TimestampTz now = GetCurrentTimestamp();

	if (l->passes > 0 &&
		(force || l->last_line == 0 ||
		 TimestampDifferenceExceeds(l->last_line, now, IJ_LOG_EVERY_MS)))
		log_summary_write(l, now);
}

static void
log_summary_at_exit(int code, Datum arg)
{
	int			i;

	for (i = 0; i < IJ_LOG_KINDS; i++)
		log_summary_flush(&log_summaries[i], true);
}

/* a pass of kind ended with these counts (0 for a kind's unused ones) */
void
ij_log_pass(IjLogKind kind, int64 a, int64 b, int64 c)
{
	LogSummary *l = &log_summaries[kind];

	if (a == 0 && b == 0 && c == 0)
	{
		log_summary_flush(l, false);
		return;
	}
	if (!log_exit_registered)
	{
		before_shmem_exit(log_summary_at_exit, (Datum) 0);
		log_exit_registered = true;
	}
	if (l->passes == 0)
		l->first = GetCurrentTimestamp();
	l->sum[0] += a;
	l->sum[1] += b;
	l->sum[2] += c;
	l->passes++;
	log_summary_flush(l, false);
}

/*
 * base + timeout, or 22023 naming the argument when that is past the end of
 * the timestamp range: an argument check, made before any id is looked up.
 */
static Datum
shift_timestamp(TimestampTz base, Interval *by, bool add, const char *name)
{
	Datum		t = (Datum) 0;
	MemoryContext cxt = CurrentMemoryContext;

	PG_TRY();
	{
		t = DirectFunctionCall2(add ? timestamptz_pl_interval : timestamptz_mi_interval,
								TimestampTzGetDatum(base), IntervalPGetDatum(by));
	}
	PG_CATCH();
	{
		/* plain arithmetic: nothing to clean up but the error itself */
		MemoryContextSwitchTo(cxt);
		FlushErrorState();
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument \"%s\" is too large", name),
				 errdetail("The time it gives would be outside the timestamp range.")));
	}
	PG_END_TRY();
	return t;
}

Datum
ij_deadline_after(TimestampTz base, Interval *timeout, const char *name)
{
	return shift_timestamp(base, timeout, true, name);
}

/* base - age, or 22023 naming the argument when that is before the range */
Datum
ij_time_before(TimestampTz base, Interval *age, const char *name)
{
	return shift_timestamp(base, age, false, name);
}

/* a wait of wait_us, capped by idemjob.max_wait */
int64
ij_capped_wait(int64 wait_us)
{
	return Min(wait_us, (int64) idemjob_max_wait_ms * 1000);
}

/*
 * A waiting call (claim with wait, await_job) ends as soon as its client
 * has gone: a claim must not take a job for a worker that is dead, nor a
 * wait hold a snapshot for nobody.  Called in the wait loops, before each
 * new look at the tables.  It asks the kernel whether the client's socket
 * was closed (as client_connection_check_interval does, but every round of
 * the wait, not on a timer), and if so ends the session the way PostgreSQL
 * does when it finds that out itself: FATAL "connection to client lost",
 * which aborts the transaction, so nothing the call did is committed.
 * Nothing to check where there is no client socket (a background worker)
 * or where the platform cannot tell a closed socket.
 */
void
ij_check_client(void)
{
	if (MyProcPort == NULL || whereToSendOutput != DestRemote ||
		FeBeWaitSet == NULL || !WaitEventSetCanReportClosed())
		return;
	if (!pq_check_connection())
	{
		ClientConnectionLost = 1;
		InterruptPending = 1;
		CHECK_FOR_INTERRUPTS();
	}
}

/*
 * Raise 22004 when argument argno is NULL.
 */
void
ij_require(FunctionCallInfo fcinfo, int argno, const char *name)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("argument \"%s\" must not be null", name)));
}

/*
 * An identifier argument (owner, key, intent, provider, worker): not empty,
 * at most IDEMJOB_MAX_NAME_BYTES bytes.  NULL is returned only when
 * nullable; otherwise it is 22004.
 */
text *
ij_name_arg(FunctionCallInfo fcinfo, int argno, const char *name, bool nullable)
{
	text	   *t;
	int			len;

	if (PG_ARGISNULL(argno))
	{
		if (nullable)
			return NULL;
		ij_require(fcinfo, argno, name);
	}
	t = PG_GETARG_TEXT_PP(argno);
	len = VARSIZE_ANY_EXHDR(t);
	if (len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument \"%s\" must not be empty", name)));
	if (len > IDEMJOB_MAX_NAME_BYTES)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument \"%s\" is too long", name),
				 errdetail("It is %d bytes long; the limit is %d bytes.",
						   len, IDEMJOB_MAX_NAME_BYTES)));
	return t;
}

/*
 * Raise 22023 when a jsonb datum is over idemjob.max_payload_bytes,
 * measured uncompressed, header included.
 */
void
ij_check_payload(Datum jsonb_datum, const char *name)
{
	Size		size = toast_raw_datum_size(jsonb_datum);

	if (size > (Size) idemjob_max_payload_bytes)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument \"%s\" is too large", name),
				 errdetail("It is %zu bytes; idemjob.max_payload_bytes is %d.",
						   size, idemjob_max_payload_bytes),
				 errhint("Store large payloads elsewhere and pass a reference.")));
}

/*
 * 22023 when a jsonb value nests arrays and objects deeper than
 * idemjob.max_payload_depth.  A restore parses every stored value again
 * (COPY's jsonb_in recurses once per level, under whatever stack the
 * restoring session has left), and one value too deep for it would empty
 * the whole table: so nothing deeper than a restore can take is stored.
 * Every level of nesting takes at least 8 bytes (a container's header and
 * its entry in its parent), so a value smaller than 8 bytes a level is not
 * walked at all.
 */
static void
check_depth(Jsonb *jb, const char *name)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	int			depth = 0;

	if (VARSIZE(jb) / 8 < (Size) idemjob_max_payload_depth)
		return;
	it = JsonbIteratorInit(&jb->root);
	while ((tok = JsonbIteratorNext(&it, &v, false)) != WJB_DONE)
	{
		CHECK_FOR_INTERRUPTS();
		if (tok == WJB_BEGIN_ARRAY || tok == WJB_BEGIN_OBJECT)
		{
			if (++depth > idemjob_max_payload_depth)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("argument \"%s\" is nested too deeply", name),
						 errdetail("It nests arrays and objects more than %d levels deep (idemjob.max_payload_depth).",
								   idemjob_max_payload_depth)));
		}
		else if (tok == WJB_END_ARRAY || tok == WJB_END_OBJECT)
			depth--;
	}
}

/*
 * A jsonb argument, size-checked.  NULL is returned only when nullable.
 */
Jsonb *
ij_jsonb_arg(FunctionCallInfo fcinfo, int argno, const char *name, bool nullable)
{
	Jsonb	   *jb;

	if (PG_ARGISNULL(argno))
	{
		if (nullable)
			return NULL;
		ij_require(fcinfo, argno, name);
	}
	ij_check_payload(PG_GETARG_DATUM(argno), name);
	jb = PG_GETARG_JSONB_P(argno);
	check_depth(jb, name);
	return jb;
}

char *
ij_uuid_str(Datum uuid)
{
	return DatumGetCString(DirectFunctionCall1(uuid_out, uuid));
}

/* byte-wise equality of a text datum and a text */
bool
ij_text_eq(Datum a, text *b)
{
	text	   *ta = DatumGetTextPP(a);

	return VARSIZE_ANY_EXHDR(ta) == VARSIZE_ANY_EXHDR(b) &&
		memcmp(VARDATA_ANY(ta), VARDATA_ANY(b), VARSIZE_ANY_EXHDR(b)) == 0;
}

Datum
ij_text_datum(const char *s)
{
	return PointerGetDatum(cstring_to_text(s));
}

/*
 * The note kept in attempts.error: {"code": code, "reason": reason}, or
 * {"code": code} when reason is NULL.
 */
Jsonb *
ij_note(const char *code, const char *reason)
{
	JsonbParseState *state = NULL;
	JsonbValue	k,
				v;
	JsonbValue *res;

	pushJsonbValue(&state, WJB_BEGIN_OBJECT, NULL);
	k.type = jbvString;
	k.val.string.val = "code";
	k.val.string.len = 4;
	pushJsonbValue(&state, WJB_KEY, &k);
	v.type = jbvString;
	v.val.string.val = (char *) code;
	v.val.string.len = strlen(code);
	pushJsonbValue(&state, WJB_VALUE, &v);
	if (reason != NULL)
	{
		k.val.string.val = "reason";
		k.val.string.len = 6;
		pushJsonbValue(&state, WJB_KEY, &k);
		v.val.string.val = (char *) reason;
		v.val.string.len = strlen(reason);
		pushJsonbValue(&state, WJB_VALUE, &v);
	}
	res = pushJsonbValue(&state, WJB_END_OBJECT, NULL);
	return JsonbValueToJsonb(res);
}

/*
 * Machine-readable error fields, for use inside ereport(): schema "idemjob",
 * table = the table the ids refer to, constraint = a stable list of
 * key=value pairs separated by single spaces (keys: job_id, attempt_id,
 * state, deadline, retry_after; values never contain spaces).  Clients read
 * them as the error's schema_name, table_name and constraint_name fields
 * instead of parsing DETAIL prose.  kv may be NULL.
 */
int
ij_errfields(const char *table, const char *kv)
{
	err_generic_string(PG_DIAG_SCHEMA_NAME, "idemjob");
	err_generic_string(PG_DIAG_TABLE_NAME, table);
	if (kv != NULL && kv[0] != '\0')
		err_generic_string(PG_DIAG_CONSTRAINT_NAME, kv);
	return 0;
}

/* a timestamp as ISO 8601 in UTC (2026-01-31T12:00:00.123456Z), whatever DateStyle */
char *
ij_iso_utc(TimestampTz ts)
{
	struct pg_tm tm;
	fsec_t		fsec;

	if (TIMESTAMP_NOT_FINITE(ts) ||
		timestamp2tm(ts, NULL, &tm, &fsec, NULL, NULL) != 0)
		return pstrdup(TIMESTAMP_IS_NOBEGIN(ts) ? "-infinity" : "infinity");
	return psprintf("%04d-%02d-%02dT%02d:%02d:%02d.%06dZ",
					tm.tm_year, tm.tm_mon, tm.tm_mday,
					tm.tm_hour, tm.tm_min, tm.tm_sec, (int) fsec);
}

/*
 * IJ002's retry_after hint in seconds: the time until the in-doubt
 * attempt's deadline, rounded up, at least 1; without a deadline,
 * idemjob.attempt_timeout (or 60 s when that is 0).
 */
int
ij_retry_after(bool has_deadline, TimestampTz deadline)
{
	int64		us;

	if (!has_deadline)
		return idemjob_attempt_timeout_ms > 0 ?
			(idemjob_attempt_timeout_ms + 999) / 1000 : 60;
	if (TIMESTAMP_NOT_FINITE(deadline))
		return 1;
	us = deadline - GetCurrentTimestamp();
	if (us <= 0)
		return 1;
	return (int) Min((us + USECS_PER_SEC - 1) / USECS_PER_SEC, (int64) PG_INT32_MAX);
}

/*
 * fmt formatted with args into a palloc'd string: psprintf for a function
 * that takes a format and its arguments itself (the guards' refusals, the
 * validator's violations).
 */
char *
ij_vformat(const char *fmt, va_list args)
{
	StringInfoData buf;

	initStringInfo(&buf);
	for (;;)
	{
		va_list		copy;
		int			needed;

		va_copy(copy, args);
		needed = appendStringInfoVA(&buf, fmt, copy);
		va_end(copy);
		if (needed == 0)
			break;
		enlargeStringInfo(&buf, needed);
	}
	return buf.data;
}

/*
 * A hash table keyed by a pointer to a NUL-terminated string (the first
 * member of each entry), hashed and compared by the string it points to,
 * not by its address: contracts.c's cache by intent, the validator's $ref
 * targets by JSON Pointer (validator_link.c).
 */
static uint32
string_ptr_hash(const void *key, Size keysize)
{
	const char *s = *(char *const *) key;

	return hash_bytes((const unsigned char *) s, strlen(s));
}

static int
string_ptr_match(const void *key1, const void *key2, Size keysize)
{
	return strcmp(*(char *const *) key1, *(char *const *) key2);
}

HTAB *
ij_string_ptr_table(const char *name, long nelem, Size entrysize,
					MemoryContext cxt)
{
	HASHCTL		ctl;

	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(char *);
	ctl.entrysize = entrysize;
	ctl.hash = string_ptr_hash;
	ctl.match = string_ptr_match;
	ctl.hcxt = cxt;
	return hash_create(name, nelem, &ctl,
					   HASH_ELEM | HASH_FUNCTION | HASH_COMPARE | HASH_CONTEXT);
}
