/*-------------------------------------------------------------------------
 *
 * contracts.c
 *	  Output contracts per intent and certified failover:
 *	  define_contract(), certify_provider(), revoke_provider(), the check
 *	  of a result against its intent's contract, and the certification
 *	  check of a failover attempt.
 *
 * Compiled contracts are cached per backend, keyed by the whole intent
 * text (whatever its length: a row restored or inserted raw may hold a
 * longer intent than the functions accept, and must never share an entry
 * with another intent), with a negative entry for an intent that has
 * none, so that complete_attempt() on the common path costs a hash probe.
 * Each contract is compiled into a memory context of its own
 * (ij_schema_compile); one that fails to compile, or whose compilation is
 * cancelled, gives its memory back before the error leaves, so a contract
 * that no longer compiles costs nothing per call but the error.
 *
 * Any change to idemjob.contracts (through define_contract() or raw DML)
 * fires a statement trigger that sends a relcache invalidation for the
 * table; at commit every backend receives it and marks its cache stale,
 * and the next look-up drops it.  Every check reads the invalidations
 * first, so a transaction open since before the commit sees it too.
 * The callback itself frees nothing: it can run in the middle of a check.
 *
 * A new contract version lapses the certifications made under older ones:
 * a certification counts only at the intent's current version.  The
 * failover check locks the certification and contract rows FOR SHARE, so
 * a concurrent revoke_provider() or define_contract() either waits for the
 * starting attempt's transaction, or commits first and the check, re-run
 * on the committed rows, refuses (IJ004).
 *
 * src/contracts.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "idemjob.h"
#include "validator.h"

PG_FUNCTION_INFO_V1(idemjob_define_contract);
PG_FUNCTION_INFO_V1(idemjob_certify_provider);
PG_FUNCTION_INFO_V1(idemjob_revoke_provider);

/* cached entries are dropped wholesale past this many */
#define CONTRACT_CACHE_MAX	10000

typedef struct ContractEntry
{
	char	   *intent;			/* hash key: the whole intent, in cache_cxt */
	bool		has_contract;
	IjSchema   *schema;
} ContractEntry;

static MemoryContext cache_cxt = NULL;
static int	any_contract = -1;	/* does any intent have one? -1: not known */
static Datum intents_with_contract = (Datum) 0;	/* text[] in cache_cxt */
static HTAB *cache = NULL;
static bool cache_stale = false;
static Oid	contracts_relid = InvalidOid;

static IjPlan get_contract = {
	"SELECT version, output_schema FROM idemjob.contracts"
	" WHERE intent OPERATOR(pg_catalog.=) $1",
	1, {TEXTOID}, NULL, 0, false, NULL, 0
};

/* the intents that have a contract (NULL: none) */
static IjPlan contract_intents = {
	"SELECT pg_catalog.array_agg(intent) FROM idemjob.contracts",
	0, {InvalidOid}, NULL, 0, false, NULL, 0
};

static IjPlan job_intent = {
	"SELECT intent FROM idemjob.jobs WHERE id OPERATOR(pg_catalog.=) $1" IJ_ROUTE_PARAM(2),
	2, {UUIDOID, INT4OID}, NULL, 0, false, NULL, 0
};

static IjPlan lock_contract = {
	"SELECT version, output_schema FROM idemjob.contracts"
	" WHERE intent OPERATOR(pg_catalog.=) $1 FOR UPDATE",
	1, {TEXTOID}, NULL, 0, false, NULL, 0
};

static IjPlan insert_contract = {
	"INSERT INTO idemjob.contracts (intent, version, output_schema)"
	" VALUES ($1, 1, $2) ON CONFLICT (intent) DO NOTHING RETURNING version",
	2, {TEXTOID, JSONBOID}, NULL, 0, false, NULL, 0
};

static IjPlan update_contract = {
	"UPDATE idemjob.contracts SET version = version OPERATOR(pg_catalog.+) 1,"
	" output_schema = $2, updated_at = pg_catalog.now()"
	" WHERE intent OPERATOR(pg_catalog.=) $1 RETURNING version",
	2, {TEXTOID, JSONBOID}, NULL, 0, false, NULL, 0
};

static IjPlan current_version = {
	"SELECT version FROM idemjob.contracts"
	" WHERE intent OPERATOR(pg_catalog.=) $1 FOR SHARE",
	1, {TEXTOID}, NULL, 0, false, NULL, 0
};

