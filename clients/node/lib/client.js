// The Client: one method per SQL function of idemjob over a pg.Pool that is
// safe through pgbouncer in transaction pooling (unnamed statements only,
// autocommit, nothing kept in the session) and keeps its connections on SQL
// errors (pool.query would destroy the connection on any error; here only a
// broken connection is discarded).  Each call is one statement:
//   SELECT * FROM idemjob.f(arg => $1::type, ...)
// naming only the arguments given, so that an omitted one is the SQL
// default.  A call whose answer was lost is sent again when it is
// resend-safe (the in-doubt rule, docs/clients.md).
import pg from 'pg';
import { parseDSN, toPgConfig } from './dsn.js';
import { Stamp, typeParsers, toJson, toInterval, toTimestamptz } from './types.js';
import {
  ConnectionLost, RetryTransaction, Unavailable, toIdemjobError, isConnectionError,
} from './errors.js';

const REQUIRED = Symbol('required');
const SQL_NULL = Symbol('SQL NULL'); // null where the SQL function gives NULL a meaning
const sleep = (ms) => new Promise((r) => { setTimeout(r, ms); });
const camel = (s) => s.replace(/_([a-z0-9])/g, (_, c) => c.toUpperCase());
const snakeToCamel = (call) => (call.includes('_') ? camel(call) : call);

// every call; the value: is it resend-safe whatever its arguments?
const CALLS = {
  submit: true, job: true, awaitJob: true, cancelJob: true,
  startAttempt: null, beginAttempt: true, completeAttempt: true, failAttempt: true, markUnknown: true,
  cancelAttempt: true, heartbeat: true, beginAttempts: true, completeAttempts: true,
  claim: null, abandonAttempts: true, expireAttempts: true,
  defineContract: true, certifyProvider: true, revokeProvider: true, setRetryPolicy: true, setRoute: true,
  purge: false, purgeRaceLog: false,
  inDoubt: true, queueStats: true, providerStats: true,
  query: false,
};

/**
 * May this call be sent again after its answer was lost?  Every call is
 * (I7) but claim without a lease, startAttempt without a worker, purge and
 * purgeRaceLog (and raw queries).  `call` in camelCase or snake_case;
 * `options` the call's options ({lease}, {worker}).
 */
export function resendSafe(call, options = {}) {
  const name = snakeToCamel(call);
  if (!(name in CALLS)) throw new TypeError(`unknown call ${call}`);
  if (name === 'claim') return options.lease === true;
  if (name === 'startAttempt') return options.worker !== undefined && options.worker !== null;
  return CALLS[name];
}

// ---- arguments

function encode(type, value, name) {
  if (value === SQL_NULL) return null;
  if (value === null) return type === 'jsonb' ? 'null' : null; // a jsonb value: JSON's null
  switch (type) {
    case 'text':
    case 'uuid':
      if (typeof value === 'string') return value;
      if (typeof value === 'number' || typeof value === 'bigint') return String(value);
      throw new TypeError(`${name}: expected a string`);
    case 'integer':
      if ((typeof value === 'number' && Number.isInteger(value)) || typeof value === 'bigint') return String(value);
      throw new TypeError(`${name}: expected an integer`);
    case 'boolean':
      if (typeof value === 'boolean') return value;
      throw new TypeError(`${name}: expected a boolean`);
    case 'text[]':
    case 'uuid[]':
      if (!Array.isArray(value)) throw new TypeError(`${name}: expected an array`);
      return value.map((v) => (v === null ? null : String(v)));
    case 'jsonb': return toJson(value);
    case 'jsonb[]':
      if (!Array.isArray(value)) throw new TypeError(`${name}: expected an array`);
      return value.map((v) => toJson(v));
    case 'interval': return toInterval(value, name);
    case 'timestamptz': return toTimestamptz(value, name);
    default: throw new TypeError(`${name}: unknown type ${type}`);
  }
}

/** SELECT ... FROM idemjob.fn(name => $1::type, ...) for the arguments given. */
function statement(fn, args, shape) {
  const parts = [];
  const values = [];
  for (const [name, type, value] of args) {
    if (value === undefined) continue;
    if (value === REQUIRED) throw new TypeError(`idemjob.${fn}: ${camel(name)} is required`);
    values.push(encode(type, value, camel(name)));
    parts.push(`${name} => $${values.length}::${type}`);
  }
  const call = `idemjob.${fn}(${parts.join(', ')})`;
  return { text: shape === 'scalar' ? `SELECT ${call} AS value` : `SELECT * FROM ${call}`, values };
}

const req = (v) => (v === undefined ? REQUIRED : v);
const orSqlNull = (v) => (v === null ? SQL_NULL : v);

