// Runs the example once: the handler and the worker through every case the
// README promises, printing one JSON line per check (test/examples/run.sh
// reads them and checks the database).  DSNs (libpq key=value):
// IJ_CLIENT_DSN, IJ_WORKER_DSN, IJ_ADMIN_DSN.
import {
  connect, handle, worker as startWorker, batchStep,
} from './app.js';

const emit = (o) => console.log(JSON.stringify(o));
const sleep = (ms) => new Promise((r) => { setTimeout(r, ms); });
const open = (v) => connect(process.env[v]);

let answerHung; // called: the hanging primary answers at last
const hung = new Promise((r) => { answerHung = r; });
async function primary(params) { // the fake provider: slow, failing, hanging, or fine
  const mode = params.mode || 'ok';
  if (mode === 'fail') throw new Error('provider said no');
  if (mode === 'hang') await hung;
  await sleep(mode === 'slow' ? 1000 : 50);
  return { by: 'primary', amount: params.amount };
}
const fallback = async (params) => ({ by: 'fallback', amount: params.amount });
const providers = { primary, fallback };

async function until(cond, tick = async () => {}, ms = 10000) { // tick() every 100 ms until cond()
  for (const end = Date.now() + ms; Date.now() < end;) {
    await tick();
    if (cond()) return;
    await sleep(100);
  }
}

