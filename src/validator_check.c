/*-------------------------------------------------------------------------
 *
 * validator_check.c
 *	  Output contracts: a JSON Schema (draft 2020-12) subset, compiled once
 *	  into a tree of C structs and checked against jsonb values natively.
 *
 * Compilation (ij_schema_compile) walks the schema jsonb once with
 * PostgreSQL's jsonb iterator and builds one IjNode per subschema: keyword
 * limits as plain integers or pointers to the schema's own numerics,
 * property maps as sorted arrays searched by binary search, regular
 * expressions compiled with PostgreSQL's regex engine (pg_regcomp), child
 * subschemas as pointers.  Every keyword outside the supported set is
 * refused, never ignored, so a contract means what it says.  The schema
 * jsonb itself is copied once into the compiled form's memory context and
 * every string, number, enum or const value points into that copy, so the
 * caller may free its own schema datum.
 *
 * Local references ("#" and "#/..." JSON Pointers, percent-decoded, with
 * ~0 and ~1) are resolved at compile time, after the whole tree is built:
 * a pointer is first followed through the compiled tree (so "#/$defs/a"
 * and "#/properties/x/items" land on the very node already compiled), and
 * only a pointer into a place that is not a compiled subschema position
 * (say, inside "contentSchema") is followed through the raw document and
 * compiled there, once per location.  A reference cycle therefore never
 * loops at compile time.  A cycle that would loop at validation time, one
 * that goes round through in-place applicators only ($ref, allOf, anyOf,
 * oneOf, not, if/then/else, dependentSchemas) without moving into the
 * value, is refused with a depth-first search; every other recursion at
 * validation time consumes one level of the value, so it is bounded by
 * the value's depth.  All recursive functions call check_stack_depth(), so
 * a 10,000-level value or schema gives an answer or a clean error.
 *
 * Bounded work.  A schema whose evaluation could multiply is refused
 * (22023): counting, with every $ref expanded, the subschema evaluations
 * one value can trigger (ij_check_expansion), no subschema may exceed 10 per
 * subschema the schema compiles to, nor less than 100,000; a $defs chain
 * where each link names the next twice is refused at its 16th link.  And
 * validation never decides the same subschema for the same value twice: a
 * subschema reached by more than one edge (two $refs to one definition, a
 * recursion back to the root) goes through a per-validation memo keyed by
 * (subschema, position in the value).  So even a recursion through the
 * value that doubles per level, which no static count catches, costs at
 * most a small multiple of subschemas times values.  Every loop and every
 * recursion, at compile and validation time, checks for interrupts, and so
 * do the sorts (an interruptible sort_template) and the pieces of work
 * that could otherwise run long in one go (multipleOf on long numbers is
 * taken in steps); a cancel or statement_timeout raises 57014 wherever it
 * lands, in the regex engine too (REG_CANCEL is never reported as a bad
 * pattern or a failed match).  A schema that fails to compile, or whose
 * compilation is cancelled, frees everything at once: it is compiled in a
 * memory context of its own, deleted on error.
 *
 * Validation (ij_schema_validate) never looks at the schema jsonb again:
 * it walks the value's containers (JsonbIteratorNext with skipNested,
 * getKeyJsonValueFromContainer for required and dependent properties),
 * compares numbers with numeric_cmp, checks multipleOf with numeric_mod,
 * counts string length in characters, and decides JSON equality (enum,
 * const, uniqueItems) with numeric comparison for scalars and
 * compareJsonbContainers for arrays and objects, under which 1 and 1.0 are
 * equal.  uniqueItems hashes every item once (a hash under which equal
 * values collide: numbers by value; a container from its members' hashes,
 * kept for containers of containers so that nested levels are not hashed
 * again), sorts by hash and compares only equal hashes in full; it reports
 * the first item that repeats an earlier one.  Simple patterns (anchors,
 * ASCII literals and classes, ".", \d \w \s, greedy quantifiers; see
 * IjFastRe) run as a bit-parallel NFA over the string, without the regex
 * engine and with the same answers.  Validation stops at the first
 * violation found, in a fixed keyword order and in the value's own (jsonb)
 * member order, so the violation reported for a given schema and value is
 * always the same.  Subschemas
 * that only decide (anyOf, oneOf, not, if, contains) run "quiet": a failure
 * there builds no message.  Everything validation allocates lives in a
 * short-lived memory context deleted before returning; only the violation
 * object is allocated in the caller's context.
 *
 * Regular expressions compiled by pg_regcomp hold memory the memory context
 * machinery does not own (before PostgreSQL 16 it is malloc'd), so a reset
 * callback on the compiled form's context frees them when the caller drops
 * its cache.  Patterns use PostgreSQL's advanced regular expression syntax
 * under the C collation, an unanchored search as in ECMA-262; the common
 * ECMA-262 constructs (classes, \d, \w, \s, quantifiers, anchors, groups)
 * mean the same there.
 *
 * Nothing here touches shared state: a compiled schema belongs to one
 * backend, and validation is read-only on it.
 *
 * src/validator_check.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/detoast.h"
#include "catalog/pg_collation.h"
#include "common/hashfn.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "regex/regex.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/hsearch.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/numeric.h"

#include "idemjob.h"
#include "validator.h"

/* instance types, also the bits of the "type" keyword */
#define IJ_T_NULL		0x01
#define IJ_T_BOOLEAN	0x02
#define IJ_T_OBJECT		0x04
#define IJ_T_ARRAY		0x08
#define IJ_T_NUMBER		0x10
#define IJ_T_STRING		0x20
#define IJ_T_INTEGER	0x40	/* "type" only: a number with no fraction */

/* limits above this are as good as none (no jsonb gets near it) */
#define IJ_COUNT_CLAMP	INT64CONST(1000000000000000)

/* property names quoted in messages are clipped to this many bytes */
#define IJ_MSG_NAME_MAX 64

typedef enum IjKind
{
	IJ_TRUE,					/* boolean schema true */
	IJ_FALSE,					/* boolean schema false */
	IJ_OBJECT					/* a schema object */
} IjKind;

typedef struct IjNode IjNode;

/* a member name (not NUL-terminated, it points into the schema copy) */
typedef struct IjNamed
{
	const char *name;
	int			len;
	IjNode	   *schema;			/* for maps of schemas, else NULL */
} IjNamed;

/*
 * A pattern simple enough to match without the regex engine: an optional
 * "^", a sequence of single-character atoms (ASCII literals, escaped
 * punctuation, ".", \d, \w, \s, or a bracket expression of those and
 * ASCII ranges, not negated), each with an optional greedy quantifier (?,
 * *, +, {n}, {n,}, {n,m}), and an optional "$".  Expanded to at most
 * IJ_FAST_MAX atoms that match exactly once, at most once or any number of
 * times, it runs as a bit-parallel NFA over the string's characters: linear
 * in the string, no allocation, and the same answer as the engine (which
 * still compiles every pattern, so errors stay the same).
 */
#define IJ_FAST_MAX		63

typedef struct IjFastRe
{
	int			natoms;
	bool		bol;			/* anchored at the start */
	bool		eol;			/* anchored at the end */
	uint64		eps[IJ_FAST_MAX + 1];	/* state i and what it skips to */
	uint64		target[IJ_FAST_MAX];	/* states after atom i matched */
	uint64		ascii[128];		/* atoms that match this ASCII character */
	uint64		other;			/* atoms that match any other character */
} IjFastRe;

typedef struct IjRegex
{
	regex_t		re;
	IjFastRe   *fast;			/* NULL: use the regex engine */
	char	   *src;			/* NUL-terminated, for messages */
	IjNode	   *schema;			/* patternProperties: the subschema */
} IjRegex;

typedef struct IjDepReq
{
	const char *name;
	int			len;
	int			nreq;
	IjNamed    *req;
} IjDepReq;

struct IjNode
{
	IjKind		kind;
	bool		trivial;		/* accepts every value without looking */
	bool		pure_ref;		/* nothing but a $ref (and annotations) */

	/* where the node sits in the schema document, for error messages */
	IjNode	   *parent;
	const char *kw;				/* keyword under the parent */
	const char *key;			/* member under kw, or NULL */
	int			keylen;
	int			index;			/* element under kw, or -1 */
	char	   *lazy_path;		/* compiled for a $ref: its pointer */

	/* any type */
	uint8		types;			/* IJ_T_* bits, 0 if no "type" */
	bool		has_enum;
	bool		has_const;
	int			nenum;
	JsonbValue *enumvals;
	JsonbValue	constval;

	/* numbers (NULL: absent); they point into the schema copy */
	Numeric		minimum;
	Numeric		maximum;
	Numeric		exclusiveMinimum;
	Numeric		exclusiveMaximum;
	Numeric		multipleOf;

	/* strings (max < 0: absent) */
	int64		minLength;
	int64		maxLength;
	IjRegex    *pattern;

	/* arrays */
	int64		minItems;
	int64		maxItems;
	bool		uniqueItems;
	int			nprefix;
	IjNode	  **prefixItems;
	IjNode	   *items;
	IjNode	   *contains;
	int64		minContains;
	int64		maxContains;

	/* objects */
	int64		minProperties;
	int64		maxProperties;
	int			nprops;
	IjNamed    *props;			/* sorted like jsonb keys */
	int			npatterns;
	IjRegex    *patterns;
	IjNode	   *additionalProperties;
	IjNode	   *propertyNames;
	int			nrequired;
	IjNamed    *required;
	int			ndepreq;
	IjDepReq   *depreq;
	int			ndepschemas;
	IjNamed    *depschemas;
	int			ndefs;
	IjNamed    *defs;

	/* in-place applicators */
	const char *ref;			/* the $ref string, not NUL-terminated */
	int			reflen;
	IjNode	   *reftarget;
	int			nallOf;
	IjNode	  **allOf;
	int			nanyOf;
	IjNode	  **anyOf;
	int			noneOf;
	IjNode	  **oneOf;
	IjNode	   *not;
	IjNode	   *if_;
	IjNode	   *then_;
	IjNode	   *else_;

	/* compile-time cycle search */
	uint8		dfs;

	/* compile-time expansion bound (ij_expansion) */
	uint8		xmark;			/* for xall */
	uint8		xdmark;			/* for xdown */
	int64		xin;			/* evaluations at one value, $refs expanded */
	int64		xdown;			/* ... at one member, item or name of it */
	int64		xall;			/* ... at any one value, this one or below */

	/* evaluation edges into the node (after ij_collapse), for memo */
	int			indegree;
	bool		reached;
	bool		memo;			/* validate through the memo table */
};

#define IJ_DFS_NEW		0
#define IJ_DFS_ACTIVE	1
#define IJ_DFS_DONE		2

/*
 * The expansion bound.  Counting each subschema evaluation that one value
 * can trigger, $refs expanded (as if nothing were memoized), no subschema
 * may exceed IJ_EXPAND_PER_NODE times the number of subschemas the schema
 * compiles to, and never less than IJ_EXPAND_MIN.
 */
#define IJ_EXPAND_MIN		INT64CONST(100000)
#define IJ_EXPAND_PER_NODE	10

/* a list of the regular expressions to free with the compiled form */
typedef struct IjRegexCell
{
	regex_t    *re;
	struct IjRegexCell *next;
} IjRegexCell;

struct IjSchema
{
	MemoryContext cxt;			/* everything below lives here */
	Jsonb	   *doc;			/* private copy of the schema */
	IjNode	   *root;
	IjRegexCell *regexes;
	MemoryContextCallback free_regexes;
	bool		any_memo;		/* some node has memo set */
};

/* compile-time state */
typedef struct IjCompile
{
	IjSchema   *schema;
	MemoryContext scratch;		/* for what the compiled form won't keep */
	Numeric		zero;
	Numeric		clamp;			/* IJ_COUNT_CLAMP as numeric */
	int			nlazy;			/* subschemas compiled for a $ref */
	int			maxlazy;
	IjNode	  **lazy;
	HTAB	   *lazy_by_path;	/* lazy_path -> node */
	int64		nnodes;			/* subschemas compiled */
	int64		expand_max;		/* the expansion bound */
} IjCompile;

/*
 * The memo: which (subschema, value) pairs were decided already during one
 * validation.  Only nodes with memo set (reached by more than one
 * evaluation edge, see ij_mark_memo) go through it.  A value is known by
 * where it sits in the value being validated (its container, string or
 * numeric pointer, and length); bool and null by their value.  Two values
 * with the same key are equal, so they get the same answer.
 */
typedef struct IjMemoKey
{
	IjNode	   *node;
	const void *ptr;
	uint32		len;
	uint32		type;
} IjMemoKey;

typedef struct IjMemoEntry
{
	IjMemoKey	key;
	char		status;			/* for simplehash */
	bool		ok;
} IjMemoEntry;

static inline uint32
ij_memo_hash_key(const IjMemoKey *k)
{
	uint64		h;

	h = (uint64) (uintptr_t) k->node * UINT64CONST(0x9E3779B97F4A7C15);
	h ^= (uint64) (uintptr_t) k->ptr + UINT64CONST(0x632BE59BD9B4E019) + (h << 6) + (h >> 2);
	h ^= ((uint64) k->len << 3) ^ k->type;
	return murmurhash32((uint32) (h ^ (h >> 32)));
}

#define SH_PREFIX		ij_memo
#define SH_ELEMENT_TYPE IjMemoEntry
#define SH_KEY_TYPE		IjMemoKey
#define SH_KEY			key
#define SH_HASH_KEY(tb, k)	ij_memo_hash_key(&(k))
#define SH_EQUAL(tb, a, b)	((a).node == (b).node && (a).ptr == (b).ptr && \
							 (a).len == (b).len && (a).type == (b).type)
#define SH_SCOPE		static inline
#define SH_DECLARE
#define SH_DEFINE
#include "lib/simplehash.h"

/*
 * uniqueItems hashes containers bottom-up; the hash of a container that
 * holds containers is kept for the rest of the validation, so a value
 * checked at every level of a recursive schema is hashed once, not once
 * per level.
 */
typedef struct IjHashEntry
{
	const JsonbContainer *key;
	char		status;			/* for simplehash */
	uint64		hash;
} IjHashEntry;

#define SH_PREFIX		ij_hcache
#define SH_ELEMENT_TYPE IjHashEntry
#define SH_KEY_TYPE		const JsonbContainer *
#define SH_KEY			key
#define SH_HASH_KEY(tb, k)	murmurhash32((uint32) ((uintptr_t) (k) ^ ((uint64) (uintptr_t) (k) >> 32)))
#define SH_EQUAL(tb, a, b)	((a) == (b))
#define SH_SCOPE		static inline
#define SH_DECLARE
#define SH_DEFINE
#include "lib/simplehash.h"

/* one step of the instance path */
typedef struct IjPathSeg
{
	const char *key;			/* NULL for an array index */
	int			len;
	int			index;
} IjPathSeg;

