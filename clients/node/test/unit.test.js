// No database: the DSN parser, the types, the error classes, the in-doubt
// rule and the resend loop over a fake pool.
import test from 'node:test';
import assert from 'node:assert/strict';
import {
  parseDSN, toPgConfig, classFor, resendSafe, Client, IdemjobError, ConnectionLost, RetryTransaction,
  AttemptInDoubt, IdempotencyConflict, JobFinished, ProviderNotCertified, InvalidTransition, NotFound,
  KeyExpired, LeaseExpired, InvalidArgument, PermissionDenied, Unavailable, Failure, toJson,
} from '../index.js';
import { parseInt8, parseTimestamptz, parseInterval } from '../lib/types.js';
import { toIdemjobError, isConnectionError } from '../lib/errors.js';

test('key=value DSN: quoting, escapes, unix socket directory', () => {
  const kv = parseDSN("host=/tmp/sock port = 5711 dbname=app user=ij_cl_client password='a b\\'c' application_name=x");
  assert.deepEqual(kv, { host: '/tmp/sock', port: '5711', dbname: 'app', user: 'ij_cl_client', password: "a b'c", application_name: 'x' });
  const cfg = toPgConfig(kv);
  assert.equal(cfg.host, '/tmp/sock');
  assert.equal(cfg.port, 5711);
  assert.equal(cfg.database, 'app');
  assert.throws(() => toPgConfig(parseDSN('hots=x')), /invalid connection option/);
  assert.throws(() => parseDSN("host='x"), /unterminated/);
  assert.deepEqual(toPgConfig(parseDSN('sslmode=require connect_timeout=3')), { ssl: { rejectUnauthorized: false }, connectionTimeoutMillis: 3000 });
  assert.equal(toPgConfig(parseDSN('sslmode=disable')).ssl, false);
  assert.equal(toPgConfig(parseDSN("options='-c idemjob.claim_lease=1s'")).options, '-c idemjob.claim_lease=1s');
});

test('postgresql:// URL: socket directory in the query, percent-encoding, IPv6', () => {
  assert.deepEqual(parseDSN('postgresql://u@/db?host=/tmp/x&port=5711'), { user: 'u', dbname: 'db', host: '/tmp/x', port: '5711' });
  assert.deepEqual(parseDSN('postgres://u:p%40ss@%2Ftmp%2Fx:5432/d%20b'), { user: 'u', password: 'p@ss', host: '/tmp/x', port: '5432', dbname: 'd b' });
  assert.deepEqual(parseDSN('postgresql://[::1]:6000/db'), { host: '::1', port: '6000', dbname: 'db' });
  assert.deepEqual(parseDSN('postgresql://'), {});
  assert.throws(() => parseDSN('postgresql://a,b/db'), /several hosts/);
});

test('int8: a number while safe, else a BigInt', () => {
  assert.equal(parseInt8('42'), 42);
  assert.equal(parseInt8('9007199254740991'), 9007199254740991);
  assert.equal(parseInt8('9007199254740992'), 9007199254740992n);
  assert.equal(parseInt8('-9223372036854775808'), -9223372036854775808n);
});

test('timestamptz: Date plus the microseconds in ISO 8601 UTC, any offset', () => {
  let s = parseTimestamptz('2030-01-02 03:04:05.123456+00');
  assert.equal(s.text, '2030-01-02T03:04:05.123456Z');
  assert.equal(s.date.toISOString(), '2030-01-02T03:04:05.123Z');
  s = parseTimestamptz('2030-01-02 03:04:05.5-05:30');
  assert.equal(s.text, '2030-01-02T08:34:05.500000Z');
  s = parseTimestamptz('2030-01-02 03:04:05+01');
  assert.equal(s.text, '2030-01-02T02:04:05.000000Z');
  s = parseTimestamptz('0001-01-01 00:00:00+00');
  assert.equal(s.date.getUTCFullYear(), 1);
  assert.equal(parseTimestamptz('infinity').text, 'infinity');
});

test('interval: milliseconds', () => {
  assert.equal(parseInterval('00:00:01.5'), 1500);
  assert.equal(parseInterval('-00:00:00.000001'), -0.001);
  assert.equal(parseInterval('1 day 02:00:00'), 93600000);
  assert.equal(parseInterval('1 mon -1 days'), 29 * 86400000);
  assert.equal(parseInterval('00:00:00'), 0);
  assert.equal(parseInterval('PT1.5S'), 1500);
});

test('jsonb arguments: a BigInt is an exact JSON number', () => {
  assert.equal(toJson({ n: 2n ** 64n + 1n, s: 'x', a: [1n] }), '{"n":18446744073709551617,"s":"x","a":[1]}');
  assert.equal(toJson(undefined), 'null');
  assert.equal(toJson(null), 'null');
});

