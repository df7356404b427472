/*-------------------------------------------------------------------------
 *
 * idemjob.h
 *	  Shared declarations of the idemjob extension: its SQLSTATEs (part of
 *	  the public API), settings, and the helpers the C files share.
 *
 * src/idemjob.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMJOB_H
#define IDEMJOB_H

#include "datatype/timestamp.h"
#include "fmgr.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/jsonb.h"
#include "utils/uuid.h"

#include "compat.h"

/*
 * SQLSTATEs.  Clients in every language switch on these; they are defined
 * here and nowhere else, with the names ../shared/CONTRACT.md gives them.
 */
#define ERRCODE_IJ_IDEMPOTENCY_CONFLICT		MAKE_SQLSTATE('I','J','0','0','1')
#define ERRCODE_IJ_ATTEMPT_IN_DOUBT			MAKE_SQLSTATE('I','J','0','0','2')
#define ERRCODE_IJ_JOB_FINISHED				MAKE_SQLSTATE('I','J','0','0','3')
#define ERRCODE_IJ_PROVIDER_NOT_CERTIFIED	MAKE_SQLSTATE('I','J','0','0','4')
#define ERRCODE_IJ_INVALID_TRANSITION		MAKE_SQLSTATE('I','J','0','0','5')
#define ERRCODE_IJ_NOT_FOUND				MAKE_SQLSTATE('I','J','0','0','6')
#define ERRCODE_IJ_KEY_EXPIRED				MAKE_SQLSTATE('I','J','0','0','7')
/* since 1.2: a leased attempt confirmed (or answered) after its lease */
#define ERRCODE_IJ_LEASE_EXPIRED			MAKE_SQLSTATE('I','J','0','0','8')

/* identifiers (owner, key, intent, provider, worker) are at most this long */
#define IDEMJOB_MAX_NAME_BYTES	255

/* settings (idemjob.c) */
extern int	idemjob_attempt_timeout_ms;
extern char *idemjob_default_provider;
extern int	idemjob_max_payload_bytes;
extern bool idemjob_require_certified_failover;
/* since 1.1 */
extern int	idemjob_max_attempts;
extern int	idemjob_retry_backoff_ms;
extern int	idemjob_retry_backoff_max_ms;
extern bool idemjob_keep_dropped_results;
extern int	idemjob_key_retention_s;
extern int	idemjob_purge_pause_ms;
extern char *idemjob_owner_binding;
extern int	idemjob_sweeper_interval_ms;
extern char *idemjob_sweeper_databases;
/* idemjob.notify: since 1.2 no tenant data by default */
#define IJ_NOTIFY_OFF	0
#define IJ_NOTIFY_WAKE	1
#define IJ_NOTIFY_FULL	2
extern int	idemjob_notify;
/* since 1.2 */
extern int	idemjob_max_wait_ms;
extern int	idemjob_max_payload_depth;
extern int	idemjob_claim_lease_ms;

/* summary lines in the server log, rate-limited (idemjob.c) */
typedef enum IjLogKind
{
	IJ_LOG_SWEEPER,				/* released, expired, fenced */
	IJ_LOG_PURGE,				/* jobs purged, spent keys deleted */
	IJ_LOG_PURGE_RACE_LOG,		/* race-log rows deleted */
	IJ_LOG_KINDS
} IjLogKind;
extern void ij_log_pass(IjLogKind kind, int64 a, int64 b, int64 c);

/*
 * Trusted path.  While one of the extension's own functions changes its
 * tables, the raw-DML guards (triggers.c) return at once: the function has
 * already checked the transition.  Reset on (sub)transaction abort.
 */
extern int	idemjob_trusted_depth;

/*
 * rights.c: the functions run as the extension's owner (ij_connect switches
 * to it), and the owner binding.
 */
