/*-------------------------------------------------------------------------
 *
 * rights.c
 *	  Who may call what, with whose rights the functions run, and which
 *	  owner a caller is bound to (the security model of CONTRACT.md).
 *
 * Rights.  The SQL functions are plain C functions (not SECURITY DEFINER):
 * EXECUTE on them is what a capability grants.  Around their table access
 * (ij_connect / ij_finish in spi_plans.c) they switch the current user to
 * the extension's owner, the owner of schema idemjob, with
 * SECURITY_LOCAL_USERID_CHANGE, as PostgreSQL's own RI triggers do; so
 * callers need no privilege on any table.  An error anywhere inside is
 * safe: (sub)transaction abort restores the user the (sub)transaction
 * started with.  The switch costs two function calls, where SECURITY
 * DEFINER with a pinned search_path would cost a GUC nesting level per
 * call.  Every name in the SQL the functions run is qualified, so the
 * caller's search_path and pg_temp never matter.
 *
 * Capabilities.  grant_capability() grants what one capability needs
 * (USAGE on the schema, EXECUTE on its functions, SELECT on the tables and
 * views for operator and admin) and records it in idemjob.capabilities;
 * revoke_capability() takes back only what none of the role's remaining
 * capabilities needs.  Only the extension's owner (and its members) and
 * superusers may call them.
 *
 * Owner binding.  idemjob.owner_binding (superuser only) ties a role's
 * calls to one owner: the role's name, or the value of another setting
 * (as a pooler or an HTTP layer sets per request), or one member of that
 * setting's JSON object.  ij_bound_owner() reads it at call time.
 *
 * src/rights.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/indexing.h"
#include "catalog/namespace.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "commands/trigger.h"
#include "common/jsonapi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "idemjob.h"

PG_FUNCTION_INFO_V1(idemjob_grant_capability);
PG_FUNCTION_INFO_V1(idemjob_revoke_capability);
PG_FUNCTION_INFO_V1(idemjob_owner_visible);
PG_FUNCTION_INFO_V1(idemjob_bind_owner);
PG_FUNCTION_INFO_V1(idemjob_unbind_owner);
PG_FUNCTION_INFO_V1(idemjob_owner_bindings_changed);

char	   *idemjob_owner_binding = NULL;

/*
 * The extension's owner (pg_extension.extowner), looked up once and dropped
 * when schema idemjob changes (its owner included): the lookup also checks
 * that the schema belongs to that role.
 */
static Oid	owner_cache = InvalidOid;

/*
 * One level of ij_switch_user(): the user and security context it switched
 * away from, the subtransaction it was made in, and whether it pinned the
 * search_path (at which GUC nesting level).  A subtransaction abort drops
 * the levels made in that subtransaction and below it, and only those: the
 * levels of an idemjob function still running around it (a DBA's trigger
 * with an EXCEPTION block, fired by one of the function's statements) stay.
 */
#define MAX_SWITCH_DEPTH 64
typedef struct SwitchLevel
{
	Oid			user;
	int			sec;
	SubTransactionId subxact;
	bool		pinned;
	int			guc_level;
} SwitchLevel;
static SwitchLevel levels[MAX_SWITCH_DEPTH];
static int	switch_depth = 0;

/* the SQL objects were found at the library's version (ij_check_version) */
static bool version_checked = false;

static void
owner_inval_callback(Datum arg, int cacheid, uint32 hashvalue)
{
	owner_cache = InvalidOid;
	version_checked = false;
}

static void bindings_inval_callback(Datum arg, Oid relid);

void
ij_rights_init(void)
{
	CacheRegisterSyscacheCallback(NAMESPACEOID, owner_inval_callback, (Datum) 0);
	ij_relcache_register(bindings_inval_callback);
}

/*
 * A (sub)transaction abort restored the user, the security context and the
 * settings of the levels it ends (PostgreSQL does that); forget them.
 * subxact is the aborting subtransaction, or InvalidSubTransactionId for
 * the whole transaction.
 */
void
ij_rights_abort(SubTransactionId subxact)
{
	while (switch_depth > 0 &&
		   (subxact == InvalidSubTransactionId ||
			levels[switch_depth - 1].subxact >= subxact))
		switch_depth--;
}

/* how many ij_switch_user() levels are open */
int
ij_switch_depth(void)
{
	return switch_depth;
}

/*
 * The library works on the objects of its own version only: a library
 * newer than the SQL objects (installed over an older version, or after
 * pg_upgrade) would run its statements against tables and functions that
 * lack what they need, and read arguments an older function does not
 * pass.  55000 naming ALTER EXTENSION idemjob UPDATE; false (no error)
 * while the extension's own scripts call the library as they bring the
 * objects up to date, an answer that is not kept.
 */
static bool
version_matches(Oid ext, const char *version)
{
	if (version != NULL && strcmp(version, IDEMJOB_VERSION) == 0)
		return true;
	if (creating_extension && CurrentExtensionObject == ext)
		return false;
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("extension idemjob is installed at version %s, but its library is version %s",
					version ? version : "?", IDEMJOB_VERSION),
			 errhint("Run ALTER EXTENSION idemjob UPDATE in this database (or install idemjob %s's library).",
					 version ? version : "?")));
	return false;				/* not reached */
}

