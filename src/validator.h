/*-------------------------------------------------------------------------
 *
 * validator.h
 *	  JSON Schema (draft 2020-12 subset) compiled once and checked against
 *	  jsonb values natively, walking PostgreSQL's jsonb containers.
 *
 * This is the public API.  The validator's internals, the types of the
 * compiled form and the helpers its files (validator_compile.c,
 * validator_link.c, validator_regex.c, validator_check.c) share, are in
 * validator_int.h.
 *
 * src/validator.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMJOB_VALIDATOR_H
#define IDEMJOB_VALIDATOR_H

#include "utils/jsonb.h"

typedef struct IjSchema IjSchema;

/*
 * Compile a schema.  Everything the compiled form needs is allocated in a
 * memory context of its own, a child of CurrentMemoryContext (callers
 * cache it under a long-lived context and drop it by deleting or resetting
 * that context).  A bad schema, an unsupported keyword, or a schema whose
 * evaluation could multiply without bound raises
 * ERRCODE_INVALID_PARAMETER_VALUE (22023) naming the schema path; a cancel
 * raises 57014.  Either way nothing it allocated survives the error.
 */
extern IjSchema *ij_schema_compile(Jsonb *schema);

/*
 * Check a value.  Returns NULL when it is valid, else a palloc'd jsonb
 * object {"path": <RFC 6901 pointer>, "keyword": ..., "message": ...}
 * describing one violation.
 */
extern Jsonb *ij_schema_validate(IjSchema *schema, Jsonb *value);

#endif							/* IDEMJOB_VALIDATOR_H */