/* validation-time state */
typedef struct IjValidate
{
	int			quiet;			/* > 0: only decide, build no message */
	int			depth;
	int			maxdepth;
	IjPathSeg  *path;
	Numeric		zero;
	ij_memo_hash *memo;			/* created on first use */
	ij_hcache_hash *hcache;		/* created on first use */
	Numeric		big;			/* 1e1000 and -1e1000, on first use */
	Numeric		minus_big;
	/* the violation */
	const char *err_keyword;
	char	   *err_path;
	char	   *err_message;
} IjValidate;

typedef enum IjKeyword
{
	KW_TYPE,
	KW_ENUM,
	KW_CONST,
	KW_PROPERTIES,
	KW_REQUIRED,
	KW_ADDITIONAL_PROPERTIES,
	KW_PATTERN_PROPERTIES,
	KW_PROPERTY_NAMES,
	KW_MIN_PROPERTIES,
	KW_MAX_PROPERTIES,
	KW_DEPENDENT_REQUIRED,
	KW_DEPENDENT_SCHEMAS,
	KW_ITEMS,
	KW_PREFIX_ITEMS,
	KW_CONTAINS,
	KW_MIN_CONTAINS,
	KW_MAX_CONTAINS,
	KW_MIN_ITEMS,
	KW_MAX_ITEMS,
	KW_UNIQUE_ITEMS,
	KW_MIN_LENGTH,
	KW_MAX_LENGTH,
	KW_PATTERN,
	KW_MINIMUM,
	KW_MAXIMUM,
	KW_EXCLUSIVE_MINIMUM,
	KW_EXCLUSIVE_MAXIMUM,
	KW_MULTIPLE_OF,
	KW_ALL_OF,
	KW_ANY_OF,
	KW_ONE_OF,
	KW_NOT,
	KW_IF,
	KW_THEN,
	KW_ELSE,
	KW_DEFS,
	KW_REF,
	KW_ID,
	KW_ANN_STRING,				/* annotations, checked for type only */
	KW_ANN_BOOL,
	KW_ANN_ARRAY,
	KW_ANN_ANY,
	KW_ANN_SCHEMA
} IjKeyword;

static const struct
{
	const char *name;
	IjKeyword	kw;
}			ij_keywords[] =
{
	{"type", KW_TYPE},
	{"enum", KW_ENUM},
	{"const", KW_CONST},
	{"properties", KW_PROPERTIES},
	{"required", KW_REQUIRED},
	{"additionalProperties", KW_ADDITIONAL_PROPERTIES},
	{"patternProperties", KW_PATTERN_PROPERTIES},
	{"propertyNames", KW_PROPERTY_NAMES},
	{"minProperties", KW_MIN_PROPERTIES},
	{"maxProperties", KW_MAX_PROPERTIES},
	{"dependentRequired", KW_DEPENDENT_REQUIRED},
	{"dependentSchemas", KW_DEPENDENT_SCHEMAS},
	{"items", KW_ITEMS},
	{"prefixItems", KW_PREFIX_ITEMS},
	{"contains", KW_CONTAINS},
	{"minContains", KW_MIN_CONTAINS},
	{"maxContains", KW_MAX_CONTAINS},
	{"minItems", KW_MIN_ITEMS},
	{"maxItems", KW_MAX_ITEMS},
	{"uniqueItems", KW_UNIQUE_ITEMS},
	{"minLength", KW_MIN_LENGTH},
	{"maxLength", KW_MAX_LENGTH},
	{"pattern", KW_PATTERN},
	{"minimum", KW_MINIMUM},
	{"maximum", KW_MAXIMUM},
	{"exclusiveMinimum", KW_EXCLUSIVE_MINIMUM},
	{"exclusiveMaximum", KW_EXCLUSIVE_MAXIMUM},
	{"multipleOf", KW_MULTIPLE_OF},
	{"allOf", KW_ALL_OF},
	{"anyOf", KW_ANY_OF},
	{"oneOf", KW_ONE_OF},
	{"not", KW_NOT},
	{"if", KW_IF},
	{"then", KW_THEN},
	{"else", KW_ELSE},
	{"$defs", KW_DEFS},
	{"$ref", KW_REF},
	{"$id", KW_ID},
	{"title", KW_ANN_STRING},
	{"description", KW_ANN_STRING},
	{"$comment", KW_ANN_STRING},
	{"$schema", KW_ANN_STRING},
	{"format", KW_ANN_STRING},
	{"contentEncoding", KW_ANN_STRING},
	{"contentMediaType", KW_ANN_STRING},
	{"deprecated", KW_ANN_BOOL},
	{"readOnly", KW_ANN_BOOL},
	{"writeOnly", KW_ANN_BOOL},
	{"examples", KW_ANN_ARRAY},
	{"default", KW_ANN_ANY},
	{"contentSchema", KW_ANN_SCHEMA}
};

static const struct
{
	const char *name;
	uint8		bit;
}			ij_types[] =
{
	{"null", IJ_T_NULL},
	{"boolean", IJ_T_BOOLEAN},
	{"object", IJ_T_OBJECT},
	{"array", IJ_T_ARRAY},
	{"number", IJ_T_NUMBER},
	{"string", IJ_T_STRING},
	{"integer", IJ_T_INTEGER}
};

PG_FUNCTION_INFO_V1(idemjob_validate);

static IjNode *ij_compile_node(IjCompile *cc, JsonbValue *v, IjNode *parent,
							   const char *kw, const char *key, int keylen,
							   int index, bool is_root);
static inline bool ij_check(IjValidate *vx, IjNode *s, JsonbValue *v,
							const char *via);


/* ----------------------------------------------------------------
 * Small helpers
 * ----------------------------------------------------------------
 */

/* append a JSON Pointer reference token, escaping '~' and '/' */
static void
ij_append_token(StringInfo buf, const char *s, int len)
{
	int			i;

	for (i = 0; i < len; i++)
	{
		if (s[i] == '~')
			appendStringInfoString(buf, "~0");
		else if (s[i] == '/')
			appendStringInfoString(buf, "~1");
		else
			appendStringInfoChar(buf, s[i]);
	}
}

/* a member name for a message: NUL-terminated, clipped if long */
static char *
ij_name(const char *s, int len)
{
	if (len > IJ_MSG_NAME_MAX)
	{
		int			clip = pg_mbcliplen(s, len, IJ_MSG_NAME_MAX);

		return psprintf("%.*s...", clip, s);
	}
	return pnstrdup(s, len);
}

static char *
ij_numstr(Numeric n)
{
	return DatumGetCString(DirectFunctionCall1(numeric_out,
											   NumericGetDatum(n)));
}

static int
ij_numcmp(Numeric a, Numeric b)
{
	return DatumGetInt32(DirectFunctionCall2(numeric_cmp,
											 NumericGetDatum(a),
											 NumericGetDatum(b)));
}

/* true if the number has no fractional part (1.0 is an integer) */
static bool
ij_is_integral(Numeric n)
{
	/* the smallest scale that shows it exactly: no allocation */
	return DatumGetInt32(DirectFunctionCall1(numeric_min_scale,
											 NumericGetDatum(n))) == 0;
}

static bool
ij_is_object(JsonbValue *v)
{
	return v->type == jbvBinary && JsonContainerIsObject(v->val.binary.data);
}

static bool
ij_is_array(JsonbValue *v)
{
	return v->type == jbvBinary && JsonContainerIsArray(v->val.binary.data);
}

static bool
ij_key_eq(const char *a, int alen, const char *b)
{
	return alen == (int) strlen(b) && memcmp(a, b, alen) == 0;
}

/* order of jsonb object keys: by length, then bytes */
static int
ij_key_cmp(const char *a, int alen, const char *b, int blen)
{
	if (alen != blen)
		return alen < blen ? -1 : 1;
	return memcmp(a, b, alen);
}

static int
ij_named_cmp(const void *a, const void *b)
{
	const IjNamed *na = (const IjNamed *) a;
	const IjNamed *nb = (const IjNamed *) b;

	return ij_key_cmp(na->name, na->len, nb->name, nb->len);
}

/* the same for qsort, which may run long: interruptible */
static int
ij_named_sort_cmp(const void *a, const void *b)
{
	CHECK_FOR_INTERRUPTS();
	return ij_named_cmp(a, b);
}

static IjNamed *
ij_named_find(IjNamed *arr, int n, const char *name, int len)
{
	IjNamed		key;

	if (n == 0)
		return NULL;
	key.name = name;
	key.len = len;
	return (IjNamed *) bsearch(&key, arr, n, sizeof(IjNamed), ij_named_cmp);
}

/* the elements or members of a container, as JsonbValues (nested: binary) */
static JsonbValue *
ij_elements(JsonbContainer *c, int *n)
{
	JsonbIterator *it = JsonbIteratorInit(c);
	JsonbValue	v;
	JsonbIteratorToken tok;
	JsonbValue *out = palloc(sizeof(JsonbValue) * Max(JsonContainerSize(c), 1));
	int			i = 0;

	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		CHECK_FOR_INTERRUPTS();
		if (tok == WJB_ELEM)
			out[i++] = v;
	}
	*n = i;
	return out;
}

/* parse an array index reference token ("0", "12"; no sign, no leading 0) */
static bool
ij_parse_index(const char *s, int len, int *index)
{
	int64		v = 0;
	int			i;

	if (len == 0 || len > 9 || (len > 1 && s[0] == '0'))
		return false;
	for (i = 0; i < len; i++)
	{
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (s[i] - '0');
	}
	*index = (int) v;
	return true;
}


/* ----------------------------------------------------------------
 * Schema paths and compile errors
 * ----------------------------------------------------------------
 */

/* the JSON Pointer of a node in the schema document */
static void
ij_append_node_path(StringInfo buf, IjNode *node)
{
	int			depth = 0;
	int			i;
	IjNode	   *n;
	IjNode	  **chain;

	for (n = node; n != NULL; n = n->parent)
		depth++;
	chain = palloc(sizeof(IjNode *) * depth);
	i = depth;
	for (n = node; n != NULL; n = n->parent)
		chain[--i] = n;

	for (i = 0; i < depth; i++)
	{
		CHECK_FOR_INTERRUPTS();
		n = chain[i];
		if (n->parent == NULL)
		{
			if (n->lazy_path)
				appendStringInfoString(buf, n->lazy_path);
			continue;
		}
		appendStringInfoChar(buf, '/');
		ij_append_token(buf, n->kw, strlen(n->kw));
		if (n->key)
		{
			appendStringInfoChar(buf, '/');
			ij_append_token(buf, n->key, n->keylen);
		}
		else if (n->index >= 0)
			appendStringInfo(buf, "/%d", n->index);
	}
	pfree(chain);
}

/*
 * Refuse a schema: the message names the place, node + "/kw" (+ "/key" or
 * "/index" when given).
 */
static void
ij_bad(IjNode *node, const char *kw, const char *key, int keylen,
	   int index, const char *msg)
{
	StringInfoData path;

	initStringInfo(&path);
	ij_append_node_path(&path, node);
	if (kw)
	{
		appendStringInfoChar(&path, '/');
		ij_append_token(&path, kw, strlen(kw));
	}
	if (key)
	{
		appendStringInfoChar(&path, '/');
		ij_append_token(&path, key, keylen);
	}
	else if (index >= 0)
		appendStringInfo(&path, "/%d", index);

	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid output schema at \"%s\": %s", path.data, msg)));
}


/* ----------------------------------------------------------------
 * Compilation
 * ----------------------------------------------------------------
 */

static void
ij_free_regexes(void *arg)
{
	IjSchema   *schema = (IjSchema *) arg;
	IjRegexCell *c;

	for (c = schema->regexes; c != NULL; c = c->next)
		pg_regfree(c->re);
	schema->regexes = NULL;
}

/* a single-character atom while parsing a simple pattern */
typedef struct IjFastAtom
{
	uint64		set[2];			/* ASCII characters matched */
	bool		other;			/* matches non-ASCII characters too */
	int			min;
	int			max;			/* -1: no limit */
} IjFastAtom;

static inline void
ij_fast_add(IjFastAtom *a, int c)
{
	a->set[c >> 6] |= UINT64CONST(1) << (c & 63);
}

static void
ij_fast_add_range(IjFastAtom *a, int lo, int hi)
{
	int			c;

	for (c = lo; c <= hi; c++)
		ij_fast_add(a, c);
}

/* \d, \w, \s as the engine has them under the C collation: ASCII only */
static bool
ij_fast_class_escape(IjFastAtom *a, char e)
{
	switch (e)
	{
		case 'd':
			ij_fast_add_range(a, '0', '9');
			return true;
		case 'w':
			ij_fast_add_range(a, '0', '9');
			ij_fast_add_range(a, 'A', 'Z');
			ij_fast_add_range(a, 'a', 'z');
			ij_fast_add(a, '_');
			return true;
		case 's':
			ij_fast_add(a, ' ');
			ij_fast_add_range(a, '\t', '\r');	/* \t \n \v \f \r */
			return true;
		default:
			return false;
	}
}

static inline bool
ij_fast_punct(char c)
{
	return c > 0x20 && c < 0x7f &&
		!(c >= '0' && c <= '9') && !(c >= 'A' && c <= 'Z') &&
		!(c >= 'a' && c <= 'z');
}

/* a bracket expression at src[*p] == '['; false if not a simple one */
static bool
ij_fast_bracket(const char *src, int len, int *p, IjFastAtom *a)
{
	int			i = *p + 1;
	bool		first = true;

	if (i < len && src[i] == '^')
		return false;			/* negated: matches non-ASCII, leave it */
	while (i < len)
	{
		char		c = src[i];
		int			lo;

		if (c == ']' && !first)
		{
			*p = i + 1;
			return true;
		}
		first = false;
		if (c == '[' || c == ']' || c < 0x20 || c > 0x7e)
			return false;
		if (c == '\\')
		{
			if (i + 1 >= len)
				return false;
			if (ij_fast_class_escape(a, src[i + 1]))
			{
				i += 2;
				if (i + 1 < len && src[i] == '-' && src[i + 1] != ']')
					return false;	/* a range from a class */
				continue;
			}
			if (!ij_fast_punct(src[i + 1]))
				return false;
			lo = (unsigned char) src[i + 1];
			i += 2;
		}
		else
		{
			lo = (unsigned char) c;
			i++;
		}
		/* a range lo-hi (a "-" before "]" is itself) */
		if (i + 1 < len && src[i] == '-' && src[i + 1] != ']')
		{
			int			hi = (unsigned char) src[i + 1];

			if (lo == '-')
				return false;

			if (hi == '\\' || hi == '[' || hi < 0x20 || hi > 0x7e || hi < lo)
				return false;
			ij_fast_add_range(a, lo, hi);
			i += 2;
		}
		else
			ij_fast_add(a, lo);
	}
	return false;
}

