// Every call against the server, as the roles that may make it; the typed
// errors with their fields and HTTP mapping; DSN and URL; the pooler.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import pg from 'pg';
import {
  connect, IdempotencyConflict, AttemptInDoubt, NotFound, PermissionDenied, InvalidArgument,
  JobFinished, InvalidTransition,
} from '../index.js';
import {
  skip, as, superuser, uniq, intent, attempts, URL, DSN, VIA, sleep,
} from '../test_support/env.js';

let client;
let worker;
let operator;
let admin;
let su;

describe('calls', { skip }, () => {
before(() => {
  client = as('client');
  worker = as('worker');
  operator = as('operator');
  admin = as('admin');
  su = superuser();
});
after(async () => {
  for (const c of [client, worker, operator, admin, su]) if (c) await c.end();
});

it('double submit: one job, created once, also when concurrent', async () => {
  const key = uniq('dbl');
  const a = await client.submit('shop', key, 'cl.charge', { params: { amount: 1 }, provider: 'primary' });
  const b = await client.submit('shop', key, 'cl.charge', { params: { amount: 1 }, provider: 'primary' });
  assert.equal(a.created, true);
  assert.equal(b.created, false);
  assert.equal(a.jobId, b.jobId);
  assert.equal(a.state, 'pending');
  assert.equal(a.version, 0);
  const key2 = uniq('dbl-conc');
  const all = await Promise.all(Array.from({ length: 8 }, () => client.submit('shop', key2, 'cl.charge', { params: { amount: 2 } })));
  assert.equal(new Set(all.map((r) => r.jobId)).size, 1);
  assert.equal(all.filter((r) => r.created).length, 1);
  const [{ n }] = await su.query('SELECT count(*)::int AS n FROM idemjob.jobs WHERE idempotency_key = $1', [key2]);
  assert.equal(n, 1);
});

it('key reuse: IdempotencyConflict with the job id from the error fields, 409', async () => {
  const key = uniq('reuse');
  const first = await client.submit('shop', key, 'cl.charge', { params: { amount: 1 } });
  const err = await client.submit('shop', key, 'cl.charge', { params: { amount: 2 } }).catch((e) => e);
  assert.ok(err instanceof IdempotencyConflict, err);
  assert.equal(err.sqlstate, 'IJ001');
  assert.equal(err.jobId, first.jobId);
  assert.equal(err.table, 'jobs');
  assert.ok(err.detail);
  const http = err.toHTTP();
  assert.equal(http.status, 409);
  assert.equal(http.body.job_id, first.jobId);
  assert.equal(http.body.sqlstate, 'IJ001');
  assert.equal(http.body.error, 'idempotency_conflict');
});

it('an attempt in doubt: AttemptInDoubt with retryAfter, 409 with Retry-After', async () => {
  const { jobId } = await client.submit('shop', uniq('doubt'), 'cl.charge', { provider: 'primary' });
  const a = await worker.startAttempt(jobId, { timeout: '30s', worker: 'w-doubt' });
  assert.equal(a.state, 'started');
  // the same worker gets its attempt back (resend-safe); another is refused
  assert.equal((await worker.startAttempt(jobId, { timeout: '30s', worker: 'w-doubt' })).id, a.id);
  const err = await worker.startAttempt(jobId, { worker: 'w-other' }).catch((e) => e);
  assert.ok(err instanceof AttemptInDoubt, err);
  assert.equal(err.jobId, jobId);
  assert.equal(err.attemptId, a.id);
  assert.equal(err.state, 'started');
  assert.ok(Number.isInteger(err.retryAfter) && err.retryAfter >= 1 && err.retryAfter <= 30, String(err.retryAfter));
  assert.match(err.deadlineText, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
  const http = err.toHTTP();
  assert.equal(http.status, 409);
  assert.equal(http.headers['Retry-After'], String(err.retryAfter));
  assert.equal(http.body.attempt_id, a.id);
});

it('not found, malformed, not allowed: NotFound 404, InvalidArgument 400, PermissionDenied 403', async () => {
  const missing = '01900000-0000-7000-8000-000000000000';
  let e = await client.job(missing).catch((x) => x);
  assert.ok(e instanceof NotFound, e);
  assert.equal(e.jobId, missing);
  assert.equal(e.toHTTP().status, 404);
  e = await client.awaitJob('not-a-uuid', 0).catch((x) => x);
  assert.ok(e instanceof InvalidArgument, e);
  assert.equal(e.sqlstate, '22P02');
  assert.equal(e.toHTTP().status, 400);
  e = await worker.claim('w', { maxJobs: 0 }).catch((x) => x);
  assert.ok(e instanceof InvalidArgument && e.sqlstate === '22023', e);
  e = await client.claim('w').catch((x) => x);
  assert.ok(e instanceof PermissionDenied, e);
  assert.equal(e.toHTTP().status, 403);
  e = await worker.expireAttempts().catch((x) => x);
  assert.ok(e instanceof PermissionDenied, e);
});

it('every call once, as the role that may make it', async () => {
  const it = await intent(admin, uniq('cl.all'));
  assert.equal(await admin.defineContract(it, { type: 'object', required: ['by'] }), 1); // the same schema: the same version
  const cert = await admin.certifyProvider(it, 'other', { evidence: { ok: 1 } });
  assert.equal(cert.contractVersion, 1);
  assert.ok(cert.certifiedAt instanceof Date);
  const revoked = await admin.revokeProvider(it, 'other', 'flaky');
  assert.equal(revoked.revokeReason, 'flaky');
  assert.ok(revoked.revokedAt instanceof Date);
  const route = await admin.setRoute(it, ['primary', 'fallback']);
  assert.deepEqual(route.providers, ['primary', 'fallback']);
  const policy = await admin.setRetryPolicy(it, { maxAttempts: 3, retryBackoff: 0, retryBackoffMax: '1 minute', fenceUnknownAfter: 1500 });
  assert.deepEqual([policy.maxAttempts, policy.retryBackoff, policy.retryBackoffMax, policy.fenceUnknownAfter], [3, 0, 60000, 1500]);

  // a job through claim, begin, heartbeat, complete
  const s = await client.submit('shop', uniq('k'), it, { params: { n: 1 }, provider: 'primary', priority: 5, maxAttempts: 4 });
  let job = await client.job(s.jobId);
  assert.deepEqual([job.state, job.priority, job.maxAttempts, job.provider], ['pending', 5, 4, 'primary']);
  const wname = uniq('w');
  const [c] = await worker.claim(wname, { intents: [it], maxJobs: 10, timeout: '30s', lease: true });
  assert.equal(c.jobId, s.jobId);
  assert.deepEqual([c.intent, c.provider, c.attemptNo, c.readVersion, c.ownerId], [it, 'primary', 1, 0, 'shop']);
  let a = await worker.beginAttempt(c.attemptId);
  assert.deepEqual([a.state, a.leaseUntil, a.worker], ['started', null, wname]);
  a = await worker.heartbeat(c.attemptId, { extend: '1 minute' });
  assert.ok(a.deadline.getTime() > Date.now() + 50000);
  const done = await worker.completeAttempt(c.attemptId, { by: 'primary' });
  assert.deepEqual([done.outcome, done.jobId, done.jobVersion, done.winnerAttemptId], ['won', s.jobId, 1, c.attemptId]);
  job = await client.awaitJob(s.jobId, 0);
  assert.deepEqual([job.state, job.result, job.completedBy, job.version], ['succeeded', { by: 'primary' }, c.attemptId, 1]);
  assert.ok(job.completedAt instanceof Date);
  let e = await client.cancelJob(s.jobId, 'too late').catch((x) => x);
  assert.ok(e instanceof JobFinished, e);

  // fail_attempt, then the retry on the fallback; a rejected result
  const f = await client.submit('shop', uniq('k'), it, { provider: 'primary' });
  const a1 = await worker.startAttempt(f.jobId, { worker: wname });
  const failed = await worker.failAttempt(a1.id, { error: { code: 'down' } });
  assert.deepEqual([failed.state, failed.error], ['failed', { code: 'down' }]);
  e = await worker.completeAttempt(a1.id, { by: 'primary' }).catch((x) => x);
  assert.ok(e instanceof InvalidTransition && e.attemptId === a1.id, e);
  const a2 = await worker.startAttempt(f.jobId, { worker: wname });
  assert.equal(a2.provider, 'fallback');
  assert.equal((await worker.completeAttempt(a2.id, { wrong: true })).outcome, 'rejected');

  // mark_unknown, then the operator's cancel_attempt; cancel_job
  const u = await client.submit('shop', uniq('k'), it, { provider: 'primary' });
  const a3 = await worker.startAttempt(u.jobId, { worker: wname, timeout: 60000 });
  const unk = await worker.markUnknown(a3.id, { reason: 'timeout' });
  assert.equal(unk.state, 'unknown');
  assert.ok(unk.unknownAt instanceof Date);
  const doubts = await operator.inDoubt();
  assert.ok(doubts.some((d) => d.attemptId === a3.id && d.state === 'unknown' && typeof d.age === 'number'));
  const qs = await operator.queueStats();
  assert.ok(qs.some((r) => r.intent === it && r.inDoubt === 1));
  const cancelled = await operator.cancelAttempt(a3.id, 'operator says so', { fence: true });
  assert.equal(cancelled.state, 'cancelled');
  const cj = await client.cancelJob(u.jobId, 'changed my mind');
  assert.deepEqual([cj.state, cj.cancelReason], ['cancelled', 'changed my mind']);
  const ps = await operator.providerStats();
  assert.ok(ps.some((r) => r.intent === it && r.provider === 'primary' && r.attempts >= 3 && r.failed >= 1));

  // the worker's own: abandon; the sweeper's: expire; retention
  assert.equal(await worker.abandonAttempts(wname), 0);
  assert.equal(typeof (await operator.expireAttempts()), 'number');
  assert.equal(typeof (await operator.purge('1 hour', { maxJobs: 10 })), 'number');
  assert.equal(typeof (await operator.purgeRaceLog(3600000)), 'number');
  assert.deepEqual(await attempts(su, f.jobId), ['primary:failed', 'fallback:failed']);
});

it('connect by URL and by DSN; raw queries through the same pool', async () => {
  for (const dsn of [URL, DSN]) {
    if (!dsn) continue;
    const c = connect(dsn, { max: 2 });
    try {
      const [r] = await c.query('SELECT current_user AS u, 1::int8 AS one');
      assert.deepEqual(r, { u: 'postgres', one: 1 });
      const s = await c.submit('shop', uniq('url'), 'cl.url');
      assert.equal(s.created, true);
    } finally {
      await c.end();
    }
  }
});

it('pooler safety: unnamed statements only, every call on whichever backend', async () => {
  // consecutive transactions go to other backends through pgbouncer
  // (server_round_robin); warm its pool first so that they do
  const c = as('client', { max: 1 });
  const warm = as('client', { max: 4 });
  try {
    await Promise.all([1, 2, 3, 4].map(() => warm.query('SELECT pg_sleep(0.2)')));
    const pids = new Set();
    const key = uniq('pool');
    for (let i = 0; i < 40; i++) {
      const s = await c.submit('shop', key, 'cl.pool', { params: { i: 0 } });
      await c.awaitJob(s.jobId, 0);
      const [{ pid }] = await c.query('SELECT pg_backend_pid() AS pid');
      pids.add(pid);
    }
    if (VIA === 'pgbouncer') {
      assert.ok(pids.size > 1, 'through pgbouncer the calls ran on one backend only: the test proves nothing');
      // and the pooler does break named statements, so the above means something
      const raw = new pg.Client({ host: c.pool.options.host, port: c.pool.options.port, database: c.pool.options.database, user: 'ij_cl_client' });
      await raw.connect();
      let broke = null;
      try {
        for (let i = 0; i < 20 && !broke; i++) {
          await raw.query({ name: 'named', text: 'SELECT $1::int AS i', values: [i] }).catch((e) => { broke = e; });
          await sleep(5);
        }
      } finally {
        await raw.end();
      }
      assert.ok(broke && ['26000', '42P05', '08P01'].includes(broke.code), `named statements worked through pgbouncer: ${broke}`);
    }
  } finally {
    await c.end();
    await warm.end();
  }
});
});
