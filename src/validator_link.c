/*-------------------------------------------------------------------------
 *
 * validator_link.c
 *	  Output contracts: what happens to a compiled schema between its tree
 *	  (validator_compile.c) and validation (validator_check.c): local
 *	  references resolved, reference cycles and schemas whose evaluation
 *	  could multiply refused, pure $refs collapsed, shared subschemas
 *	  marked for the memo.
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
 * a 10,000-level schema gives an answer or a clean error.
 *
 * Bounded work.  A schema whose evaluation could multiply is refused
 * (22023): counting, with every $ref expanded, the subschema evaluations
 * one value can trigger (ij_check_expansion), no subschema may exceed 10 per
 * subschema the schema compiles to, nor less than 100,000; a $defs chain
 * where each link names the next twice is refused at its 16th link.  And
 * validation never decides the same subschema for the same value twice: a
 * subschema reached by more than one edge (two $refs to one definition, a
 * recursion back to the root) is marked here (ij_mark_edge) to go through
 * a per-validation memo keyed by (subschema, position in the value), see
 * validator_check.c.  So even a recursion through the value that doubles
 * per level, which no static count catches, costs at most a small multiple
 * of subschemas times values.  Every loop and every recursion here checks
 * for interrupts: a cancel or statement_timeout raises 57014 wherever it
 * lands, and the compiled form's memory context, deleted on error
 * (ij_schema_compile), gives back all that was built.
 *
 * src/validator_link.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/hsearch.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"

#include "idemjob.h"
#include "validator_int.h"

/*
 * The expansion bound.  Counting each subschema evaluation that one value
 * can trigger, $refs expanded (as if nothing were memoized), no subschema
 * may exceed IJ_EXPAND_PER_NODE times the number of subschemas the schema
 * compiles to, and never less than IJ_EXPAND_MIN.
 */
#define IJ_EXPAND_MIN		INT64CONST(100000)
#define IJ_EXPAND_PER_NODE	10


/* ----------------------------------------------------------------
 * The subschemas of a node
 *
 * Each macro runs body once per subschema slot (IjNode **s) or subschema
 * (IjNode *c) of n that is set, in a fixed order: the order in which the
 * checks below visit them, and so the order in which they report an error.
 * ----------------------------------------------------------------
 */

/* the child applicators: at the value's members, items or property names */
#define IJ_FOREACH_DOWN_SLOT(n, s, body) \
	do { \
		for (int d_ = 0; d_ < (n)->nprefix; d_++) { IjNode **s = &(n)->prefixItems[d_]; body; } \
		if ((n)->items) { IjNode **s = &(n)->items; body; } \
		if ((n)->contains) { IjNode **s = &(n)->contains; body; } \
		for (int d_ = 0; d_ < (n)->nprops; d_++) { IjNode **s = &(n)->props[d_].schema; body; } \
		for (int d_ = 0; d_ < (n)->npatterns; d_++) { IjNode **s = &(n)->patterns[d_].schema; body; } \
		if ((n)->additionalProperties) { IjNode **s = &(n)->additionalProperties; body; } \
		if ((n)->propertyNames) { IjNode **s = &(n)->propertyNames; body; } \
	} while (0)

/* allOf, anyOf, oneOf, not, if, then, else: at the same value */
#define IJ_FOREACH_COMBINATOR_SLOT(n, s, body) \
	do { \
		for (int a_ = 0; a_ < (n)->nallOf; a_++) { IjNode **s = &(n)->allOf[a_]; body; } \
		for (int a_ = 0; a_ < (n)->nanyOf; a_++) { IjNode **s = &(n)->anyOf[a_]; body; } \
		for (int a_ = 0; a_ < (n)->noneOf; a_++) { IjNode **s = &(n)->oneOf[a_]; body; } \
		if ((n)->not) { IjNode **s = &(n)->not; body; } \
		if ((n)->if_) { IjNode **s = &(n)->if_; body; } \
		if ((n)->then_) { IjNode **s = &(n)->then_; body; } \
		if ((n)->else_) { IjNode **s = &(n)->else_; body; } \
	} while (0)

/*
 * The in-place subschemas of n: its $ref target, the combinators,
 * dependentSchemas (as they are before ij_collapse).
 */