// ---- results

/** A row with camelCase keys; a timestamptz as a Date plus its exact text in `<key>Text`. */
function shapeRow(row, fields, rename = camel) {
  const out = {};
  for (const f of fields) {
    const key = rename(f.name);
    const v = row[f.name];
    if (v instanceof Stamp) {
      out[key] = v.date;
      out[`${key}Text`] = v.text;
    } else if (v === null && f.dataTypeID === 1184) {
      out[key] = null;
      out[`${key}Text`] = null;
    } else {
      out[key] = v;
    }
  }
  return out;
}

const rows = (res) => res.rows.map((r) => shapeRow(r, res.fields));
const one = (res) => rows(res)[0];
const scalar = (res) => res.rows[0].value;

// ---- the client

/**
 * connect(dsn | options[, options]) -> Client.  `dsn`: a libpq key=value
 * string or a postgresql:// URL.  Options: dsn, max (pool size, 10),
 * retries (3), backoff (ms, 50, doubled per retry), idleTimeout (ms,
 * 10000), connectTimeout (ms), applicationName, parseJson (jsonb text ->
 * value; JSON.parse), pg (more pg.Pool options), faults (test only).
 * No connection is opened until the first call.
 */
export function connect(dsnOrOptions, options = {}) {
  const opts = typeof dsnOrOptions === 'string' ? { ...options, dsn: dsnOrOptions } : { ...(dsnOrOptions || {}), ...options };
  return new Client(opts);
}

export class Client {
  constructor(opts = {}) {
    const base = opts.dsn !== undefined ? toPgConfig(parseDSN(opts.dsn)) : {};
    const parsers = typeParsers(opts.parseJson || JSON.parse);
    const types = {
      getTypeParser: (oid, format) => (format !== 'binary' && parsers[oid]) || pg.types.getTypeParser(oid, format),
    };
    const config = {
      application_name: 'idemjob-node',
      ...base,
      max: opts.max ?? 10,
      idleTimeoutMillis: opts.idleTimeout ?? 10000,
      allowExitOnIdle: true,
      ...(opts.connectTimeout !== undefined ? { connectionTimeoutMillis: opts.connectTimeout } : {}),
      ...(opts.applicationName !== undefined ? { application_name: opts.applicationName } : {}),
      ...(opts.pg || {}),
      types,
    };
    this.retries = opts.retries ?? 3;
    this.backoff = opts.backoff ?? 50;
    this._faults = opts.faults || null;
    this._ended = false;
    this._counts = { created: 0, removed: 0, broken: 0 };
    this.pool = new pg.Pool(config);
    // an idle connection that breaks is dropped by pg-pool; without a
    // listener its 'error' would end the process
    this.pool.on('error', () => {});
    this.pool.on('connect', (c) => {
      this._counts.created++;
      // an error while the connection is checked out, between statements
      c.on('error', () => { c.idemjobBroken = true; });
    });
    this.pool.on('remove', () => { this._counts.removed++; });
  }

  /** The pool's connections: total, idle, waiting; created and removed since connect. */
  get stats() {
    return {
      total: this.pool.totalCount, idle: this.pool.idleCount, waiting: this.pool.waitingCount,
      created: this._counts.created, removed: this._counts.removed, broken: this._counts.broken,
    };
  }

  /** Closes every connection; the client is not usable afterwards. */
  async end() {
    if (this._ended) return;
    this._ended = true;
    await this.pool.end();
  }

  async _run(call, { text, values }, shape, safe) {
    if (this._ended) throw new ConnectionLost(`${call}: the client was ended`, { call });
    let last;
    for (let attempt = 0; attempt <= this.retries; attempt++) {
      if (attempt > 0) await sleep(this.backoff * 2 ** (attempt - 1));
      let conn;
      try {
        conn = await this.pool.connect();
      } catch (e) {
        // not sent: any call may be sent again
        last = toIdemjobError(e, call, { sent: false });
        if (this._ended) throw last;
        if (last instanceof ConnectionLost || last instanceof Unavailable) continue;
        throw last;
      }
      let res;
      let err;
      try {
        res = await conn.query(text, values);
      } catch (e) {
        err = e;
      }
      const broken = conn.idemjobBroken || (err !== undefined && isConnectionError(err));
      if (broken) this._counts.broken++;
      conn.release(broken ? (err || new Error('connection broke')) : undefined);
      if (err !== undefined) {
        last = toIdemjobError(err, call);
        // a rolled-back transaction committed nothing: any call may be sent again
        if (last instanceof RetryTransaction || (last instanceof ConnectionLost && safe)) continue;
        throw last;
      }
      const result = shape(res);
      if (this._faults && this._faults.loseAnswer && this._faults.loseAnswer({ call, attempt, text, values, result })) {
        last = new ConnectionLost(`the answer to ${call} was lost (injected)`, { call });
        last.sent = true;
        last.injected = true;
        if (safe) continue;
        throw last;
      }
      return result;
    }
    throw last;
  }