/* parse {n}, {n,}, {n,m} at src[*p] == '{' */
static bool
ij_fast_bound(const char *src, int len, int *p, int *min, int *max)
{
	int			i = *p + 1;
	int			n = 0;
	int			m;
	int			digits = 0;

	while (i < len && src[i] >= '0' && src[i] <= '9' && digits < 4)
	{
		n = n * 10 + (src[i++] - '0');
		digits++;
	}
	if (digits == 0 || digits == 4 || i >= len)
		return false;
	m = n;
	if (src[i] == ',')
	{
		i++;
		m = -1;
		digits = 0;
		if (i < len && src[i] >= '0' && src[i] <= '9')
		{
			m = 0;
			while (i < len && src[i] >= '0' && src[i] <= '9' && digits < 4)
			{
				m = m * 10 + (src[i++] - '0');
				digits++;
			}
			if (digits == 4)
				return false;
		}
	}
	if (i >= len || src[i] != '}' || n > 255 || m > 255 || (m >= 0 && m < n))
		return false;
	*p = i + 1;
	*min = n;
	*max = m;
	return true;
}

/* a matcher for a simple pattern, or NULL */
static IjFastRe *
ij_fast_compile(const char *src, int len)
{
	IjFastAtom	atoms[IJ_FAST_MAX + 1];
	int			natoms = 0;
	int			nexp = 0;
	bool		bol = false;
	bool		eol = false;
	int			p = 0;
	int			i;
	int			k;
	IjFastRe   *f;

	if (p < len && src[p] == '^')
	{
		bol = true;
		p++;
	}
	while (p < len)
	{
		IjFastAtom *a;
		char		c = src[p];

		if (c == '$' && p == len - 1)
		{
			eol = true;
			break;
		}
		if (natoms > IJ_FAST_MAX)
			return NULL;
		a = &atoms[natoms];
		memset(a, 0, sizeof(IjFastAtom));
		a->min = a->max = 1;
		if (c == '[')
		{
			if (!ij_fast_bracket(src, len, &p, a))
				return NULL;
		}
		else if (c == '\\')
		{
			if (p + 1 >= len)
				return NULL;
			if (!ij_fast_class_escape(a, src[p + 1]))
			{
				if (!ij_fast_punct(src[p + 1]))
					return NULL;
				ij_fast_add(a, (unsigned char) src[p + 1]);
			}
			p += 2;
		}
		else if (c == '.')
		{
			a->set[0] = a->set[1] = ~UINT64CONST(0);
			a->other = true;
			p++;
		}
		else if (c < 0x20 || c > 0x7e || strchr("^$|()*+?{}[]", c) != NULL)
			return NULL;
		else
		{
			ij_fast_add(a, (unsigned char) c);
			p++;
		}

		/* one greedy quantifier at most */
		if (p < len)
		{
			if (src[p] == '?')
				a->min = 0, a->max = 1, p++;
			else if (src[p] == '*')
				a->min = 0, a->max = -1, p++;
			else if (src[p] == '+')
				a->min = 1, a->max = -1, p++;
			else if (src[p] == '{' && !ij_fast_bound(src, len, &p, &a->min, &a->max))
				return NULL;
			if (p < len && (src[p] == '?' || src[p] == '*' ||
							src[p] == '+' || src[p] == '{'))
				return NULL;
		}
		nexp += a->min + (a->max < 0 ? 1 : a->max - a->min);
		if (nexp > IJ_FAST_MAX)
			return NULL;
		natoms++;
	}

	/* expand: min atoms exactly once, then one "*" or (max - min) "?" */
	f = palloc0(sizeof(IjFastRe));
	f->bol = bol;
	f->eol = eol;
	k = 0;
	{
		bool		star[IJ_FAST_MAX];
		bool		skip[IJ_FAST_MAX];

		for (i = 0; i < natoms; i++)
		{
			IjFastAtom *a = &atoms[i];
			int			extra = a->max < 0 ? 1 : a->max - a->min;
			int			j;

			for (j = 0; j < a->min + extra; j++)
			{
				int			c;

				for (c = 0; c < 128; c++)
				{
					if (a->set[c >> 6] & (UINT64CONST(1) << (c & 63)))
						f->ascii[c] |= UINT64CONST(1) << k;
				}
				if (a->other)
					f->other |= UINT64CONST(1) << k;
				star[k] = (j >= a->min && a->max < 0);
				skip[k] = (j >= a->min);
				k++;
			}
		}
		f->natoms = k;
		f->eps[k] = UINT64CONST(1) << k;
		for (i = k - 1; i >= 0; i--)
			f->eps[i] = (UINT64CONST(1) << i) | (skip[i] ? f->eps[i + 1] : 0);
		for (i = 0; i < k; i++)
			f->target[i] = star[i] ? f->eps[i] : f->eps[i + 1];
	}
	return f;
}

/* run a simple pattern over a string (in the database encoding) */
static bool
ij_fast_match(const IjFastRe *f, const char *s, int len)
{
	uint64		accept = UINT64CONST(1) << f->natoms;
	uint64		start = f->eps[0];
	uint64		st = start;
	int			i = 0;
	int			n = 0;

	if (!f->eol && (st & accept))
		return true;
	while (i < len)
	{
		unsigned char c = (unsigned char) s[i];
		uint64		hit;
		uint64		next = 0;

		if (c < 0x80)
		{
			hit = st & f->ascii[c];
			i++;
		}
		else
		{
			hit = st & f->other;
			i += pg_mblen(s + i);
		}
		while (hit)
		{
			next |= f->target[pg_rightmost_one_pos64(hit)];
			hit &= hit - 1;
		}
		if (!f->bol)
			next |= start;
		st = next;
		if (!f->eol && (st & accept))
			return true;
		if (st == 0)
			return false;
		if ((++n & 4095) == 0)
			CHECK_FOR_INTERRUPTS();
	}
	return (st & accept) != 0;
}

static void
ij_compile_regex(IjCompile *cc, IjRegex *rx, const char *src, int len,
				 IjNode *node, const char *kw, bool is_key)
{
	pg_wchar   *w;
	int			wlen;
	int			rc;
	IjRegexCell *cell;
	MemoryContext old;

	old = MemoryContextSwitchTo(cc->scratch);
	w = palloc(sizeof(pg_wchar) * (len + 1));
	wlen = pg_mb2wchar_with_len(src, w, len);
	MemoryContextSwitchTo(old);

	rc = pg_regcomp(&rx->re, w, wlen, REG_ADVANCED | REG_NOSUB,
					C_COLLATION_OID);
	if (rc != REG_OKAY)
	{
		char		errbuf[128];

		/*
		 * The regex engine gives up with REG_CANCEL when a cancel or a
		 * timeout is pending: raise that (57014), not a bad-schema error,
		 * as PostgreSQL's own regexp.c does.
		 */
		CHECK_FOR_INTERRUPTS();
		pg_regerror(rc, &rx->re, errbuf, sizeof(errbuf));
		ij_bad(node, kw, is_key ? src : NULL, len, -1,
			   psprintf("invalid regular expression: %s", errbuf));
	}
	/* from now on it is freed with the compiled form */
	cell = palloc(sizeof(IjRegexCell));
	cell->re = &rx->re;
	cell->next = cc->schema->regexes;
	cc->schema->regexes = cell;
	rx->src = pnstrdup(src, len);
	rx->fast = ij_fast_compile(src, len);
}

/* a non-negative integer keyword value (1.0 counts), clamped */
static int64
ij_count(IjCompile *cc, IjNode *node, const char *kw, JsonbValue *v)
{
	if (v->type != jbvNumeric || !ij_is_integral(v->val.numeric) ||
		ij_numcmp(v->val.numeric, cc->zero) < 0)
		ij_bad(node, kw, NULL, 0, -1, "must be a non-negative integer");
	/* huge values are as good as infinite */
	if (ij_numcmp(v->val.numeric, cc->clamp) > 0)
		return IJ_COUNT_CLAMP;
	return DatumGetInt64(DirectFunctionCall1(numeric_int8,
											 NumericGetDatum(v->val.numeric)));
}

static Numeric
ij_number(IjNode *node, const char *kw, JsonbValue *v)
{
	if (v->type != jbvNumeric)
		ij_bad(node, kw, NULL, 0, -1, "must be a number");
	return v->val.numeric;
}

static void
ij_require_schema_value(IjNode *node, const char *kw, const char *key,
						int keylen, int index, JsonbValue *v)
{
	if (v->type != jbvBool && !ij_is_object(v))
		ij_bad(node, kw, key, keylen, index,
			   "must be a schema (an object or a boolean)");
}

/* an array of unique strings (required, dependentRequired members) */
static IjNamed *
ij_string_set(IjCompile *cc, IjNode *node, const char *kw, const char *key,
			  int keylen, JsonbValue *v, int *n)
{
	JsonbValue *elems;
	IjNamed    *out;
	IjNamed    *sorted;
	int			i;

	if (!ij_is_array(v))
		ij_bad(node, kw, key, keylen, -1, "must be an array of unique strings");
	elems = ij_elements(v->val.binary.data, n);
	out = palloc(sizeof(IjNamed) * Max(*n, 1));
	for (i = 0; i < *n; i++)
	{
		CHECK_FOR_INTERRUPTS();
		if (elems[i].type != jbvString)
			ij_bad(node, kw, key, keylen, -1,
				   "must be an array of unique strings");
		out[i].name = elems[i].val.string.val;
		out[i].len = elems[i].val.string.len;
		out[i].schema = NULL;
	}
	sorted = MemoryContextAlloc(cc->scratch, sizeof(IjNamed) * Max(*n, 1));
	memcpy(sorted, out, sizeof(IjNamed) * *n);
	qsort(sorted, *n, sizeof(IjNamed), ij_named_sort_cmp);
	for (i = 1; i < *n; i++)
	{
		CHECK_FOR_INTERRUPTS();
		if (ij_named_cmp(&sorted[i - 1], &sorted[i]) == 0)
			ij_bad(node, kw, key, keylen, -1,
				   "must be an array of unique strings");
	}
	pfree(elems);
	return out;
}

/* a non-empty array of schemas (allOf, anyOf, oneOf, prefixItems) */
static IjNode **
ij_schema_array(IjCompile *cc, IjNode *node, const char *kw, JsonbValue *v,
				int *n)
{
	JsonbValue *elems;
	IjNode	  **out;
	int			i;

	if (!ij_is_array(v) || JsonContainerSize(v->val.binary.data) == 0)
		ij_bad(node, kw, NULL, 0, -1, "must be a non-empty array of schemas");
	elems = ij_elements(v->val.binary.data, n);
	out = palloc(sizeof(IjNode *) * *n);
	for (i = 0; i < *n; i++)
		out[i] = ij_compile_node(cc, &elems[i], node, kw, NULL, 0, i, false);
	pfree(elems);
	return out;
}

/*
 * An object whose members are schemas (properties, $defs,
 * dependentSchemas) or, with regexes, patternProperties.  Returned in jsonb
 * key order, which is the order ij_named_cmp sorts by.
 */
static IjNamed *
ij_schema_map(IjCompile *cc, IjNode *node, const char *kw, JsonbValue *v,
			  int *n, IjRegex **regexes)
{
	JsonbIterator *it;
	JsonbValue	k;
	JsonbValue	val;
	JsonbIteratorToken tok;
	IjNamed    *out;
	int			i = 0;

	if (!ij_is_object(v))
		ij_bad(node, kw, NULL, 0, -1, "must be an object whose values are schemas");
	out = palloc(sizeof(IjNamed) * Max(JsonContainerSize(v->val.binary.data), 1));
	if (regexes)
		*regexes = palloc0(sizeof(IjRegex) *
						   Max(JsonContainerSize(v->val.binary.data), 1));
	it = JsonbIteratorInit(v->val.binary.data);
	while ((tok = JsonbIteratorNext(&it, &k, true)) != WJB_DONE)
	{
		CHECK_FOR_INTERRUPTS();
		if (tok != WJB_KEY)
			continue;
		tok = JsonbIteratorNext(&it, &val, true);
		Assert(tok == WJB_VALUE);
		out[i].name = k.val.string.val;
		out[i].len = k.val.string.len;
		if (regexes)
			ij_compile_regex(cc, &(*regexes)[i], k.val.string.val,
							 k.val.string.len, node, kw, true);
		out[i].schema = ij_compile_node(cc, &val, node, kw,
										k.val.string.val, k.val.string.len,
										-1, false);
		if (regexes)
			(*regexes)[i].schema = out[i].schema;
		i++;
	}
	*n = i;
	if (!regexes)
		qsort(out, i, sizeof(IjNamed), ij_named_sort_cmp);
	return out;
}

static IjKeyword
ij_lookup_keyword(const char *s, int len, const char **name)
{
	int			i;

	for (i = 0; i < (int) lengthof(ij_keywords); i++)
	{
		if (ij_key_eq(s, len, ij_keywords[i].name))
		{
			*name = ij_keywords[i].name;
			return ij_keywords[i].kw;
		}
	}
	*name = NULL;
	return -1;
}

static uint8
ij_type_bit(JsonbValue *v)
{
	int			i;

	if (v->type != jbvString)
		return 0;
	for (i = 0; i < (int) lengthof(ij_types); i++)
	{
		if (ij_key_eq(v->val.string.val, v->val.string.len, ij_types[i].name))
			return ij_types[i].bit;
	}
	return 0;
}

static void
ij_compile_type(IjNode *node, const char *kw, JsonbValue *v)
{
	const char *msg = "must be a type name or a non-empty array of unique type names";

	if (v->type == jbvString)
	{
		node->types = ij_type_bit(v);
		if (node->types == 0)
			ij_bad(node, kw, NULL, 0, -1,
				   "must be one of \"null\", \"boolean\", \"object\", \"array\", \"number\", \"string\", \"integer\"");
	}
	else if (ij_is_array(v) && JsonContainerSize(v->val.binary.data) > 0)
	{
		int			n;
		int			i;
		JsonbValue *elems = ij_elements(v->val.binary.data, &n);

		for (i = 0; i < n; i++)
		{
			uint8		bit;

			CHECK_FOR_INTERRUPTS();
			bit = ij_type_bit(&elems[i]);

			if (bit == 0)
				ij_bad(node, kw, NULL, 0, i,
					   "must be one of \"null\", \"boolean\", \"object\", \"array\", \"number\", \"string\", \"integer\"");
			if (node->types & bit)
				ij_bad(node, kw, NULL, 0, -1, msg);
			node->types |= bit;
		}
		pfree(elems);
	}
	else
		ij_bad(node, kw, NULL, 0, -1, msg);
}

