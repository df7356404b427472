/*-------------------------------------------------------------------------
 *
 * validator_compile.c
 *	  Output contracts: a JSON Schema (draft 2020-12) subset, compiled once
 *	  into a tree of C structs (this file, with validator_link.c and
 *	  validator_regex.c) and checked against jsonb values natively
 *	  (validator_check.c).  The files share validator_int.h.
 *
 * Compilation (ij_schema_compile) walks the schema jsonb once with
 * PostgreSQL's jsonb iterator and builds one IjNode per subschema: keyword
 * limits as plain integers or pointers to the schema's own numerics,
 * property maps as sorted arrays searched by binary search, regular
 * expressions compiled with PostgreSQL's regex engine (pg_regcomp, in
 * validator_regex.c), child subschemas as pointers.  Every keyword outside
 * the supported set is refused, never ignored, so a contract means what it
 * says.  The keyword table (ij_keywords) says how each supported keyword
 * is compiled: one whose value is only stored (a count, a number, a
 * subschema, an array or an object of subschemas) goes straight to its
 * field in IjNode, the others are compiled case by case.  The schema jsonb
 * itself is copied once into the compiled form's
 * memory context and every string, number, enum or const value points
 * into that copy, so the caller may free its own schema datum.
 *
 * Once the whole tree is built, validator_link.c resolves the local
 * references, refuses reference cycles that never descend into the value
 * and schemas whose evaluation could multiply without bound, and marks the
 * subschemas validation decides through its memo (see there).
 *
 * Every loop and every recursion checks for interrupts, and so do the
 * sorts (an interruptible qsort comparison); a cancel or statement_timeout
 * raises 57014 wherever it lands, in the regex engine too (REG_CANCEL is
 * never reported as a bad pattern, see validator_regex.c).  All recursive
 * functions call check_stack_depth(), so a 10,000-level schema gives an
 * answer or a clean error.  A schema that fails to compile, or whose
 * compilation is cancelled, frees everything at once: it is compiled in a
 * memory context of its own, deleted on error.
 *
 * Nothing here touches shared state: a compiled schema belongs to one
 * backend.
 *
 * src/validator_compile.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

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

/* limits above this are as good as none (no jsonb gets near it) */
#define IJ_COUNT_CLAMP	INT64CONST(1000000000000000)

/* property names quoted in messages are clipped to this many bytes */
#define IJ_MSG_NAME_MAX 64

/* a field of IjNode, for the keyword table */
#define IJ_AT(field)	offsetof(IjNode, field)

/*
 * The supported keywords: name, which one, how its value is compiled,
 * whether it constrains the value, and where a stored value (and its
 * count) goes.
 */