/* certify: a new row, or a revoked one certified again; else nothing */
static IjPlan certify_row = {
	"INSERT INTO idemjob.certifications AS c"
	" (intent, provider, contract_version, evidence)"
	" VALUES ($1, $2, $3, $4)"
	" ON CONFLICT (intent, provider, contract_version) DO UPDATE"
	" SET certified_at = $5, evidence = EXCLUDED.evidence,"
	" revoked_at = NULL, revoke_reason = NULL"
	" WHERE c.revoked_at IS NOT NULL"
	" RETURNING *",
	5, {TEXTOID, TEXTOID, INT4OID, JSONBOID, TIMESTAMPTZOID}, NULL, 0, false, NULL, 0
};

static IjPlan certification_row = {
	"SELECT * FROM idemjob.certifications"
	" WHERE intent OPERATOR(pg_catalog.=) $1 AND provider OPERATOR(pg_catalog.=) $2"
	" ORDER BY contract_version DESC LIMIT 1",
	2, {TEXTOID, TEXTOID}, NULL, 0, false, NULL, 0
};

static IjPlan revoke_all = {
	"UPDATE idemjob.certifications SET revoked_at = pg_catalog.now(), revoke_reason = $3"
	" WHERE intent OPERATOR(pg_catalog.=) $1 AND provider OPERATOR(pg_catalog.=) $2"
	" AND revoked_at IS NULL",
	3, {TEXTOID, TEXTOID, TEXTOID}, NULL, 0, false, NULL, 0
};

static IjPlan certified = {
	"SELECT 1 FROM idemjob.certifications c JOIN idemjob.contracts k"
	" ON k.intent OPERATOR(pg_catalog.=) c.intent"
	" AND k.version OPERATOR(pg_catalog.=) c.contract_version"
	" WHERE c.intent OPERATOR(pg_catalog.=) $1 AND c.provider OPERATOR(pg_catalog.=) $2"
	" AND c.revoked_at IS NULL"
	" FOR SHARE OF c, k",
	2, {TEXTOID, TEXTOID}, NULL, 0, false, NULL, 0
};

static void
contracts_inval_callback(Datum arg, Oid relid)
{
	if (relid == InvalidOid || relid == contracts_relid)
		cache_stale = true;
}

void
ij_contracts_init(void)
{
	ij_relcache_register(contracts_inval_callback);
}

static void
cache_reset(void)
{
	Oid			nsp;

	if (cache_cxt != NULL)
		MemoryContextDelete(cache_cxt);
	cache_cxt = AllocSetContextCreate(CacheMemoryContext,
									  "idemjob contract cache",
									  ALLOCSET_DEFAULT_SIZES);
	/* the key is a pointer to the intent, hashed by what it points to */
	cache = ij_string_ptr_table("idemjob contracts", 64,
								sizeof(ContractEntry), cache_cxt);
	cache_stale = false;
	any_contract = -1;
	intents_with_contract = (Datum) 0;

	/* which relation's invalidations concern us (changes with re-install) */
	nsp = get_namespace_oid("idemjob", true);
	contracts_relid = OidIsValid(nsp) ? get_relname_relid("contracts", nsp) : InvalidOid;
}

/*
 * The compiled contract of an intent, from the cache or the table.
 * Must be connected to SPI.
 */
static ContractEntry *
lookup_contract(const char *intent)
{
	ContractEntry *e;
	bool		found;

	for (;;)
	{
		Datum		arg;
		bool		has;
		IjSchema   *schema = NULL;

		if (cache == NULL || cache_stale ||
			hash_get_num_entries(cache) >= CONTRACT_CACHE_MAX)
			cache_reset();

		e = hash_search(cache, &intent, HASH_FIND, NULL);
		if (e != NULL)
			return e;

		arg = ij_text_datum(intent);
		has = ij_exec(&get_contract, &arg, NULL) == 1;
		if (has)
		{
			/* detoasted here, not in the cache: the compiled form copies it */
			Jsonb	   *doc = DatumGetJsonbP(ij_col_nn(0, 2));
			MemoryContext oldcxt = MemoryContextSwitchTo(cache_cxt);

			/* in a context of its own, freed at once if this fails */
			schema = ij_schema_compile(doc);
			MemoryContextSwitchTo(oldcxt);
		}

		/*
		 * The query may have processed an invalidation: then what was just
		 * compiled may be stale, and goes with the cache on the next round.
		 */
		if (cache_stale)
			continue;

		{
			/* the key must live as long as the entry: copy it first */
			char	   *key = MemoryContextStrdup(cache_cxt, intent);

			e = hash_search(cache, &key, HASH_ENTER, &found);
		}
		e->has_contract = has;
		e->schema = schema;
		break;
	}
	return e;
}