static pg_noinline void
ij_compile_keyword(IjCompile *cc, IjNode *node, const char *key, int keylen,
				   JsonbValue *v, bool is_root, bool *constrains)
{
	const char *kw;
	IjKeyword	which = ij_lookup_keyword(key, keylen, &kw);

	*constrains = true;
	switch ((int) which)
	{
		case KW_TYPE:
			ij_compile_type(node, kw, v);
			break;
		case KW_ENUM:
			if (!ij_is_array(v))
				ij_bad(node, kw, NULL, 0, -1, "must be an array");
			node->has_enum = true;
			node->enumvals = ij_elements(v->val.binary.data, &node->nenum);
			break;
		case KW_CONST:
			node->has_const = true;
			node->constval = *v;
			break;
		case KW_PROPERTIES:
			node->props = ij_schema_map(cc, node, kw, v, &node->nprops, NULL);
			break;
		case KW_REQUIRED:
			node->required = ij_string_set(cc, node, kw, NULL, 0, v,
										   &node->nrequired);
			break;
		case KW_ADDITIONAL_PROPERTIES:
			node->additionalProperties =
				ij_compile_node(cc, v, node, kw, NULL, 0, -1, false);
			break;
		case KW_PATTERN_PROPERTIES:
			(void) ij_schema_map(cc, node, kw, v, &node->npatterns,
								 &node->patterns);
			break;
		case KW_PROPERTY_NAMES:
			node->propertyNames =
				ij_compile_node(cc, v, node, kw, NULL, 0, -1, false);
			break;
		case KW_MIN_PROPERTIES:
			node->minProperties = ij_count(cc, node, kw, v);
			break;
		case KW_MAX_PROPERTIES:
			node->maxProperties = ij_count(cc, node, kw, v);
			break;
		case KW_DEPENDENT_REQUIRED:
			{
				JsonbIterator *it;
				JsonbValue	k;
				JsonbValue	val;
				JsonbIteratorToken tok;
				int			i = 0;

				if (!ij_is_object(v))
					ij_bad(node, kw, NULL, 0, -1,
						   "must be an object whose values are arrays of unique strings");
				node->depreq = palloc(sizeof(IjDepReq) *
									  Max(JsonContainerSize(v->val.binary.data), 1));
				it = JsonbIteratorInit(v->val.binary.data);
				while ((tok = JsonbIteratorNext(&it, &k, true)) != WJB_DONE)
				{
					CHECK_FOR_INTERRUPTS();
					if (tok != WJB_KEY)
						continue;
					(void) JsonbIteratorNext(&it, &val, true);
					node->depreq[i].name = k.val.string.val;
					node->depreq[i].len = k.val.string.len;
					node->depreq[i].req =
						ij_string_set(cc, node, kw, k.val.string.val,
									  k.val.string.len, &val,
									  &node->depreq[i].nreq);
					i++;
				}
				node->ndepreq = i;
			}
			break;
		case KW_DEPENDENT_SCHEMAS:
			node->depschemas = ij_schema_map(cc, node, kw, v,
											 &node->ndepschemas, NULL);
			break;
		case KW_ITEMS:
			if (ij_is_array(v))
				ij_bad(node, kw, NULL, 0, -1,
					   "must be a schema (an object or a boolean); for tuples use \"prefixItems\"");
			node->items = ij_compile_node(cc, v, node, kw, NULL, 0, -1, false);
			break;
		case KW_PREFIX_ITEMS:
			node->prefixItems = ij_schema_array(cc, node, kw, v,
												&node->nprefix);
			break;
		case KW_CONTAINS:
			node->contains = ij_compile_node(cc, v, node, kw, NULL, 0, -1,
											 false);
			break;
		case KW_MIN_CONTAINS:
			node->minContains = ij_count(cc, node, kw, v);
			break;
		case KW_MAX_CONTAINS:
			node->maxContains = ij_count(cc, node, kw, v);
			break;
		case KW_MIN_ITEMS:
			node->minItems = ij_count(cc, node, kw, v);
			break;
		case KW_MAX_ITEMS:
			node->maxItems = ij_count(cc, node, kw, v);
			break;
		case KW_UNIQUE_ITEMS:
			if (v->type != jbvBool)
				ij_bad(node, kw, NULL, 0, -1, "must be a boolean");
			node->uniqueItems = v->val.boolean;
			break;
		case KW_MIN_LENGTH:
			node->minLength = ij_count(cc, node, kw, v);
			break;
		case KW_MAX_LENGTH:
			node->maxLength = ij_count(cc, node, kw, v);
			break;
		case KW_PATTERN:
			if (v->type != jbvString)
				ij_bad(node, kw, NULL, 0, -1,
					   "must be a string (a regular expression)");
			node->pattern = palloc0(sizeof(IjRegex));
			ij_compile_regex(cc, node->pattern, v->val.string.val,
							 v->val.string.len, node, kw, false);
			break;
		case KW_MINIMUM:
			node->minimum = ij_number(node, kw, v);
			break;
		case KW_MAXIMUM:
			node->maximum = ij_number(node, kw, v);
			break;
		case KW_EXCLUSIVE_MINIMUM:
			node->exclusiveMinimum = ij_number(node, kw, v);
			break;
		case KW_EXCLUSIVE_MAXIMUM:
			node->exclusiveMaximum = ij_number(node, kw, v);
			break;
		case KW_MULTIPLE_OF:
			if (v->type != jbvNumeric || ij_numcmp(v->val.numeric, cc->zero) <= 0)
				ij_bad(node, kw, NULL, 0, -1, "must be a number greater than 0");
			node->multipleOf = v->val.numeric;
			break;
		case KW_ALL_OF:
			node->allOf = ij_schema_array(cc, node, kw, v, &node->nallOf);
			break;
		case KW_ANY_OF:
			node->anyOf = ij_schema_array(cc, node, kw, v, &node->nanyOf);
			break;
		case KW_ONE_OF:
			node->oneOf = ij_schema_array(cc, node, kw, v, &node->noneOf);
			break;
		case KW_NOT:
			node->not = ij_compile_node(cc, v, node, kw, NULL, 0, -1, false);
			break;
		case KW_IF:
			node->if_ = ij_compile_node(cc, v, node, kw, NULL, 0, -1, false);
			break;
		case KW_THEN:
			node->then_ = ij_compile_node(cc, v, node, kw, NULL, 0, -1, false);
			break;
		case KW_ELSE:
			node->else_ = ij_compile_node(cc, v, node, kw, NULL, 0, -1, false);
			break;
		case KW_DEFS:
			node->defs = ij_schema_map(cc, node, kw, v, &node->ndefs, NULL);
			*constrains = false;
			break;
		case KW_REF:
			if (v->type != jbvString ||
				!(v->val.string.len == 1 ||
				  (v->val.string.len > 1 && v->val.string.val[1] == '/')) ||
				v->val.string.val[0] != '#')
				ij_bad(node, kw, NULL, 0, -1,
					   "must be a JSON Pointer into this schema (\"#\" or \"#/...\"); other references are not supported");
			node->ref = v->val.string.val;
			node->reflen = v->val.string.len;
			break;
		case KW_ID:
			if (!is_root)
				ij_bad(node, kw, NULL, 0, -1,
					   "\"$id\" is only allowed at the root of the schema");
			if (v->type != jbvString)
				ij_bad(node, kw, NULL, 0, -1, "must be a string");
			*constrains = false;
			break;
		case KW_ANN_STRING:
			if (v->type != jbvString)
				ij_bad(node, kw, NULL, 0, -1, "must be a string");
			*constrains = false;
			break;
		case KW_ANN_BOOL:
			if (v->type != jbvBool)
				ij_bad(node, kw, NULL, 0, -1, "must be a boolean");
			*constrains = false;
			break;
		case KW_ANN_ARRAY:
			if (!ij_is_array(v))
				ij_bad(node, kw, NULL, 0, -1, "must be an array");
			*constrains = false;
			break;
		case KW_ANN_ANY:
			*constrains = false;
			break;
		case KW_ANN_SCHEMA:
			ij_require_schema_value(node, kw, NULL, 0, -1, v);
			*constrains = false;
			break;
		default:
			{
				StringInfoData path;

				initStringInfo(&path);
				ij_append_node_path(&path, node);
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("invalid output schema at \"%s\": unsupported keyword \"%s\"",
								path.data, ij_name(key, keylen)),
						 errdetail("idemjob supports a subset of JSON Schema draft 2020-12 and refuses any other keyword rather than ignore it.")));
			}
	}
}

static IjNode *
ij_compile_node(IjCompile *cc, JsonbValue *v, IjNode *parent, const char *kw,
				const char *key, int keylen, int index, bool is_root)
{
	IjNode	   *node;

	check_stack_depth();
	CHECK_FOR_INTERRUPTS();

	node = palloc0(sizeof(IjNode));
	cc->nnodes++;
	node->parent = parent;
	node->kw = kw;
	node->key = key;
	node->keylen = keylen;
	node->index = index;
	node->maxLength = -1;
	node->maxItems = -1;
	node->maxProperties = -1;
	node->minContains = 1;
	node->maxContains = -1;

	if (v->type == jbvBool)
	{
		node->kind = v->val.boolean ? IJ_TRUE : IJ_FALSE;
		node->trivial = v->val.boolean;
		return node;
	}
	if (!ij_is_object(v))
		ij_bad(node, NULL, NULL, 0, -1,
			   "must be a schema (an object or a boolean)");

	node->kind = IJ_OBJECT;
	node->trivial = true;
	{
		JsonbIterator *it = JsonbIteratorInit(v->val.binary.data);
		JsonbValue	k;
		JsonbValue	val;
		JsonbIteratorToken tok;
		int			nconstraints = 0;

		while ((tok = JsonbIteratorNext(&it, &k, true)) != WJB_DONE)
		{
			bool		constrains;

			CHECK_FOR_INTERRUPTS();
			if (tok != WJB_KEY)
				continue;
			tok = JsonbIteratorNext(&it, &val, true);
			Assert(tok == WJB_VALUE);
			ij_compile_keyword(cc, node, k.val.string.val, k.val.string.len,
							   &val, is_root, &constrains);
			if (constrains)
			{
				node->trivial = false;
				nconstraints++;
			}
		}
		node->pure_ref = (node->ref != NULL && nconstraints == 1);
	}
	return node;
}

/* ----------------------------------------------------------------
 * $ref resolution (after the whole tree is compiled)
 * ----------------------------------------------------------------
 */

typedef struct IjToken
{
	char	   *s;
	int			len;
} IjToken;

static void
ij_bad_ref(IjNode *node, const char *msg)
{
	ij_bad(node, "$ref", NULL, 0, -1,
		   psprintf("\"%s\" %s", ij_name(node->ref, node->reflen), msg));
}

static int
ij_hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* decode "#/a~1b/%25" into reference tokens ("a/b", "%") */
static IjToken *
ij_decode_pointer(IjNode *node, int *ntokens)
{
	const char *s = node->ref + 1;
	int			len = node->reflen - 1;
	char	   *dec = palloc(len + 1);
	int			dlen = 0;
	IjToken    *toks;
	int			n = 0;
	int			i;

	for (i = 0; i < len; i++)
	{
		CHECK_FOR_INTERRUPTS();
		if (s[i] == '%')
		{
			int			hi = -1;

			if (i + 2 < len && ij_hexval(s[i + 1]) >= 0 && ij_hexval(s[i + 2]) >= 0)
				hi = ij_hexval(s[i + 1]) * 16 + ij_hexval(s[i + 2]);
			if (hi < 0)
				ij_bad_ref(node, "is not a valid URI fragment (bad percent-encoding)");
			dec[dlen++] = (char) hi;
			i += 2;
		}
		else
			dec[dlen++] = s[i];
	}
	dec[dlen] = '\0';
	if (!pg_verifymbstr(dec, dlen, true) || memchr(dec, '\0', dlen) != NULL)
		ij_bad_ref(node, "is not a valid URI fragment (bad percent-encoding)");

	/* "#" is the root; otherwise the pointer starts with '/' */
	toks = palloc(sizeof(IjToken) * (dlen + 1));
	if (dlen == 0)
	{
		*ntokens = 0;
		return toks;
	}
	if (dec[0] != '/')
		ij_bad_ref(node, "is not a JSON Pointer");
	i = 1;
	for (;;)
	{
		char	   *tok = palloc(dlen + 1);
		int			tlen = 0;

		CHECK_FOR_INTERRUPTS();
		while (i < dlen && dec[i] != '/')
		{
			if (dec[i] == '~')
			{
				if (i + 1 < dlen && dec[i + 1] == '0')
					tok[tlen++] = '~';
				else if (i + 1 < dlen && dec[i + 1] == '1')
					tok[tlen++] = '/';
				else
					ij_bad_ref(node, "is not a valid JSON Pointer (\"~\" must be followed by \"0\" or \"1\")");
				i += 2;
			}
			else
				tok[tlen++] = dec[i++];
		}
		tok[tlen] = '\0';
		toks[n].s = tok;
		toks[n].len = tlen;
		n++;
		if (i >= dlen)
			break;
		i++;					/* skip '/', a token (maybe empty) follows */
	}
	*ntokens = n;
	return toks;
}

static bool
ij_tok_is(IjToken *t, const char *s)
{
	return ij_key_eq(t->s, t->len, s);
}

static IjNode *
ij_tok_index(IjToken *t, IjNode **arr, int n)
{
	int			idx;

	if (!ij_parse_index(t->s, t->len, &idx) || idx >= n)
		return NULL;
	return arr[idx];
}

/* follow the pointer through the compiled tree; NULL if it leaves it */
static IjNode *
ij_walk_compiled(IjNode *cur, IjToken *toks, int n)
{
	int			i = 0;

	while (cur != NULL && i < n)
	{
		IjToken    *t = &toks[i];
		IjToken    *t2 = (i + 1 < n) ? &toks[i + 1] : NULL;
		IjNamed    *nm;
		IjNode	   *next = NULL;
		int			used = 1;

		CHECK_FOR_INTERRUPTS();
		if (cur->kind != IJ_OBJECT)
			return NULL;

		if (ij_tok_is(t, "items"))
			next = cur->items;
		else if (ij_tok_is(t, "contains"))
			next = cur->contains;
		else if (ij_tok_is(t, "additionalProperties"))
			next = cur->additionalProperties;
		else if (ij_tok_is(t, "propertyNames"))
			next = cur->propertyNames;
		else if (ij_tok_is(t, "not"))
			next = cur->not;
		else if (ij_tok_is(t, "if"))
			next = cur->if_;
		else if (ij_tok_is(t, "then"))
			next = cur->then_;
		else if (ij_tok_is(t, "else"))
			next = cur->else_;
		else if (t2 == NULL)
			return NULL;
		else
		{
			used = 2;
			if (ij_tok_is(t, "properties"))
			{
				nm = ij_named_find(cur->props, cur->nprops, t2->s, t2->len);
				next = nm ? nm->schema : NULL;
			}
			else if (ij_tok_is(t, "$defs"))
			{
				nm = ij_named_find(cur->defs, cur->ndefs, t2->s, t2->len);
				next = nm ? nm->schema : NULL;
			}
			else if (ij_tok_is(t, "dependentSchemas"))
			{
				nm = ij_named_find(cur->depschemas, cur->ndepschemas,
								   t2->s, t2->len);
				next = nm ? nm->schema : NULL;
			}
			else if (ij_tok_is(t, "patternProperties"))
			{
				int			j;

				for (j = 0; j < cur->npatterns; j++)
				{
					CHECK_FOR_INTERRUPTS();
					if (ij_key_eq(t2->s, t2->len, cur->patterns[j].src))
						next = cur->patterns[j].schema;
				}
			}
			else if (ij_tok_is(t, "allOf"))
				next = ij_tok_index(t2, cur->allOf, cur->nallOf);
			else if (ij_tok_is(t, "anyOf"))
				next = ij_tok_index(t2, cur->anyOf, cur->nanyOf);
			else if (ij_tok_is(t, "oneOf"))
				next = ij_tok_index(t2, cur->oneOf, cur->noneOf);
			else if (ij_tok_is(t, "prefixItems"))
				next = ij_tok_index(t2, cur->prefixItems, cur->nprefix);
		}
		cur = next;
		i += used;
	}
	return cur;
}

