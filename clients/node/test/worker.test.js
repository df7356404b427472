// The Worker runtime end to end: concurrency and several intents; failover
// by route after a failure; a timeout marked unknown, fenced by the retry
// policy, won on the fallback, and the late answer reported and lost; the
// failures a handler raises; stop().
import { describe, it, before, after, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { Worker as BaseWorker, Failure } from '../index.js';
import {
  skip, as, superuser, uniq, intent, sleep, until, attempts,
} from '../test_support/env.js';

let client;
let wclient;
let operator;
let admin;
let su;

// every worker a test starts is stopped after it, passed or not
const started = [];
class Worker extends BaseWorker {
  start() {
    started.push(this);
    return super.start();
  }
}

const final = (s) => ['succeeded', 'failed', 'cancelled'].includes(s);

describe('the worker', { skip }, () => {
  before(() => {
    client = as('client');
    wclient = as('worker');
    operator = as('operator');
    admin = as('admin');
    su = superuser();
  });
  afterEach(async () => {
    for (const w of started.splice(0)) await w.stop({ grace: 100 });
  });
  after(async () => {
    for (const c of [client, wclient, operator, admin, su]) if (c) await c.end();
  });

  it('runs several intents side by side, at most `concurrency` at once, each job won once', async () => {
    const ia = await intent(admin, uniq('wk.a'));
    const ib = await intent(admin, uniq('wk.b'));
    const jobs = [];
    for (let i = 0; i < 12; i++) {
      for (const it of [ia, ib]) jobs.push((await client.submit('shop', uniq('k'), it, { params: { i }, provider: 'primary' })).jobId);
    }
    let now = 0;
    let peak = 0;
    const seen = [];
    const handler = async (job, ctx) => {
      now++;
      peak = Math.max(peak, now);
      seen.push(job.intent);
      assert.equal(ctx.provider, 'primary');
      assert.equal(ctx.jobId, job.jobId);
      assert.ok(ctx.deadline > new Date() && ctx.signal && !ctx.signal.aborted);
      await sleep(40);
      now--;
      return { by: ctx.provider, i: job.params.i, intent: job.intent };
    };
    const events = [];
    const w = new Worker({
      client: wclient, name: uniq('wk'), handlers: { [ia]: handler, [ib]: handler }, concurrency: 4, timeout: 5000, wait: 300,
      onEvent: (name) => events.push(name),
    });
    assert.equal(await w.start(), 0);
    await until(async () => w.counters.won === 24, { what: '24 won' });
    await w.stop({ grace: 1000 });
    assert.deepEqual(w.counters, { claimed: 24, skipped: 0, won: 24, lost: 0, rejected: 0, failed: 0, inDoubt: 0, late: 0, errors: 0 });
    assert.ok(peak <= 4 && peak >= 2, `peak ${peak}`);
    assert.deepEqual(new Set(seen), new Set([ia, ib]));
    for (const id of jobs) {
      const j = await client.job(id);
      assert.deepEqual([j.state, j.attemptCount, j.result.by], ['succeeded', 1, 'primary']);
    }
    for (const e of ['started', 'claiming', 'claimed', 'begun', 'answered', 'completed', 'stopped']) assert.ok(events.includes(e), e);
  });

  it('failover by route: a Failure on the primary, the job won on the certified fallback', async () => {
    const it = await intent(admin, uniq('wk.fo'));
    const { jobId } = await client.submit('shop', uniq('k'), it, { provider: 'primary' });
    const w = new Worker({
      client: wclient, name: uniq('wk'), timeout: 5000, wait: 300,
      handlers: {
        [it]: async (job, ctx) => {
          if (ctx.provider === 'primary') throw new Failure({ code: 'provider_down' });
          return { by: ctx.provider };
        },
      },
    });
    await w.start();
    const job = await client.awaitJob(jobId, 5000);
    await w.stop({ grace: 1000 });
    assert.deepEqual([job.state, job.result], ['succeeded', { by: 'fallback' }]);
    assert.deepEqual(await attempts(su, jobId), ['primary:failed', 'fallback:succeeded']);
    assert.deepEqual([w.counters.failed, w.counters.won], [1, 1]);
  });

  it('a timeout: unknown, fenced by fence_unknown_after, won on the fallback; the late answer lost, with a race-log row', async () => {
    const it = await intent(admin, uniq('wk.late'), { fence: '1s' });
    const { jobId } = await client.submit('shop', uniq('k'), it, { provider: 'primary' });
    let answer;
    const hung = new Promise((r) => { answer = r; });
    const events = [];
    const w = new Worker({
      client: wclient, name: uniq('wk'), timeout: 700, wait: 200,
      handlers: {
        [it]: async (job, ctx) => {
          if (ctx.provider === 'primary') await hung; // the provider answers long after the deadline
          return { by: ctx.provider };
        },
      },
      onEvent: (name, f) => events.push({ name, ...f }),
    });
    await w.start();
    const primaryAttempt = (await until(() => events.find((e) => e.name === 'unknown'), { what: 'mark_unknown' })).attemptId;
    assert.equal((await client.job(jobId)).state, 'in_doubt');
    // the sweeper's part (operator rights): fence the doubt after 1 s
    const job = await until(async () => {
      await operator.expireAttempts();
      const j = await client.job(jobId);
      return final(j.state) && j;
    }, { every: 200, what: 'the fallback' });
    assert.deepEqual([job.state, job.result], ['succeeded', { by: 'fallback' }]);
    answer();
    await until(() => w.counters.late === 1, { what: 'the late answer' });
    await w.stop({ grace: 1000 });
    assert.deepEqual([w.counters.won, w.counters.lost, w.counters.inDoubt, w.counters.late, w.counters.errors], [1, 1, 1, 1, 0]);
    const late = events.find((e) => e.name === 'late');
    assert.deepEqual([late.attemptId, late.outcome], [primaryAttempt, 'lost']);
    const [race] = await su.query('SELECT reason, provider, winner_attempt_id FROM idemjob.race_log WHERE attempt_id = $1', [primaryAttempt]);
    assert.deepEqual([race.reason, race.provider, race.winner_attempt_id], ['slot_taken', 'primary', job.completedBy]);
    assert.deepEqual(await attempts(su, jobId), ['primary:superseded', 'fallback:succeeded']);
  });

  it('handler errors: an exception is a retryable failure {"code": "exception"}; Failure(retryable=false) ends the job', async () => {
    const it = await intent(admin, uniq('wk.err'));
    const a = (await client.submit('shop', uniq('k'), it, { params: { mode: 'throw' }, provider: 'primary' })).jobId;
    const b = (await client.submit('shop', uniq('k'), it, { params: { mode: 'fatal' }, provider: 'primary' })).jobId;
    const w = new Worker({
      client: wclient, name: uniq('wk'), timeout: 5000, wait: 200,
      handlers: {
        [it]: async (job, ctx) => {
          if (job.params.mode === 'fatal') throw new Failure({ code: 'card_declined' }, false);
          if (ctx.provider === 'primary') throw new TypeError('boom');
          return { by: ctx.provider };
        },
      },
    });
    await w.start();
    const [ja, jb] = await Promise.all([client.awaitJob(a, 5000), client.awaitJob(b, 5000)]);
    await w.stop({ grace: 1000 });
    assert.equal(ja.state, 'succeeded');
    const [err] = await su.query("SELECT error FROM idemjob.attempts WHERE job_id = $1 AND state = 'failed'", [a]);
    assert.deepEqual(err.error, { code: 'exception', name: 'TypeError', message: 'boom' });
    assert.deepEqual([jb.state, jb.attemptCount], ['failed', 1]);
    assert.equal(w.counters.failed, 2);
  });

  it('an attempt cancelled on the server meanwhile: the heartbeat is refused, ctx.signal aborts, nothing reported; the job goes on', async () => {
    const it = await intent(admin, uniq('wk.sig'));
    const { jobId } = await client.submit('shop', uniq('k'), it, { provider: 'primary' });
    const events = [];
    const w = new Worker({
      client: wclient, name: uniq('wk'), timeout: 900, wait: 200,
      handlers: {
        [it]: async (job, ctx) => {
          if (ctx.provider === 'primary') {
            await new Promise((resolve, reject) => { ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason)); });
          }
          return { by: ctx.provider };
        },
      },
      onEvent: (name, f) => events.push({ name, ...f }),
    });
    await w.start();
    const begun = await until(() => events.find((e) => e.name === 'begun'), { what: 'the begin' });
    await operator.cancelAttempt(begun.attemptId, 'operator: provider is down');
    const job = await client.awaitJob(jobId, 5000);
    assert.deepEqual([job.state, job.result], ['succeeded', { by: 'fallback' }]);
    const refused = events.find((e) => e.name === 'heartbeat_refused');
    assert.ok(refused && refused.sqlstate === 'IJ005', JSON.stringify(events.map((e) => e.name)));
    assert.ok(events.some((e) => e.name === 'gave_up' && e.attemptId === begun.attemptId));
    assert.deepEqual([w.counters.failed, w.counters.errors, w.counters.inDoubt, w.counters.won], [0, 0, 0, 1]);
    assert.deepEqual(await attempts(su, jobId), ['primary:cancelled', 'fallback:succeeded']);
  });

  it('stop(): a handler past its grace is marked unknown and given up; the claim loop ends', async () => {
    const it = await intent(admin, uniq('wk.stop'), { fence: null });
    const { jobId } = await client.submit('shop', uniq('k'), it, { provider: 'primary' });
    let signalled = false;
    const w = new Worker({
      client: wclient, name: uniq('wk'), timeout: 10000, wait: 200,
      handlers: {
        [it]: async (job, ctx) => {
          ctx.signal.addEventListener('abort', () => { signalled = true; });
          await sleep(3000);
          return { by: ctx.provider };
        },
      },
    });
    await w.start();
    await until(() => w.busy === 1 && w.counters.claimed === 1, { what: 'the handler' });
    await sleep(100);
    const t0 = Date.now();
    const abandoned = await w.stop({ grace: 200 });
    assert.ok(Date.now() - t0 < 2000);
    assert.equal(abandoned, 1);
    assert.ok(signalled);
    assert.equal(w.counters.inDoubt, 1);
    const [a] = await su.query('SELECT state::text, error FROM idemjob.attempts WHERE job_id = $1', [jobId]);
    assert.equal(a.state, 'cancelled'); // fenced: its answer can never win
    assert.equal((await client.job(jobId)).state, 'pending'); // retried on its next provider
  });
});