/* the installed version of extension ext (palloc'd), or NULL */
static char *
extension_version(Oid ext, Oid *extowner)
{
	char	   *version = NULL;
	HeapTuple	tup;
	Relation	rel;
	ScanKeyData key;
	SysScanDesc scan;

	*extowner = InvalidOid;
	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_extension_oid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(ext));
	scan = systable_beginscan(rel, ExtensionOidIndexId, true, NULL, 1, &key);
	tup = systable_getnext(scan);
	if (HeapTupleIsValid(tup))
	{
		bool		isnull;
		Datum		v = heap_getattr(tup, Anum_pg_extension_extversion,
									 RelationGetDescr(rel), &isnull);

		*extowner = ((Form_pg_extension) GETSTRUCT(tup))->extowner;
		if (!isnull)
			version = TextDatumGetCString(v);
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return version;
}

/*
 * First thing in every SQL-callable function: the version check alone,
 * before a single argument is read (an older function passes fewer, or
 * others).  Once per backend while the answer holds.
 */
void
ij_check_version(void)
{
	Oid			ext;
	Oid			extowner;

	if (version_checked)
		return;
	ext = get_extension_oid("idemjob", false);
	if (version_matches(ext, extension_version(ext, &extowner)))
		version_checked = true;
}

Oid
ij_extension_owner(void)
{
	if (!OidIsValid(owner_cache))
	{
		Oid			nsp = get_namespace_oid("idemjob", false);
		Oid			ext = get_extension_oid("idemjob", false);
		Oid			extowner = InvalidOid;
		char	   *version = NULL;
		Oid			nspowner;
		HeapTuple	tup;

		tup = SearchSysCache1(NAMESPACEOID, ObjectIdGetDatum(nsp));
		if (!HeapTupleIsValid(tup))
			elog(ERROR, "cache lookup failed for namespace %u", nsp);
		nspowner = ((Form_pg_namespace) GETSTRUCT(tup))->nspowner;
		ReleaseSysCache(tup);

		version = extension_version(ext, &extowner);
		if (!OidIsValid(extowner))
			elog(ERROR, "could not find extension idemjob");

		if (!version_matches(ext, version))
			return extowner;
		version_checked = true;

		/*
		 * The functions run as the extension's owner; a schema owned by
		 * anyone else (made before CREATE EXTENSION by a role with CREATE on
		 * the database, or given away later) could hold objects that role
		 * planted.
		 */
		if (nspowner != extowner)
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("schema idemjob is owned by role \"%s\", not by the owner of extension idemjob (\"%s\")",
							GetUserNameFromId(nspowner, true),
							GetUserNameFromId(extowner, true)),
					 errhint("A superuser must give the schema back: ALTER SCHEMA idemjob OWNER TO %s.",
							 quote_identifier(GetUserNameFromId(extowner, true)))));
		owner_cache = extowner;
	}
	return owner_cache;
}

/*
 * Switch to the extension's owner; ij_unswitch_user() goes back.
 *
 * The owner's code runs as PostgreSQL runs a table owner's code in its own
 * maintenance commands: a security-restricted operation (no temporary
 * table, no SET ROLE, no LISTEN, nothing left for after it), and, for any
 * code that is not the extension's own, with search_path pinned to
 * pg_catalog and pg_temp last, so that no object or setting of the
 * caller's reaches it.  The extension's own statements name everything
 * with its schema and need no search_path; the only other code that runs
 * inside is a trigger (or a rule's action) a DBA put on the tables, so the
 * executor hook (triggers.c) pins the path, once per level, when a
 * statement inside is about to fire one: a call that fires none pays no
 * GUC nesting level.
 */
void
ij_switch_user(void)
{
	Oid			owner = ij_extension_owner();
	SwitchLevel *l;

	if (switch_depth >= MAX_SWITCH_DEPTH)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("idemjob functions nested too deeply")));
	l = &levels[switch_depth];
	GetUserIdAndSecContext(&l->user, &l->sec);
	l->subxact = GetCurrentSubTransactionId();
	l->pinned = false;
	SetUserIdAndSecContext(owner, l->sec | SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
	switch_depth++;
}

/* pin search_path to pg_catalog, pg_temp until this level ends */
void
ij_pin_search_path(void)
{
	SwitchLevel *l;

	if (switch_depth <= 0)
		return;
	l = &levels[switch_depth - 1];
	if (l->pinned)
		return;
	l->guc_level = NewGUCNestLevel();
	l->pinned = true;
	(void) set_config_option("search_path", "pg_catalog, pg_temp",
							 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE,
							 true, 0, false);
}

void
ij_unswitch_user(void)
{
	SwitchLevel *l;

	if (switch_depth <= 0)
		elog(ERROR, "idemjob: user switch stack is empty");
	switch_depth--;
	l = &levels[switch_depth];
	if (l->pinned)
		AtEOXact_GUC(true, l->guc_level);
	SetUserIdAndSecContext(l->user, l->sec);
}

/* the role that called the outermost idemjob function */
Oid
ij_caller(void)
{
	return switch_depth > 0 ? levels[0].user : GetUserId();
}

/*
 * Owner binding
 */
typedef enum
{
	BIND_OFF,
	BIND_ROLE,
	BIND_SETTING
} BindMode;