/* follow the pointer through the raw schema document */
static bool
ij_walk_raw(IjCompile *cc, IjToken *toks, int n, JsonbValue *out)
{
	Jsonb	   *doc = cc->schema->doc;
	JsonbValue	cur;
	int			i;

	if (JB_ROOT_IS_SCALAR(doc))
	{
		if (!JsonbExtractScalar(&doc->root, &cur))
			return false;
	}
	else
	{
		cur.type = jbvBinary;
		cur.val.binary.data = &doc->root;
		cur.val.binary.len = VARSIZE(doc) - VARHDRSZ;
	}
	for (i = 0; i < n; i++)
	{
		JsonbValue *next;

		CHECK_FOR_INTERRUPTS();
		if (cur.type != jbvBinary)
			return false;
		if (JsonContainerIsObject(cur.val.binary.data))
		{
			next = getKeyJsonValueFromContainer(cur.val.binary.data,
												toks[i].s, toks[i].len, NULL);
		}
		else
		{
			int			idx;

			if (!ij_parse_index(toks[i].s, toks[i].len, &idx) ||
				idx >= (int) JsonContainerSize(cur.val.binary.data))
				return false;
			next = getIthJsonbValueFromContainer(cur.val.binary.data, idx);
		}
		if (next == NULL)
			return false;
		cur = *next;
	}
	*out = cur;
	return true;
}

/* lazy_by_path: keyed by the (NUL-terminated) pointer, not its address */
typedef struct IjLazyEntry
{
	char	   *path;			/* hash key */
	IjNode	   *node;
} IjLazyEntry;

static uint32
ij_lazy_hash(const void *key, Size keysize)
{
	const char *s = *(char *const *) key;

	return hash_bytes((const unsigned char *) s, strlen(s));
}

static int
ij_lazy_match(const void *key1, const void *key2, Size keysize)
{
	return strcmp(*(char *const *) key1, *(char *const *) key2);
}

static IjNode *
ij_resolve(IjCompile *cc, IjNode *node)
{
	IjToken    *toks;
	int			n;
	IjNode	   *target;
	StringInfoData canon;
	JsonbValue	v;
	int			i;
	MemoryContext old;
	IjLazyEntry *le;
	bool		found;

	old = MemoryContextSwitchTo(cc->scratch);
	toks = ij_decode_pointer(node, &n);
	MemoryContextSwitchTo(old);

	target = ij_walk_compiled(cc->schema->root, toks, n);
	if (target != NULL)
		return target;

	/* not a compiled position: compiled already for another $ref? */
	initStringInfo(&canon);
	for (i = 0; i < n; i++)
	{
		CHECK_FOR_INTERRUPTS();
		appendStringInfoChar(&canon, '/');
		ij_append_token(&canon, toks[i].s, toks[i].len);
	}
	if (cc->lazy_by_path == NULL)
	{
		HASHCTL		ctl;

		memset(&ctl, 0, sizeof(ctl));
		ctl.keysize = sizeof(char *);
		ctl.entrysize = sizeof(IjLazyEntry);
		ctl.hash = ij_lazy_hash;
		ctl.match = ij_lazy_match;
		ctl.hcxt = cc->scratch;
		cc->lazy_by_path = hash_create("idemjob schema $ref targets", 16, &ctl,
									   HASH_ELEM | HASH_FUNCTION |
									   HASH_COMPARE | HASH_CONTEXT);
	}
	le = hash_search(cc->lazy_by_path, &canon.data, HASH_FIND, NULL);
	if (le != NULL)
		return le->node;

	if (!ij_walk_raw(cc, toks, n, &v))
		ij_bad_ref(node, "points at nothing in this schema");
	if (v.type != jbvBool && !ij_is_object(&v))
		ij_bad_ref(node, "does not point at a schema (an object or a boolean)");

	target = ij_compile_node(cc, &v, NULL, NULL, NULL, 0, -1, false);
	target->lazy_path = canon.data;
	le = hash_search(cc->lazy_by_path, &canon.data, HASH_ENTER, &found);
	Assert(!found);
	le->path = canon.data;
	le->node = target;
	if (cc->nlazy >= cc->maxlazy)
	{
		cc->maxlazy = cc->maxlazy * 2 + 4;
		cc->lazy = cc->lazy ?
			repalloc(cc->lazy, sizeof(IjNode *) * cc->maxlazy) :
			palloc(sizeof(IjNode *) * cc->maxlazy);
	}
	cc->lazy[cc->nlazy++] = target;
	return target;
}

typedef void (*IjVisit) (IjCompile *cc, IjNode *node);

/* call fn on each direct subschema of node */
static void
ij_for_children(IjCompile *cc, IjNode *n, IjVisit fn)
{
	int			i;

	if (n->kind != IJ_OBJECT)
		return;
	for (i = 0; i < n->nprefix; i++)
		fn(cc, n->prefixItems[i]);
	if (n->items)
		fn(cc, n->items);
	if (n->contains)
		fn(cc, n->contains);
	for (i = 0; i < n->nprops; i++)
		fn(cc, n->props[i].schema);
	for (i = 0; i < n->npatterns; i++)
		fn(cc, n->patterns[i].schema);
	if (n->additionalProperties)
		fn(cc, n->additionalProperties);
	if (n->propertyNames)
		fn(cc, n->propertyNames);
	for (i = 0; i < n->ndepschemas; i++)
		fn(cc, n->depschemas[i].schema);
	for (i = 0; i < n->ndefs; i++)
		fn(cc, n->defs[i].schema);
	for (i = 0; i < n->nallOf; i++)
		fn(cc, n->allOf[i]);
	for (i = 0; i < n->nanyOf; i++)
		fn(cc, n->anyOf[i]);
	for (i = 0; i < n->noneOf; i++)
		fn(cc, n->oneOf[i]);
	if (n->not)
		fn(cc, n->not);
	if (n->if_)
		fn(cc, n->if_);
	if (n->then_)
		fn(cc, n->then_);
	if (n->else_)
		fn(cc, n->else_);
}

static void
ij_link(IjCompile *cc, IjNode *n)
{
	check_stack_depth();
	CHECK_FOR_INTERRUPTS();
	if (n->ref)
		n->reftarget = ij_resolve(cc, n);
	ij_for_children(cc, n, ij_link);
}

/*
 * Refuse a loop of in-place applicators: validating would come back to the
 * same subschema for the same value and never end.
 */
static void
ij_inplace_dfs(IjNode *n)
{
	int			i;

	check_stack_depth();
	CHECK_FOR_INTERRUPTS();
	if (n->dfs == IJ_DFS_DONE || n->kind != IJ_OBJECT)
		return;
	if (n->dfs == IJ_DFS_ACTIVE)
	{
		StringInfoData path;

		initStringInfo(&path);
		ij_append_node_path(&path, n);
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid output schema at \"%s\": reference cycle that never descends into the value",
						path.data),
				 errdetail("Following \"$ref\", \"allOf\", \"anyOf\", \"oneOf\", \"not\", \"if\", \"then\", \"else\" or \"dependentSchemas\" from here leads back here for the same value, so validation would never end.")));
	}
	n->dfs = IJ_DFS_ACTIVE;
	if (n->reftarget)
		ij_inplace_dfs(n->reftarget);
	for (i = 0; i < n->nallOf; i++)
		ij_inplace_dfs(n->allOf[i]);
	for (i = 0; i < n->nanyOf; i++)
		ij_inplace_dfs(n->anyOf[i]);
	for (i = 0; i < n->noneOf; i++)
		ij_inplace_dfs(n->oneOf[i]);
	if (n->not)
		ij_inplace_dfs(n->not);
	if (n->if_)
		ij_inplace_dfs(n->if_);
	if (n->then_)
		ij_inplace_dfs(n->then_);
	if (n->else_)
		ij_inplace_dfs(n->else_);
	for (i = 0; i < n->ndepschemas; i++)
		ij_inplace_dfs(n->depschemas[i].schema);
	n->dfs = IJ_DFS_DONE;
}

static void
ij_check_cycles(IjCompile *cc, IjNode *n)
{
	check_stack_depth();
	CHECK_FOR_INTERRUPTS();
	ij_inplace_dfs(n);
	ij_for_children(cc, n, ij_check_cycles);
}

/* where a chain of nodes that are nothing but a $ref ends */
static IjNode *
ij_skip_refs(IjNode *n)
{
	while (n->kind == IJ_OBJECT && n->pure_ref)
	{
		CHECK_FOR_INTERRUPTS();
		n = n->reftarget;
	}
	return n;
}

#define IJ_COLLAPSE(slot) \
	do { ij_collapse(slot); (slot) = ij_skip_refs(slot); } while (0)

/*
 * Point every subschema slot past nodes that are nothing but a $ref, so
 * that a recursive schema costs no stack frame for the hop.  Runs after the
 * cycle check (a chain of pure $refs therefore ends), visiting each node of
 * the tree once (it recurses into the original child before replacing it).
 */
static void
ij_collapse(IjNode *n)
{
	int			i;

	check_stack_depth();
	CHECK_FOR_INTERRUPTS();
	if (n->kind != IJ_OBJECT)
		return;
	if (n->reftarget)
		n->reftarget = ij_skip_refs(n->reftarget);
	for (i = 0; i < n->nprefix; i++)
		IJ_COLLAPSE(n->prefixItems[i]);
	if (n->items)
		IJ_COLLAPSE(n->items);
	if (n->contains)
		IJ_COLLAPSE(n->contains);
	for (i = 0; i < n->nprops; i++)
		IJ_COLLAPSE(n->props[i].schema);
	for (i = 0; i < n->npatterns; i++)
		IJ_COLLAPSE(n->patterns[i].schema);
	if (n->additionalProperties)
		IJ_COLLAPSE(n->additionalProperties);
	if (n->propertyNames)
		IJ_COLLAPSE(n->propertyNames);
	for (i = 0; i < n->ndepschemas; i++)
		IJ_COLLAPSE(n->depschemas[i].schema);
	for (i = 0; i < n->ndefs; i++)
		ij_collapse(n->defs[i].schema);
	for (i = 0; i < n->nallOf; i++)
		IJ_COLLAPSE(n->allOf[i]);
	for (i = 0; i < n->nanyOf; i++)
		IJ_COLLAPSE(n->anyOf[i]);
	for (i = 0; i < n->noneOf; i++)
		IJ_COLLAPSE(n->oneOf[i]);
	if (n->not)
		IJ_COLLAPSE(n->not);
	if (n->if_)
		IJ_COLLAPSE(n->if_);
	if (n->then_)
		IJ_COLLAPSE(n->then_);
	if (n->else_)
		IJ_COLLAPSE(n->else_);
}

/* ----------------------------------------------------------------
 * The expansion bound (after the cycle check, before ij_collapse)
 *
 * Validation evaluates a subschema at a value, and from there the
 * subschemas its in-place applicators name ($ref, allOf, anyOf, oneOf,
 * not, if/then/else, dependentSchemas) at the same value, and its child
 * applicators at the value's members or items.  Without sharing, a $ref
 * named twice is evaluated twice: a chain of $defs each naming the next
 * one twice doubles the work per link.  For every subschema we count,
 * following $refs as if expanded and saturating at the bound:
 *
 *	xin		evaluations at one value (1 + the in-place subschemas' xin);
 *	xdown	evaluations at one member, item or property name, over the
 *			subschemas that apply there at once (per subschema the largest
 *			property's or the additionalProperties' count plus every
 *			patternProperties', the largest prefixItems' or the items'
 *			count plus the contains', or the propertyNames'), summed over
 *			the in-place subschemas;
 *	xall	the most at any one value below, max(xin, xdown), recursively.
 *
 * A schema where one of these exceeds the bound is refused.  A recursion
 * through the value (a $ref back to an enclosing subschema from under
 * "items", "properties", ...) is counted once: it can only repeat as deep
 * as the value goes, and validation decides each subschema reached by
 * more than one edge once per value (the memo), so that
 * the work stays within subschemas times values whatever the schema.
 * ----------------------------------------------------------------
 */

static inline int64
ij_sat_add(IjCompile *cc, int64 a, int64 b)
{
	/* both are at most expand_max + 1, far from overflow */
	int64		r = a + b;

	return r > cc->expand_max ? cc->expand_max + 1 : r;
}

/* the in-place subschemas of n, as they are before ij_collapse */
#define IJ_FOREACH_INPLACE(n, c, body) \
	do { \
		int			i_; \
		if ((n)->reftarget) { IjNode *c = (n)->reftarget; body; } \
		for (i_ = 0; i_ < (n)->nallOf; i_++) { IjNode *c = (n)->allOf[i_]; body; } \
		for (i_ = 0; i_ < (n)->nanyOf; i_++) { IjNode *c = (n)->anyOf[i_]; body; } \
		for (i_ = 0; i_ < (n)->noneOf; i_++) { IjNode *c = (n)->oneOf[i_]; body; } \
		if ((n)->not) { IjNode *c = (n)->not; body; } \
		if ((n)->if_) { IjNode *c = (n)->if_; body; } \
		if ((n)->then_) { IjNode *c = (n)->then_; body; } \
		if ((n)->else_) { IjNode *c = (n)->else_; body; } \
		for (i_ = 0; i_ < (n)->ndepschemas; i_++) { IjNode *c = (n)->depschemas[i_].schema; body; } \
	} while (0)

static pg_noinline void
ij_too_expensive(IjCompile *cc, IjNode *n, bool below)
{
	StringInfoData path;
	StringInfoData via;
	IjNode	   *heavy = NULL;
	int64		heavyx = 0;

	initStringInfo(&path);
	ij_append_node_path(&path, n);

	/* name the $ref that brings the most (its own count is within bounds) */
	initStringInfo(&via);
	if (below && n->kind == IJ_OBJECT && n->reftarget)
	{
		heavy = n;
		heavyx = Max(n->reftarget->xin, n->reftarget->xdown);
	}
	else if (!below && n->kind == IJ_OBJECT)
	{
		if (n->reftarget)
		{
			heavy = n;
			heavyx = n->reftarget->xin;
		}
		IJ_FOREACH_INPLACE(n, c,
		{
			if (c != n->reftarget && c->ref != NULL && c->reftarget &&
				c->xin > heavyx)
			{
				heavy = c;
				heavyx = c->xin;
			}
		});
	}
	if (heavy != NULL)
	{
		StringInfoData hp;

		initStringInfo(&hp);
		ij_append_node_path(&hp, heavy);
		appendStringInfo(&via, " The largest part comes through \"$ref\": \"%s\" at \"%s\", which alone expands to %s" INT64_FORMAT " evaluations.",
						 ij_name(heavy->ref, heavy->reflen), hp.data,
						 heavyx > cc->expand_max ? "more than " : "",
						 Min(heavyx, cc->expand_max));
	}

	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid output schema at \"%s\": evaluation could multiply without bound",
					path.data),
			 errdetail("With every \"$ref\" expanded, one value %s would be checked against more than " INT64_FORMAT " subschemas (the limit for this schema: %d per subschema it compiles to, at least " INT64_FORMAT ").%s",
					   below ? "below this subschema" : "at this subschema",
					   cc->expand_max, IJ_EXPAND_PER_NODE, IJ_EXPAND_MIN,
					   via.data),
			 errhint("Refer to a shared definition once per value: each level that checks one value against the same definition twice doubles the work below it.")));
}