static const IjKeywordDef ij_keywords[] =
{
	{"type", KW_TYPE, IJ_FORM_OTHER, true, 0, 0},
	{"enum", KW_ENUM, IJ_FORM_OTHER, true, 0, 0},
	{"const", KW_CONST, IJ_FORM_OTHER, true, 0, 0},
	{"properties", KW_STORED, IJ_FORM_MAP, true, IJ_AT(props), IJ_AT(nprops)},
	{"required", KW_REQUIRED, IJ_FORM_OTHER, true, 0, 0},
	{"additionalProperties", KW_STORED, IJ_FORM_SCHEMA, true, IJ_AT(additionalProperties), 0},
	{"patternProperties", KW_PATTERN_PROPERTIES, IJ_FORM_OTHER, true, 0, 0},
	{"propertyNames", KW_STORED, IJ_FORM_SCHEMA, true, IJ_AT(propertyNames), 0},
	{"minProperties", KW_STORED, IJ_FORM_COUNT, true, IJ_AT(minProperties), 0},
	{"maxProperties", KW_STORED, IJ_FORM_COUNT, true, IJ_AT(maxProperties), 0},
	{"dependentRequired", KW_DEPENDENT_REQUIRED, IJ_FORM_OTHER, true, 0, 0},
	{"dependentSchemas", KW_STORED, IJ_FORM_MAP, true, IJ_AT(depschemas), IJ_AT(ndepschemas)},
	{"items", KW_ITEMS, IJ_FORM_OTHER, true, 0, 0},
	{"prefixItems", KW_STORED, IJ_FORM_SCHEMAS, true, IJ_AT(prefixItems), IJ_AT(nprefix)},
	{"contains", KW_STORED, IJ_FORM_SCHEMA, true, IJ_AT(contains), 0},
	{"minContains", KW_STORED, IJ_FORM_COUNT, true, IJ_AT(minContains), 0},
	{"maxContains", KW_STORED, IJ_FORM_COUNT, true, IJ_AT(maxContains), 0},
	{"minItems", KW_STORED, IJ_FORM_COUNT, true, IJ_AT(minItems), 0},
	{"maxItems", KW_STORED, IJ_FORM_COUNT, true, IJ_AT(maxItems), 0},
	{"uniqueItems", KW_UNIQUE_ITEMS, IJ_FORM_OTHER, true, 0, 0},
	{"minLength", KW_STORED, IJ_FORM_COUNT, true, IJ_AT(minLength), 0},
	{"maxLength", KW_STORED, IJ_FORM_COUNT, true, IJ_AT(maxLength), 0},
	{"pattern", KW_PATTERN, IJ_FORM_OTHER, true, 0, 0},
	{"minimum", KW_STORED, IJ_FORM_NUMBER, true, IJ_AT(minimum), 0},
	{"maximum", KW_STORED, IJ_FORM_NUMBER, true, IJ_AT(maximum), 0},
	{"exclusiveMinimum", KW_STORED, IJ_FORM_NUMBER, true, IJ_AT(exclusiveMinimum), 0},
	{"exclusiveMaximum", KW_STORED, IJ_FORM_NUMBER, true, IJ_AT(exclusiveMaximum), 0},
	{"multipleOf", KW_MULTIPLE_OF, IJ_FORM_OTHER, true, 0, 0},
	{"allOf", KW_STORED, IJ_FORM_SCHEMAS, true, IJ_AT(allOf), IJ_AT(nallOf)},
	{"anyOf", KW_STORED, IJ_FORM_SCHEMAS, true, IJ_AT(anyOf), IJ_AT(nanyOf)},
	{"oneOf", KW_STORED, IJ_FORM_SCHEMAS, true, IJ_AT(oneOf), IJ_AT(noneOf)},
	{"not", KW_STORED, IJ_FORM_SCHEMA, true, IJ_AT(not), 0},
	{"if", KW_STORED, IJ_FORM_SCHEMA, true, IJ_AT(if_), 0},
	{"then", KW_STORED, IJ_FORM_SCHEMA, true, IJ_AT(then_), 0},
	{"else", KW_STORED, IJ_FORM_SCHEMA, true, IJ_AT(else_), 0},
	{"$defs", KW_STORED, IJ_FORM_MAP, false, IJ_AT(defs), IJ_AT(ndefs)},
	{"$ref", KW_REF, IJ_FORM_OTHER, true, 0, 0},
	{"$id", KW_ID, IJ_FORM_OTHER, false, 0, 0},
	{"title", KW_ANN_STRING, IJ_FORM_OTHER, false, 0, 0},
	{"description", KW_ANN_STRING, IJ_FORM_OTHER, false, 0, 0},
	{"$comment", KW_ANN_STRING, IJ_FORM_OTHER, false, 0, 0},
	{"$schema", KW_ANN_STRING, IJ_FORM_OTHER, false, 0, 0},
	{"format", KW_ANN_STRING, IJ_FORM_OTHER, false, 0, 0},
	{"contentEncoding", KW_ANN_STRING, IJ_FORM_OTHER, false, 0, 0},
	{"contentMediaType", KW_ANN_STRING, IJ_FORM_OTHER, false, 0, 0},
	{"deprecated", KW_ANN_BOOL, IJ_FORM_OTHER, false, 0, 0},
	{"readOnly", KW_ANN_BOOL, IJ_FORM_OTHER, false, 0, 0},
	{"writeOnly", KW_ANN_BOOL, IJ_FORM_OTHER, false, 0, 0},
	{"examples", KW_ANN_ARRAY, IJ_FORM_OTHER, false, 0, 0},
	{"default", KW_ANN_ANY, IJ_FORM_OTHER, false, 0, 0},
	{"contentSchema", KW_ANN_SCHEMA, IJ_FORM_OTHER, false, 0, 0}
};

const IjTypeName ij_types[IJ_NTYPES] =
{
	{"null", IJ_T_NULL},
	{"boolean", IJ_T_BOOLEAN},
	{"object", IJ_T_OBJECT},
	{"array", IJ_T_ARRAY},
	{"number", IJ_T_NUMBER},
	{"string", IJ_T_STRING},
	{"integer", IJ_T_INTEGER}
};