/* parse a binding; the setting's name and JSON key are returned in place */
static bool
parse_binding(const char *value, BindMode *mode, char **setting, char **key)
{
	const char *p;
	const char *slash;

	*setting = *key = NULL;
	if (value == NULL || strcmp(value, "off") == 0 || value[0] == '\0')
	{
		*mode = BIND_OFF;
		return true;
	}
	if (strcmp(value, "role") == 0)
	{
		*mode = BIND_ROLE;
		return true;
	}
	if (strncmp(value, "setting:", 8) != 0)
		return false;
	p = value + 8;
	slash = strchr(p, '/');
	if (slash == NULL)
		*setting = pstrdup(p);
	else
	{
		*setting = pnstrdup(p, slash - p);
		*key = pstrdup(slash + 1);
		if ((*key)[0] == '\0')
			return false;
	}
	if ((*setting)[0] == '\0')
		return false;
	*mode = BIND_SETTING;
	return true;
}

bool
ij_check_owner_binding(char **newval, void **extra, GucSource source)
{
	BindMode	mode;
	char	   *setting;
	char	   *key;

	if (!parse_binding(*newval, &mode, &setting, &key))
	{
		GUC_check_errdetail("idemjob.owner_binding must be \"off\", \"role\", \"setting:NAME\" or \"setting:NAME/KEY\".");
		return false;
	}
	return true;
}

/*
 * A JSON object's top-level member, as text, found with PostgreSQL's JSON
 * lexer: a string member's value, or a number's text.  Malformed JSON, no
 * such member, or a member that is not a string or number gives NULL.
 */
static char *
json_member(const char *json, const char *key)
{
	JsonLexContext *lex;
	JsonParseErrorType rc;
	JsonTokenType tok;
	int			depth = 0;
	bool		expect_key = false;
	bool		take = false;
	char	   *result = NULL;

	/*
	 * Malformed JSON binds nobody: the walk below only lexes, so it would
	 * take '{"sub":"alice"' or '{"sub" "alice"}'; PostgreSQL's parser
	 * checks the syntax first (and the stack depth as it recurses).
	 */
	lex = ij_json_lexer(json, strlen(json), false);
	if (pg_parse_json(lex, &nullSemAction) != JSON_SUCCESS)
		return NULL;

	lex = ij_json_lexer(json, strlen(json), true);

	/* a walk over the tokens: a top-level object, its keys at depth 1 */
	for (;;)
	{
		CHECK_FOR_INTERRUPTS();
		rc = json_lex(lex);
		if (rc != JSON_SUCCESS)
			return NULL;
		tok = lex->token_type;
		if (tok == JSON_TOKEN_END)
			break;
		switch (tok)
		{
			case JSON_TOKEN_OBJECT_START:
			case JSON_TOKEN_ARRAY_START:
				if (take)
					return NULL;	/* the member is not a scalar */
				if (depth == 0 && tok != JSON_TOKEN_OBJECT_START)
					return NULL;
				depth++;
				expect_key = (tok == JSON_TOKEN_OBJECT_START && depth == 1);
				break;
			case JSON_TOKEN_OBJECT_END:
			case JSON_TOKEN_ARRAY_END:
				depth--;
				break;
			case JSON_TOKEN_COMMA:
				if (depth == 1)
					expect_key = true;
				break;
			case JSON_TOKEN_COLON:
				break;
			case JSON_TOKEN_STRING:
			case JSON_TOKEN_NUMBER:
			case JSON_TOKEN_TRUE:
			case JSON_TOKEN_FALSE:
			case JSON_TOKEN_NULL:
				if (depth == 1 && expect_key)
				{
					expect_key = false;
					take = (tok == JSON_TOKEN_STRING && lex->strval != NULL &&
							strcmp(lex->strval->data, key) == 0);
					break;
				}
				if (take)
				{
					if (tok == JSON_TOKEN_STRING)
						result = pstrdup(lex->strval->data);
					else if (tok == JSON_TOKEN_NUMBER)
						result = pnstrdup(lex->token_start,
										  lex->token_terminator - lex->token_start);
					else
						return NULL;	/* true, false, null: no owner */
					take = false;
				}
				break;
			default:
				return NULL;
		}
	}
	return result;
}

/*
 * Bindings recorded in idemjob.owner_bindings (since 1.2), read once per
 * backend and again after the table changes (its statement trigger sends a
 * relcache invalidation).  A binding is in force for every call whose
 * current user is the bound role or has its privileges (membership with
 * INHERIT, SET ROLE, SET SESSION AUTHORIZATION, a login), whatever the
 * session's settings: nothing a non-superuser can set loosens it.
 */
typedef struct Binding
{
	Oid			role;
	char	   *mode;
} Binding;

static MemoryContext bindings_cxt = NULL;
static Binding *bindings = NULL;
static int	nbindings = 0;
static bool bindings_valid = false;
static Oid	bindings_relid = InvalidOid;

static uint64 bindings_generation = 0;	/* bumped by every invalidation */

static void
bindings_inval_callback(Datum arg, Oid relid)
{
	if (relid == InvalidOid || relid == bindings_relid)
	{
		bindings_valid = false;
		bindings_generation++;
	}
}