/* xin: evaluations at one value; the in-place graph has no cycle here */
static int64
ij_expand_in(IjCompile *cc, IjNode *n)
{
	int64		total = 1;
	int64		thenx = 0;
	int64		elsex = 0;

	check_stack_depth();
	CHECK_FOR_INTERRUPTS();
	if (n->kind != IJ_OBJECT)
		return 1;
	if (n->xin > 0)
		return n->xin;
	IJ_FOREACH_INPLACE(n, c,
	{
		int64		x = ij_expand_in(cc, c);

		/* then and else exclude each other */
		if (c == n->then_)
			thenx = x;
		else if (c == n->else_)
			elsex = x;
		else
			total = ij_sat_add(cc, total, x);
	});
	total = ij_sat_add(cc, total, Max(thenx, elsex));
	n->xin = total;
	if (total > cc->expand_max)
		ij_too_expensive(cc, n, false);
	return total;
}

static int64 ij_expand_all(IjCompile *cc, IjNode *n);

/* xdown: evaluations at one member, item or name of the value */
static int64
ij_expand_down(IjCompile *cc, IjNode *n)
{
	int64		own;
	int64		t;
	int64		sum;
	int			i;

	check_stack_depth();
	CHECK_FOR_INTERRUPTS();
	if (n->kind != IJ_OBJECT)
		return 0;
	if (n->xdmark == IJ_DFS_DONE)
		return n->xdown;
	if (n->xdmark == IJ_DFS_ACTIVE)
		return 0;				/* a recursion through the value */
	n->xdmark = IJ_DFS_ACTIVE;

	/* a member's value */
	t = 0;
	for (i = 0; i < n->nprops; i++)
		t = Max(t, ij_expand_all(cc, n->props[i].schema));
	if (n->additionalProperties)
		t = Max(t, ij_expand_all(cc, n->additionalProperties));
	for (i = 0; i < n->npatterns; i++)
		t = ij_sat_add(cc, t, ij_expand_all(cc, n->patterns[i].schema));
	own = t;
	/* a member's name */
	if (n->propertyNames)
		own = Max(own, ij_expand_all(cc, n->propertyNames));
	/* an item */
	t = 0;
	for (i = 0; i < n->nprefix; i++)
		t = Max(t, ij_expand_all(cc, n->prefixItems[i]));
	if (n->items)
		t = Max(t, ij_expand_all(cc, n->items));
	if (n->contains)
		t = ij_sat_add(cc, t, ij_expand_all(cc, n->contains));
	own = Max(own, t);

	sum = own;
	IJ_FOREACH_INPLACE(n, c,
	{
		sum = ij_sat_add(cc, sum, ij_expand_down(cc, c));
	});
	n->xdown = sum;
	n->xdmark = IJ_DFS_DONE;
	return sum;
}

/* xall: the most evaluations at any one value, this one or below */
static int64
ij_expand_all(IjCompile *cc, IjNode *n)
{
	int64		x;

	check_stack_depth();
	CHECK_FOR_INTERRUPTS();
	if (n->kind != IJ_OBJECT)
		return 1;
	if (n->xmark == IJ_DFS_DONE)
		return n->xall;
	if (n->xmark == IJ_DFS_ACTIVE)
		return 1;				/* a recursion through the value */
	n->xmark = IJ_DFS_ACTIVE;
	x = ij_expand_in(cc, n);
	n->xall = Max(x, ij_expand_down(cc, n));
	n->xmark = IJ_DFS_DONE;
	if (n->xall > cc->expand_max)
		ij_too_expensive(cc, n, true);
	return n->xall;
}

/* every subschema, referenced or not */
static void
ij_check_expansion(IjCompile *cc, IjNode *n)
{
	check_stack_depth();
	CHECK_FOR_INTERRUPTS();
	(void) ij_expand_all(cc, n);
	ij_for_children(cc, n, ij_check_expansion);
}

/*
 * After ij_collapse: count the evaluation edges into each subschema
 * reachable from the root.  One reached by two or more (two $refs to one
 * definition, a recursion back to the root, ...) may be asked about the
 * same value more than once: it goes through the memo at validation.  One
 * reached by a single edge is evaluated at a value at most as often as
 * the subschema that edge comes from, so memoizing the shared ones bounds
 * them all.
 */
static void
ij_mark_edge(IjCompile *cc, IjNode *c)
{
	int			i;

	check_stack_depth();
	CHECK_FOR_INTERRUPTS();
	c->indegree++;
	if (c->indegree == 2 && c->kind == IJ_OBJECT && !c->trivial)
	{
		c->memo = true;
		cc->schema->any_memo = true;
	}
	if (c->reached || c->kind != IJ_OBJECT)
		return;
	c->reached = true;
	for (i = 0; i < c->nprefix; i++)
		ij_mark_edge(cc, c->prefixItems[i]);
	if (c->items)
		ij_mark_edge(cc, c->items);
	if (c->contains)
		ij_mark_edge(cc, c->contains);
	for (i = 0; i < c->nprops; i++)
		ij_mark_edge(cc, c->props[i].schema);
	for (i = 0; i < c->npatterns; i++)
		ij_mark_edge(cc, c->patterns[i].schema);
	if (c->additionalProperties)
		ij_mark_edge(cc, c->additionalProperties);
	if (c->propertyNames)
		ij_mark_edge(cc, c->propertyNames);
	IJ_FOREACH_INPLACE(c, d,
	{
		ij_mark_edge(cc, d);
	});
}

static IjSchema *
ij_schema_compile_in(Jsonb *schema)
{
	IjCompile	cc;
	IjSchema   *out;
	JsonbValue	root;
	int			i;

	memset(&cc, 0, sizeof(cc));
	out = palloc0(sizeof(IjSchema));
	out->cxt = CurrentMemoryContext;
	out->free_regexes.func = ij_free_regexes;
	out->free_regexes.arg = out;
	MemoryContextRegisterResetCallback(CurrentMemoryContext,
									   &out->free_regexes);
	out->doc = palloc(VARSIZE(schema));
	memcpy(out->doc, schema, VARSIZE(schema));

	cc.schema = out;
	cc.scratch = AllocSetContextCreate(CurrentMemoryContext,
									   "idemjob schema compile",
									   ALLOCSET_DEFAULT_SIZES);
	cc.zero = DatumGetNumeric(DirectFunctionCall1(int8_numeric,
												  Int64GetDatum(0)));
	cc.clamp = DatumGetNumeric(DirectFunctionCall1(int8_numeric,
												   Int64GetDatum(IJ_COUNT_CLAMP)));

	if (JB_ROOT_IS_SCALAR(out->doc))
	{
		if (!JsonbExtractScalar(&out->doc->root, &root))
			elog(ERROR, "could not extract jsonb scalar");
	}
	else
	{
		root.type = jbvBinary;
		root.val.binary.data = &out->doc->root;
		root.val.binary.len = VARSIZE(out->doc) - VARHDRSZ;
	}
	out->root = ij_compile_node(&cc, &root, NULL, NULL, NULL, 0, -1, true);

	ij_link(&cc, out->root);
	for (i = 0; i < cc.nlazy; i++)		/* nlazy may grow as we go */
		ij_link(&cc, cc.lazy[i]);

	ij_check_cycles(&cc, out->root);
	for (i = 0; i < cc.nlazy; i++)
		ij_check_cycles(&cc, cc.lazy[i]);

	cc.expand_max = Max(IJ_EXPAND_MIN, IJ_EXPAND_PER_NODE * cc.nnodes);
	ij_check_expansion(&cc, out->root);
	for (i = 0; i < cc.nlazy; i++)
		ij_check_expansion(&cc, cc.lazy[i]);

	ij_collapse(out->root);
	for (i = 0; i < cc.nlazy; i++)
		ij_collapse(cc.lazy[i]);
	out->root = ij_skip_refs(out->root);

	ij_mark_edge(&cc, out->root);

	MemoryContextDelete(cc.scratch);
	return out;
}

/*
 * Compile into a memory context of its own, a child of the caller's: the
 * caller frees the compiled form by deleting (or resetting) its context,
 * and a schema that fails to compile (refused, or interrupted by a cancel)
 * gives back everything it took, regular expressions included, before the
 * error leaves here.
 */
IjSchema *
ij_schema_compile(Jsonb *schema)
{
	MemoryContext cxt;
	MemoryContext old;
	IjSchema   *volatile out = NULL;

	cxt = AllocSetContextCreate(CurrentMemoryContext, "idemjob compiled schema",
								ALLOCSET_SMALL_SIZES);
	old = MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		out = ij_schema_compile_in(schema);
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(old);
		MemoryContextDelete(cxt);
		PG_RE_THROW();
	}
	PG_END_TRY();
	MemoryContextSwitchTo(old);
	return out;
}


/* ----------------------------------------------------------------
 * Validation
 * ----------------------------------------------------------------
 */

static void
ij_push_key(IjValidate *vx, const char *key, int len)
{
	if (vx->depth >= vx->maxdepth)
	{
		vx->maxdepth *= 2;
		vx->path = repalloc(vx->path, sizeof(IjPathSeg) * vx->maxdepth);
	}
	vx->path[vx->depth].key = key;
	vx->path[vx->depth].len = len;
	vx->path[vx->depth].index = -1;
	vx->depth++;
}

static void
ij_push_index(IjValidate *vx, int index)
{
	ij_push_key(vx, NULL, 0);
	vx->path[vx->depth - 1].index = index;
}

static char *
ij_instance_path(IjValidate *vx)
{
	StringInfoData buf;
	int			i;

	initStringInfo(&buf);
	for (i = 0; i < vx->depth; i++)
	{
		appendStringInfoChar(&buf, '/');
		if (vx->path[i].key)
			ij_append_token(&buf, vx->path[i].key, vx->path[i].len);
		else
			appendStringInfo(&buf, "%d", vx->path[i].index);
	}
	return buf.data;
}

static bool ij_fail(IjValidate *vx, const char *keyword, const char *fmt,...)
			pg_attribute_printf(3, 4);

/* record the violation; always returns false */
static bool
ij_fail(IjValidate *vx, const char *keyword, const char *fmt,...)
{
	StringInfoData msg;

	initStringInfo(&msg);
	for (;;)
	{
		va_list		args;
		int			needed;

		va_start(args, fmt);
		needed = appendStringInfoVA(&msg, fmt, args);
		va_end(args);
		if (needed == 0)
			break;
		enlargeStringInfo(&msg, needed);
	}
	vx->err_keyword = keyword;
	vx->err_message = msg.data;
	vx->err_path = ij_instance_path(vx);
	return false;
}

/* fail, building the message only when someone will read it */
#define IJ_FAIL(vx, keyword, ...) \
	((vx)->quiet > 0 ? false : ij_fail((vx), (keyword), __VA_ARGS__))

static int
ij_value_type(JsonbValue *v)
{
	switch (v->type)
	{
		case jbvNull:
			return IJ_T_NULL;
		case jbvBool:
			return IJ_T_BOOLEAN;
		case jbvNumeric:
			return IJ_T_NUMBER;
		case jbvString:
			return IJ_T_STRING;
		case jbvBinary:
			return JsonContainerIsObject(v->val.binary.data) ?
				IJ_T_OBJECT : IJ_T_ARRAY;
		default:
			elog(ERROR, "unexpected jsonb value type %d", (int) v->type);
	}
	return 0;					/* keep compiler quiet */
}

static const char *
ij_type_name(int bit)
{
	int			i;

	for (i = 0; i < (int) lengthof(ij_types); i++)
	{
		if (ij_types[i].bit == bit)
			return ij_types[i].name;
	}
	return "?";
}

static char *
ij_type_list(uint8 types)
{
	StringInfoData buf;
	int			i;
	int			n = 0;

	initStringInfo(&buf);
	for (i = 0; i < (int) lengthof(ij_types); i++)
	{
		if (types & ij_types[i].bit)
		{
			if (n++ > 0)
				appendStringInfoString(&buf, " or ");
			appendStringInfo(&buf, "\"%s\"", ij_types[i].name);
		}
	}
	return buf.data;
}

/*
 * JSON equality as an ordering: type first, numbers by value (1 = 1.0),
 * strings by length then bytes, arrays and objects by
 * compareJsonbContainers, which compares numbers the same way.
 */
static int
ij_rank(JsonbValue *v)
{
	switch (ij_value_type(v))
	{
		case IJ_T_NULL:
			return 0;
		case IJ_T_BOOLEAN:
			return 1;
		case IJ_T_NUMBER:
			return 2;
		case IJ_T_STRING:
			return 3;
		case IJ_T_ARRAY:
			return 4;
		default:
			return 5;
	}
}

static int
ij_compare(JsonbValue *a, JsonbValue *b)
{
	int			ra = ij_rank(a);
	int			rb = ij_rank(b);

	if (ra != rb)
		return ra < rb ? -1 : 1;
	switch (a->type)
	{
		case jbvNull:
			return 0;
		case jbvBool:
			return (int) a->val.boolean - (int) b->val.boolean;
		case jbvNumeric:
			return ij_numcmp(a->val.numeric, b->val.numeric);
		case jbvString:
			return ij_key_cmp(a->val.string.val, a->val.string.len,
							  b->val.string.val, b->val.string.len);
		default:
			return compareJsonbContainers(a->val.binary.data,
										  b->val.binary.data);
	}
}

typedef struct IjItem
{
	JsonbValue	v;
	uint64		hash;
	int			index;
} IjItem;

/* mix one more word into a running hash */
static inline uint64
ij_hash_mix(uint64 h, uint64 x)
{
	h = (h << 1) | (h >> 63);
	return hash_combine64(h, x);
}

static uint64 ij_hash_container(IjValidate *vx, JsonbContainer *c);

/*
 * A hash of a value that equal values (by ij_compare: 1 = 1.0, same keys
 * and members) share: scalars as jsonb hashes them (numbers by value),
 * containers from their members' hashes, in the order
 * compareJsonbContainers compares them.
 */
