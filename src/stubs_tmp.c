/* temporary: functions of 1.1 not written yet (removed before landing) */
#include "postgres.h"
#include "fmgr.h"
#include "idemjob.h"

#define STUB(name) PG_FUNCTION_INFO_V1(name); Datum name(PG_FUNCTION_ARGS) { elog(ERROR, #name " is not written yet"); PG_RETURN_NULL(); }
STUB(idemjob_job)
STUB(idemjob_await_job)
STUB(idemjob_claim)
STUB(idemjob_heartbeat)
STUB(idemjob_purge)
STUB(idemjob_purge_race_log)
