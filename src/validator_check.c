/*-------------------------------------------------------------------------
 *
 * validator_check.c
 *	  Output contracts: a jsonb value checked natively against a schema
 *	  compiled by validator_compile.c, and the SQL function
 *	  idemjob.validate.
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
 * engine and with the same answers (validator_regex.c).  Validation stops
 * at the first violation found, in a fixed keyword order and in the
 * value's own (jsonb) member order, so the violation reported for a given
 * schema and value is always the same.  Subschemas that only decide
 * (anyOf, oneOf, not, if, contains) run "quiet": a failure there builds no
 * message.
 *
 * Bounded work.  Compilation refused every schema whose evaluation could
 * multiply (validator_link.c), and validation never decides the same
 * subschema for the same value twice: a subschema reached by more than one
 * edge (two $refs to one definition, a recursion back to the root) goes
 * through a per-validation memo keyed by (subschema, position in the
 * value).  So even a recursion through the value that doubles per level,
 * which no static count catches, costs at most a small multiple of
 * subschemas times values.  Every loop and every recursion checks for
 * interrupts, and so do the sorts (an interruptible sort_template) and the
 * pieces of work that could otherwise run long in one go (multipleOf on
 * long numbers is taken in steps); a cancel or statement_timeout raises
 * 57014 wherever it lands, in the regex engine too (REG_CANCEL is never
 * reported as a failed match).  Every other recursion than through the
 * memo consumes one level of the value, and all recursive functions call
 * check_stack_depth(), so a 10,000-level value gives an answer or a clean
 * error.
 *
 * Everything validation allocates lives in a short-lived memory context
 * deleted before returning; only the violation object is allocated in the
 * caller's context.
 *
 * Nothing here touches shared state: a compiled schema belongs to one
 * backend, and validation is read-only on it.
 *
 * src/validator_check.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/numeric.h"

#include "idemjob.h"
#include "validator_int.h"

/*
 * The memo: which (subschema, value) pairs were decided already during one
 * validation.  Only nodes with memo set (reached by more than one
 * evaluation edge, see ij_mark_edge in validator_link.c) go through it.  A value is known by
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

PG_FUNCTION_INFO_V1(idemjob_validate);

static inline bool ij_check(IjValidate *vx, IjNode *s, JsonbValue *v,
							const char *via);


/* ----------------------------------------------------------------
 * The instance path and the violation
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
	va_list		args;

	va_start(args, fmt);
	vx->err_message = ij_vformat(fmt, args);
	va_end(args);
	vx->err_keyword = keyword;
	vx->err_path = ij_instance_path(vx);
	return false;
}

/* fail, building the message only when someone will read it */
#define IJ_FAIL(vx, keyword, ...) \
	((vx)->quiet > 0 ? false : ij_fail((vx), (keyword), __VA_ARGS__))


/* ----------------------------------------------------------------
 * Types, and JSON equality (enum, const, uniqueItems)
 * ----------------------------------------------------------------
 */

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


/* ----------------------------------------------------------------
 * uniqueItems: hashing and sorting the items
 * ----------------------------------------------------------------
 */

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


/* ----------------------------------------------------------------
 * Numbers
 * ----------------------------------------------------------------
 */

static char *
ij_numstr(Numeric n)
{
	return DatumGetCString(DirectFunctionCall1(numeric_out,
											   NumericGetDatum(n)));
}

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


/* ----------------------------------------------------------------
 * Strings
 * ----------------------------------------------------------------
 */

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


/* ----------------------------------------------------------------
 * Arrays
 * ----------------------------------------------------------------
 */

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

/*
 * A count n against a minimum and a maximum (< 0: none): minItems and
 * maxItems, minProperties and maxProperties, minContains and maxContains.
 * The message reads "<what> at least <min> <unit>, found <n>".
 */
