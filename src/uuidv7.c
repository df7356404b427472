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
 * Since 1.2 a job's id carries its owner's hash (idemjob.owner_hash,
 * docs/scaling.md) in its last 32 bits, and an attempt's id its job id's
 * last 32 bits, so that a call given only an id can know where its rows
 * are; 30 random bits remain.
 * Two ids of one owner collide only if two backends make them in the same
 * 1/4096 ms with the same 30 bits (about 1 in 10^9 per such pair), and the
 * primary key then refuses the second (23505): never a silent mix-up.
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

#include "common/hashfn.h"
#include "fmgr.h"
#include "utils/uuid.h"

#include "idemjob.h"

PG_FUNCTION_INFO_V1(idemjob_uuid_v7);
PG_FUNCTION_INFO_V1(idemjob_owner_hash);
PG_FUNCTION_INFO_V1(idemjob_owner_hash_of_id);
PG_FUNCTION_INFO_V1(idemjob_owner_hash_id);
PG_FUNCTION_INFO_V1(idemjob_uuid_v7_owner_hash);

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

/* write the owner_hash into an id's last four bytes (big-endian) */
static void
put_owner_hash(pg_uuid_t *uuid, int32 owner_hash)
{
	uint32		r = (uint32) owner_hash;

	uuid->data[12] = (unsigned char) (r >> 24);
	uuid->data[13] = (unsigned char) (r >> 16);
	uuid->data[14] = (unsigned char) (r >> 8);
	uuid->data[15] = (unsigned char) r;
}

/* a new id with the owner_hash in its last four bytes */
pg_uuid_t *
idemjob_new_uuid_with_hash(int32 owner_hash)
{
	pg_uuid_t  *uuid = idemjob_new_uuid();

	put_owner_hash(uuid, owner_hash);
	return uuid;
}

/*
 * The owner_hash of an owner: PostgreSQL's hash_bytes() over the owner_id's
 * bytes (what hashtext() gives under a deterministic collation).  Like
 * PostgreSQL's hash partitioning, it depends on the byte order of the
 * machine: every node of a cluster, and a server a dump is restored on,
 * must share it (docs/scaling.md).
 */
int32
ij_owner_hash(text *owner_id)
{
	return (int32) hash_bytes((const unsigned char *) VARDATA_ANY(owner_id),
							  VARSIZE_ANY_EXHDR(owner_id));
}

/* the owner_hash an id carries: its last four bytes */
int32
ij_owner_hash_of_id(const pg_uuid_t *id)
{
	return (int32) (((uint32) id->data[12] << 24) | ((uint32) id->data[13] << 16) |
					((uint32) id->data[14] << 8) | (uint32) id->data[15]);
}

/* idemjob.uuid_v7(owner_hash): an id that carries the owner_hash */
Datum
idemjob_uuid_v7_owner_hash(PG_FUNCTION_ARGS)
{
	PG_RETURN_UUID_P(idemjob_new_uuid_with_hash(PG_GETARG_INT32(0)));
}

Datum
idemjob_owner_hash(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32(ij_owner_hash(PG_GETARG_TEXT_PP(0)));
}

Datum
idemjob_owner_hash_of_id(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32(ij_owner_hash_of_id(PG_GETARG_UUID_P(0)));
}

Datum
idemjob_owner_hash_id(PG_FUNCTION_ARGS)
{
	pg_uuid_t  *uuid = palloc0(sizeof(pg_uuid_t));

	put_owner_hash(uuid, PG_GETARG_INT32(0));
	PG_RETURN_UUID_P(uuid);
}
