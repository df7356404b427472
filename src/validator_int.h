/*-------------------------------------------------------------------------
 *
 * validator_int.h
 *	  Internals of the JSON Schema (draft 2020-12 subset) validator: the
 *	  compiled form's types and the helpers its files share.
 *
 * validator.h is the public API (ij_schema_compile, ij_schema_validate);
 * this header is for the validator's own files only, split by phase:
 *
 *	validator_compile.c	compiling a schema: the keyword table
 *						(ij_keyword_def), one IjNode per subschema, schema
 *						paths and compile errors, ij_schema_compile
 *	validator_link.c	after the tree is built: $ref resolution, the
 *						reference cycle check, the expansion bound, pure
 *						$refs collapsed, subschemas marked for the memo
 *	validator_regex.c	regular expressions: pg_regcomp and pg_regexec
 *						(cancel-safe), the bit-parallel NFA for simple
 *						patterns (IjFastRe)
 *	validator_check.c	checking a value: the walk, the memo, each keyword
 *						family, the violation; ij_schema_validate and the
 *						SQL function idemjob.validate
 *
 * Each file's header says what it relies on.  Helpers on the validation
 * hot path that more than one file needs are static inline here.
 *
 * Nothing here touches shared state: a compiled schema belongs to one
 * backend, and validation is read-only on it.
 *
 * src/validator_int.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMJOB_VALIDATOR_INT_H
#define IDEMJOB_VALIDATOR_INT_H

#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "regex/regex.h"
#include "utils/fmgrprotos.h"
#include "utils/hsearch.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"

#include "validator.h"

/* instance types, also the bits of the "type" keyword */
#define IJ_T_NULL		0x01
#define IJ_T_BOOLEAN	0x02
#define IJ_T_OBJECT		0x04
#define IJ_T_ARRAY		0x08
#define IJ_T_NUMBER		0x10
#define IJ_T_STRING		0x20
#define IJ_T_INTEGER	0x40	/* "type" only: a number with no fraction */

/* the names of the types, in the order messages list them */
typedef struct IjTypeName
{
	const char *name;
	uint8		bit;
} IjTypeName;

#define IJ_NTYPES		7
extern const IjTypeName ij_types[IJ_NTYPES];	/* validator_compile.c */

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
 * The keyword table (validator_compile.c).  A keyword whose value is only
 * stored (a count, a number, a subschema, an array or an object of them)
 * says where in IjNode it goes, and the compiler stores it there; $ref
 * pointers are followed through the compiled tree by the same entries
 * (validator_link.c).  The other keywords are compiled case by case.
 */
typedef enum IjForm
{
	IJ_FORM_OTHER,				/* by its own rules (IjKeyword) */
	IJ_FORM_COUNT,				/* int64 at "at": a non-negative integer */
	IJ_FORM_NUMBER,				/* Numeric at "at" */
	IJ_FORM_SCHEMA,				/* IjNode * at "at": a subschema */
	IJ_FORM_SCHEMAS,			/* IjNode ** at "at", count at "nat" */
	IJ_FORM_MAP					/* IjNamed * at "at" (by name), count at "nat" */
} IjForm;

typedef enum IjKeyword
{
	KW_STORED,					/* not IJ_FORM_OTHER: stored as its form says */
	KW_TYPE,
	KW_ENUM,
	KW_CONST,
	KW_REQUIRED,
	KW_PATTERN_PROPERTIES,
	KW_DEPENDENT_REQUIRED,
	KW_ITEMS,
	KW_UNIQUE_ITEMS,
	KW_PATTERN,
	KW_MULTIPLE_OF,
	KW_REF,
	KW_ID,
	KW_ANN_STRING,				/* annotations, checked for type only */
	KW_ANN_BOOL,
	KW_ANN_ARRAY,
	KW_ANN_ANY,
	KW_ANN_SCHEMA
} IjKeyword;