extern void ij_rights_init(void);
extern void ij_rights_abort(SubTransactionId subxact);
extern int	ij_switch_depth(void);
extern Oid	ij_extension_owner(void);
extern void ij_check_version(void);
/*
 * The first line of every SQL-callable function (a declaration, so that
 * it runs before the other declarations' initializers read an argument):
 * the SQL objects must be at the library's version (55000 naming ALTER
 * EXTENSION idemjob UPDATE), or an older function's fewer arguments would
 * be read.  Not in validate() and uuid_v7(), which read no table and take
 * the same arguments in every version, nor in the triggers.
 */
#define IJ_ENTRY() int ij_entry_ pg_attribute_unused() = (ij_check_version(), 0)
extern void ij_switch_user(void);
extern void ij_unswitch_user(void);
extern void ij_pin_search_path(void);
extern Oid	ij_caller(void);
extern bool ij_check_owner_binding(char **newval, void **extra,
								   GucSource source);
extern text *ij_bound_owner(void);
extern void ij_check_submit_owner(text *owner_id);
extern bool ij_owner_visible(Datum owner_id);

/* uuidv7.c */
extern pg_uuid_t *idemjob_new_uuid(void);
/* since 1.2: the owner_hash (a hash of the owner) in ids and rows */
extern pg_uuid_t *idemjob_new_uuid_with_hash(int32 owner_hash);
extern int32 ij_owner_hash(text *owner_id);
extern int32 ij_owner_hash_of_id(const pg_uuid_t *id);

/* spi_plans.c: plans prepared once per backend */
typedef struct IjPlan
{
	const char *sql;
	int			nargs;
	Oid			argtypes[10];
	SPIPlanPtr	plan;
	int			cursor_options; /* e.g. CURSOR_OPT_GENERIC_PLAN; 0: default */
	bool		routed;			/* prepared from the routed text */
	const char *sql_unrouted;	/* sql without its IJ_ROUTED parts, once made */
	int			route_param;	/* Citus: the owner_hash's parameter; 0: not
								 * looked for yet, -1: none (ij_exec) */
} IjPlan;

/*
 * A part of a statement that only the routed layouts run (see
 * ij_layout_routed): a condition on owner_hash, which makes PostgreSQL read
 * one partition, and Citus one shard.  On plain tables it is cut out of the
 * text before the statement is prepared (its parameter stays, unused).
 */
#define IJ_ROUTED(sql) " /*routed*/" sql "/*end*/"
/* IJ_ROUTED: col's owner_hash is parameter n (an int4) */
#define IJ_ROUTE(col, n) IJ_ROUTED(" AND " col "owner_hash OPERATOR(pg_catalog.=) $" #n)
/*
 * Parameter n is the owner_hash of every row the statement reads or
 * writes, where it does not say so in an IJ_ROUTE condition (an INSERT's
 * value, a look-up by an attempt id): a mark for the Citus path of
 * ij_exec(), a comment to SQL
 */
#define IJ_ROUTE_PARAM(n) " /*route $" #n "*/"
extern bool ij_layout_routed(void);
extern bool ij_layout_citus(void);
extern bool ij_in_prepared_transaction(void);
/*
 * now() as a parameter, where a statement would call it inside CASE or
 * COALESCE: Citus refuses a function that is not immutable there
 */
extern Datum ij_now_datum(void);
#define IJ_NOW_DATUM() ij_now_datum()
extern SPIPlanPtr ij_prepared(IjPlan *p);
extern int	ij_exec_id(IjPlan *p, Datum id, int32 route);
extern int32 ij_id_route(Datum id);
extern bool ij_reroute(bool attempt, Datum id, int32 *route);

/* triggers.c: the statement ij_exec() runs does not fire the guards */
extern const char *guard_skip_text;
extern void ij_guards_init(void);
extern bool ij_holds_rows_of(Relation rel, const char *relname);
extern void ij_guards_xact_end(void);

