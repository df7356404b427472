/*-------------------------------------------------------------------------
 *
 * compat.h
 *	  Every difference between the PostgreSQL major versions idemjob builds
 *	  against (15, 16, 17 and 18), in one place, so that the other files
 *	  read as one version.  Included by idemjob.h, after postgres.h.
 *
 *	  Nothing else in src/ tests PG_VERSION_NUM.  A difference gets a macro
 *	  or a static inline function here, named ij_* or after the newest
 *	  PostgreSQL API it stands for.
 *
 * src/compat.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMJOB_COMPAT_H
#define IDEMJOB_COMPAT_H

#include "common/jsonapi.h"
#include "mb/pg_wchar.h"

/*
 * PostgreSQL 13 lacks common/cryptohash.h and 14 is out of support since
 * November 2026; both lack es_opened_result_relations' companions and
 * MarkGUCPrefixReserved, which the code uses as they are.
 */
#if PG_VERSION_NUM < 150000
#error "idemjob requires PostgreSQL 15 or later"
#endif

/*
 * makeJsonLexContextCstringLen: since 17 it takes the context to fill (NULL:
 * allocate one) as its first argument.
 */
static inline JsonLexContext *
ij_json_lexer(const char *json, size_t len, bool need_escapes)
{
#if PG_VERSION_NUM >= 170000
	return makeJsonLexContextCstringLen(NULL, json, len,
										GetDatabaseEncoding(), need_escapes);
#else
	return makeJsonLexContextCstringLen((char *) json, (int) len,
										GetDatabaseEncoding(), need_escapes);
#endif
}

/*
 * A function that never returns: 18 marks it with a prefix (pg_noreturn,
 * C11's _Noreturn) and no longer has the suffix pg_attribute_noreturn(),
 * which GCC and clang also take in front of a declaration.
 */
#if PG_VERSION_NUM >= 180000
#define IJ_NORETURN pg_noreturn
#else
#define IJ_NORETURN pg_attribute_noreturn()
#endif

/*
 * object_ownercheck: since 16 one function for every catalog; 15 has one per
 * kind (only the extension's is used here).
 */
#if PG_VERSION_NUM < 160000
#include "catalog/pg_extension.h"
#include "utils/acl.h"

static inline bool
object_ownercheck(Oid classid, Oid objectid, Oid roleid)
{
	Assert(classid == ExtensionRelationId);
	return pg_extension_ownercheck(objectid, roleid);
}
#endif

#endif							/* IDEMJOB_COMPAT_H */
