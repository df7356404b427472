/*-------------------------------------------------------------------------
 *
 * validator_regex.c
 *	  Output contracts: the regular expressions of "pattern" and
 *	  "patternProperties", compiled with the schema (validator_compile.c)
 *	  and run during validation (validator_check.c).
 *
 * Patterns use PostgreSQL's advanced regular expression syntax under the
 * C collation, an unanchored search as in ECMA-262; the common ECMA-262
 * constructs (classes, \d, \w, \s, quantifiers, anchors, groups) mean the
 * same there.  Every pattern is compiled by PostgreSQL's regex engine
 * (pg_regcomp), so a bad one is refused (22023) the same way whatever the
 * path that later runs it.
 *
 * Simple patterns (anchors, ASCII literals and classes, ".", \d \w \s,
 * greedy quantifiers; see IjFastRe in validator_int.h) also get an
 * IjFastRe, and run as a bit-parallel NFA over the string, without the
 * regex engine and with the same answers: linear in the string, no
 * allocation, and interruptible on long strings.  The others run through
 * pg_regexec over the string converted to pg_wchar.
 *
 * A cancel or statement_timeout raises 57014 wherever it lands, in the
 * regex engine too: the engine gives up with REG_CANCEL when an interrupt
 * is pending, and REG_CANCEL is never reported as a bad pattern or a
 * failed match (CHECK_FOR_INTERRUPTS() runs first, as in PostgreSQL's own
 * regexp.c).
 *
 * Regular expressions compiled by pg_regcomp hold memory the memory context
 * machinery does not own (before PostgreSQL 16 it is malloc'd), so a reset
 * callback on the compiled form's context (ij_free_regexes) frees them
 * when the caller drops its cache, or when a schema fails to compile.
 *
 * There are no "format" checks: "format" is an annotation, accepted as a
 * string and not asserted (validator_compile.c).
 *
 * src/validator_regex.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_collation.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "port/pg_bitutils.h"
#include "regex/regex.h"
#include "utils/memutils.h"

#include "idemjob.h"
#include "validator_int.h"


/* ----------------------------------------------------------------
 * Simple patterns: a bit-parallel NFA (IjFastRe)
 * ----------------------------------------------------------------
 */

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

/*
 * One atom of a simple pattern at src[*p] and its quantifier, into a;
 * false if it is not simple.  Advances *p past them.
 */
static bool
ij_fast_atom(const char *src, int len, int *p, IjFastAtom *a)
{
	int			q = *p;
	char		c = src[q];

	memset(a, 0, sizeof(IjFastAtom));
	a->min = a->max = 1;
	if (c == '[')
	{
		if (!ij_fast_bracket(src, len, &q, a))
			return false;
	}
	else if (c == '\\')
	{
		if (q + 1 >= len)
			return false;
		if (!ij_fast_class_escape(a, src[q + 1]))
		{
			if (!ij_fast_punct(src[q + 1]))
				return false;
			ij_fast_add(a, (unsigned char) src[q + 1]);
		}
		q += 2;
	}
	else if (c == '.')
	{
		a->set[0] = a->set[1] = ~UINT64CONST(0);
		a->other = true;
		q++;
	}
	else if (c < 0x20 || c > 0x7e || strchr("^$|()*+?{}[]", c) != NULL)
		return false;
	else
	{
		ij_fast_add(a, (unsigned char) c);
		q++;
	}

	/* one greedy quantifier at most */
	if (q < len)
	{
		if (src[q] == '?')
			a->min = 0, a->max = 1, q++;
		else if (src[q] == '*')
			a->min = 0, a->max = -1, q++;
		else if (src[q] == '+')
			a->min = 1, a->max = -1, q++;
		else if (src[q] == '{' && !ij_fast_bound(src, len, &q, &a->min, &a->max))
			return false;
		if (q < len && (src[q] == '?' || src[q] == '*' ||
						src[q] == '+' || src[q] == '{'))
			return false;
	}
	*p = q;
	return true;
}

/*
 * The NFA of parsed atoms: each expanded into its min atoms that match
 * exactly once, then one "*" or (max - min) "?".
 */
static IjFastRe *
ij_fast_build(const IjFastAtom *atoms, int natoms, bool bol, bool eol)
{
	IjFastRe   *f = palloc0(sizeof(IjFastRe));
	bool		star[IJ_FAST_MAX];
	bool		skip[IJ_FAST_MAX];
	int			i;
	int			k = 0;

	f->bol = bol;
	f->eol = eol;
	for (i = 0; i < natoms; i++)
	{
		const IjFastAtom *a = &atoms[i];
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
	return f;
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

	if (p < len && src[p] == '^')
	{
		bol = true;
		p++;
	}
	while (p < len)
	{
		IjFastAtom *a;

		if (src[p] == '$' && p == len - 1)
		{
			eol = true;
			break;
		}
		if (natoms > IJ_FAST_MAX)
			return NULL;
		a = &atoms[natoms];
		if (!ij_fast_atom(src, len, &p, a))
			return NULL;
		nexp += a->min + (a->max < 0 ? 1 : a->max - a->min);
		if (nexp > IJ_FAST_MAX)
			return NULL;
		natoms++;
	}
	return ij_fast_build(atoms, natoms, bol, eol);
}

/* run a simple pattern over a string (in the database encoding) */
bool
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


/* ----------------------------------------------------------------
 * Every pattern: the regex engine
 * ----------------------------------------------------------------
 */

/* the reset callback of the compiled form's context */
void
ij_free_regexes(void *arg)
{
	IjSchema   *schema = (IjSchema *) arg;
	IjRegexCell *c;

	for (c = schema->regexes; c != NULL; c = c->next)
		pg_regfree(c->re);
	schema->regexes = NULL;
}

void
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

bool
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

pg_wchar *
ij_to_wchar(const char *s, int len, int *wlen)
{
	pg_wchar   *w = palloc(sizeof(pg_wchar) * (len + 1));

	*wlen = pg_mb2wchar_with_len(s, w, len);
	return w;
}