extern void ij_planner_init(void);
extern void ij_connect(void);
extern void ij_finish(void);
extern int	ij_exec(IjPlan *p, Datum *values, const char *nulls);
/* Citus: a node's shards of jobs, attempts, race_log and spent_keys */
#define IJ_SHARD_TABLES 4
/* ... and its copies of the six reference tables */
#define IJ_REF_TABLES 6
typedef struct IjShardGroup
{
	/* qualified: idemjob.jobs_102008; a reference table's NULL: no copy */
	char	   *names[IJ_SHARD_TABLES + IJ_REF_TABLES];
	int32		min;			/* the range of hashed owner_hash values the */
	int32		max;			/* group holds */
} IjShardGroup;
extern int	ij_local_shard_groups(IjShardGroup **groups);
extern bool ij_rows_elsewhere(int32 owner_hash);
extern Oid	ij_local_jobs_shard(int32 owner_hash);
extern Oid	ij_group_relid(const IjShardGroup *g, const char *table);
extern const IjShardGroup *ij_local_copies(void);
extern int	ij_shard_nodes(int32 **hashes);
extern bool ij_maybe_shardless(void);
extern int	ij_exec_on(IjPlan *p, const IjShardGroup *g, Datum *values, const char *nulls);
extern int	ij_exec_latest(IjPlan *p, Datum *values, const char *nulls);
extern int	ij_exec_in_order(IjPlan *p, const IjShardGroup *g, Datum *values, const char *nulls);
extern Datum ij_col(int row, int col, bool *isnull);
extern Datum ij_col_nn(int row, int col);
extern TupleDesc ij_result_tupdesc(FunctionCallInfo fcinfo);
extern void ij_rowtypes_init(void);
/* one relcache callback slot for all of idemjob's caches (spi_plans.c) */
extern void ij_relcache_register(void (*fn) (Datum arg, Oid relid));
extern void ij_rowtypes_xact_end(void);
extern Datum ij_row_datum(int row, FunctionCallInfo fcinfo);
extern Tuplestorestate *ij_result_store(FunctionCallInfo fcinfo, TupleDesc *tupdesc);
extern void ij_return_row(FunctionCallInfo fcinfo, Datum *values, bool *nulls);

/* forward.c: Citus, a call whose rows are on another node runs there */
extern bool ij_forward(FunctionCallInfo fcinfo, int32 owner_hash, Datum *result);
extern int	ij_connect_shard_nodes(int32 **nodes);
extern void ij_append_literal(StringInfo buf, Oid type, Datum value, bool isnull);
extern int	ij_forward_sql_rows(const char *sql);
extern bool ij_on_shard_nodes(FunctionCallInfo fcinfo, const char *call, int limit_arg, int32 *total);
#define IJ_ON_SHARD_NODES(call, limit_arg) \
	do { \
		int32		total_; \
		if (ij_on_shard_nodes(fcinfo, (call), (limit_arg), &total_)) \
			PG_RETURN_INT32(total_); \
	} while (0)
#define IJ_FORWARD(owner_hash) \
	do { \
		Datum		forwarded_; \
		if (ij_forward(fcinfo, (owner_hash), &forwarded_)) \
			return forwarded_; \
	} while (0)

/* argument checks shared by every function (idemjob.c) */
extern void ij_require(FunctionCallInfo fcinfo, int argno, const char *name);
extern text *ij_name_arg(FunctionCallInfo fcinfo, int argno, const char *name,
						 bool nullable);
extern Jsonb *ij_jsonb_arg(FunctionCallInfo fcinfo, int argno, const char *name,
						   bool nullable);
extern void ij_check_payload(Datum jsonb_datum, const char *name);
extern Datum ij_deadline_after(TimestampTz base, Interval *timeout,
								const char *name);
