// Values through the server without loss: bigint, numbers in jsonb,
// timestamptz with microseconds, intervals.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { skip, as, superuser, uniq } from '../test_support/env.js';

let client;
let worker;
let su;

describe('types', { skip }, () => {
  before(() => {
    client = as('client');
    worker = as('worker');
    su = superuser();
  });
  after(async () => {
    for (const c of [client, worker, su]) if (c) await c.end();
  });

  it('int8: a number up to 2^53 - 1, a BigInt past it, both ways', async () => {
    const [r] = await client.query('SELECT 9007199254740991::int8 AS safe, 9007199254740992::int8 AS past,'
      + ' (-9223372036854775808)::int8 AS min, $1::int8 AS sent', [2n ** 62n]);
    assert.equal(r.safe, 9007199254740991);
    assert.equal(r.past, 9007199254740992n);
    assert.equal(r.min, -9223372036854775808n);
    assert.equal(r.sent, 4611686018427387904n);
    // the int8 columns of the calls: numbers
    const s = await client.submit('shop', uniq('int8'), 'ty.int8', { provider: 'p' });
    const [c] = await worker.claim(uniq('w'), { intents: ['ty.int8'], lease: true });
    assert.equal(typeof c.readVersion, 'number');
    const done = await worker.completeAttempt(c.attemptId, { ok: true });
    assert.equal(done.jobVersion, 1);
    const job = await client.job(s.jobId);
    assert.equal(job.version, 1);
    assert.equal(job.attemptCount, 1);
  });

  it('numbers in jsonb: a BigInt is sent exactly; JSON.parse reads past 2^53 approximately, parseJson can read it exactly', async () => {
    const big = 2n ** 64n + 1n; // 18446744073709551617
    const params = { big, small: 42, dec: 0.1, neg: -(2n ** 70n) };
    const s = await client.submit('shop', uniq('big'), 'ty.json', { params });
    const [stored] = await su.query("SELECT params ->> 'big' AS big, params ->> 'neg' AS neg, params ->> 'dec' AS dec FROM idemjob.jobs WHERE id = $1", [s.jobId]);
    assert.deepEqual(stored, { big: '18446744073709551617', neg: '-1180591620717411303424', dec: '0.1' });
    // the default reader: JSON.parse, the nearest double (documented)
    const job = await client.job(s.jobId);
    assert.equal(job.params.big, 18446744073709552000);
    assert.equal(job.params.small, 42);
    // a lossless reader of your choice (here: integers past 2^53 as BigInt)
    const exact = as('client', {
      parseJson: (text) => JSON.parse(text.replace(/([:[,]\s*)(-?\d{16,})(?=\s*[,\]}])/g, '$1"#big#$2"'),
        (k, v) => (typeof v === 'string' && v.startsWith('#big#') ? BigInt(v.slice(5)) : v)),
    });
    try {
      const j = await exact.job(s.jobId);
      assert.equal(j.params.big, big);
      assert.equal(j.params.neg, -(2n ** 70n));
      assert.equal(j.params.small, 42);
      // and the same params again: the same request (compared as jsonb)
      const again = await exact.submit('shop', j.idempotencyKey, 'ty.json', { params: j.params });
      assert.equal(again.jobId, s.jobId);
      assert.equal(again.created, false);
    } finally {
      await exact.end();
    }
    // a reader that throws: the client's error, not a lost connection, and the connection stays
    const picky = as('client', { max: 1, parseJson: () => { throw new Error('no'); } });
    try {
      const e = await picky.job(s.jobId).catch((x) => x);
      assert.equal(e.name, 'IdemjobError');
      assert.match(e.message, /cannot read a value/);
      assert.equal((await picky.query('SELECT 1 AS one'))[0].one, 1);
      assert.deepEqual([picky.stats.created, picky.stats.broken], [1, 0]);
    } finally {
      await picky.end();
    }
    // numeric columns come as text (pg's default), exactly
    const [n] = await client.query('SELECT 123456789012345678901234567890.123456::numeric AS n');
    assert.equal(n.n, '123456789012345678901234567890.123456');
  });

  it('timestamptz: microseconds given as a string come back exactly in ...Text; a Date to the millisecond', async () => {
    const runAt = '2031-02-03T04:05:06.123456Z';
    const s = await client.submit('shop', uniq('ts'), 'ty.ts', { runAt });
    const job = await client.job(s.jobId);
    assert.equal(job.runAtText, runAt);
    assert.ok(job.runAt instanceof Date);
    assert.equal(job.runAt.toISOString(), '2031-02-03T04:05:06.123Z');
    const [db] = await su.query("SELECT to_char(run_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') AS t FROM idemjob.jobs WHERE id = $1", [s.jobId]);
    assert.equal(db.t, runAt);
    // another offset in, UTC out
    const s2 = await client.submit('shop', uniq('ts'), 'ty.ts', { runAt: '2031-02-03 10:05:06.000001+05:30' });
    assert.equal((await client.job(s2.jobId)).runAtText, '2031-02-03T04:35:06.000001Z');
    // a Date: its milliseconds
    const d = new Date(Date.UTC(2031, 1, 3, 4, 5, 6, 789));
    const s3 = await client.submit('shop', uniq('ts'), 'ty.ts', { runAt: d });
    const j3 = await client.job(s3.jobId);
    assert.equal(j3.runAt.getTime(), d.getTime());
    assert.equal(j3.runAtText, '2031-02-03T04:05:06.789000Z');
    // a ...Text value sent back is the same instant
    const [{ same }] = await su.query('SELECT run_at = $1::timestamptz AS same FROM idemjob.jobs WHERE id = $2', [job.runAtText, s.jobId]);
    assert.equal(same, true);
    // whatever the session's time zone
    // (set for this statement's transaction only: through the pooler a session setting would stay behind)
    const [tz] = await client.query("SELECT set_config('TimeZone', 'Asia/Kathmandu', true) AS zone, $1::timestamptz AS t", [runAt]);
    assert.equal(tz.zone, 'Asia/Kathmandu');
    assert.equal(tz.tText, runAt);
  });

  it('intervals: milliseconds or text in, milliseconds out', async () => {
    const [r] = await client.query("SELECT '1 day 02:03:04.5'::interval AS a, '-1.25 s'::interval AS b");
    assert.equal(r.a, 93784500);
    assert.equal(r.b, -1250);
    const s = await client.submit('shop', uniq('iv'), 'ty.iv', { provider: 'p' });
    const a = await worker.startAttempt(s.jobId, { timeout: 1500.5, worker: uniq('w') });
    assert.ok(Math.abs(a.deadline - a.startedAt - 1500) <= 1, String(a.deadline - a.startedAt));
    const b = await worker.heartbeat(a.id, { extend: '2 minutes' });
    assert.ok(b.deadline - Date.now() > 100000);
  });
});