static inline uint64
ij_hash_value(IjValidate *vx, JsonbValue *v)
{
	uint64		h = 0;

	if (v->type == jbvBinary)
		return ij_hash_container(vx, v->val.binary.data);
	JsonbHashScalarValueExtended(v, &h, 0);
	return h;
}

static uint64
ij_hash_container(IjValidate *vx, JsonbContainer *c)
{
	uint64		h;
	JsonbIterator *it;
	JsonbValue	x;
	JsonbIteratorToken tok;
	bool		nested = false;
	IjHashEntry *e;
	bool		found;

	check_stack_depth();
	CHECK_FOR_INTERRUPTS();
	if (vx->hcache != NULL &&
		(e = ij_hcache_lookup(vx->hcache, c)) != NULL)
		return e->hash;

	h = JsonContainerIsObject(c) ? 0x13 : 0x11;
	it = JsonbIteratorInit(c);
	while ((tok = JsonbIteratorNext(&it, &x, true)) != WJB_DONE)
	{
		uint64		sh = 0;

		if (tok != WJB_KEY && tok != WJB_VALUE && tok != WJB_ELEM)
			continue;
		CHECK_FOR_INTERRUPTS();
		if (x.type == jbvBinary)
		{
			nested = true;
			sh = ij_hash_container(vx, x.val.binary.data);
		}
		else
			JsonbHashScalarValueExtended(&x, &sh, 0);
		h = ij_hash_mix(h, sh);
	}
	h = ij_hash_mix(h, 0x17);

	if (nested)
	{
		if (vx->hcache == NULL)
			vx->hcache = ij_hcache_create(CurrentMemoryContext, 64, NULL);
		e = ij_hcache_insert(vx->hcache, c, &found);
		e->hash = h;
	}
	return h;
}

/* by hash, then by value, then by position */
static inline int
ij_item_cmp(const IjItem *ia, const IjItem *ib)
{
	int			c;

	if (ia->hash != ib->hash)
		return ia->hash < ib->hash ? -1 : 1;
	c = ij_compare((JsonbValue *) &ia->v, (JsonbValue *) &ib->v);
	if (c != 0)
		return c;
	return ia->index - ib->index;
}

/* ij_sort_items(): a quicksort with the comparison inlined, interruptible */
#define ST_SORT ij_sort_items
#define ST_ELEMENT_TYPE IjItem
#define ST_COMPARE(a, b) ij_item_cmp(a, b)
#define ST_CHECK_FOR_INTERRUPTS
#define ST_SCOPE static
#define ST_DEFINE
#include "lib/sort_template.h"

static Numeric
ij_numeric(const char *s)
{
	return DatumGetNumeric(DirectFunctionCall3(numeric_in, CStringGetDatum(s),
											   ObjectIdGetDatum(InvalidOid),
											   Int32GetDatum(-1)));
}

static int
ij_min_scale(Numeric n)
{
	return DatumGetInt32(DirectFunctionCall1(numeric_min_scale,
											 NumericGetDatum(n)));
}

/*
 * The decimal digits of |n| * 10^scale, n having at most scale decimals,
 * without leading zeros ("" for zero).
 */
static char *
ij_scaled_digits(Numeric n, int scale)
{
	char	   *s = ij_numstr(n);
	const char *p = (*s == '-') ? s + 1 : s;
	const char *dot = strchr(p, '.');
	int			intlen = dot ? (int) (dot - p) : (int) strlen(p);
	const char *frac = dot ? dot + 1 : "";
	int			fraclen = strlen(frac);
	StringInfoData buf;
	int			i;

	initStringInfo(&buf);
	appendBinaryStringInfo(&buf, p, intlen);
	for (i = 0; i < scale; i++)
		appendStringInfoChar(&buf, i < fraclen ? frac[i] : '0');
	for (i = 0; i < buf.len && buf.data[i] == '0'; i++)
		;
	return buf.data + i;
}

/*
 * Is x a multiple of y (> 0)?  numeric_mod cannot be interrupted, and
 * dividing a 100,000-digit value by a 10,000-digit multipleOf takes a good
 * part of a second; so beyond small operands (the common case, decided by
 * numeric_mod at once), take the remainder a thousand digits at a time,
 * checking for interrupts between steps.
 */
static bool
ij_multiple_of(IjValidate *vx, Numeric x, Numeric y)
{
	int			sy;
	char	   *xd;
	char	   *yd;
	Numeric		ynum;
	char	   *r;
	int			xlen;
	int			pos;
	MemoryContext step;
	MemoryContext old;

	if (vx->big == NULL)
	{
		vx->big = ij_numeric("1e1000");
		vx->minus_big = ij_numeric("-1e1000");
	}
	if (VARSIZE(y) <= 200 && ij_numcmp(x, vx->big) < 0 &&
		ij_numcmp(x, vx->minus_big) > 0)
	{
		Datum		rem = DirectFunctionCall2(numeric_mod, NumericGetDatum(x),
											  NumericGetDatum(y));

		return ij_numcmp(DatumGetNumeric(rem), vx->zero) == 0;
	}

	/* a multiple of y has no more decimals than y */
	sy = ij_min_scale(y);
	if (ij_min_scale(x) > sy)
		return false;
	/* both as integers, scaled by 10^sy */
	xd = ij_scaled_digits(x, sy);
	yd = ij_scaled_digits(y, sy);
	ynum = ij_numeric(yd);
	xlen = strlen(xd);
	r = "";
	step = AllocSetContextCreate(CurrentMemoryContext, "idemjob multipleOf",
								 ALLOCSET_DEFAULT_SIZES);
	for (pos = 0; pos < xlen; pos += 1024)
	{
		char	   *dividend;
		char	   *rem;

		CHECK_FOR_INTERRUPTS();
		old = MemoryContextSwitchTo(step);
		dividend = psprintf("%s%.*s", r, Min(1024, xlen - pos), xd + pos);
		rem = ij_numstr(DatumGetNumeric(DirectFunctionCall2(numeric_mod,
															NumericGetDatum(ij_numeric(dividend)),
															NumericGetDatum(ynum))));
		MemoryContextSwitchTo(old);
		r = strcmp(rem, "0") == 0 ? "" : pstrdup(rem);
		MemoryContextReset(step);
	}
	MemoryContextDelete(step);
	return r[0] == '\0';
}

static pg_noinline bool
ij_check_number(IjValidate *vx, IjNode *s, Numeric x)
{
	if (s->minimum && ij_numcmp(x, s->minimum) < 0)
		return IJ_FAIL(vx, "minimum", "value must be at least %s",
					   ij_numstr(s->minimum));
	if (s->exclusiveMinimum && ij_numcmp(x, s->exclusiveMinimum) <= 0)
		return IJ_FAIL(vx, "exclusiveMinimum", "value must be greater than %s",
					   ij_numstr(s->exclusiveMinimum));
	if (s->maximum && ij_numcmp(x, s->maximum) > 0)
		return IJ_FAIL(vx, "maximum", "value must be at most %s",
					   ij_numstr(s->maximum));
	if (s->exclusiveMaximum && ij_numcmp(x, s->exclusiveMaximum) >= 0)
		return IJ_FAIL(vx, "exclusiveMaximum", "value must be less than %s",
					   ij_numstr(s->exclusiveMaximum));
	if (s->multipleOf && !ij_multiple_of(vx, x, s->multipleOf))
		return IJ_FAIL(vx, "multipleOf", "value must be a multiple of %s",
					   ij_numstr(s->multipleOf));
	return true;
}

static bool
ij_regex_match(regex_t *re, const pg_wchar *w, int wlen)
{
	int			rc = pg_regexec(re, w, wlen, 0, NULL, 0, NULL, 0);

	if (rc == REG_OKAY)
		return true;
	if (rc != REG_NOMATCH)
	{
		char		errbuf[128];

		/* REG_CANCEL: the cancel or timeout itself (57014), see above */
		CHECK_FOR_INTERRUPTS();
		pg_regerror(rc, re, errbuf, sizeof(errbuf));
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_REGULAR_EXPRESSION),
				 errmsg("regular expression failed: %s", errbuf)));
	}
	return false;
}

static pg_wchar *
ij_to_wchar(const char *s, int len, int *wlen)
{
	pg_wchar   *w = palloc(sizeof(pg_wchar) * (len + 1));

	*wlen = pg_mb2wchar_with_len(s, w, len);
	return w;
}

static pg_noinline bool
ij_check_string(IjValidate *vx, IjNode *s, const char *str, int len)
{
	if (s->minLength > 0 || s->maxLength >= 0)
	{
		/* a character is at least one byte: skip counting when we can */
		int64		chars = -1;

		if (s->minLength > 0 && len < s->minLength)
			chars = pg_mbstrlen_with_len(str, len);
		else if (s->minLength > 0 || (s->maxLength >= 0 && len > s->maxLength))
			chars = pg_mbstrlen_with_len(str, len);
		if (chars >= 0 && chars < s->minLength)
			return IJ_FAIL(vx, "minLength",
						   "string must be at least " INT64_FORMAT " characters long, found " INT64_FORMAT,
						   s->minLength, chars);
		if (chars >= 0 && s->maxLength >= 0 && chars > s->maxLength)
			return IJ_FAIL(vx, "maxLength",
						   "string must be at most " INT64_FORMAT " characters long, found " INT64_FORMAT,
						   s->maxLength, chars);
	}
	if (s->pattern)
	{
		bool		ok;

		if (s->pattern->fast)
			ok = ij_fast_match(s->pattern->fast, str, len);
		else
		{
			int			wlen;
			pg_wchar   *w = ij_to_wchar(str, len, &wlen);

			ok = ij_regex_match(&s->pattern->re, w, wlen);
			pfree(w);
		}
		if (!ok)
			return IJ_FAIL(vx, "pattern", "string does not match pattern \"%s\"",
						   s->pattern->src);
	}
	return true;
}

/*
 * uniqueItems: hash every item once, sort by hash (equal values are then
 * neighbours, and only items whose hashes collide are compared in full),
 * and report the first item that repeats an earlier one, with the first
 * occurrence.
 */
static pg_noinline bool
ij_check_unique(IjValidate *vx, JsonbContainer *c)
{
	int			n = JsonContainerSize(c);
	IjItem	   *items = palloc(sizeof(IjItem) * n);
	JsonbIterator *it = JsonbIteratorInit(c);
	JsonbValue	v;
	JsonbIteratorToken tok;
	int			i = 0;
	int			group = 0;
	int			a = -1;
	int			b = -1;

	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (tok != WJB_ELEM)
			continue;
		CHECK_FOR_INTERRUPTS();
		items[i].v = v;
		items[i].hash = ij_hash_value(vx, &v);
		items[i].index = i;
		i++;
	}
	n = i;
	ij_sort_items(items, n);
	for (i = 1; i < n; i++)
	{
		CHECK_FOR_INTERRUPTS();
		if (items[i - 1].hash != items[i].hash ||
			ij_compare(&items[i - 1].v, &items[i].v) != 0)
		{
			group = i;
			continue;
		}
		/* a group of equal items, by position: its second one repeats */
		if (i == group + 1 && (b < 0 || items[i].index < b))
		{
			a = items[group].index;
			b = items[i].index;
		}
	}
	pfree(items);
	if (b >= 0)
		return IJ_FAIL(vx, "uniqueItems",
					   "array items %d and %d are equal", a, b);
	return true;
}

static pg_noinline bool
ij_check_array(IjValidate *vx, IjNode *s, JsonbContainer *c)
{
	int64		n = JsonContainerSize(c);

	if (n < s->minItems)
		return IJ_FAIL(vx, "minItems",
					   "array must have at least " INT64_FORMAT " items, found " INT64_FORMAT,
					   s->minItems, n);
	if (s->maxItems >= 0 && n > s->maxItems)
		return IJ_FAIL(vx, "maxItems",
					   "array must have at most " INT64_FORMAT " items, found " INT64_FORMAT,
					   s->maxItems, n);
	if (s->uniqueItems && n > 1 && !ij_check_unique(vx, c))
		return false;

	if (n > 0 &&
		(s->nprefix > 0 || (s->items && !s->items->trivial) || s->contains))
	{
		JsonbIterator *it = JsonbIteratorInit(c);
		JsonbValue	v;
		JsonbIteratorToken tok;
		int			i = 0;
		int64		matches = 0;

		while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
		{
			IjNode	   *sub;
			const char *via;

			if (tok != WJB_ELEM)
				continue;
			CHECK_FOR_INTERRUPTS();
			if (i < s->nprefix)
			{
				sub = s->prefixItems[i];
				via = "prefixItems";
			}
			else
			{
				sub = s->items;
				via = "items";
			}
			if (sub && !sub->trivial)
			{
				bool		ok;

				ij_push_index(vx, i);
				if (sub->kind == IJ_FALSE && i >= s->nprefix)
					ok = IJ_FAIL(vx, via,
								 "array item %d is not allowed (at most %d items)",
								 i, s->nprefix);
				else if (sub->kind == IJ_FALSE)
					ok = IJ_FAIL(vx, via, "array item %d is not allowed", i);
				else
					ok = ij_check(vx, sub, &v, via);
				vx->depth--;
				if (!ok)
					return false;
			}
			if (s->contains)
			{
				bool		m;

				vx->quiet++;
				m = ij_check(vx, s->contains, &v, "contains");
				vx->quiet--;
				if (m)
					matches++;
			}
			i++;
		}
		if (s->contains)
		{
			if (matches < s->minContains)
			{
				if (s->minContains == 1)
					return IJ_FAIL(vx, "contains",
								   "array must contain an item matching \"contains\"");
				return IJ_FAIL(vx, "minContains",
							   "array must contain at least " INT64_FORMAT " items matching \"contains\", found " INT64_FORMAT,
							   s->minContains, matches);
			}
			if (s->maxContains >= 0 && matches > s->maxContains)
				return IJ_FAIL(vx, "maxContains",
							   "array must contain at most " INT64_FORMAT " items matching \"contains\", found " INT64_FORMAT,
							   s->maxContains, matches);
		}
	}
	else if (n == 0 && s->contains && s->minContains > 0)
	{
		if (s->minContains == 1)
			return IJ_FAIL(vx, "contains",
						   "array must contain an item matching \"contains\"");
		return IJ_FAIL(vx, "minContains",
					   "array must contain at least " INT64_FORMAT " items matching \"contains\", found 0",
					   s->minContains);
	}
	return true;
}

static bool
ij_has_key(JsonbContainer *c, const char *key, int len)
{
	JsonbValue	tmp;

	return getKeyJsonValueFromContainer(c, key, len, &tmp) != NULL;
}

/* one member's value against one subschema reached through keyword via */
static bool
ij_check_member(IjValidate *vx, IjNode *sub, const char *via,
				const char *key, int keylen, JsonbValue *val)
{
	bool		ok;

	if (sub->trivial)
		return true;
	if (sub->kind == IJ_FALSE)
		return IJ_FAIL(vx, via, "property \"%s\" is not allowed",
					   ij_name(key, keylen));
	ij_push_key(vx, key, keylen);
	ok = ij_check(vx, sub, val, via);
	vx->depth--;
	return ok;
}