  _call(call, fn, args, shape, safe = CALLS[call]) {
    let stmt;
    try {
      stmt = statement(fn, args, shape === scalar ? 'scalar' : 'rows');
    } catch (e) {
      return Promise.reject(e);
    }
    return this._run(call, stmt, shape, safe);
  }

  /**
   * A statement of your own, through the same pool and error mapping, as
   * rows with the column names as they are (timestamptz: Date plus
   * `<name>Text`).  Not sent again unless {resendSafe: true}.
   */
  query(text, values = [], { resendSafe: safe = false } = {}) {
    return this._run('query', { text, values }, (res) => res.rows.map((r) => shapeRow(r, res.fields, (n) => n)), safe);
  }

  // ---- jobs

  /** submit(ownerId, idempotencyKey, intent, {params, provider, runAt, priority, maxAttempts}) -> {jobId, created, state, version, result} */
  submit(ownerId, idempotencyKey, intent, { params, provider, runAt, priority, maxAttempts } = {}) {
    return this._call('submit', 'submit', [
      ['owner_id', 'text', req(ownerId)], ['idempotency_key', 'text', req(idempotencyKey)],
      ['intent', 'text', req(intent)], ['params', 'jsonb', params], ['provider', 'text', provider],
      ['run_at', 'timestamptz', runAt], ['priority', 'integer', priority], ['max_attempts', 'integer', maxAttempts],
    ], one);
  }

  job(jobId) {
    return this._call('job', 'job', [['job_id', 'uuid', req(jobId)]], one);
  }

  /** awaitJob(jobId, timeout): the job once final or after `timeout` (ms or an interval string; 0: now). */
  awaitJob(jobId, timeout) {
    return this._call('awaitJob', 'await_job', [['job_id', 'uuid', req(jobId)], ['timeout', 'interval', req(timeout)]], one);
  }

  cancelJob(jobId, reason) {
    return this._call('cancelJob', 'cancel_job', [['job_id', 'uuid', req(jobId)], ['reason', 'text', req(reason)]], one);
  }

  // ---- attempts

  /** startAttempt(jobId, {provider, timeout, worker}); resend-safe only with a worker. */
  startAttempt(jobId, { provider, timeout, worker } = {}) {
    return this._call('startAttempt', 'start_attempt', [
      ['job_id', 'uuid', req(jobId)], ['provider', 'text', provider], ['timeout', 'interval', timeout], ['worker', 'text', worker],
    ], one, resendSafe('startAttempt', { worker }));
  }

  beginAttempt(attemptId) {
    return this._call('beginAttempt', 'begin_attempt', [['attempt_id', 'uuid', req(attemptId)]], one);
  }

  /** completeAttempt(attemptId, result) -> {outcome: 'won'|'lost'|'rejected', jobId, jobVersion, winnerAttemptId} */
  completeAttempt(attemptId, result) {
    return this._call('completeAttempt', 'complete_attempt', [
      ['attempt_id', 'uuid', req(attemptId)], ['result', 'jsonb', result === undefined ? null : result],
    ], one);
  }

  failAttempt(attemptId, { error, retryable } = {}) {
    return this._call('failAttempt', 'fail_attempt', [
      ['attempt_id', 'uuid', req(attemptId)], ['error', 'jsonb', orSqlNull(error)], ['retryable', 'boolean', retryable],
    ], one);
  }

  markUnknown(attemptId, { reason } = {}) {
    return this._call('markUnknown', 'mark_unknown', [['attempt_id', 'uuid', req(attemptId)], ['reason', 'text', reason]], one);
  }

  cancelAttempt(attemptId, reason, { fence } = {}) {
    return this._call('cancelAttempt', 'cancel_attempt', [
      ['attempt_id', 'uuid', req(attemptId)], ['reason', 'text', req(reason)], ['fence', 'boolean', fence],
    ], one);
  }

  heartbeat(attemptId, { extend } = {}) {
    return this._call('heartbeat', 'heartbeat', [['attempt_id', 'uuid', req(attemptId)], ['extend', 'interval', extend]], one);
  }

