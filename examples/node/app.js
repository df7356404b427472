// idemjob from Node (node-postgres): an HTTP-style handler and a worker.
// Pooler-safe: queries carry no `name`, so pg uses the unnamed statement
// (parse/bind/execute in one go) and works through pgbouncer in transaction
// pooling. Types: bigint -> Number (parser below; "1" by default), uuid ->
// string, jsonb -> object, timestamptz -> Date (ms), interval -> object.
'use strict';
const pg = require('pg');

pg.types.setTypeParser(20, (v) => {            // bigint: a number, never a string
  const n = Number(v);
  if (!Number.isSafeInteger(n)) throw new RangeError(`bigint ${v} out of range`);
  return n;
});

const connect = async (dsn) => { const c = new pg.Client(dsn); await c.connect(); return c; };

// ---- errors: SQLSTATE -> HTTP; ids from the error fields, never from DETAIL
const HTTP = {
  IJ001: [409, 'idempotency_conflict'], IJ002: [409, 'attempt_in_doubt'],
  IJ003: [409, 'job_finished'], IJ004: [422, 'provider_not_certified'],
  IJ005: [409, 'invalid_transition'], IJ006: [404, 'not_found'], IJ007: [410, 'key_expired'],
  '22004': [400, 'null_value_not_allowed'], '22023': [400, 'invalid_parameter_value'],
  '22P02': [400, 'invalid_text_representation'], '42501': [403, 'insufficient_privilege'],
  '57014': [503, 'query_canceled'], '0A000': [500, 'feature_not_supported'],
};

function fields(e) {                           // idemjob's key=value list in `constraint`
  const kv = e.schema === 'idemjob' && e.constraint ? e.constraint.split(' ') : [];
  return Object.fromEntries(kv.map((p) => [p.slice(0, p.indexOf('=')), p.slice(p.indexOf('=') + 1)]));
}

function httpError(e) {
  const [status, name] = HTTP[e.code] || [500, 'internal_error'];
  const f = fields(e);
  const body = { error: name, sqlstate: e.code, message: e.message };
  for (const k of ['job_id', 'attempt_id', 'state', 'deadline']) if (k in f) body[k] = f[k];
  return [status, 'retry_after' in f ? { 'Retry-After': f.retry_after } : {}, body];
}

const jobBody = (r) => ({ job_id: r.id, state: r.state, version: r.version, result: r.result });

// POST /jobs (Idempotency-Key: key) and GET /jobs/<id>: [status, headers, json]
async function handle(db, method, path, owner, key, body, wait = '2s') {
  try {
    let jobId;
    if (method === 'POST') {
      const { rows } = await db.query('SELECT * FROM idemjob.submit($1, $2, $3, $4)',
        [owner, key, body.intent, JSON.stringify(body.params || {})]);
      jobId = rows[0].job_id;
    } else {
      jobId = path.split('/').pop();            // a malformed id is 22P02 -> 400
    }
    const { rows } = await db.query('SELECT * FROM idemjob.await_job($1, $2)', [jobId, wait]);
    const final = ['succeeded', 'failed', 'cancelled'].includes(rows[0].state);
    return [final ? 200 : 202, {}, jobBody(rows[0])];
  } catch (e) {
    if (!e.code) throw e;                       // connection lost: in doubt, retry the same call
    return httpError(e);
  }
}

// ---- worker: claim, run the provider with heartbeats, report, fail over
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

class Worker {
  constructor(db, name, providers, { giveUp = 1500, beat = 400, emit = console.log } = {}) {
    Object.assign(this, { db, name, providers, giveUp, beat, emit });
    this.late = [];        // {attemptId, answer}: answers still to report
    this.failover = [];    // jobs to restart on the fallback when their doubt ends
  }

  async one(sql, args) { return (await this.db.query(sql, args)).rows[0]; }

  // report a provider's answer: the database decides won, lost or rejected
  async complete(attemptId, value) {
    return (await this.one('SELECT outcome FROM idemjob.complete_attempt($1, $2)',
      [attemptId, JSON.stringify(value)])).outcome;
  }

  // a definite provider error: the attempt failed, the job may retry
  async fail(attemptId, error) {
    await this.one('SELECT state FROM idemjob.fail_attempt($1, $2, true)',
      [attemptId, JSON.stringify({ code: 'provider_error', message: String(error.message) })]);
  }