async function main() {
  const client = open('IJ_CLIENT_DSN');
  const admin = open('IJ_ADMIN_DSN');
  const wclient = open('IJ_WORKER_DSN');
  const events = [];
  const seen = (name, f = () => true) => events.some((e) => e.event === name && f(e));
  const owner = 'shop-1';
  const charge = { intent: 'ex.charge', params: { amount: 42 } };

  // a previous run of this worker died after sending a job: at start the worker
  // gives it up (abandon_attempts), and the server routes the job to the fallback
  let [status, headers, body] = await handle(client, 'POST', '/jobs', owner, 'crash',
    { intent: 'ex.charge', params: { amount: 4 } }, 0);
  const crashed = open('IJ_WORKER_DSN');
  const [left] = await crashed.claim('node-worker', { lease: true });
  await crashed.beginAttempt(left.attemptId);
  await crashed.end();
  const w = startWorker(wclient, 'node-worker', providers, {
    onEvent: (event, f) => { events.push({ event, ...f }); emit({ event, ...f }); },
  });
  const abandoned = await w.start();
  let [rstatus, , done] = await handle(client, 'GET', `/jobs/${body.job_id}`, owner);
  emit({ check: 'restart', abandoned, job_id: body.job_id, status: rstatus, state: done.state, result: done.result });

  // double click: two concurrent POSTs with one key, each on its own connection
  const conns = [open('IJ_CLIENT_DSN'), open('IJ_CLIENT_DSN')];
  const answers = await Promise.all(conns.map((c) => handle(c, 'POST', '/jobs', owner, 'dbl', charge, 200)));
  emit({ check: 'double_click', statuses: answers.map((a) => a[0]), job_ids: answers.map((a) => a[2].job_id) });
  [status, headers, body] = await handle(client, 'GET', `/jobs/${answers[0][2].job_id}`, owner);
  emit({ check: 'double_click_done', status, ...body });

  // the same key with another request: 409, the job id from the error fields
  [status, headers, body] = await handle(client, 'POST', '/jobs', owner, 'dbl',
    { intent: 'ex.charge', params: { amount: 43 } });
  emit({ check: 'key_reuse', status, body });

  [status, headers, body] = await handle(client, 'GET', '/jobs/not-a-uuid', owner);
  emit({ check: 'bad_uuid', status, body });

  // slow provider: heartbeats keep the attempt alive
  [, , body] = await handle(client, 'POST', '/jobs', owner, 'slow',
    { intent: 'ex.charge', params: { amount: 1, mode: 'slow' } }, 3000);
  emit({ check: 'slow', job_id: body.job_id });

  // failing provider: fail_attempt; the next claim returns the job on the fallback
  [, , body] = await handle(client, 'POST', '/jobs', owner, 'fail',
    { intent: 'ex.charge', params: { amount: 2, mode: 'fail' } }, 0);
  [rstatus, , done] = await handle(client, 'GET', `/jobs/${body.job_id}`, owner);
  emit({ check: 'failover', job_id: body.job_id, status: rstatus, state: done.state, result: done.result });

  // the primary hangs: mark_unknown; another worker's start meanwhile is IJ002
  // (409 + Retry-After); after fence_unknown_after the server fences the doubt
  // and the next claim returns the job on the fallback, which wins; the
  // primary's late answer is still reported, and is lost
  [, , body] = await handle(client, 'POST', '/jobs', owner, 'hang',
    { intent: 'ex.charge', params: { amount: 3, mode: 'hang' } }, 0);
  const lateJob = body.job_id;
  await until(() => seen('begun', (e) => e.jobId === lateJob));
  let refused = [201, {}, {}];
  try {
    await wclient.startAttempt(lateJob, { timeout: '1s', worker: 'node-other' });
  } catch (e) {
    const { status: s, headers: h, body: b } = e.toHTTP();
    refused = [s, h, b];
  }
  emit({ check: 'in_doubt', status: refused[0], headers: refused[1], body: refused[2], job_id: lateJob });
  // the sweeper's tick, which needs the operator capability (the worker role
  // lacks it), so the admin connection calls it; a no-op where a sweeper runs
  await until(() => seen('completed', (e) => e.jobId === lateJob), () => admin.expireAttempts());
  answerHung();
  await until(() => seen('late'));
  const late = events.find((e) => e.event === 'late') || {};
  emit({ check: 'late', job_id: lateJob, attempt_id: late.attemptId, outcome: late.outcome });
  [status, , body] = await handle(client, 'GET', `/jobs/${lateJob}`, owner);
  emit({ check: 'late_job', status, ...body });
  await w.stop({ grace: 1000 });

  // a batch: 20 jobs claimed in one call, confirmed in one statement, run side
  // by side, reported in one statement
  const batchIds = [];
  for (let i = 0; i < 20; i++) {
    [, , body] = await handle(client, 'POST', '/jobs', owner, `batch-${i}`,
      { intent: 'ex.charge', params: { amount: 100 + i } }, 0);
    batchIds.push(body.job_id);
  }
  let batch = await batchStep(wclient, 'node-batch', providers, { wait: 0 });
  emit({ check: 'batch', claimed: batch.claimed, job_ids: batchIds, outcomes: batch.outcomes });

  // a batch in which one job was cancelled before its begin (IJ003: not sent)
  // and one attempt failed before the report (IJ005): each statement errors,
  // nothing of it is written, and its calls go one by one
  for (let i = 0; i < 5; i++) {
    await handle(client, 'POST', '/jobs', owner, `batch2-${i}`,
      { intent: 'ex.charge', params: { amount: 200 + i } }, 0);
  }
  const meanwhile = [];
  batch = await batchStep(wclient, 'node-batch', providers, {
    wait: 0,
    hooks: {
      beforeBegin: async (attemptIds) => { // set-up: what another party does meanwhile
        meanwhile.push(attemptIds[0]);
        const [{ job_id: jobId }] = await admin.query('SELECT job_id FROM idemjob.attempts WHERE id = $1', [attemptIds[0]]);
        await admin.cancelJob(jobId, 'changed my mind');
      },
      beforeReport: async (attemptIds) => {
        meanwhile.push(attemptIds[0]);
        await admin.failAttempt(attemptIds[0], { error: { code: 'operator' }, retryable: false });
      },
    },
  });
  emit({ check: 'batch_fallback', claimed: batch.claimed, sent: batch.sent, meanwhile, outcomes: batch.outcomes });
  for (const c of [client, admin, wclient, ...conns]) await c.end();
}

main().catch((e) => { console.error(e); process.exit(1); });
