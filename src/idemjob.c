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

#include "access/detoast.h"
#include "access/xact.h"
#include "common/hashfn.h"
#include "lib/stringinfo.h"
#include "libpq/libpq.h"
#include "libpq/libpq-be.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "storage/latch.h"
#include "tcop/dest.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
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

void
_PG_init(void)
{
	DefineCustomIntVariable("idemjob.attempt_timeout",
							"Deadline given to an attempt started without a timeout.",
							"0 means no deadline.",
							&idemjob_attempt_timeout_ms,
							5 * 60 * 1000,
							0, INT_MAX,
							PGC_USERSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

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

	DefineCustomIntVariable("idemjob.max_attempts",
							"Attempts a job gets before a failure or rejection ends it failed, when submitted without max_attempts.",
							NULL,
							&idemjob_max_attempts,
							25,
							1, INT_MAX,
							PGC_SUSET,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("idemjob.retry_backoff",
							"Delay before the first retry of a failed or rejected attempt; it doubles with each attempt.",
							"0 retries at once.",
							&idemjob_retry_backoff_ms,
							1000,
							0, INT_MAX,
							PGC_SUSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("idemjob.retry_backoff_max",
							"Longest delay before a retry.",
							NULL,
							&idemjob_retry_backoff_max_ms,
							60 * 60 * 1000,
							0, INT_MAX,
							PGC_SUSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomBoolVariable("idemjob.keep_dropped_results",
							 "Keep the result of a superseded or rejected attempt in attempts.dropped_result.",
							 "Results may hold personal data; off by default.",
							 &idemjob_keep_dropped_results,
							 false,
							 PGC_SUSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("idemjob.key_retention",
							"How long purge() keeps the spent key of a purged job.",
							"0 keeps spent keys forever.",
							&idemjob_key_retention_s,
							0,
							0, INT_MAX,
							PGC_SUSET,
							GUC_UNIT_S,
							NULL, NULL, NULL);

	DefineCustomIntVariable("idemjob.purge_pause",
							"Pause of purge() after each 1,000 jobs it deletes, to leave the CPU to other work.",
							"0 purges without a pause.",
							&idemjob_purge_pause_ms,
							0,
							0, 10000,
							PGC_SUSET,
							GUC_UNIT_MS,
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

	DefineCustomIntVariable("idemjob.max_wait",
							"Longest wait of claim(wait) and await_job(timeout); longer ones end then.",
							"A waiting call holds its snapshot for as long as it waits. 0: no call waits.",
							&idemjob_max_wait_ms,
							60 * 1000,
							0, INT_MAX,
							PGC_SUSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("idemjob.claim_lease",
							"Time a worker has to confirm an attempt taken by claim(lease => true) before it is released.",
							"The worker confirms with begin_attempt() immediately before it calls the provider; an attempt not confirmed by then was never sent.",
							&idemjob_claim_lease_ms,
							5000,
							1, INT_MAX,
							PGC_USERSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("idemjob.sweeper_interval",
							"How often the sweeper runs expire_attempts() (with idemjob in shared_preload_libraries).",
							"0 turns the sweeper off.",
							&idemjob_sweeper_interval_ms,
							1000,
							0, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_MS,
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