/*
 * Under Citus owner_bindings is a reference table: its rows are in this
 * node's copy, idemjob.owner_bindings_<shard id> (every node Citus knows
 * has one), and the shell table of that name is empty.  The copy, or relid
 * itself where there is none.  Reads pg_dist_shard by a plain scan: this
 * may run where no query can (a parallel worker's filter).
 */
static Oid
local_copy(Oid relid, Oid nsp, const char *relname)
{
	Oid			dist_shard;
	Oid			copy = InvalidOid;
	Relation	rel;
	ScanKeyData key;
	TableScanDesc scan;
	HeapTuple	tup;

	if (!OidIsValid(get_extension_oid("citus", true)))
		return relid;
	dist_shard = get_relname_relid("pg_dist_shard", PG_CATALOG_NAMESPACE);
	if (!OidIsValid(dist_shard))
		return relid;
	rel = table_open(dist_shard, AccessShareLock);
	/* pg_dist_shard: logicalrelid (1), shardid (2) */
	ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(relid));
	scan = table_beginscan_catalog(rel, 1, &key);
	if ((tup = heap_getnext(scan, ForwardScanDirection)) != NULL)
	{
		bool		isnull;
		Datum		shardid = heap_getattr(tup, 2, RelationGetDescr(rel), &isnull);

		if (!isnull)
			copy = get_relname_relid(psprintf("%s_" INT64_FORMAT, relname,
											  DatumGetInt64(shardid)), nsp);
	}
	table_endscan(scan);
	table_close(rel, AccessShareLock);
	return OidIsValid(copy) ? copy : relid;
}

/*
 * Read the table into bindings[].  With the latest snapshot, taken after
 * the table's lock (so after every invalidation sent before it): a binding
 * committed before is seen under any isolation level.  An invalidation
 * that arrives while reading means a change the snapshot may have missed:
 * read again.  bindings_valid is set only once a read is complete, so an
 * error half-way leaves no partial list.
 */
static void
load_bindings(void)
{
	for (;;)
	{
		uint64		generation = bindings_generation;
		Oid			nsp;
		Relation	rel;
		TableScanDesc scan;
		Snapshot	snapshot;
		HeapTuple	tup;
		int			size = 8;

		CHECK_FOR_INTERRUPTS();
		if (bindings_cxt == NULL)
			bindings_cxt = AllocSetContextCreate(CacheMemoryContext,
												 "idemjob owner bindings",
												 ALLOCSET_SMALL_SIZES);
		bindings_valid = false;
		MemoryContextReset(bindings_cxt);
		bindings = NULL;
		nbindings = 0;

		nsp = get_namespace_oid("idemjob", true);
		bindings_relid = OidIsValid(nsp) ? get_relname_relid("owner_bindings", nsp) : InvalidOid;
		if (!OidIsValid(bindings_relid))
		{
			/* objects older than 1.2: the extension's scripts are running */
			bindings_valid = true;
			return;
		}
		/* Citus: this node's copy, whose trigger invalidates bindings_relid */
		bindings_relid = local_copy(bindings_relid, nsp, "owner_bindings");

		rel = table_open(bindings_relid, AccessShareLock);
		/*
		 * The latest snapshot, but in parallel mode (owner_visible() is
		 * PARALLEL SAFE: a view's filter in a parallel scan, in each
		 * worker) the statement's own, which is all a worker may take
		 */
		snapshot = RegisterSnapshot(IsInParallelMode() ? GetActiveSnapshot()
									: GetLatestSnapshot());
		scan = table_beginscan(rel, snapshot, 0, NULL);
		while ((tup = heap_getnext(scan, ForwardScanDirection)) != NULL)
		{
			bool		isnull[2];
			Datum		role = heap_getattr(tup, 1, RelationGetDescr(rel), &isnull[0]);
			Datum		mode = heap_getattr(tup, 2, RelationGetDescr(rel), &isnull[1]);

			CHECK_FOR_INTERRUPTS();
			if (isnull[0] || isnull[1])
				continue;
			if (bindings == NULL || nbindings == size)
			{
				if (bindings != NULL)
					size *= 2;
				bindings = bindings == NULL ?
					MemoryContextAlloc(bindings_cxt, size * sizeof(Binding)) :
					repalloc(bindings, size * sizeof(Binding));
			}
			bindings[nbindings].role = DatumGetObjectId(role);
			bindings[nbindings].mode = MemoryContextStrdup(bindings_cxt,
														   TextDatumGetCString(mode));
			nbindings++;
		}
		table_endscan(scan);
		UnregisterSnapshot(snapshot);
		table_close(rel, AccessShareLock);

		if (generation == bindings_generation)
		{
			bindings_valid = true;
			return;
		}
	}
}

/*
 * The binding in force for role, from the table: its mode, with *bound set
 * to the bound role; NULL when none.  Two bindings that would give
 * different owners are 42501: a role is never bound two ways.
 */