extern Datum ij_time_before(TimestampTz base, Interval *age, const char *name);
extern int64 ij_capped_wait(int64 wait_us);
extern void ij_check_client(void);
extern char *ij_uuid_str(Datum uuid);
extern Datum ij_text_datum(const char *s);
extern bool ij_text_eq(Datum a, text *b);
extern Jsonb *ij_note(const char *code, const char *reason);
extern int	ij_errfields(const char *table, const char *kv);
extern char *ij_iso_utc(TimestampTz ts);
extern int	ij_retry_after(bool has_deadline, TimestampTz deadline);
/* psprintf from a va_list (idemjob.c) */
extern char *ij_vformat(const char *fmt, va_list args) pg_attribute_printf(1, 0);
/* a hash table keyed by a pointer to a string, by the string (idemjob.c) */
extern HTAB *ij_string_ptr_table(const char *name, long nelem, Size entrysize,
								 MemoryContext cxt);

/*
 * The SET list that starts an attempt on a job (start_attempt's two paths
 * and claim): one more attempt, running, touched now.
 */
#define IJ_JOB_STARTS_SET \
	" attempt_count = attempt_count OPERATOR(pg_catalog.+) 1," \
	" state = 'running'::idemjob.job_state, updated_at = pg_catalog.now()"

/* attempts.c: an attempt row locked FOR UPDATE */
typedef struct IjAttempt
{
	Datum		id;
	Datum		job_id;
	char	   *state;			/* attempt_state as text */
	int64		read_version;
	bool		has_sha;		/* a result fingerprint was kept */
	Datum		sha;			/* result_sha256, if has_sha */
	Datum		intent;			/* the job's intent (text), or 0: not read */
	bool		leased;			/* started, with a lease not yet confirmed */
	bool		lease_over;		/* ... and the lease has ended */
	Datum		provider;		/* the attempt's provider (text) */
	int32		route;			/* its owner_hash (and its job's) */
} IjAttempt;

extern void ij_lock_attempt(Datum attempt_id, IjAttempt *a);
extern void ij_lock_attempt_ex(Datum attempt_id, IjAttempt *a, bool with_intent);
extern bool ij_try_lock_attempt(Datum attempt_id, IjAttempt *a, bool with_intent);
extern void ij_attempt_not_found(Datum attempt_id);
extern void ij_release_job(Datum job_id, int32 route);
extern void ij_job_in_doubt(Datum job_id, int32 route);
extern bool ij_in_doubt(const char *attempt_state);
extern bool ij_job_final(const char *job_state);
extern void ij_confirm_lease(IjAttempt *a, bool shift_deadline);
IJ_NORETURN extern void ij_lease_expired(IjAttempt *a);
IJ_NORETURN extern void ij_not_started(IjAttempt *a, const char *verb, const char *hint);

/* routes.c: failover routed by the server */
extern void ij_route_advance(Datum job_id, int32 route, Datum failed_provider);
extern void ij_route_forget(const char *intent, const char *provider);

/* commit.c: the race-log fingerprint of a result (SHA-256, bytes) */
extern bytea *ij_result_fingerprint(Jsonb *result, int32 *nbytes);

/* contracts.c */
extern void ij_contracts_init(void);
extern bool ij_contracts_any(void);
extern Datum ij_contract_intents(void);
extern bool ij_check_result_contract(Datum job_id, Datum intent, int32 route, Jsonb *result,
									 Jsonb **violation);
extern bool ij_provider_certified(const char *intent, const char *provider);

/* retention.c: the request fingerprint kept in spent_keys; submit's check */
extern bytea *ij_request_sha256(text *intent, text *provider, Jsonb *params);
extern void ij_check_spent_key(text *owner_id, text *key, text *intent,
							   text *provider, Jsonb *params, bool before);

/* claim.c, sweeper.c (and the retry policy and notifications, attempts.c) */
extern void ij_sweeper_init(void);
extern int32 ij_expire_attempts(text *owner);
extern void ij_job_retry(Datum job_id, int32 route, Datum provider, Jsonb *error);
extern void ij_notify_due(const char *intent);
extern void ij_notify_done(Datum job_id);

/* validator_*.c: JSON Schema 2020-12 over jsonb, see validator.h */

#endif							/* IDEMJOB_H */
