// A worker killed (SIGKILL) at each point of its loop, in a child process,
// as test/t/060_kill_points.pl does for the SQL loop:
//   p1  waiting in claim                 nothing is claimed for it
//   p2  after claim, before begin        its lease ends: released, never sent
//   p3  after begin, before the handler  its deadline: unknown; the intent's
//                                        fence_unknown_after gives it up
//   p4  in the handler                   restarted under its name:
//                                        abandonAttempts gives it up
//   p5  after the answer, before the     the same
//       report
//   op  as p3, without fence_unknown_after: left in doubt for an operator
// Then workers (worker rights only) run until nothing is due: the restarted
// ones of p4 and p5 under their names, one other for the rest.  The only
// other actor is the sweeper's expire_attempts(), called here on the admin
// connection as the sweeper would (no sweeper runs in the test cluster).
// Every job of p1-p5 ends succeeded with one winning attempt, those whose
// attempt was sent (p3-p5) on the route's fallback; the op job stays in
// doubt.  No operator call is made.
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { connect, Worker } from '../index.js';
import {
  skip, as, uniq, intent, until, dsnAs, ADMIN_DSN, VIA,
} from '../test_support/env.js';

const child = fileURLToPath(new URL('../test_support/kill_worker.js', import.meta.url));

// the worker that dies; through pgbouncer the startup option cannot pass,
// and the lease is the default 5 s
const lease = VIA === 'direct' ? "options='-c idemjob.claim_lease=1s'" : '';

function run(point, name, it) {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [child, point, name, it, dsnAs('ij_cl_worker', lease)], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    p.stdout.on('data', (d) => { out += d; });
    p.stderr.on('data', (d) => { out += d; });
    p.on('error', reject);
    p.on('exit', (code, signal) => resolve({ code, signal, out }));
  });
}

const clients = [];
after(async () => {
  for (const c of clients) await c.end();
});

describe('a worker killed at each point of its loop', { skip }, () => {
  it('every job final (p1-p5), none by an operator; the job whose intent has no fence policy left in doubt', async () => {
    const client = as('client');
    const wclient = as('worker');
    const admin = as('admin');
    const sweeper = connect(ADMIN_DSN, { applicationName: 'ijt-sweeper' });
    clients.push(client, wclient, admin, sweeper);
    const tag = uniq('kill');
    const points = ['p1', 'p2', 'p3', 'p4', 'p5', 'op'];
    const intents = {};
    const jobs = {};
    const names = {};
    for (const p of points) {
      intents[p] = await intent(admin, `${tag}.${p}`, { fence: p === 'op' ? null : '1s' });
      names[p] = `${tag}-${p}`;
    }
    const submit = async (p) => {
      jobs[p] = (await client.submit('shop', `${tag}-${p}`, intents[p], { provider: 'primary' })).jobId;
    };
    for (const p of points) {
      if (p !== 'p1') await submit(p); // p1 dies waiting: its job comes after
      const r = await run(p, names[p], intents[p]);
      assert.equal(r.signal, 'SIGKILL', `${p}: ${r.code} ${r.out}`);
      if (p === 'p1') await submit(p);
    }
    // where each died
    const states = async (p) => (await sweeper.query(
      'SELECT a.state::text, a.lease_until IS NOT NULL AS leased FROM idemjob.attempts a WHERE a.job_id = $1 ORDER BY a.attempt_no', [jobs[p]]))
      .map((r) => `${r.state}${r.leased ? '/leased' : ''}`);
    assert.deepEqual(await states('p1'), []);
    assert.deepEqual(await states('p2'), ['started/leased']);
    for (const p of ['p3', 'p4', 'p5', 'op']) assert.deepEqual(await states(p), ['started'], p);

    // restarted under their names: p4 and p5 give up what they left
    const handler = async (job, ctx) => ({ by: ctx.provider });
    const workers = [];
    for (const p of ['p4', 'p5']) {
      const w = new Worker({ client: wclient, name: names[p], handlers: { [intents[p]]: handler }, timeout: 5000, wait: 200 });
      workers.push(w);
      assert.equal(await w.start(), 1, `${p}: abandoned`);
    }
    const rest = new Worker({
      client: wclient, name: `${tag}-rest`, timeout: 5000, wait: 200,
      handlers: { [intents.p1]: handler, [intents.p2]: handler, [intents.p3]: handler, [intents.op]: handler },
    });
    workers.push(rest);
    await rest.start();
    try {
      const final = ['p1', 'p2', 'p3', 'p4', 'p5'];
      await until(async () => {
        await sweeper.expireAttempts();
        const rows = await sweeper.query("SELECT count(*)::int AS n FROM idemjob.jobs WHERE id = ANY($1::uuid[]) AND state = 'succeeded'",
          [final.map((p) => jobs[p])]);
        return rows[0].n === final.length;
      }, { every: 200, timeout: 20000, what: 'every job of p1-p5 won' });
    } finally {
      for (const w of workers) await w.stop({ grace: 500 });
    }
    const trail = async (p) => (await sweeper.query(
      "SELECT a.provider || ':' || a.state AS s FROM idemjob.attempts a WHERE a.job_id = $1 ORDER BY a.attempt_no", [jobs[p]])).map((r) => r.s);
    // never sent: won on their own provider
    assert.deepEqual(await trail('p1'), ['primary:succeeded']);
    assert.deepEqual(await trail('p2'), ['primary:released', 'primary:succeeded']);
    // sent: given up (fenced), won on the fallback
    assert.deepEqual(await trail('p3'), ['primary:cancelled', 'fallback:succeeded']);
    assert.deepEqual(await trail('p4'), ['primary:cancelled', 'fallback:succeeded']);
    assert.deepEqual(await trail('p5'), ['primary:cancelled', 'fallback:succeeded']);
    const [why3] = await sweeper.query("SELECT error ->> 'reason' AS r FROM idemjob.attempts WHERE job_id = $1 AND attempt_no = 1", [jobs.p3]);
    assert.match(why3.r, /fence_unknown_after/);
    const [why4] = await sweeper.query("SELECT error ->> 'reason' AS r FROM idemjob.attempts WHERE job_id = $1 AND attempt_no = 1", [jobs.p4]);
    assert.equal(why4.r, 'abandoned by its worker');
    // the op job: no policy, in doubt, untouched
    const op = await client.job(jobs.op);
    assert.equal(op.state, 'in_doubt');
    assert.deepEqual(await trail('op'), ['primary:unknown']);
  });
});