  async run(attemptId, jobId, provider, params) {
    const call = { done: false };
    call.answer = Promise.resolve().then(() => this.providers[provider](params))
      .then((v) => { call.done = true; call.value = v; }, (e) => { call.done = true; call.error = e; });
    const t0 = Date.now();
    while (true) {
      await Promise.race([call.answer, sleep(this.beat)]);
      if (call.done) break;
      if (Date.now() - t0 > this.giveUp) {      // no answer: unknown, never failed
        await this.one('SELECT state FROM idemjob.mark_unknown($1)', [attemptId]);
        this.late.push({ attemptId, call });
        this.emit({ event: 'unknown', attempt_id: attemptId });
        return 'unknown';
      }
      await this.one("SELECT state FROM idemjob.heartbeat($1, '1s')", [attemptId]);
    }
    if (call.error) {                           // a definite failure
      await this.fail(attemptId, call.error);
      return 'failed';
    }
    const outcome = await this.complete(attemptId, call.value);
    this.emit({ event: 'completed', attempt_id: attemptId, job_id: jobId, provider, outcome });
    return outcome;
  }

  async tryFailover(jobId, params) {
    let a;
    try {
      a = await this.one("SELECT id, provider FROM idemjob.start_attempt($1, 'fallback', '1s', $2)",
        [jobId, this.name]);
    } catch (e) {
      if (e.code === 'IJ002') {                  // still in doubt: try again later
        const [status, headers, body] = httpError(e);
        this.emit({ event: 'failover_refused', status, headers, body });
        return false;
      }
      if (e.code === 'IJ003' || e.code === 'IJ006') return true;   // finished or gone
      throw e;
    }
    await this.run(a.id, jobId, a.provider, params);
    return true;
  }

  async step(wait = '1s') {
    for (const l of this.late.filter((x) => x.call.done)) {
      this.late.splice(this.late.indexOf(l), 1);
      if (l.call.error) continue;                // report an answer: the database decides
      const outcome = await this.complete(l.attemptId, l.call.value);
      this.emit({ event: 'late_result', attempt_id: l.attemptId, outcome });
    }
    const still = [];
    for (const f of this.failover) if (!(await this.tryFailover(f.jobId, f.params))) still.push(f);
    this.failover = still;
    const { rows } = await this.db.query(
      "SELECT attempt_id, job_id, provider, params FROM idemjob.claim($1, wait => $2, timeout => '1s')",
      [this.name, wait]);
    for (const r of rows) {
      const st = await this.run(r.attempt_id, r.job_id, r.provider, r.params);
      if ((st === 'failed' || st === 'unknown') && !(await this.tryFailover(r.job_id, r.params))) {
        this.failover.push({ jobId: r.job_id, params: r.params });
      }
    }
    return rows.length;
  }

  // Claim up to maxJobs jobs, run them side by side, and report the results
  // together: one statement over two arrays, one complete_attempt per job
  // (each its own compare-and-swap and answer), one transaction.  If one
  // call errors (IJ005: someone failed that attempt meanwhile), nothing of
  // the batch is written and the results go one by one; if the connection
  // drops, resending the same batch gives the same answers.  beforeReport
  // (attemptIds) runs between the provider calls and the report.
  async batchStep(maxJobs = 100, wait = '1s', beforeReport = null) {
    const { rows } = await this.db.query(
      "SELECT attempt_id, provider, params FROM idemjob.claim($1, max_jobs => $2, wait => $3, timeout => '30s')",
      [this.name, maxJobs, wait]);
    const settled = await Promise.allSettled(
      rows.map((r) => Promise.resolve().then(() => this.providers[r.provider](r.params))));
    const results = [];
    for (let i = 0; i < rows.length; i++) {
      if (settled[i].status === 'fulfilled') {
        results.push([rows[i].attempt_id, settled[i].value]);
      } else {                                   // a definite failure
        await this.fail(rows[i].attempt_id, settled[i].reason);
      }
    }
    if (beforeReport) await beforeReport(results.map(([a]) => a));
    const outcomes = new Map();
    if (results.length > 0) {
      try {
        const done = await this.db.query(
          'SELECT r.attempt_id, c.outcome FROM unnest($1::uuid[], $2::jsonb[]) AS r(attempt_id, result),'
          + ' LATERAL idemjob.complete_attempt(r.attempt_id, r.result) c',
          [results.map(([a]) => a), results.map(([, v]) => JSON.stringify(v))]);
        for (const r of done.rows) outcomes.set(r.attempt_id, r.outcome);
      } catch (e) {
        if (!e.code) throw e;                    // in doubt: resend the same batch
        for (const [a, v] of results) {
          try {
            outcomes.set(a, await this.complete(a, v));
          } catch (e1) {
            if (!e1.code) throw e1;
            outcomes.set(a, e1.code);
          }
        }
      }
    }
    this.emit({ event: 'batch', claimed: rows.length, outcomes: results.map(([a]) => outcomes.get(a)) });
    return rows.length;
  }
}

module.exports = { connect, handle, httpError, Worker };