static pg_noinline bool
ij_check_name(IjValidate *vx, IjNode *s, const char *key, int keylen)
{
	JsonbValue	kv;
	bool		ok;

	kv.type = jbvString;
	kv.val.string.val = (char *) key;
	kv.val.string.len = keylen;
	ok = ij_check(vx, s, &kv, "propertyNames");
	if (!ok && vx->quiet == 0)
	{
		vx->err_keyword = "propertyNames";
		vx->err_message = psprintf("property name \"%s\" is not allowed: %s",
								   ij_name(key, keylen), vx->err_message);
		vx->err_path = ij_instance_path(vx);
	}
	return ok;
}

static pg_noinline bool
ij_check_object(IjValidate *vx, IjNode *s, JsonbValue *obj)
{
	JsonbContainer *c = obj->val.binary.data;
	int64		n = JsonContainerSize(c);
	int			i;
	int			j;

	for (i = 0; i < s->nrequired; i++)
	{
		CHECK_FOR_INTERRUPTS();
		if (!ij_has_key(c, s->required[i].name, s->required[i].len))
			return IJ_FAIL(vx, "required", "required property \"%s\" is missing",
						   ij_name(s->required[i].name, s->required[i].len));
	}
	if (n < s->minProperties)
		return IJ_FAIL(vx, "minProperties",
					   "object must have at least " INT64_FORMAT " properties, found " INT64_FORMAT,
					   s->minProperties, n);
	if (s->maxProperties >= 0 && n > s->maxProperties)
		return IJ_FAIL(vx, "maxProperties",
					   "object must have at most " INT64_FORMAT " properties, found " INT64_FORMAT,
					   s->maxProperties, n);
	for (i = 0; i < s->ndepreq; i++)
	{
		IjDepReq   *d = &s->depreq[i];

		CHECK_FOR_INTERRUPTS();
		if (d->nreq == 0 || !ij_has_key(c, d->name, d->len))
			continue;
		for (j = 0; j < d->nreq; j++)
		{
			CHECK_FOR_INTERRUPTS();
			if (!ij_has_key(c, d->req[j].name, d->req[j].len))
				return IJ_FAIL(vx, "dependentRequired",
							   "property \"%s\" is required when \"%s\" is present",
							   ij_name(d->req[j].name, d->req[j].len),
							   ij_name(d->name, d->len));
		}
	}

	if (n > 0 &&
		(s->nprops > 0 || s->npatterns > 0 ||
		 (s->additionalProperties && !s->additionalProperties->trivial) ||
		 (s->propertyNames && !s->propertyNames->trivial)))
	{
		JsonbIterator *it = JsonbIteratorInit(c);
		JsonbValue	k;
		JsonbValue	v;
		JsonbIteratorToken tok;

		while ((tok = JsonbIteratorNext(&it, &k, true)) != WJB_DONE)
		{
			const char *key;
			int			keylen;
			bool		matched = false;
			IjNamed    *prop;

			if (tok != WJB_KEY)
				continue;
			tok = JsonbIteratorNext(&it, &v, true);
			Assert(tok == WJB_VALUE);
			CHECK_FOR_INTERRUPTS();
			key = k.val.string.val;
			keylen = k.val.string.len;

			if (s->propertyNames && !s->propertyNames->trivial &&
				!ij_check_name(vx, s->propertyNames, key, keylen))
				return false;

			prop = ij_named_find(s->props, s->nprops, key, keylen);
			if (prop)
			{
				matched = true;
				if (!ij_check_member(vx, prop->schema, "properties",
									 key, keylen, &v))
					return false;
			}
			if (s->npatterns > 0)
			{
				int			wlen = 0;
				pg_wchar   *w = NULL;

				for (j = 0; j < s->npatterns; j++)
				{
					bool		m;

					CHECK_FOR_INTERRUPTS();
					if (s->patterns[j].fast)
						m = ij_fast_match(s->patterns[j].fast, key, keylen);
					else
					{
						if (w == NULL)
							w = ij_to_wchar(key, keylen, &wlen);
						m = ij_regex_match(&s->patterns[j].re, w, wlen);
					}
					if (!m)
						continue;
					matched = true;
					if (!ij_check_member(vx, s->patterns[j].schema,
										 "patternProperties", key, keylen, &v))
						return false;
				}
				if (w)
					pfree(w);
			}
			if (!matched && s->additionalProperties &&
				!ij_check_member(vx, s->additionalProperties,
								 "additionalProperties", key, keylen, &v))
				return false;
		}
	}

	for (i = 0; i < s->ndepschemas; i++)
	{
		IjNamed    *d = &s->depschemas[i];

		CHECK_FOR_INTERRUPTS();
		if (ij_has_key(c, d->name, d->len) &&
			!ij_check(vx, d->schema, obj, "dependentSchemas"))
			return false;
	}
	return true;
}

/* does v satisfy s?  Quiet: only the answer. */
static bool
ij_matches(IjValidate *vx, IjNode *s, JsonbValue *v)
{
	bool		ok;

	vx->quiet++;
	ok = ij_check(vx, s, v, NULL);
	vx->quiet--;
	return ok;
}

static bool
ij_check_node(IjValidate *vx, IjNode *s, JsonbValue *v, const char *via)
{
	int			t;
	int			i;

	if (s->kind == IJ_FALSE)
		return IJ_FAIL(vx, via ? via : "false",
					   "no value is allowed here (the schema is false)");

	t = ij_value_type(v);
	if (s->types)
	{
		bool		ok = (s->types & t) != 0;

		if (!ok && t == IJ_T_NUMBER && (s->types & IJ_T_INTEGER))
			ok = ij_is_integral(v->val.numeric);
		if (!ok)
			return IJ_FAIL(vx, "type", "value must be of type %s, found \"%s\"",
						   ij_type_list(s->types),
						   (t == IJ_T_NUMBER && ij_is_integral(v->val.numeric)) ?
						   "integer" : ij_type_name(t));
	}
	if (s->has_enum)
	{
		bool		found = false;

		for (i = 0; i < s->nenum && !found; i++)
		{
			CHECK_FOR_INTERRUPTS();
			found = (ij_compare(v, &s->enumvals[i]) == 0);
		}
		if (!found)
			return IJ_FAIL(vx, "enum", "value must be one of the values listed in \"enum\"");
	}
	if (s->has_const && ij_compare(v, &s->constval) != 0)
		return IJ_FAIL(vx, "const", "value must be equal to \"const\"");

	switch (t)
	{
		case IJ_T_NUMBER:
			if (!ij_check_number(vx, s, v->val.numeric))
				return false;
			break;
		case IJ_T_STRING:
			if (!ij_check_string(vx, s, v->val.string.val, v->val.string.len))
				return false;
			break;
		case IJ_T_ARRAY:
			if (!ij_check_array(vx, s, v->val.binary.data))
				return false;
			break;
		case IJ_T_OBJECT:
			if (!ij_check_object(vx, s, v))
				return false;
			break;
		default:
			break;
	}

	if (s->reftarget && !ij_check(vx, s->reftarget, v, "$ref"))
		return false;
	for (i = 0; i < s->nallOf; i++)
	{
		CHECK_FOR_INTERRUPTS();
		if (!ij_check(vx, s->allOf[i], v, "allOf"))
			return false;
	}
	if (s->nanyOf > 0)
	{
		bool		any = false;

		for (i = 0; i < s->nanyOf && !any; i++)
		{
			CHECK_FOR_INTERRUPTS();
			any = ij_matches(vx, s->anyOf[i], v);
		}
		if (!any)
			return IJ_FAIL(vx, "anyOf",
						   "value must match at least one schema in \"anyOf\"");
	}
	if (s->noneOf > 0)
	{
		int			first = -1;

		for (i = 0; i < s->noneOf; i++)
		{
			CHECK_FOR_INTERRUPTS();
			if (!ij_matches(vx, s->oneOf[i], v))
				continue;
			if (first >= 0)
				return IJ_FAIL(vx, "oneOf",
							   "value must match exactly one schema in \"oneOf\", but matches schemas %d and %d",
							   first, i);
			first = i;
		}
		if (first < 0)
			return IJ_FAIL(vx, "oneOf",
						   "value must match exactly one schema in \"oneOf\", but matches none");
	}
	if (s->not && ij_matches(vx, s->not, v))
		return IJ_FAIL(vx, "not", "value must not match the schema in \"not\"");
	if (s->if_ && (s->then_ || s->else_))
	{
		if (ij_matches(vx, s->if_, v))
		{
			if (s->then_ && !ij_check(vx, s->then_, v, "then"))
				return false;
		}
		else if (s->else_ && !ij_check(vx, s->else_, v, "else"))
			return false;
	}
	return true;
}

/* a subschema reached by several edges: decide it once per value */
static pg_noinline bool
ij_check_memo(IjValidate *vx, IjNode *s, JsonbValue *v, const char *via)
{
	IjMemoKey	key;
	IjMemoEntry *e;
	bool		found;
	bool		ok;

	key.node = s;
	key.type = (uint32) v->type;
	switch (v->type)
	{
		case jbvString:
			key.ptr = v->val.string.val;
			key.len = (uint32) v->val.string.len;
			break;
		case jbvNumeric:
			key.ptr = v->val.numeric;
			key.len = 0;
			break;
		case jbvBool:
			key.ptr = NULL;
			key.len = v->val.boolean ? 1 : 0;
			break;
		case jbvBinary:
			key.ptr = v->val.binary.data;
			key.len = 0;
			break;
		default:
			key.ptr = NULL;
			key.len = 0;
			break;
	}
	if (vx->memo == NULL)
		vx->memo = ij_memo_create(CurrentMemoryContext, 64, NULL);
	e = ij_memo_lookup(vx->memo, key);
	if (e != NULL && (e->ok || vx->quiet > 0))
		return e->ok;

	/*
	 * Not decided yet; or decided false quietly and now the message is
	 * wanted, which ends the validation, so that happens once.
	 */
	ok = ij_check_node(vx, s, v, via);
	/* the table may have grown meanwhile: insert afresh */
	e = ij_memo_insert(vx->memo, key, &found);
	e->ok = ok;
	return ok;
}

static inline bool
ij_check(IjValidate *vx, IjNode *s, JsonbValue *v, const char *via)
{
	check_stack_depth();
	CHECK_FOR_INTERRUPTS();

	if (s->trivial)
		return true;
	if (unlikely(s->memo))
		return ij_check_memo(vx, s, v, via);
	return ij_check_node(vx, s, v, via);
}

Jsonb *
ij_schema_validate(IjSchema *schema, Jsonb *value)
{
	MemoryContext cxt;
	MemoryContext old;
	IjValidate	vx;
	JsonbValue	root;
	Jsonb	   *result = NULL;

	if (schema->root->trivial)
		return NULL;

	cxt = AllocSetContextCreate(CurrentMemoryContext, "idemjob validate",
								ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(cxt);

	memset(&vx, 0, sizeof(vx));
	vx.maxdepth = 16;
	vx.path = palloc(sizeof(IjPathSeg) * vx.maxdepth);
	vx.zero = DatumGetNumeric(DirectFunctionCall1(int8_numeric,
												  Int64GetDatum(0)));

	if (JB_ROOT_IS_SCALAR(value))
	{
		if (!JsonbExtractScalar(&value->root, &root))
			elog(ERROR, "could not extract jsonb scalar");
	}
	else
	{
		root.type = jbvBinary;
		root.val.binary.data = &value->root;
		root.val.binary.len = VARSIZE(value) - VARHDRSZ;
	}

	if (!ij_check(&vx, schema->root, &root, NULL))
	{
		JsonbParseState *ps = NULL;
		JsonbValue	k;
		JsonbValue	s;
		JsonbValue *obj;

		MemoryContextSwitchTo(old);
		pushJsonbValue(&ps, WJB_BEGIN_OBJECT, NULL);

		k.type = jbvString;
		s.type = jbvString;

		k.val.string.val = "path";
		k.val.string.len = 4;
		s.val.string.val = vx.err_path;
		s.val.string.len = strlen(vx.err_path);
		pushJsonbValue(&ps, WJB_KEY, &k);
		pushJsonbValue(&ps, WJB_VALUE, &s);

		k.val.string.val = "keyword";
		k.val.string.len = 7;
		s.val.string.val = (char *) vx.err_keyword;
		s.val.string.len = strlen(vx.err_keyword);
		pushJsonbValue(&ps, WJB_KEY, &k);
		pushJsonbValue(&ps, WJB_VALUE, &s);

		k.val.string.val = "message";
		k.val.string.len = 7;
		s.val.string.val = vx.err_message;
		s.val.string.len = strlen(vx.err_message);
		pushJsonbValue(&ps, WJB_KEY, &k);
		pushJsonbValue(&ps, WJB_VALUE, &s);

		obj = pushJsonbValue(&ps, WJB_END_OBJECT, NULL);
		result = JsonbValueToJsonb(obj);
	}

	MemoryContextSwitchTo(old);
	MemoryContextDelete(cxt);
	return result;
}


/* ----------------------------------------------------------------
 * SQL: idemjob.validate(output_schema jsonb, value jsonb) RETURNS jsonb
 * ----------------------------------------------------------------
 */

/* the compiled schema, kept across calls of one query (fn_extra) */
typedef struct IjFnCache
{
	MemoryContext cxt;
	IjSchema   *compiled;		/* NULL until a compile succeeds */
} IjFnCache;

Datum
idemjob_validate(PG_FUNCTION_ARGS)
{
	IjFnCache  *cache = (IjFnCache *) fcinfo->flinfo->fn_extra;
	Jsonb	   *schema;
	Jsonb	   *value;
	Jsonb	   *result;

	ij_require(fcinfo, 0, "output_schema");
	ij_require(fcinfo, 1, "value");
	schema = ij_jsonb_arg(fcinfo, 0, "output_schema", false);
	value = ij_jsonb_arg(fcinfo, 1, "value", false);

	if (cache == NULL)
	{
		cache = MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt,
									   sizeof(IjFnCache));
		fcinfo->flinfo->fn_extra = cache;
	}
	if (cache->compiled == NULL ||
		VARSIZE(cache->compiled->doc) != VARSIZE(schema) ||
		memcmp(cache->compiled->doc, schema, VARSIZE(schema)) != 0)
	{
		MemoryContext old;

		if (cache->cxt)
			MemoryContextDelete(cache->cxt);
		cache->compiled = NULL;
		cache->cxt = AllocSetContextCreate(fcinfo->flinfo->fn_mcxt,
										   "idemjob validate schema",
										   ALLOCSET_SMALL_SIZES);
		old = MemoryContextSwitchTo(cache->cxt);
		cache->compiled = ij_schema_compile(schema);
		MemoryContextSwitchTo(old);
	}

	result = ij_schema_validate(cache->compiled, value);
	if (result == NULL)
		PG_RETURN_NULL();
	PG_RETURN_JSONB_P(result);
}
