// What the suites share: the cluster test/clients/run.sh gives them.
//   IDEMJOB_TEST_DSN        key=value DSN as the superuser, direct or through the pooler
//   IDEMJOB_TEST_URL        the same as a postgresql:// URL
//   IDEMJOB_TEST_ADMIN_DSN  always direct, superuser (set-up, inspection, pg_terminate_backend)
//   IDEMJOB_TEST_VIA        direct | pgbouncer
// Roles: ij_cl_client, ij_cl_worker, ij_cl_operator, ij_cl_admin.
// (Not under test/: node --test would run every .js file there as a suite.)
import { connect } from '../index.js';

export const DSN = process.env.IDEMJOB_TEST_DSN;
export const URL = process.env.IDEMJOB_TEST_URL;
export const ADMIN_DSN = process.env.IDEMJOB_TEST_ADMIN_DSN;
export const VIA = process.env.IDEMJOB_TEST_VIA || 'direct';
/** false, or why the database suites skip */
export const skip = DSN && ADMIN_DSN ? false : 'IDEMJOB_TEST_DSN / IDEMJOB_TEST_ADMIN_DSN not set (bash test/clients/run.sh sets them)';

let seq = 0;
/** A name no other suite or run uses. */
export const uniq = (prefix) => `${prefix}-${process.pid}-${Date.now().toString(36)}-${seq++}`;

/** The DSN with user= replaced (and more key=value pairs appended). */
export function dsnAs(role, extra = '', dsn = DSN) {
  const base = dsn.replace(/(^|\s)user=\S+/, '').trim();
  return `${base} user=${role}${extra ? ` ${extra}` : ''}`;
}

/** A client as one of the test roles: client, worker, operator, admin. */
export function as(role, options = {}) {
  return connect(dsnAs(`ij_cl_${role}`), { applicationName: uniq(`ijt-${role}`), ...options });
}

/** The superuser, directly (never through the pooler). */
export function superuser(options = {}) {
  return connect(ADMIN_DSN, { applicationName: uniq('ijt-super'), ...options });
}

export const sleep = (ms) => new Promise((r) => { setTimeout(r, ms); });

/** Polls `cond` (async) every `every` ms until it is truthy; throws after `timeout` ms. */
export async function until(cond, { timeout = 15000, every = 50, what = 'condition' } = {}) {
  const end = Date.now() + timeout;
  for (;;) {
    const v = await cond();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(every);
  }
}

/**
 * An intent with a contract ({"by": ...} required), the provider fallback
 * certified, the route primary -> fallback, retries at once and (unless
 * fence is null) a doubt fenced after `fence`.
 */
export async function intent(admin, name, { fence = '1s', maxAttempts } = {}) {
  await admin.defineContract(name, { type: 'object', required: ['by'] });
  await admin.certifyProvider(name, 'fallback', { evidence: { suite: 'node' } });
  await admin.setRoute(name, ['primary', 'fallback']);
  await admin.setRetryPolicy(name, { retryBackoff: 0, fenceUnknownAfter: fence === null ? undefined : fence, maxAttempts });
  return name;
}

/** The attempts of a job, in order, as "provider:state". */
export async function attempts(su, jobId) {
  const rows = await su.query('SELECT provider, state::text, error FROM idemjob.attempts WHERE job_id = $1 ORDER BY attempt_no', [jobId]);
  return rows.map((r) => `${r.provider}:${r.state}`);
}