test('SQLSTATE -> class -> HTTP status, as clients/README.md', () => {
  const cases = [
    ['IJ001', IdempotencyConflict, 409], ['IJ002', AttemptInDoubt, 409], ['IJ003', JobFinished, 409],
    ['IJ004', ProviderNotCertified, 422], ['IJ005', InvalidTransition, 409], ['IJ006', NotFound, 404],
    ['IJ007', KeyExpired, 410], ['IJ008', LeaseExpired, 409], ['22004', InvalidArgument, 400],
    ['22P02', InvalidArgument, 400], ['42602', InvalidArgument, 400], ['42704', InvalidArgument, 400],
    ['42501', PermissionDenied, 403], ['40001', RetryTransaction, 503], ['40P01', RetryTransaction, 503],
    ['55P03', RetryTransaction, 503], ['25006', Unavailable, 503], ['55000', Unavailable, 503],
    ['53300', Unavailable, 503], ['57014', Unavailable, 503], ['08006', ConnectionLost, 503],
    ['57P01', ConnectionLost, 503], [undefined, ConnectionLost, 503], ['42883', IdemjobError, 500],
    ['XX000', IdemjobError, 500], ['0A000', IdemjobError, 500],
  ];
  for (const [code, Cls, status] of cases) {
    assert.equal(classFor(code), Cls, code);
    const e = toIdemjobError(code ? { code, severity: 'ERROR', message: 'm' } : new Error('Connection terminated unexpectedly'), 'x');
    assert.ok(e instanceof Cls && e instanceof IdemjobError, code);
    assert.equal(e.toHTTP().status, status, code);
  }
  // docs/reference.md's own statuses where they differ from the class
  assert.equal(toIdemjobError({ code: '2201B', severity: 'ERROR', message: 'm' }).status, 500);
  assert.equal(toIdemjobError({ code: '54001', severity: 'ERROR', message: 'm' }).status, 400);
});

test('error fields from the constraint field, only under schema idemjob; Retry-After', () => {
  const err = {
    code: 'IJ002', severity: 'ERROR', message: 'in doubt', schema: 'idemjob', table: 'attempts',
    constraint: 'job_id=j1 attempt_id=a1 state=unknown deadline=2026-12-03T04:33:16.343372Z retry_after=7 future=x',
  };
  const e = toIdemjobError(err, 'startAttempt');
  assert.ok(e instanceof AttemptInDoubt);
  assert.equal(e.jobId, 'j1');
  assert.equal(e.attemptId, 'a1');
  assert.equal(e.state, 'unknown');
  assert.equal(e.retryAfter, 7);
  assert.equal(e.deadlineText, '2026-12-03T04:33:16.343372Z');
  assert.equal(e.fields.future, 'x');
  assert.deepEqual(e.toHTTP(), {
    status: 409,
    headers: { 'Retry-After': '7' },
    body: {
      error: 'attempt_in_doubt', sqlstate: 'IJ002', message: 'in doubt', job_id: 'j1', attempt_id: 'a1', state: 'unknown', deadline: '2026-12-03T04:33:16.343372Z',
    },
  });
  const other = toIdemjobError({ ...err, schema: 'public' }, 'x');
  assert.equal(other.jobId, undefined);
});

test('connection errors: no SQLSTATE (node-postgres messages, errno), 08xxx, 57P0x', () => {
  for (const e of [
    new Error('Connection terminated unexpectedly'), new Error('Connection terminated'),
    new Error('Client has encountered a connection error and is not queryable'),
    Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }),
    Object.assign(new Error('connect ENOENT /tmp/.s.PGSQL.1'), { code: 'ENOENT' }),
    { code: '08P01', severity: 'FATAL', message: 'server conn crashed?' },
    { code: '57P01', severity: 'FATAL', message: 'terminating connection due to administrator command' },
  ]) {
    assert.ok(isConnectionError(e), e.message);
    assert.ok(toIdemjobError(e, 'job') instanceof ConnectionLost, e.message);
  }
  assert.ok(!isConnectionError({ code: 'IJ006', severity: 'ERROR', message: 'm' }));
  const lost = toIdemjobError(Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }), 'job');
  assert.equal(lost.sqlstate, undefined);
  assert.equal(lost.errno, 'ECONNRESET');
  assert.equal(lost.toHTTP().status, 503);
});