  /**
   * beginAttempt for many attempts in one statement (one transaction): the
   * attempts' rows in order, or the first error and nothing written.
   */
  beginAttempts(attemptIds) {
    if (!Array.isArray(attemptIds)) return Promise.reject(new TypeError('attemptIds: expected an array'));
    if (attemptIds.length === 0) return Promise.resolve([]);
    const text = 'SELECT b.* FROM unnest($1::uuid[]) WITH ORDINALITY AS a(id, n),'
      + ' LATERAL idemjob.begin_attempt(attempt_id => a.id) AS b ORDER BY a.n';
    return this._run('beginAttempts', { text, values: [encode('uuid[]', attemptIds, 'attemptIds')] }, rows, true);
  }

  /**
   * completeAttempt for many [{attemptId, result}] in one statement (one
   * transaction, one compare-and-swap per attempt): the answers in order,
   * or the first error and nothing written.
   */
  completeAttempts(results) {
    if (!Array.isArray(results)) return Promise.reject(new TypeError('results: expected an array'));
    if (results.length === 0) return Promise.resolve([]);
    const text = 'SELECT c.* FROM unnest($1::uuid[], $2::jsonb[]) WITH ORDINALITY AS r(attempt_id, result, n),'
      + ' LATERAL idemjob.complete_attempt(attempt_id => r.attempt_id, result => r.result) AS c ORDER BY r.n';
    let values;
    try {
      values = [encode('uuid[]', results.map((r) => r.attemptId), 'attemptId'),
        encode('jsonb[]', results.map((r) => (r.result === undefined ? null : r.result)), 'result')];
    } catch (e) {
      return Promise.reject(e);
    }
    return this._run('completeAttempts', { text, values }, rows, true);
  }

  // ---- workers

  /** claim(worker, {intents, maxJobs, timeout, wait, lease}) -> claimed attempts; resend-safe only with lease: true. */
  claim(worker, { intents, maxJobs, timeout, wait, lease } = {}) {
    return this._call('claim', 'claim', [
      ['worker', 'text', req(worker)], ['intents', 'text[]', intents], ['max_jobs', 'integer', maxJobs],
      ['timeout', 'interval', timeout], ['wait', 'interval', wait], ['lease', 'boolean', lease],
    ], rows, resendSafe('claim', { lease }));
  }

  abandonAttempts(worker) {
    return this._call('abandonAttempts', 'abandon_attempts', [['worker', 'text', req(worker)]], scalar);
  }

  expireAttempts() {
    return this._call('expireAttempts', 'expire_attempts', [], scalar);
  }

  // ---- admin

  defineContract(intent, outputSchema) {
    return this._call('defineContract', 'define_contract', [['intent', 'text', req(intent)], ['output_schema', 'jsonb', req(outputSchema)]], scalar);
  }

  certifyProvider(intent, provider, { evidence } = {}) {
    return this._call('certifyProvider', 'certify_provider', [
      ['intent', 'text', req(intent)], ['provider', 'text', req(provider)], ['evidence', 'jsonb', orSqlNull(evidence)],
    ], one);
  }

  revokeProvider(intent, provider, reason) {
    return this._call('revokeProvider', 'revoke_provider', [
      ['intent', 'text', req(intent)], ['provider', 'text', req(provider)], ['reason', 'text', req(reason)],
    ], one);
  }

  setRetryPolicy(intent, { maxAttempts, retryBackoff, retryBackoffMax, fenceUnknownAfter } = {}) {
    return this._call('setRetryPolicy', 'set_retry_policy', [
      ['intent', 'text', req(intent)], ['max_attempts', 'integer', maxAttempts], ['retry_backoff', 'interval', retryBackoff],
      ['retry_backoff_max', 'interval', retryBackoffMax], ['fence_unknown_after', 'interval', fenceUnknownAfter],
    ], one);
  }

  setRoute(intent, providers) {
    return this._call('setRoute', 'set_route', [['intent', 'text', req(intent)], ['providers', 'text[]', req(providers)]], one);
  }

  /** purge(olderThan, {maxJobs}) -> jobs purged; never sent again by the client. */
  purge(olderThan, { maxJobs } = {}) {
    return this._call('purge', 'purge', [['older_than', 'interval', req(olderThan)], ['max_jobs', 'integer', maxJobs]], scalar);
  }

  purgeRaceLog(olderThan) {
    return this._call('purgeRaceLog', 'purge_race_log', [['older_than', 'interval', req(olderThan)]], scalar);
  }

  // ---- views

  inDoubt() {
    return this._run('inDoubt', { text: 'SELECT * FROM idemjob.in_doubt', values: [] }, rows, true);
  }

  queueStats() {
    return this._run('queueStats', { text: 'SELECT * FROM idemjob.queue_stats', values: [] }, rows, true);
  }

  providerStats() {
    return this._run('providerStats', { text: 'SELECT * FROM idemjob.provider_stats', values: [] }, rows, true);
  }
}