static const char *
table_binding(Oid role, Oid *bound)
{
	const char *mode = NULL;
	int			i;

	/* a binding committed while this transaction is open counts at once */
	AcceptInvalidationMessages();
	if (!bindings_valid)
		load_bindings();
	if (nbindings == 0 || superuser_arg(role))
		return NULL;
	for (i = 0; i < nbindings; i++)
	{
		CHECK_FOR_INTERRUPTS();
		if (bindings[i].role != role && !has_privs_of_role(role, bindings[i].role))
			continue;
		if (mode != NULL &&
			(strcmp(mode, bindings[i].mode) != 0 ||
			 (strcmp(mode, "role") == 0 && *bound != bindings[i].role)))
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("role \"%s\" is bound to owners in two ways",
							GetUserNameFromId(role, true)),
					 errdetail("It has the privileges of role \"%s\" (bound as \"%s\") and of role \"%s\" (bound as \"%s\").",
							   GetUserNameFromId(*bound, true), mode,
							   GetUserNameFromId(bindings[i].role, true), bindings[i].mode),
					 errhint("Unbind one of them with idemjob.unbind_owner().")));
		mode = bindings[i].mode;
		*bound = bindings[i].role;
	}
	return mode;
}

/*
 * The owner the caller is bound to, or NULL when it is bound to none: by
 * idemjob.owner_bindings (bind_owner), or else by the setting
 * idemjob.owner_binding (1.1's way, kept: it can only add a binding, and
 * one that differs from the table's is 42501).  A binding whose value is
 * missing or empty is 42501: a bound role never acts for nobody, or for
 * everybody.
 */
text *
ij_bound_owner(void)
{
	BindMode	mode;
	char	   *setting;
	char	   *key;
	const char *value;
	const char *binding;
	Oid			caller = ij_caller();
	Oid			bound = caller;

	binding = table_binding(caller, &bound);
	if (binding == NULL)
		binding = idemjob_owner_binding;
	else if (idemjob_owner_binding != NULL &&
			 strcmp(idemjob_owner_binding, "off") != 0 &&
			 strcmp(idemjob_owner_binding, binding) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("idemjob.owner_binding \"%s\" differs from the binding of role \"%s\" (\"%s\")",
						idemjob_owner_binding, GetUserNameFromId(bound, true), binding),
				 errhint("The setting can only add a binding; bindings are made with idemjob.bind_owner().")));

	if (!parse_binding(binding, &mode, &setting, &key))
		elog(ERROR, "invalid owner binding \"%s\"", binding);
	switch (mode)
	{
		case BIND_OFF:
			return NULL;
		case BIND_ROLE:
			return cstring_to_text(GetUserNameFromId(bound, false));
		case BIND_SETTING:
			break;
	}

	value = GetConfigOption(setting, true, false);
	if (value != NULL && value[0] != '\0' && key != NULL)
		value = json_member(value, key);
	if (value == NULL || value[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("no owner is bound to this session"),
				 errdetail("The owner binding is \"%s\", and %s%s%s is %s.",
						   binding,
						   key ? "member \"" : "", key ? key : "",
						   key ? psprintf("\" of setting \"%s\"", setting) :
						   psprintf("setting \"%s\"", setting),
						   value == NULL ? "not set" : "empty"),
				 errhint("Set the owner for this request before calling idemjob.")));
	if (strlen(value) > IDEMJOB_MAX_NAME_BYTES)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("the owner bound to this session is too long"),
				 errdetail("It is %zu bytes long; the limit is %d bytes.",
						   strlen(value), IDEMJOB_MAX_NAME_BYTES)));
	return cstring_to_text(value);
}

/*
 * submit() for owner_id: 42501 unless the binding allows it.
 */
void
ij_check_submit_owner(text *owner_id)
{
	text	   *bound = ij_bound_owner();

	if (bound != NULL && !ij_text_eq(PointerGetDatum(owner_id), bound))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to submit for owner \"%s\"",
						text_to_cstring(owner_id)),
				 errdetail("This session is bound to owner \"%s\" (idemjob.owner_binding).",
						   text_to_cstring(bound))));
}

/*
 * May the caller see a row of owner_id?  With no binding, always.
 */
bool
ij_owner_visible(Datum owner_id)
{
	text	   *bound = ij_bound_owner();

	return bound == NULL || ij_text_eq(owner_id, bound);
}

/*
 * idemjob.owner_visible(owner_id): the views' row filter.
 */
Datum
idemjob_owner_visible(PG_FUNCTION_ARGS)
{
	IJ_ENTRY();
	PG_RETURN_BOOL(ij_owner_visible(PG_GETARG_DATUM(0)));
}

/*
 * Capabilities
 */
typedef enum
{
	CAP_CLIENT = 1 << 0,
	CAP_WORKER = 1 << 1,
	CAP_OPERATOR = 1 << 2,
	CAP_ADMIN = 1 << 3,
	CAP_MONITOR = 1 << 4		/* since 1.2: reads the views, nothing else */
} Capability;

/* each capability includes the ones below it; operator includes monitor */
#define TO_CLIENT	(CAP_CLIENT | CAP_OPERATOR | CAP_ADMIN)
#define TO_WORKER	(CAP_WORKER | CAP_OPERATOR | CAP_ADMIN)
#define TO_BOTH		(CAP_CLIENT | CAP_WORKER | CAP_OPERATOR | CAP_ADMIN)
#define TO_MONITOR	(CAP_MONITOR | CAP_OPERATOR | CAP_ADMIN)
#define TO_OPERATOR	(CAP_OPERATOR | CAP_ADMIN)
#define TO_ADMIN	(CAP_ADMIN)

typedef struct
{
	const char *privilege;		/* what GRANT/REVOKE take */
	int			capabilities;	/* the capabilities that need it */
} CapabilityGrant;