typedef struct IjKeywordDef
{
	const char *name;
	IjKeyword	kw;
	IjForm		form;
	bool		constrains;		/* false: $defs, $id and the annotations */
	Size		at;				/* offsetof(IjNode, ...) of the value */
	Size		nat;			/* ... of its count (IJ_FORM_SCHEMAS, _MAP) */
} IjKeywordDef;

/* the field of a node at an offset the keyword table gives, as type */
#define IJ_FIELD(node, off, type)	(*(type *) ((char *) (node) + (off)))

/* ----------------------------------------------------------------
 * Small helpers, inline: validation calls them on its hot path
 * ----------------------------------------------------------------
 */

static inline int
ij_numcmp(Numeric a, Numeric b)
{
	return DatumGetInt32(DirectFunctionCall2(numeric_cmp,
											 NumericGetDatum(a),
											 NumericGetDatum(b)));
}

/* true if the number has no fractional part (1.0 is an integer) */
static inline bool
ij_is_integral(Numeric n)
{
	/* the smallest scale that shows it exactly: no allocation */
	return DatumGetInt32(DirectFunctionCall1(numeric_min_scale,
											 NumericGetDatum(n))) == 0;
}

static inline bool
ij_is_object(JsonbValue *v)
{
	return v->type == jbvBinary && JsonContainerIsObject(v->val.binary.data);
}

static inline bool
ij_is_array(JsonbValue *v)
{
	return v->type == jbvBinary && JsonContainerIsArray(v->val.binary.data);
}

static inline bool
ij_key_eq(const char *a, int alen, const char *b)
{
	return alen == (int) strlen(b) && memcmp(a, b, alen) == 0;
}

/* order of jsonb object keys: by length, then bytes */
static inline int
ij_key_cmp(const char *a, int alen, const char *b, int blen)
{
	if (alen != blen)
		return alen < blen ? -1 : 1;
	return memcmp(a, b, alen);
}

static inline int
ij_named_cmp(const void *a, const void *b)
{
	const IjNamed *na = (const IjNamed *) a;
	const IjNamed *nb = (const IjNamed *) b;

	return ij_key_cmp(na->name, na->len, nb->name, nb->len);
}

static inline IjNamed *
ij_named_find(IjNamed *arr, int n, const char *name, int len)
{
	IjNamed		key;

	if (n == 0)
		return NULL;
	key.name = name;
	key.len = len;
	return (IjNamed *) bsearch(&key, arr, n, sizeof(IjNamed), ij_named_cmp);
}


/* ----------------------------------------------------------------
 * Shared functions
 * ----------------------------------------------------------------
 */

/* validator_compile.c: building the tree, schema paths, compile errors */
extern const IjKeywordDef *ij_keyword_def(const char *s, int len);
extern IjNode *ij_compile_node(IjCompile *cc, JsonbValue *v, IjNode *parent,
							   const char *kw, const char *key, int keylen,
							   int index, bool is_root);
extern void ij_append_token(StringInfo buf, const char *s, int len);
extern char *ij_name(const char *s, int len);
extern void ij_append_node_path(StringInfo buf, IjNode *node);
IJ_NORETURN extern void ij_bad(IjNode *node, const char *kw, const char *key,
							   int keylen, int index, const char *msg);

/* validator_link.c: everything between the tree and the compiled form */
extern void ij_link_schema(IjCompile *cc);

/* validator_regex.c */
extern void ij_compile_regex(IjCompile *cc, IjRegex *rx, const char *src,
							 int len, IjNode *node, const char *kw,
							 bool is_key);
extern void ij_free_regexes(void *arg);
extern bool ij_fast_match(const IjFastRe *f, const char *s, int len);
extern bool ij_regex_match(regex_t *re, const pg_wchar *w, int wlen);
extern pg_wchar *ij_to_wchar(const char *s, int len, int *wlen);

#endif							/* IDEMJOB_VALIDATOR_INT_H */