/*
 * Has any intent a contract?  Known from the cache (the contracts
 * statement trigger invalidates it), so while none has, complete_attempt
 * reads no intent at all.  Must be connected to SPI.
 */
bool
ij_contracts_any(void)
{
	/*
	 * A transaction that takes no new lock reads no invalidation: a worker
	 * reporting a batch in one transaction would check every result against
	 * the contract it had cached when the batch began.  I6 says the current
	 * contract, so read them now (a look at a shared counter when there are
	 * none).
	 */
	AcceptInvalidationMessages();
	while (any_contract < 0 || cache == NULL || cache_stale)
	{
		Datum		list;
		bool		none;
		MemoryContext oldcxt;

		CHECK_FOR_INTERRUPTS();
		if (cache == NULL || cache_stale)
			cache_reset();
		ij_exec(&contract_intents, NULL, NULL);
		list = ij_col(0, 1, &none);
		if (!cache_stale)
		{
			oldcxt = MemoryContextSwitchTo(cache_cxt);
			intents_with_contract = none ? (Datum) 0 :
				PointerGetDatum(DatumGetArrayTypePCopy(list));
			MemoryContextSwitchTo(oldcxt);
			any_contract = none ? 0 : 1;
		}
	}
	return any_contract != 0;
}

/*
 * The intents that have a contract, as a text[] (empty when none), from
 * the cache.  Must be connected to SPI; valid until the next cache reset.
 */
Datum
ij_contract_intents(void)
{
	static ArrayType *empty = NULL;

	if (ij_contracts_any())
		return intents_with_contract;
	if (empty == NULL)
	{
		MemoryContext oldcxt = MemoryContextSwitchTo(TopMemoryContext);

		empty = construct_empty_array(TEXTOID);
		MemoryContextSwitchTo(oldcxt);
	}
	return PointerGetDatum(empty);
}

/*
 * Check a result against the contract of its job's intent.  True when the
 * intent has no contract or the result honours it; else false, with
 * *violation set to {"path", "keyword", "message"}.  intent: the job's
 * intent if the caller has read it (text), or 0 to read it here (the job's
 * owner_hash: route).  Must be connected to SPI.
 */
bool
ij_check_result_contract(Datum job_id, Datum intent, int32 route, Jsonb *result, Jsonb **violation)
{
	ContractEntry *e;

	*violation = NULL;
	if (!ij_contracts_any())
		return true;

	if (intent == (Datum) 0)
	{
		if (ij_exec_id(&job_intent, job_id, route) == 0)
			elog(ERROR, "job %s vanished", ij_uuid_str(job_id));
		intent = ij_col_nn(0, 1);
	}
	e = lookup_contract(TextDatumGetCString(intent));
	if (!e->has_contract)
		return true;
	*violation = ij_schema_validate(e->schema, result);
	return *violation == NULL;
}

/*
 * Does provider hold an unrevoked certification for intent at the intent's
 * current contract version?  Locks what it found.  Must be connected.
 */
bool
ij_provider_certified(const char *intent, const char *provider)
{
	Datum		args[2];

	args[0] = ij_text_datum(intent);
	args[1] = ij_text_datum(provider);
	return ij_exec(&certified, args, NULL) == 1;
}

/*
 * idemjob.define_contract(intent, output_schema) RETURNS integer
 */