static const CapabilityGrant grants[] = {
	{"USAGE ON SCHEMA idemjob", TO_BOTH | CAP_MONITOR},
	{"EXECUTE ON FUNCTION idemjob.validate(pg_catalog.jsonb, pg_catalog.jsonb)", TO_BOTH},
	{"EXECUTE ON FUNCTION idemjob.job(pg_catalog.uuid)", TO_BOTH},
	{"EXECUTE ON FUNCTION idemjob.submit(pg_catalog.text, pg_catalog.text, pg_catalog.text, pg_catalog.jsonb, pg_catalog.text, pg_catalog.timestamptz, pg_catalog.int4, pg_catalog.int4)", TO_CLIENT},
	{"EXECUTE ON FUNCTION idemjob.await_job(pg_catalog.uuid, pg_catalog.interval)", TO_CLIENT},
	{"EXECUTE ON FUNCTION idemjob.cancel_job(pg_catalog.uuid, pg_catalog.text)", TO_CLIENT},
	{"EXECUTE ON FUNCTION idemjob.claim(pg_catalog.text, pg_catalog.text[], pg_catalog.int4, pg_catalog.interval, pg_catalog.interval, pg_catalog.bool)", TO_WORKER},
	{"EXECUTE ON FUNCTION idemjob.claim_on(idemjob.owner_hash, pg_catalog.text, pg_catalog.text[], pg_catalog.int4, pg_catalog.interval, pg_catalog.interval, pg_catalog.bool)", TO_WORKER},
	{"EXECUTE ON FUNCTION idemjob.on_node(idemjob.owner_hash, pg_catalog.text, pg_catalog.text[])", TO_WORKER},
	{"EXECUTE ON FUNCTION idemjob.begin_attempt(pg_catalog.uuid)", TO_WORKER},
	{"EXECUTE ON FUNCTION idemjob.abandon_attempts(pg_catalog.text)", TO_WORKER},
	{"EXECUTE ON FUNCTION idemjob.start_attempt(pg_catalog.uuid, pg_catalog.text, pg_catalog.interval, pg_catalog.text)", TO_WORKER},
	{"EXECUTE ON FUNCTION idemjob.heartbeat(pg_catalog.uuid, pg_catalog.interval)", TO_WORKER},
	{"EXECUTE ON FUNCTION idemjob.complete_attempt(pg_catalog.uuid, pg_catalog.jsonb)", TO_WORKER},
	{"EXECUTE ON FUNCTION idemjob.fail_attempt(pg_catalog.uuid, pg_catalog.jsonb, pg_catalog.bool)", TO_WORKER},
	{"EXECUTE ON FUNCTION idemjob.mark_unknown(pg_catalog.uuid, pg_catalog.text)", TO_WORKER},
	{"EXECUTE ON FUNCTION idemjob.cancel_attempt(pg_catalog.uuid, pg_catalog.text, pg_catalog.bool)", TO_OPERATOR},
	{"EXECUTE ON FUNCTION idemjob.expire_attempts()", TO_OPERATOR},
	{"EXECUTE ON FUNCTION idemjob.purge(pg_catalog.interval, pg_catalog.int4)", TO_OPERATOR},
	{"EXECUTE ON FUNCTION idemjob.purge_race_log(pg_catalog.interval)", TO_OPERATOR},
	/* the views call owner_visible() with their reader's rights */
	{"EXECUTE ON FUNCTION idemjob.owner_visible(pg_catalog.text)", TO_MONITOR},
	{"EXECUTE ON FUNCTION idemjob.provider_stats(pg_catalog.interval)", TO_MONITOR},
	{"SELECT ON TABLE idemjob.jobs, idemjob.attempts, idemjob.race_log, idemjob.contracts, idemjob.certifications, idemjob.spent_keys, idemjob.capabilities, idemjob.owner_bindings, idemjob.retry_policies, idemjob.routes", TO_OPERATOR},
	/* the views a monitor reads; compensations (keys, payloads) is the operator's only */
	{"SELECT ON TABLE idemjob.in_doubt, idemjob.queue_stats, idemjob.provider_stats, idemjob.retention_stats", TO_MONITOR},
	{"SELECT ON TABLE idemjob.compensations", TO_OPERATOR},
	{"EXECUTE ON FUNCTION idemjob.define_contract(pg_catalog.text, pg_catalog.jsonb)", TO_ADMIN},
	{"EXECUTE ON FUNCTION idemjob.certify_provider(pg_catalog.text, pg_catalog.text, pg_catalog.jsonb)", TO_ADMIN},
	{"EXECUTE ON FUNCTION idemjob.revoke_provider(pg_catalog.text, pg_catalog.text, pg_catalog.text)", TO_ADMIN},
	{"EXECUTE ON FUNCTION idemjob.set_retry_policy(pg_catalog.text, pg_catalog.int4, pg_catalog.interval, pg_catalog.interval, pg_catalog.interval)", TO_ADMIN},
	{"EXECUTE ON FUNCTION idemjob.set_route(pg_catalog.text, pg_catalog.text[])", TO_ADMIN},
};

