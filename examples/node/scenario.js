// Runs the example once: the handler and the worker through every case the
// README promises, printing one JSON line per check (test/examples/run.sh
// reads them and checks the database). DSNs (libpq key=value):
// IJ_CLIENT_DSN, IJ_WORKER_DSN, IJ_ADMIN_DSN.
'use strict';
const { connect, handle, Worker } = require('./app');

const emit = (o) => console.log(JSON.stringify(o));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const config = (dsn) => Object.fromEntries(dsn.split(/\s+/).filter(Boolean).map((p) => {
  const [k, v] = p.split('=');
  return [k === 'dbname' ? 'database' : k, v];
}));
const open = (v) => connect(config(process.env[v]));

async function primary(params) {      // the fake provider: slow, failing, late, or fine
  const mode = params.mode || 'ok';
  if (mode === 'fail') throw new Error('provider said no');
  await sleep({ slow: 1000, late: 3000 }[mode] || 50);
  return { by: 'primary', amount: params.amount };
}
const fallback = async (params) => ({ by: 'fallback', amount: params.amount });

async function main() {
  const client = await open('IJ_CLIENT_DSN');
  const admin = await open('IJ_ADMIN_DSN');
  const events = [];
  const worker = new Worker(await open('IJ_WORKER_DSN'), 'node-worker', { primary, fallback },
    { emit: (e) => { events.push(e); emit(e); } });
  const owner = 'shop-1';
  const charge = { intent: 'ex.charge', params: { amount: 42 } };

  // double click: two concurrent POSTs with one key, each on its own connection
  const conns = [await open('IJ_CLIENT_DSN'), await open('IJ_CLIENT_DSN')];
  const answers = await Promise.all(conns.map((c) => handle(c, 'POST', '/jobs', owner, 'dbl', charge, '0.2s')));
  emit({ check: 'double_click', statuses: answers.map((a) => a[0]), job_ids: answers.map((a) => a[2].job_id) });
  await worker.step();
  let [status, headers, body] = await handle(client, 'GET', `/jobs/${answers[0][2].job_id}`, owner);
  emit({ check: 'double_click_done', status, ...body });

  // the same key with another request: 409, the job id from the error fields
  [status, headers, body] = await handle(client, 'POST', '/jobs', owner, 'dbl',
    { intent: 'ex.charge', params: { amount: 43 } });
  emit({ check: 'key_reuse', status, body });

  [status, headers, body] = await handle(client, 'GET', '/jobs/not-a-uuid', owner);
  emit({ check: 'bad_uuid', status, body });

  // slow provider: heartbeats keep the attempt alive
  [, , body] = await handle(client, 'POST', '/jobs', owner, 'slow',
    { intent: 'ex.charge', params: { amount: 1, mode: 'slow' } }, '0s');
  await worker.step();
  emit({ check: 'slow', job_id: body.job_id });

  // failing provider: fail_attempt, then failover to the certified fallback
  [, , body] = await handle(client, 'POST', '/jobs', owner, 'fail',
    { intent: 'ex.charge', params: { amount: 2, mode: 'fail' } }, '0s');
  await worker.step();
  const [fstatus, , done] = await handle(client, 'GET', `/jobs/${body.job_id}`, owner);
  emit({ check: 'failover', job_id: body.job_id, status: fstatus, state: done.state, result: done.result });

  // no answer: unknown, failover refused (IJ002 -> 409 + Retry-After), an
  // operator cancels the attempt, the fallback wins, the late answer loses
  [, , body] = await handle(client, 'POST', '/jobs', owner, 'late',
    { intent: 'ex.charge', params: { amount: 3, mode: 'late' } }, '0s');
  const lateJob = body.job_id;
  await worker.step();
  const refused = events.find((e) => e.event === 'failover_refused');
  emit({ check: 'in_doubt', status: refused.status, headers: refused.headers, body: refused.body, job_id: lateJob });
  await admin.query("SELECT idemjob.cancel_attempt($1, 'operator: the provider never answered')",
    [refused.body.attempt_id]);
  await worker.step('0s');
  for (let i = 0; i < 50 && !events.some((e) => e.event === 'late_result'); i++) {
    await sleep(100);
    await worker.step('0s');
  }
  const late = events.find((e) => e.event === 'late_result') || {};
  emit({ check: 'late', job_id: lateJob, attempt_id: late.attempt_id, outcome: late.outcome });
  [status, , body] = await handle(client, 'GET', `/jobs/${lateJob}`, owner);
  emit({ check: 'late_job', status, ...body });

  // a batch: 20 jobs claimed in one call, run side by side, reported in one statement
  const batchIds = [];
  for (let i = 0; i < 20; i++) {
    [, , body] = await handle(client, 'POST', '/jobs', owner, `batch-${i}`,
      { intent: 'ex.charge', params: { amount: 100 + i } }, '0s');
    batchIds.push(body.job_id);
  }
  let claimed = await worker.batchStep(100, '0s');
  let batch = events.filter((e) => e.event === 'batch').pop() || {};
  emit({ check: 'batch', claimed, job_ids: batchIds, outcomes: batch.outcomes });

  // a batch in which one attempt was failed meanwhile: the statement errors
  // (IJ005), nothing of it is written, the results go one by one
  for (let i = 0; i < 5; i++) {
    await handle(client, 'POST', '/jobs', owner, `batch2-${i}`,
      { intent: 'ex.charge', params: { amount: 200 + i } }, '0s');
  }
  const failedMeanwhile = [];
  claimed = await worker.batchStep(100, '0s', async (attemptIds) => {
    failedMeanwhile.push(attemptIds[0]);
    await admin.query(`SELECT idemjob.fail_attempt($1, '{"code": "operator"}', false)`, [attemptIds[0]]);
  });
  batch = events.filter((e) => e.event === 'batch').pop() || {};
  emit({ check: 'batch_fallback', claimed, failed: failedMeanwhile, outcomes: batch.outcomes });
  for (const c of [client, admin, worker.db, ...conns]) await c.end();
}

main().catch((e) => { console.error(e); process.exit(1); });
