/*-------------------------------------------------------------------------
 *
 * uuidv7.c
 *	  Time-ordered ids for jobs and attempts: UUID version 7 (RFC 9562).
 *
 * Layout: 48 bits of Unix time in milliseconds, the version nibble, 12 bits
 * of sub-millisecond time (the RFC's "method 3", so ids made by one backend
 * sort in the order they were made), the variant, and 62 random bits from
 * pg_strong_random() (buffered).  New ids land at the right edge of the primary key's
 * btree, which keeps inserts cheap as the tables grow.
 *
 * Within one backend the 60-bit timestamp never goes backwards: if the
 * clock steps back, or two ids fall into the same 1/4096 ms, the previous
 * value plus one is used.
 *
 * src/uuidv7.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sys/time.h>

#include "fmgr.h"
#include "utils/uuid.h"

#include "idemjob.h"

PG_FUNCTION_INFO_V1(idemjob_uuid_v7);

static uint64 last_ts = 0;

/*
 * Random bytes are drawn from pg_strong_random() 256 at a time: the same
 * CSPRNG, without its per-call cost (about 8k instructions).  The buffer is
 * filled lazily in the backend, never in the postmaster, so forked
 * processes never share it.
 */
static uint8 random_buf[256];
static int	random_used = sizeof(random_buf);

static void
random_bytes(uint8 *dst, int n)
{
	if (random_used + n > (int) sizeof(random_buf))
	{
		if (!pg_strong_random(random_buf, sizeof(random_buf)))
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("could not generate random values")));
		random_used = 0;
	}
	memcpy(dst, random_buf + random_used, n);
	random_used += n;
}

pg_uuid_t *
idemjob_new_uuid(void)
{
	pg_uuid_t  *uuid = palloc(sizeof(pg_uuid_t));
	struct timespec tp;
	uint64		ms;
	uint64		frac;
	uint64		ts;

	clock_gettime(CLOCK_REALTIME, &tp);
	ms = (uint64) tp.tv_sec * 1000 + tp.tv_nsec / 1000000;
	/* the rest of the millisecond, scaled to 12 bits */
	frac = ((uint64) (tp.tv_nsec % 1000000) * 4096) / 1000000;
	ts = (ms << 12) | frac;
	if (ts <= last_ts)
		ts = last_ts + 1;
	last_ts = ts;

	random_bytes(uuid->data + 8, 8);

	ms = ts >> 12;
	frac = ts & 0xFFF;
	uuid->data[0] = (unsigned char) (ms >> 40);
	uuid->data[1] = (unsigned char) (ms >> 32);
	uuid->data[2] = (unsigned char) (ms >> 24);
	uuid->data[3] = (unsigned char) (ms >> 16);
	uuid->data[4] = (unsigned char) (ms >> 8);
	uuid->data[5] = (unsigned char) ms;
	uuid->data[6] = (unsigned char) (0x70 | (frac >> 8));	/* version 7 */
	uuid->data[7] = (unsigned char) frac;
	uuid->data[8] = (unsigned char) (0x80 | (uuid->data[8] & 0x3F)); /* variant */

	return uuid;
}

Datum
idemjob_uuid_v7(PG_FUNCTION_ARGS)
{
	PG_RETURN_UUID_P(idemjob_new_uuid());
}