#define IJ_FOREACH_INPLACE(n, c, body) \
	do { \
		if ((n)->reftarget) { IjNode *c = (n)->reftarget; body; } \
		IJ_FOREACH_COMBINATOR_SLOT(n, c##_s, { IjNode *c = *c##_s; body; }); \
		for (int p_ = 0; p_ < (n)->ndepschemas; p_++) { IjNode *c = (n)->depschemas[p_].schema; body; } \
	} while (0)


/* ----------------------------------------------------------------
 * $ref resolution (after the whole tree is compiled)
 * ----------------------------------------------------------------
 */

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

/* a reference token, decoded */
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

static IjNode *
ij_tok_index(IjToken *t, IjNode **arr, int n)
{
	int			idx;

	if (!ij_parse_index(t->s, t->len, &idx) || idx >= n)
		return NULL;
	return arr[idx];
}

/*
 * One step through the compiled tree: the subschema of cur that token t
 * names ("items", "not", ...), or with the next token t2 a member or an
 * element of it ("properties/x", "allOf/0", ...); NULL if there is none.
 * *used: how many tokens the step took.
 */
static IjNode *
ij_walk_step(IjNode *cur, IjToken *t, IjToken *t2, int *used)
{
	const IjKeywordDef *def = ij_keyword_def(t->s, t->len);
	IjNode	   *next = NULL;
	int			j;

	*used = 1;
	if (def == NULL)
		return NULL;
	if (def->form == IJ_FORM_SCHEMA)
		return IJ_FIELD(cur, def->at, IjNode *);
	if (def->kw == KW_ITEMS)
		return cur->items;
	if (t2 == NULL)
		return NULL;
	*used = 2;
	if (def->form == IJ_FORM_SCHEMAS)
		return ij_tok_index(t2, IJ_FIELD(cur, def->at, IjNode **),
							IJ_FIELD(cur, def->nat, int));
	if (def->form == IJ_FORM_MAP)
	{
		IjNamed    *nm = ij_named_find(IJ_FIELD(cur, def->at, IjNamed *),
									   IJ_FIELD(cur, def->nat, int),
									   t2->s, t2->len);

		return nm ? nm->schema : NULL;
	}
	if (def->kw == KW_PATTERN_PROPERTIES)
	{
		for (j = 0; j < cur->npatterns; j++)
		{
			CHECK_FOR_INTERRUPTS();
			if (ij_key_eq(t2->s, t2->len, cur->patterns[j].src))
				next = cur->patterns[j].schema;
		}
	}
	return next;
}

/* follow the pointer through the compiled tree; NULL if it leaves it */
static IjNode *
ij_walk_compiled(IjNode *cur, IjToken *toks, int n)
{
	int			i = 0;

	while (cur != NULL && i < n)
	{
		IjToken    *t2 = (i + 1 < n) ? &toks[i + 1] : NULL;
		int			used;

		CHECK_FOR_INTERRUPTS();
		if (cur->kind != IJ_OBJECT)
			return NULL;
		cur = ij_walk_step(cur, &toks[i], t2, &used);
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
		cc->lazy_by_path = ij_string_ptr_table("idemjob schema $ref targets",
											   16, sizeof(IjLazyEntry),
											   cc->scratch);
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
	IJ_FOREACH_DOWN_SLOT(n, s, fn(cc, *s));
	for (i = 0; i < n->ndepschemas; i++)
		fn(cc, n->depschemas[i].schema);
	for (i = 0; i < n->ndefs; i++)
		fn(cc, n->defs[i].schema);
	IJ_FOREACH_COMBINATOR_SLOT(n, s, fn(cc, *s));
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


/* ----------------------------------------------------------------
 * Reference cycles; pure $refs collapsed
 * ----------------------------------------------------------------
 */

/*
 * Refuse a loop of in-place applicators: validating would come back to the
 * same subschema for the same value and never end.
 */
static void
ij_inplace_dfs(IjNode *n)
{
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
	IJ_FOREACH_INPLACE(n, c, ij_inplace_dfs(c));
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
	IJ_FOREACH_DOWN_SLOT(n, s, IJ_COLLAPSE(*s));
	for (i = 0; i < n->ndepschemas; i++)
		IJ_COLLAPSE(n->depschemas[i].schema);
	for (i = 0; i < n->ndefs; i++)
		ij_collapse(n->defs[i].schema);
	IJ_FOREACH_COMBINATOR_SLOT(n, s, IJ_COLLAPSE(*s));
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

/*
 * The start of a count below a value (xdown, xall), kept in the node with
 * its mark: true and *x when it is known already, none when n is not a
 * schema object or is being counted (a recursion through the value, which
 * repeats only as deep as the value goes); else n is marked as being
 * counted and false returned.
 */
static inline bool
ij_expand_known(IjNode *n, uint8 *mark, int64 count, int64 none, int64 *x)
{
	if (n->kind != IJ_OBJECT || *mark == IJ_DFS_ACTIVE)
	{
		*x = none;
		return true;
	}
	if (*mark == IJ_DFS_DONE)
	{
		*x = count;
		return true;
	}
	*mark = IJ_DFS_ACTIVE;
	return false;
}

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
	if (ij_expand_known(n, &n->xdmark, n->xdown, 0, &sum))
		return sum;

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
	if (ij_expand_known(n, &n->xmark, n->xall, 1, &x))
		return x;
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


/* ----------------------------------------------------------------
 * The memo marks, and the whole linking phase
 * ----------------------------------------------------------------
 */

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
	IJ_FOREACH_DOWN_SLOT(c, s, ij_mark_edge(cc, *s));
	IJ_FOREACH_INPLACE(c, d, ij_mark_edge(cc, d));
}

/*
 * Everything between the compiled tree (cc->schema->root, and the
 * subschemas ij_resolve compiles for a $ref on the way) and the compiled
 * form validation uses: resolve the $refs, refuse in-place cycles, bound
 * the expansion, collapse pure $refs, mark the subschemas for the memo.
 */
void
ij_link_schema(IjCompile *cc)
{
	IjSchema   *out = cc->schema;
	int			i;

	ij_link(cc, out->root);
	for (i = 0; i < cc->nlazy; i++)		/* nlazy may grow as we go */
		ij_link(cc, cc->lazy[i]);

	ij_check_cycles(cc, out->root);
	for (i = 0; i < cc->nlazy; i++)
		ij_check_cycles(cc, cc->lazy[i]);

	cc->expand_max = Max(IJ_EXPAND_MIN, IJ_EXPAND_PER_NODE * cc->nnodes);
	ij_check_expansion(cc, out->root);
	for (i = 0; i < cc->nlazy; i++)
		ij_check_expansion(cc, cc->lazy[i]);

	ij_collapse(out->root);
	for (i = 0; i < cc->nlazy; i++)
		ij_collapse(cc->lazy[i]);
	out->root = ij_skip_refs(out->root);

	ij_mark_edge(cc, out->root);
}