test('resendSafe: every call but claim without a lease, startAttempt without a worker, purge, purgeRaceLog', () => {
  for (const c of ['submit', 'job', 'awaitJob', 'cancelJob', 'beginAttempt', 'completeAttempt', 'failAttempt',
    'markUnknown', 'cancelAttempt', 'heartbeat', 'abandonAttempts', 'expireAttempts', 'defineContract',
    'certifyProvider', 'revokeProvider', 'setRetryPolicy', 'setRoute', 'inDoubt', 'queueStats', 'providerStats',
    'complete_attempt', 'await_job']) {
    assert.equal(resendSafe(c), true, c);
  }
  assert.equal(resendSafe('claim'), false);
  assert.equal(resendSafe('claim', { lease: true }), true);
  assert.equal(resendSafe('startAttempt'), false);
  assert.equal(resendSafe('start_attempt', { worker: 'w' }), true);
  assert.equal(resendSafe('purge'), false);
  assert.equal(resendSafe('purgeRaceLog'), false);
  assert.throws(() => resendSafe('nope'));
});

test('Failure: the error and retryable', () => {
  const f = new Failure({ code: 'card_declined' }, false);
  assert.deepEqual(f.error, { code: 'card_declined' });
  assert.equal(f.retryable, false);
  assert.equal(new Failure('down').retryable, true);
  assert.deepEqual(new Failure('down').error, { code: 'down' });
});

// a pool whose connections answer from a script: [error | rows] per query
function fakePool(script) {
  const log = { queries: [], released: [] };
  return {
    log,
    pool: {
      totalCount: 1, idleCount: 1, waitingCount: 0,
      async connect() {
        return {
          async query(text, values) {
            log.queries.push({ text, values });
            const next = script.shift();
            if (next instanceof Error || (next && next.severity)) throw next;
            return { rows: next || [], fields: [] };
          },
          release(err) { log.released.push(err === undefined ? 'kept' : 'destroyed'); },
        };
      },
      async end() {},
    },
  };
}

function clientOver(script, opts = {}) {
  const c = new Client({ retries: 3, backoff: 1, ...opts });
  c.pool.end();
  const f = fakePool(script);
  c.pool = f.pool;
  return { c, log: f.log };
}

test('a resend-safe call is sent again after a lost answer or a rolled-back transaction; the connection kept on SQL errors', async () => {
  const lost = new Error('Connection terminated unexpectedly');
  const deadlock = Object.assign(new Error('deadlock detected'), { code: '40P01', severity: 'ERROR' });
  const { c, log } = clientOver([lost, deadlock, [{ value: 3 }]]);
  assert.equal(await c.abandonAttempts('w'), 3);
  assert.equal(log.queries.length, 3);
  assert.deepEqual(log.released, ['destroyed', 'kept', 'kept']);
  assert.equal(log.queries[0].text, 'SELECT idemjob.abandon_attempts(worker => $1::text) AS value');
});

test('a call that is not resend-safe is not sent again after a lost answer; it is after a rollback', async () => {
  let { c, log } = clientOver([new Error('Connection terminated unexpectedly'), [{ value: 1 }]]);
  await assert.rejects(c.purge('1 day'), (e) => e instanceof ConnectionLost && e.sent === true && e.call === 'purge');
  assert.equal(log.queries.length, 1);
  ({ c, log } = clientOver([Object.assign(new Error('x'), { code: '40001', severity: 'ERROR' }), [{ value: 1 }]]));
  assert.equal(await c.purge('1 day'), 1);
  assert.equal(log.queries.length, 2);
});

test('retries run out: the last error', async () => {
  const lost = () => Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' });
  const { c, log } = clientOver([lost(), lost(), lost(), lost(), [{}]], { retries: 2 });
  await assert.rejects(c.expireAttempts(), ConnectionLost);
  assert.equal(log.queries.length, 3);
});

test('arguments: only those given are named, with their types; required ones checked before sending', async () => {
  const { c, log } = clientOver([[{ attempt_id: 'a' }]]);
  await c.claim('w', { maxJobs: 5, lease: true, wait: 1500, intents: ['a', 'b'] });
  assert.equal(log.queries[0].text, 'SELECT * FROM idemjob.claim(worker => $1::text, intents => $2::text[], max_jobs => $3::integer, wait => $4::interval, lease => $5::boolean)');
  assert.deepEqual(log.queries[0].values, ['w', ['a', 'b'], '5', '1500 milliseconds', true]);
  // null: SQL NULL, but JSON's null for a jsonb value (params, result, output schema)
  const { c: c2, log: log2 } = clientOver([[{}], [{}], [{}]]);
  await c2.failAttempt('a', { error: null });
  await c2.completeAttempt('a', null);
  await c2.startAttempt('j', { provider: null, worker: 'w' });
  assert.deepEqual(log2.queries.map((q) => q.values), [['a', null], ['a', 'null'], ['j', null, 'w']]);
  await assert.rejects(c.submit('o', 'k'), /intent is required/);
  await assert.rejects(c.awaitJob('j'), /timeout is required/);
  await assert.rejects(c.heartbeat('a', { extend: {} }), TypeError);
});