/* ----------------------------------------------------------------
 * Small helpers
 * ----------------------------------------------------------------
 */

/* append a JSON Pointer reference token, escaping '~' and '/' */
void
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
char *
ij_name(const char *s, int len)
{
	if (len > IJ_MSG_NAME_MAX)
	{
		int			clip = pg_mbcliplen(s, len, IJ_MSG_NAME_MAX);

		return psprintf("%.*s...", clip, s);
	}
	return pnstrdup(s, len);
}

/* ij_named_cmp for qsort, which may run long: interruptible */
static int
ij_named_sort_cmp(const void *a, const void *b)
{
	CHECK_FOR_INTERRUPTS();
	return ij_named_cmp(a, b);
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

/*
 * The next member of the object *it iterates over (skipNested): its key
 * and its value; false after the last one.
 */
static bool
ij_next_member(JsonbIterator **it, JsonbValue *k, JsonbValue *val)
{
	JsonbIteratorToken tok;

	while ((tok = JsonbIteratorNext(it, k, true)) != WJB_DONE)
	{
		CHECK_FOR_INTERRUPTS();
		if (tok != WJB_KEY)
			continue;
		tok = JsonbIteratorNext(it, val, true);
		Assert(tok == WJB_VALUE);
		return true;
	}
	return false;
}


/* ----------------------------------------------------------------
 * Schema paths and compile errors
 * ----------------------------------------------------------------
 */

/* the JSON Pointer of a node in the schema document */
void
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
void
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
	IjNamed    *out;
	int			i = 0;

	if (!ij_is_object(v))
		ij_bad(node, kw, NULL, 0, -1, "must be an object whose values are schemas");
	out = palloc(sizeof(IjNamed) * Max(JsonContainerSize(v->val.binary.data), 1));
	if (regexes)
		*regexes = palloc0(sizeof(IjRegex) *
						   Max(JsonContainerSize(v->val.binary.data), 1));
	it = JsonbIteratorInit(v->val.binary.data);
	while (ij_next_member(&it, &k, &val))
	{
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

/* the keyword named s, or NULL if it is not supported */
const IjKeywordDef *
ij_keyword_def(const char *s, int len)
{
	int			i;

	for (i = 0; i < (int) lengthof(ij_keywords); i++)
	{
		if (ij_key_eq(s, len, ij_keywords[i].name))
			return &ij_keywords[i];
	}
	return NULL;
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

/* "dependentRequired": an object of arrays of unique strings */
static void
ij_compile_dependent_required(IjCompile *cc, IjNode *node, const char *kw,
							  JsonbValue *v)
{
	JsonbIterator *it;
	JsonbValue	k;
	JsonbValue	val;
	int			i = 0;

	if (!ij_is_object(v))
		ij_bad(node, kw, NULL, 0, -1,
			   "must be an object whose values are arrays of unique strings");
	node->depreq = palloc(sizeof(IjDepReq) *
						  Max(JsonContainerSize(v->val.binary.data), 1));
	it = JsonbIteratorInit(v->val.binary.data);
	while (ij_next_member(&it, &k, &val))
	{
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

/*
 * A keyword compiled by its own rules (IJ_FORM_OTHER) that constrains the
 * value.
 */
static void
ij_compile_special(IjCompile *cc, IjNode *node, IjKeyword which,
				   const char *kw, JsonbValue *v)
{
	switch (which)
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
		case KW_REQUIRED:
			node->required = ij_string_set(cc, node, kw, NULL, 0, v,
										   &node->nrequired);
			break;
		case KW_PATTERN_PROPERTIES:
			(void) ij_schema_map(cc, node, kw, v, &node->npatterns,
								 &node->patterns);
			break;
		case KW_DEPENDENT_REQUIRED:
			ij_compile_dependent_required(cc, node, kw, v);
			break;
		case KW_ITEMS:
			if (ij_is_array(v))
				ij_bad(node, kw, NULL, 0, -1,
					   "must be a schema (an object or a boolean); for tuples use \"prefixItems\"");
			node->items = ij_compile_node(cc, v, node, kw, NULL, 0, -1, false);
			break;
		case KW_UNIQUE_ITEMS:
			if (v->type != jbvBool)
				ij_bad(node, kw, NULL, 0, -1, "must be a boolean");
			node->uniqueItems = v->val.boolean;
			break;
		case KW_PATTERN:
			if (v->type != jbvString)
				ij_bad(node, kw, NULL, 0, -1,
					   "must be a string (a regular expression)");
			node->pattern = palloc0(sizeof(IjRegex));
			ij_compile_regex(cc, node->pattern, v->val.string.val,
							 v->val.string.len, node, kw, false);
			break;
		case KW_MULTIPLE_OF:
			if (v->type != jbvNumeric || ij_numcmp(v->val.numeric, cc->zero) <= 0)
				ij_bad(node, kw, NULL, 0, -1, "must be a number greater than 0");
			node->multipleOf = v->val.numeric;
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
		default:
			elog(ERROR, "unexpected keyword \"%s\"", kw);
	}
}

/* $id and the annotations: they constrain nothing, checked for type only */
static void
ij_compile_annotation(IjNode *node, IjKeyword which, const char *kw,
					  JsonbValue *v, bool is_root)
{
	switch (which)
	{
		case KW_ID:
			if (!is_root)
				ij_bad(node, kw, NULL, 0, -1,
					   "\"$id\" is only allowed at the root of the schema");
			if (v->type != jbvString)
				ij_bad(node, kw, NULL, 0, -1, "must be a string");
			break;
		case KW_ANN_STRING:
			if (v->type != jbvString)
				ij_bad(node, kw, NULL, 0, -1, "must be a string");
			break;
		case KW_ANN_BOOL:
			if (v->type != jbvBool)
				ij_bad(node, kw, NULL, 0, -1, "must be a boolean");
			break;
		case KW_ANN_ARRAY:
			if (!ij_is_array(v))
				ij_bad(node, kw, NULL, 0, -1, "must be an array");
			break;
		case KW_ANN_ANY:
			break;
		case KW_ANN_SCHEMA:
			ij_require_schema_value(node, kw, NULL, 0, -1, v);
			break;
		default:
			elog(ERROR, "unexpected keyword \"%s\"", kw);
	}
}

IJ_NORETURN static void ij_unsupported_keyword(IjNode *node, const char *key,
												int keylen);

static void
ij_unsupported_keyword(IjNode *node, const char *key, int keylen)
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

/*
 * One member of a schema object.  *constrains: whether the keyword
 * constrains the value (false for $defs, $id and the annotations).  A
 * keyword whose value is only stored goes where the keyword table says.
 */
static pg_noinline void
ij_compile_keyword(IjCompile *cc, IjNode *node, const char *key, int keylen,
				   JsonbValue *v, bool is_root, bool *constrains)
{
	const IjKeywordDef *def = ij_keyword_def(key, keylen);
	const char *kw;

	if (def == NULL)
		ij_unsupported_keyword(node, key, keylen);
	kw = def->name;
	*constrains = def->constrains;
	switch (def->form)
	{
		case IJ_FORM_COUNT:
			IJ_FIELD(node, def->at, int64) = ij_count(cc, node, kw, v);
			break;
		case IJ_FORM_NUMBER:
			IJ_FIELD(node, def->at, Numeric) = ij_number(node, kw, v);
			break;
		case IJ_FORM_SCHEMA:
			IJ_FIELD(node, def->at, IjNode *) =
				ij_compile_node(cc, v, node, kw, NULL, 0, -1, false);
			break;
		case IJ_FORM_SCHEMAS:
			IJ_FIELD(node, def->at, IjNode **) =
				ij_schema_array(cc, node, kw, v, &IJ_FIELD(node, def->nat, int));
			break;
		case IJ_FORM_MAP:
			IJ_FIELD(node, def->at, IjNamed *) =
				ij_schema_map(cc, node, kw, v, &IJ_FIELD(node, def->nat, int),
							  NULL);
			break;
		case IJ_FORM_OTHER:
			if (def->constrains)
				ij_compile_special(cc, node, def->kw, kw, v);
			else
				ij_compile_annotation(node, def->kw, kw, v, is_root);
			break;
	}
}

IjNode *
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
		int			nconstraints = 0;

		while (ij_next_member(&it, &k, &val))
		{
			bool		constrains;

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

static IjSchema *
ij_schema_compile_in(Jsonb *schema)
{
	IjCompile	cc;
	IjSchema   *out;
	JsonbValue	root;

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

	/* $refs, the cycle check, the expansion bound, the memo marks */
	ij_link_schema(&cc);

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