Datum
idemjob_define_contract(PG_FUNCTION_ARGS)
{
	IJ_ENTRY();
	text	   *intent;
	Jsonb	   *schema;
	Datum		args[2];
	int32		version;
	MemoryContext tmp;
	MemoryContext oldcxt;

	ij_require(fcinfo, 0, "intent");
	ij_require(fcinfo, 1, "output_schema");
	intent = ij_name_arg(fcinfo, 0, "intent", false);
	schema = ij_jsonb_arg(fcinfo, 1, "output_schema", false);

	/* refuse a bad schema before anything is written */
	tmp = AllocSetContextCreate(CurrentMemoryContext, "idemjob schema check",
								ALLOCSET_DEFAULT_SIZES);
	oldcxt = MemoryContextSwitchTo(tmp);
	(void) ij_schema_compile(schema);
	MemoryContextSwitchTo(oldcxt);
	MemoryContextDelete(tmp);

	args[0] = PointerGetDatum(intent);
	args[1] = JsonbPGetDatum(schema);

	ij_connect();
	for (;;)
	{
		if (ij_exec(&lock_contract, args, NULL) == 1)
		{
			if (DatumGetBool(DirectFunctionCall2(jsonb_eq, ij_col_nn(0, 2),
												 args[1])))
				version = DatumGetInt32(ij_col_nn(0, 1));	/* I7 */
			else
			{
				ij_exec(&update_contract, args, NULL);
				version = DatumGetInt32(ij_col_nn(0, 1));
				/* every certification lapsed: no job stays routed */
				ij_route_forget(text_to_cstring(intent), NULL);
			}
			break;
		}
		if (ij_exec(&insert_contract, args, NULL) == 1)
		{
			version = DatumGetInt32(ij_col_nn(0, 1));
			break;
		}
		/* a concurrent define_contract() inserted it: lock that row */
	}
	ij_finish();

	PG_RETURN_INT32(version);
}

static void
no_contract(const char *intent)
{
	ereport(ERROR,
			(errcode(ERRCODE_IJ_NOT_FOUND),
			 errmsg("intent \"%s\" has no output contract", intent),
			 ij_errfields("contracts", NULL),
			 errhint("Define one with idemjob.define_contract() first.")));
}

/*
 * idemjob.certify_provider(intent, provider, evidence)
 *		RETURNS idemjob.certifications
 */
Datum
idemjob_certify_provider(PG_FUNCTION_ARGS)
{
	IJ_ENTRY();
	text	   *intent;
	text	   *provider;
	Jsonb	   *evidence;
	Datum		args[5];
	char		nulls[5] = {' ', ' ', ' ', ' ', ' '};
	Datum		result;

	ij_require(fcinfo, 0, "intent");
	ij_require(fcinfo, 1, "provider");
	intent = ij_name_arg(fcinfo, 0, "intent", false);
	provider = ij_name_arg(fcinfo, 1, "provider", false);
	evidence = ij_jsonb_arg(fcinfo, 2, "evidence", true);

	args[0] = PointerGetDatum(intent);
	args[1] = PointerGetDatum(provider);

	ij_connect();
	if (ij_exec(&current_version, args, NULL) == 0)
		no_contract(text_to_cstring(intent));
	args[2] = ij_col_nn(0, 1);
	args[3] = evidence ? JsonbPGetDatum(evidence) : (Datum) 0;
	nulls[3] = evidence ? ' ' : 'n';
	/* now(): Citus refuses a function in DO UPDATE SET */
	args[4] = IJ_NOW_DATUM();

	/* certified already at this version: the row as stored (I7) */
	if (ij_exec(&certify_row, args, nulls) == 0)
		ij_exec(&certification_row, args, NULL);

	result = ij_row_datum(0, fcinfo);
	ij_finish();
	PG_RETURN_DATUM(result);
}

/*
 * idemjob.revoke_provider(intent, provider, reason)
 *		RETURNS idemjob.certifications
 */
Datum
idemjob_revoke_provider(PG_FUNCTION_ARGS)
{
	IJ_ENTRY();
	text	   *intent;
	text	   *provider;
	Datum		args[3];
	Datum		result;

	ij_require(fcinfo, 0, "intent");
	ij_require(fcinfo, 1, "provider");
	ij_require(fcinfo, 2, "reason");
	intent = ij_name_arg(fcinfo, 0, "intent", false);
	provider = ij_name_arg(fcinfo, 1, "provider", false);

	args[0] = PointerGetDatum(intent);
	args[1] = PointerGetDatum(provider);
	args[2] = PG_GETARG_DATUM(2);

	ij_connect();
	if (ij_exec(&current_version, args, NULL) == 0)
		no_contract(text_to_cstring(intent));
	/* every certification still in force, at any version */
	ij_exec(&revoke_all, args, NULL);
	/* jobs routed to the provider go back to their own */
	ij_route_forget(text_to_cstring(intent), text_to_cstring(provider));
	if (ij_exec(&certification_row, args, NULL) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_IJ_NOT_FOUND),
				 errmsg("provider \"%s\" was never certified for intent \"%s\"",
						text_to_cstring(provider), text_to_cstring(intent)),
				 ij_errfields("certifications", NULL)));
	result = ij_row_datum(0, fcinfo);
	ij_finish();
	PG_RETURN_DATUM(result);
}