static inline bool
ij_check_count(IjValidate *vx, int64 n, int64 min, int64 max,
			   const char *minkw, const char *maxkw,
			   const char *what, const char *unit)
{
	if (n < min)
		return IJ_FAIL(vx, minkw,
					   "%s at least " INT64_FORMAT " %s, found " INT64_FORMAT,
					   what, min, unit, n);
	if (max >= 0 && n > max)
		return IJ_FAIL(vx, maxkw,
					   "%s at most " INT64_FORMAT " %s, found " INT64_FORMAT,
					   what, max, unit, n);
	return true;
}

/* minContains and maxContains, once the items matching "contains" are counted */
static bool
ij_check_contains_count(IjValidate *vx, IjNode *s, int64 matches)
{
	if (matches < s->minContains && s->minContains == 1)
		return IJ_FAIL(vx, "contains",
					   "array must contain an item matching \"contains\"");
	return ij_check_count(vx, matches, s->minContains, s->maxContains,
						  "minContains", "maxContains", "array must contain",
						  "items matching \"contains\"");
}

/*
 * Each item against prefixItems or items, and against contains (quietly:
 * *matches counts the items that match it).
 */
static bool
ij_check_items(IjValidate *vx, IjNode *s, JsonbContainer *c, int64 *matches)
{
	JsonbIterator *it = JsonbIteratorInit(c);
	JsonbValue	v;
	JsonbIteratorToken tok;
	int			i = 0;

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
				(*matches)++;
		}
		i++;
	}
	return true;
}

static pg_noinline bool
ij_check_array(IjValidate *vx, IjNode *s, JsonbContainer *c)
{
	int64		n = JsonContainerSize(c);
	int64		matches = 0;

	if (!ij_check_count(vx, n, s->minItems, s->maxItems, "minItems",
						"maxItems", "array must have", "items"))
		return false;
	if (s->uniqueItems && n > 1 && !ij_check_unique(vx, c))
		return false;

	if (n > 0 &&
		(s->nprefix > 0 || (s->items && !s->items->trivial) || s->contains) &&
		!ij_check_items(vx, s, c, &matches))
		return false;
	/* an empty array has no item matching "contains" */
	if (s->contains)
		return ij_check_contains_count(vx, s, matches);
	return true;
}


/* ----------------------------------------------------------------
 * Objects
 * ----------------------------------------------------------------
 */

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

/*
 * The keywords that look at which members an object has, and how many:
 * required, minProperties, maxProperties, dependentRequired.
 */
static bool
ij_check_object_keys(IjValidate *vx, IjNode *s, JsonbContainer *c, int64 n)
{
	int			i;
	int			j;

	for (i = 0; i < s->nrequired; i++)
	{
		CHECK_FOR_INTERRUPTS();
		if (!ij_has_key(c, s->required[i].name, s->required[i].len))
			return IJ_FAIL(vx, "required", "required property \"%s\" is missing",
						   ij_name(s->required[i].name, s->required[i].len));
	}
	if (!ij_check_count(vx, n, s->minProperties, s->maxProperties,
						"minProperties", "maxProperties", "object must have",
						"properties"))
		return false;
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
	return true;
}

/*
 * One member's value against each patternProperties subschema whose
 * pattern matches its name; *matched is set if one does.
 */
static bool
ij_check_pattern_members(IjValidate *vx, IjNode *s, const char *key,
						 int keylen, JsonbValue *v, bool *matched)
{
	int			wlen = 0;
	pg_wchar   *w = NULL;
	int			j;

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
		*matched = true;
		if (!ij_check_member(vx, s->patterns[j].schema,
							 "patternProperties", key, keylen, v))
			return false;
	}
	if (w)
		pfree(w);
	return true;
}

/*
 * Each member against propertyNames, then properties, patternProperties
 * and, if neither applies, additionalProperties.
 */
static bool
ij_check_members(IjValidate *vx, IjNode *s, JsonbContainer *c)
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
		if (s->npatterns > 0 &&
			!ij_check_pattern_members(vx, s, key, keylen, &v, &matched))
			return false;
		if (!matched && s->additionalProperties &&
			!ij_check_member(vx, s->additionalProperties,
							 "additionalProperties", key, keylen, &v))
			return false;
	}
	return true;
}

