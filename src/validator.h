/*-------------------------------------------------------------------------
 *
 * validator.h
 *	  JSON Schema (draft 2020-12 subset) compiled once and checked against
 *	  jsonb values natively, walking PostgreSQL's jsonb containers.
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
 * Compile a schema.  Everything the compiled form needs is allocated in
 * CurrentMemoryContext (callers cache it in a long-lived context and drop
 * it by deleting that context).  A bad schema or an unsupported keyword
 * raises ERRCODE_INVALID_PARAMETER_VALUE (22023) naming the schema path.
 */
extern IjSchema *ij_schema_compile(Jsonb *schema);

/*
 * Check a value.  Returns NULL when it is valid, else a palloc'd jsonb
 * object {"path": <RFC 6901 pointer>, "keyword": ..., "message": ...}
 * describing one violation.
 */
extern Jsonb *ij_schema_validate(IjSchema *schema, Jsonb *value);

#endif							/* IDEMJOB_VALIDATOR_H */
