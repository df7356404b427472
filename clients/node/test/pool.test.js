// The pool under a burst of error answers: node-postgres' pool.query would
// destroy a connection on every error and open a new one; the client keeps
// its connections (an SQL error leaves the connection as good as it was).
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { NotFound, AttemptInDoubt, connect } from '../index.js';
import {
  skip, as, superuser, uniq, VIA, dsnAs,
} from '../test_support/env.js';

const backends = async (su, app) => (await su.query(
  'SELECT pid FROM pg_stat_activity WHERE application_name = $1 ORDER BY pid', [app])).map((r) => r.pid);

describe('the pool', { skip }, () => {
  it('200 calls answering IJ006 and IJ002 at once: the same connections, no new backend', async () => {
    const app = uniq('ijt-burst');
    const max = 5;
    const c = as('worker', { applicationName: app, max });
    const su = superuser();
    const client = as('client');
    try {
      const { jobId } = await client.submit('shop', uniq('k'), 'po.burst', { provider: 'primary' });
      await c.startAttempt(jobId, { worker: 'holder', timeout: '1 minute' });
      // open the pool's connections
      await Promise.all(Array.from({ length: max }, () => c.query('SELECT pg_sleep(0.05)')));
      assert.equal(c.stats.created, max);
      const before = await backends(su, app);
      const missing = '01900000-0000-7000-8000-000000000000';
      const calls = Array.from({ length: 200 }, (_, i) => (i % 2
        ? c.job(missing)
        : c.startAttempt(jobId, { worker: `other-${i}` })));
      const answers = await Promise.allSettled(calls);
      assert.equal(answers.filter((a) => a.status === 'rejected' && a.reason instanceof NotFound).length, 100);
      assert.equal(answers.filter((a) => a.status === 'rejected' && a.reason instanceof AttemptInDoubt).length, 100);
      for (const a of answers) {
        if (a.reason instanceof NotFound) assert.equal(a.reason.toHTTP().status, 404);
        else assert.equal(a.reason.toHTTP().headers['Retry-After'], String(a.reason.retryAfter));
      }
      const st = c.stats;
      assert.ok(st.total <= max, JSON.stringify(st));
      assert.equal(st.created, max, `connections opened during the burst: ${JSON.stringify(st)}`);
      assert.equal(st.broken, 0);
      assert.equal(st.removed, 0);
      const after = await backends(su, app);
      if (VIA === 'direct') {
        // the very same server processes, one per pooled connection
        assert.deepEqual(after, before);
        assert.equal(after.length, max);
      } else {
        // through pgbouncer the server connections are pgbouncer's (at most its pool size)
        assert.ok(after.length <= 4, String(after));
      }
      // and they still work
      assert.equal((await c.job(jobId)).id, jobId);
    } finally {
      await c.end();
      await su.end();
      await client.end();
    }
  });

  it('what the client avoids: pg.Pool.query destroys a connection on each error', async () => {
    const c = connect(dsnAs('ij_cl_client'), { max: 2 });
    try {
      let created = 0;
      c.pool.on('connect', () => { created++; });
      for (let i = 0; i < 5; i++) {
        await c.pool.query('SELECT * FROM idemjob.job($1)', ['01900000-0000-7000-8000-000000000000']).catch(() => {});
      }
      assert.equal(created, 5); // one new connection per error
      created = 0;
      for (let i = 0; i < 5; i++) await c.job('01900000-0000-7000-8000-000000000000').catch(() => {});
      assert.ok(created <= 1, String(created));
    } finally {
      await c.end();
    }
  });
});