static pg_noinline bool
ij_check_object(IjValidate *vx, IjNode *s, JsonbValue *obj)
{
	JsonbContainer *c = obj->val.binary.data;
	int64		n = JsonContainerSize(c);
	int			i;

	if (!ij_check_object_keys(vx, s, c, n))
		return false;
	if (n > 0 &&
		(s->nprops > 0 || s->npatterns > 0 ||
		 (s->additionalProperties && !s->additionalProperties->trivial) ||
		 (s->propertyNames && !s->propertyNames->trivial)) &&
		!ij_check_members(vx, s, c))
		return false;

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


/* ----------------------------------------------------------------
 * The walk: a subschema at a value
 * ----------------------------------------------------------------
 */

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

/* the keywords for any type: type, enum, const (t: the value's type) */
static inline bool
ij_check_any_type(IjValidate *vx, IjNode *s, JsonbValue *v, int t)
{
	int			i;

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
	return true;
}

/* the keywords for the value's own type (t) */
static inline bool
ij_check_by_type(IjValidate *vx, IjNode *s, JsonbValue *v, int t)
{
	switch (t)
	{
		case IJ_T_NUMBER:
			return ij_check_number(vx, s, v->val.numeric);
		case IJ_T_STRING:
			return ij_check_string(vx, s, v->val.string.val, v->val.string.len);
		case IJ_T_ARRAY:
			return ij_check_array(vx, s, v->val.binary.data);
		case IJ_T_OBJECT:
			return ij_check_object(vx, s, v);
		default:
			return true;
	}
}

/* oneOf: exactly one of the subschemas matches */
static bool
ij_check_one_of(IjValidate *vx, IjNode *s, JsonbValue *v)
{
	int			first = -1;
	int			i;

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
	return true;
}

/* the in-place applicators: $ref, allOf, anyOf, oneOf, not, if/then/else */
static inline bool
ij_check_inplace(IjValidate *vx, IjNode *s, JsonbValue *v)
{
	int			i;

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
	if (s->noneOf > 0 && !ij_check_one_of(vx, s, v))
		return false;
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

/* decide s for v: the keywords in a fixed order, the first violation wins */
static bool
ij_check_node(IjValidate *vx, IjNode *s, JsonbValue *v, const char *via)
{
	int			t;

	if (s->kind == IJ_FALSE)
		return IJ_FAIL(vx, via ? via : "false",
					   "no value is allowed here (the schema is false)");

	t = ij_value_type(v);
	if (!ij_check_any_type(vx, s, v, t) ||
		!ij_check_by_type(vx, s, v, t))
		return false;
	return ij_check_inplace(vx, s, v);
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


/* ----------------------------------------------------------------
 * The entry point
 * ----------------------------------------------------------------
 */

/* one member of the violation object, a string */
static void
ij_push_string_member(JsonbParseState **ps, const char *key, const char *val)
{
	JsonbValue	k;
	JsonbValue	s;

	k.type = jbvString;
	k.val.string.val = (char *) key;
	k.val.string.len = strlen(key);
	s.type = jbvString;
	s.val.string.val = (char *) val;
	s.val.string.len = strlen(val);
	pushJsonbValue(ps, WJB_KEY, &k);
	pushJsonbValue(ps, WJB_VALUE, &s);
}

/* the violation recorded by ij_fail: {"path", "keyword", "message"} */
static Jsonb *
ij_violation(IjValidate *vx)
{
	JsonbParseState *ps = NULL;

	pushJsonbValue(&ps, WJB_BEGIN_OBJECT, NULL);
	ij_push_string_member(&ps, "path", vx->err_path);
	ij_push_string_member(&ps, "keyword", vx->err_keyword);
	ij_push_string_member(&ps, "message", vx->err_message);
	return JsonbValueToJsonb(pushJsonbValue(&ps, WJB_END_OBJECT, NULL));
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
		/* only the violation object outlives the validation's context */
		MemoryContextSwitchTo(old);
		result = ij_violation(&vx);
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
