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
  IJ008: [409, 'lease_expired'],
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

// ---- worker: claim with a lease, begin right before calling the provider the
// claim row names, heartbeats, report. Failover is the server's: after a failure
// or a fenced doubt, claim returns the job on the next provider of its route.
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const NOT_SENT = ['IJ003', 'IJ005', 'IJ008'];   // job ended, attempt ended, lease over

class Worker {
  constructor(db, name, providers, { giveUp = 1500, beat = 400, emit = console.log } = {}) {
    Object.assign(this, { db, name, providers, giveUp, beat, emit });
    this.late = [];        // {attemptId, call}: answers that came after mark_unknown
  }

  async one(sql, args) { return (await this.db.query(sql, args)).rows[0]; }

  // once, at start: give up what an earlier run of this worker left behind
  async start() {
    return (await this.one('SELECT idemjob.abandon_attempts($1) AS n', [this.name])).n;
  }

  // confirm the attempt immediately before calling the provider; false: do not call it
  async begin(attemptId) {
    try {
      await this.one('SELECT state FROM idemjob.begin_attempt($1)', [attemptId]);
      return true;
    } catch (e) {
      if (!NOT_SENT.includes(e.code)) throw e;
      this.emit({ event: 'not_sent', attempt_id: attemptId, sqlstate: e.code });
      return false;
    }
  }

  // report a provider's answer: the database decides won, lost or rejected
  async complete(attemptId, value) {
    return (await this.one('SELECT outcome FROM idemjob.complete_attempt($1, $2)',
      [attemptId, JSON.stringify(value)])).outcome;
  }

  // a definite provider error: the attempt failed; the server retries the job
  // on the next provider of its route
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
        return;
      }
      await this.one("SELECT state FROM idemjob.heartbeat($1, '1s')", [attemptId]);
    }
    if (call.error) {                           // a definite failure
      await this.fail(attemptId, call.error);
      return;
    }
    const outcome = await this.complete(attemptId, call.value);
    this.emit({ event: 'completed', attempt_id: attemptId, job_id: jobId, provider, outcome });
  }

  async step(wait = '1s') {
    for (const l of this.late.filter((x) => x.call.done)) {
      this.late.splice(this.late.indexOf(l), 1);
      if (l.call.error) continue;                // report an answer: the database decides
      const outcome = await this.complete(l.attemptId, l.call.value);
      this.emit({ event: 'late_result', attempt_id: l.attemptId, outcome });
    }
    const { rows } = await this.db.query(
      'SELECT attempt_id, job_id, provider, params FROM idemjob.claim($1, wait => $2,'
      + " timeout => '1s', lease => true)",
      [this.name, wait]);
    for (const r of rows) {
      if (await this.begin(r.attempt_id)) await this.run(r.attempt_id, r.job_id, r.provider, r.params);
    }
    return rows.length;
  }

  // Claim up to maxJobs jobs, confirm them in one statement, run them side by
  // side, and report the results in one statement: one complete_attempt per
  // job (its own compare-and-swap and answer), one transaction.  If a call of
  // either statement errors, nothing of it is written and the calls go one by
  // one (the begins then skip what must not be sent); if the connection
  // drops, resend the same statement.  hooks.beforeBegin / beforeReport
  // (attemptIds): the scenario's.
  async batchStep(maxJobs = 100, wait = '1s', hooks = {}) {
    const { rows } = await this.db.query(
      'SELECT attempt_id, provider, params FROM idemjob.claim($1, max_jobs => $2, wait => $3,'
      + " timeout => '30s', lease => true)",
      [this.name, maxJobs, wait]);
    if (hooks.beforeBegin) await hooks.beforeBegin(rows.map((r) => r.attempt_id));
    let sent = rows;
    if (rows.length > 0) {
      try {
        await this.db.query('SELECT b.id FROM unnest($1::uuid[]) a, LATERAL idemjob.begin_attempt(a) b',
          [rows.map((r) => r.attempt_id)]);
      } catch (e) {
        if (!e.code) throw e;                    // in doubt: resend the same batch
        sent = [];
        for (const r of rows) if (await this.begin(r.attempt_id)) sent.push(r);
      }
    }
    const settled = await Promise.allSettled(
      sent.map((r) => Promise.resolve().then(() => this.providers[r.provider](r.params))));
    const results = [];
    for (let i = 0; i < sent.length; i++) {
      if (settled[i].status === 'fulfilled') {
        results.push([sent[i].attempt_id, settled[i].value]);
      } else {                                   // a definite failure
        await this.fail(sent[i].attempt_id, settled[i].reason);
      }
    }
    if (hooks.beforeReport) await hooks.beforeReport(results.map(([a]) => a));
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
    this.emit({ event: 'batch', claimed: rows.length, sent: sent.length,
      outcomes: results.map(([a]) => outcomes.get(a)) });
    return rows.length;
  }
}

module.exports = { connect, handle, httpError, Worker };