static const struct
{
	const char *name;
	Capability	cap;
}			capability_names[] = {
	{"client", CAP_CLIENT},
	{"worker", CAP_WORKER},
	{"operator", CAP_OPERATOR},
	{"admin", CAP_ADMIN},
	{"monitor", CAP_MONITOR},
};

static IjPlan record_capability = {
	"INSERT INTO idemjob.capabilities (grantee, capability) VALUES ($1, $2)"
	" ON CONFLICT (grantee, capability) DO NOTHING",
	2, {REGROLEOID, TEXTOID}, NULL, 0, false, NULL, 0
};

static IjPlan forget_capability = {
	"DELETE FROM idemjob.capabilities"
	" WHERE grantee OPERATOR(pg_catalog.=) $1"
	" AND capability OPERATOR(pg_catalog.=) $2",
	2, {REGROLEOID, TEXTOID}, NULL, 0, false, NULL, 0
};

static IjPlan held_capabilities = {
	"SELECT capability FROM idemjob.capabilities"
	" WHERE grantee OPERATOR(pg_catalog.=) $1",
	1, {REGROLEOID}, NULL, 0, false, NULL, 0
};

/* 42501 unless the caller is a superuser or has the extension owner's privileges */
static void
require_owner(const char *what, Oid caller)
{
	if (!superuser_arg(caller) && !has_privs_of_role(caller, ij_extension_owner()))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to %s", what),
				 errdetail("Only the owner of extension idemjob and superusers can.")));
}

/* arguments of grant_capability and revoke_capability, checked */
static Capability
capability_args(FunctionCallInfo fcinfo, Oid *role)
{
	char	   *name;
	Oid			caller = GetUserId();
	int			i;

	ij_require(fcinfo, 0, "role");
	ij_require(fcinfo, 1, "capability");
	*role = PG_GETARG_OID(0);
	name = text_to_cstring(PG_GETARG_TEXT_PP(1));

	for (i = 0; i < (int) lengthof(capability_names); i++)
		if (strcmp(name, capability_names[i].name) == 0)
			break;
	if (i == (int) lengthof(capability_names))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown capability \"%s\"", name),
				 errhint("The capabilities are client, worker, operator, admin and monitor.")));

	require_owner("change idemjob capabilities", caller);
	if (!OidIsValid(*role))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a capability is granted to a role, not to PUBLIC")));
	return capability_names[i].cap;
}

static void
run_acl(const char *verb, const char *privilege, const char *prep, Oid role)
{
	char	   *sql = psprintf("%s %s %s %s", verb, privilege, prep,
							   quote_identifier(GetUserNameFromId(role, false)));

	if (SPI_execute(sql, false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "SPI_execute failed: %s", sql);
}


/*
 * The server log's line for a change of rights (grant_capability,
 * revoke_capability, bind_owner, unbind_owner): who, what, to whom.  At
 * LOG, whatever the caller's client_min_messages.
 */
static void
log_right(const char *verb, Datum what, const char *prep, Oid role)
{
	char	   *w = what ? TextDatumGetCString(what) : NULL;

	ereport(LOG,
			(errmsg("idemjob: role \"%s\" %s%s%s%s %s role \"%s\"",
					GetUserNameFromId(ij_caller(), true), verb,
					w ? " \"" : "", w ? w : "", w ? "\"" : "",
					prep, GetUserNameFromId(role, true)),
			 errhidestmt(true)));
}

/*
 * idemjob.grant_capability(role, capability) RETURNS void
 */
Datum
idemjob_grant_capability(PG_FUNCTION_ARGS)
{
	IJ_ENTRY();
	Oid			role;
	Capability	cap = capability_args(fcinfo, &role);
	Datum		args[2];
	int			i;

	ij_connect();

	/*
	 * Called by the extension's own update script (which takes every right
	 * back, then grants each recorded capability again), a GRANT would be
	 * recorded as one of the extension's initial privileges: pg_dump would
	 * not write it, and a restore would leave the role without its rights.
	 * A capability is the DBA's grant, wherever it is made.
	 */
	{
		bool		save = creating_extension;

		creating_extension = false;
		PG_TRY();
		{
			for (i = 0; i < (int) lengthof(grants); i++)
				if (grants[i].capabilities & cap)
					run_acl("GRANT", grants[i].privilege, "TO", role);
		}
		PG_FINALLY();
		{
			creating_extension = save;
		}
		PG_END_TRY();
	}
	args[0] = ObjectIdGetDatum(role);
	args[1] = PG_GETARG_DATUM(1);
	ij_exec(&record_capability, args, NULL);
	ij_finish();
	/* not the update script's grants again of what was recorded */
	if (!creating_extension)
		log_right("granted capability", PG_GETARG_DATUM(1), "to", role);
	PG_RETURN_VOID();
}

/*
 * idemjob.revoke_capability(role, capability) RETURNS void
 *
 * Takes back what this capability gave and none of the role's other
 * capabilities (as recorded by grant_capability) needs.
 */
Datum
idemjob_revoke_capability(PG_FUNCTION_ARGS)
{
	IJ_ENTRY();
	Oid			role;
	Capability	cap = capability_args(fcinfo, &role);
	int			keep = 0;
	Datum		args[2];
	int			i,
				j,
				n;

	ij_connect();
	args[0] = ObjectIdGetDatum(role);
	args[1] = PG_GETARG_DATUM(1);
	ij_exec(&forget_capability, args, NULL);
	n = ij_exec(&held_capabilities, args, NULL);
	for (i = 0; i < n; i++)
	{
		char	   *held = TextDatumGetCString(ij_col_nn(i, 1));

		for (j = 0; j < (int) lengthof(capability_names); j++)
			if (strcmp(held, capability_names[j].name) == 0)
				keep |= capability_names[j].cap;
	}
	for (i = 0; i < (int) lengthof(grants); i++)
		if ((grants[i].capabilities & cap) && !(grants[i].capabilities & keep))
			run_acl("REVOKE", grants[i].privilege, "FROM", role);
	ij_finish();
	log_right("revoked capability", PG_GETARG_DATUM(1), "from", role);
	PG_RETURN_VOID();
}

/*
 * Owner bindings (since 1.2)
 */
static IjPlan record_binding = {
	"INSERT INTO idemjob.owner_bindings AS b (bound_role, mode) VALUES ($1, $2)"
	" ON CONFLICT (bound_role) DO UPDATE SET mode = EXCLUDED.mode,"
	" bound_at = $3"
	" WHERE b.mode OPERATOR(pg_catalog.<>) EXCLUDED.mode",
	3, {REGROLEOID, TEXTOID, TIMESTAMPTZOID}, NULL, 0, false, NULL, 0
};

static IjPlan forget_binding = {
	"DELETE FROM idemjob.owner_bindings WHERE bound_role OPERATOR(pg_catalog.=) $1",
	1, {REGROLEOID}, NULL, 0, false, NULL, 0
};

static Oid
binding_role_arg(FunctionCallInfo fcinfo)
{
	Oid			role;

	ij_require(fcinfo, 0, "role");
	role = PG_GETARG_OID(0);
	require_owner("change idemjob owner bindings", GetUserId());
	if (!OidIsValid(role))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("an owner binding is made for a role, not for PUBLIC")));
	if (superuser_arg(role))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("role \"%s\" is a superuser, which no binding holds",
						GetUserNameFromId(role, false))));
	return role;
}

