// idemjob from Node, on the idemjob package (clients/node): an HTTP-style
// handler and a worker.  No SQL here: the package has one method per SQL
// function, over a pool that is safe through pgbouncer in transaction
// pooling; its errors carry the SQLSTATE, the ids from the error fields
// and their HTTP answer; and it sends a call whose answer was lost again
// when that is safe (docs/clients.md).
import {
  connect, Worker, Failure, IdemjobError, ConnectionLost,
} from 'idemjob';

export { connect };

// ---- POST /jobs (Idempotency-Key: key) and GET /jobs/<id>: [status, headers, json]
const FINAL = ['succeeded', 'failed', 'cancelled'];

export async function handle(client, method, path, owner, key, body, wait = 2000) {
  try {
    const jobId = method === 'POST'
      ? (await client.submit(owner, key, body.intent, { params: body.params || {} })).jobId
      : path.split('/').pop(); // a malformed id is 22P02: 400
    const job = await client.awaitJob(jobId, wait);
    const json = { job_id: job.id, state: job.state, version: job.version, result: job.result };
    return [FINAL.includes(job.state) ? 200 : 202, {}, json];
  } catch (e) {
    if (!(e instanceof IdemjobError)) throw e;
    const { status, headers, body: error } = e.toHTTP(); // IJ002: 409 + Retry-After; lost: 503
    return [status, headers, error];
  }
}

// ---- the worker: the package's loop.  At start it gives up what an earlier
// run under this name left; it claims with a lease, begins each attempt right
// before calling the provider the claim row names (failover is the server's,
// by route), sends heartbeats, and reports: complete, fail (a Failure), or
// unknown when the timeout passes first, and then the late answer too.
export function worker(client, name, providers, options = {}) {
  const charge = async (job, ctx) => {
    try {
      return await providers[ctx.provider](job.params, ctx.signal);
    } catch (e) { // a definite failure: the job goes on to the next provider
      throw new Failure({ code: 'provider_error', message: String(e.message) });
    }
  };
  return new Worker({ client, name, handlers: { 'ex.charge': charge }, timeout: 1500, wait: 1000, ...options });
}

// ---- a batch: up to maxJobs claimed in one call, begun in one statement,
// run side by side, reported in one statement (one compare-and-swap per job).
// A statement that errors wrote nothing: its calls then go one by one, the
// begins skipping what must not be sent.  hooks: the scenario's.
const NOT_SENT = ['IJ003', 'IJ005', 'IJ008']; // job final, attempt ended, lease over
const notSent = (e) => { if (NOT_SENT.includes(e.sqlstate)) return null; throw e; };
const refused = (e) => { if (e instanceof ConnectionLost) throw e; return { outcome: e.sqlstate }; };

async function allOrEach(all, each, items) {
  try {
    return await all(items);
  } catch (e) {
    if (e instanceof ConnectionLost) throw e; // sent again by the client, in vain
    return Promise.all(items.map(each));
  }
}

export async function batchStep(client, name, providers, { maxJobs = 100, wait = 1000, hooks = {} } = {}) {
  const claimed = await client.claim(name, { maxJobs, wait, timeout: 30000, lease: true });
  const ids = claimed.map((r) => r.attemptId);
  await hooks.beforeBegin?.(ids);
  const begun = await allOrEach((a) => client.beginAttempts(a), (id) => client.beginAttempt(id).catch(notSent), ids);
  const sent = claimed.filter((r, i) => begun[i] !== null);
  const answers = await Promise.allSettled(sent.map((r) => providers[r.provider](r.params)));
  const results = [];
  for (const [i, a] of answers.entries()) {
    if (a.status === 'fulfilled') results.push({ attemptId: sent[i].attemptId, result: a.value });
    else await client.failAttempt(sent[i].attemptId, { error: { code: 'provider_error', message: String(a.reason.message) } });
  }
  await hooks.beforeReport?.(results.map((r) => r.attemptId));
  const done = await allOrEach((rs) => client.completeAttempts(rs),
    (r) => client.completeAttempt(r.attemptId, r.result).catch(refused), results);
  return { claimed: claimed.length, sent: sent.length, outcomes: done.map((d) => d.outcome) };
}