/*
 * idemjob.bind_owner(role regrole, mode text) RETURNS void
 *
 * Binds role, and every role with its privileges, to one owner: mode is
 * 'role' (the owner is the bound role's name), 'setting:NAME' or
 * 'setting:NAME/KEY'.  Binding a role again replaces its mode.
 */
Datum
idemjob_bind_owner(PG_FUNCTION_ARGS)
{
	IJ_ENTRY();
	Oid			role = binding_role_arg(fcinfo);
	char	   *mode;
	BindMode	m;
	char	   *setting;
	char	   *key;
	Datum		args[3];

	ij_require(fcinfo, 1, "mode");
	mode = text_to_cstring(PG_GETARG_TEXT_PP(1));
	if (!parse_binding(mode, &m, &setting, &key) || m == BIND_OFF ||
		strlen(mode) > IDEMJOB_MAX_NAME_BYTES)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid owner binding \"%s\"", mode),
				 errhint("A binding is \"role\", \"setting:NAME\" or \"setting:NAME/KEY\"; unbind_owner() removes one.")));
	ij_connect();
	args[0] = ObjectIdGetDatum(role);
	args[1] = PG_GETARG_DATUM(1);
	args[2] = IJ_NOW_DATUM();	/* Citus refuses now() in DO UPDATE SET */
	ij_exec(&record_binding, args, NULL);
	ij_finish();
	log_right("bound owner binding", PG_GETARG_DATUM(1), "to", role);
	PG_RETURN_VOID();
}

/*
 * idemjob.unbind_owner(role regrole) RETURNS boolean: whether it was bound
 */
Datum
idemjob_unbind_owner(PG_FUNCTION_ARGS)
{
	IJ_ENTRY();
	Oid			role;
	Datum		arg;
	int			n;

	ij_require(fcinfo, 0, "role");
	role = PG_GETARG_OID(0);
	require_owner("change idemjob owner bindings", GetUserId());
	arg = ObjectIdGetDatum(role);
	ij_connect();
	n = ij_exec(&forget_binding, &arg, NULL);
	ij_finish();
	if (n > 0)
		log_right("removed the owner binding", (Datum) 0, "of", role);
	PG_RETURN_BOOL(n > 0);
}

/*
 * Statement trigger on idemjob.owner_bindings: every backend reads the
 * bindings again after a change commits.
 */
Datum
idemjob_owner_bindings_changed(PG_FUNCTION_ARGS)
{
	TriggerData *td = (TriggerData *) fcinfo->context;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_TRIGGERED_ACTION_EXCEPTION),
				 errmsg("idemjob.owner_bindings_changed() is a trigger function")));
	if (TRIGGER_FIRED_FOR_ROW(td->tg_event) || !TRIGGER_FIRED_AFTER(td->tg_event) ||
		!ij_holds_rows_of(td->tg_relation, "owner_bindings"))
		ereport(ERROR,
				(errcode(ERRCODE_TRIGGERED_ACTION_EXCEPTION),
				 errmsg("idemjob.owner_bindings_changed() fires only AFTER ... FOR EACH STATEMENT on idemjob.owner_bindings")));
	CacheInvalidateRelcacheByRelid(RelationGetRelid(td->tg_relation));
	return PointerGetDatum(NULL);
}
