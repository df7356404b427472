// The Worker: the loop of docs/operations.md#workers, once.
//
//   start()  abandonAttempts(name): what an earlier run under this name left
//            is released (never sent) or given up (cancelled and fenced,
//            the job retried on its next provider)
//   loop     claim(name, {intents: the handlers' intents, maxJobs: free
//            slots, wait, timeout, lease: true}); for each attempt
//            beginAttempt right before its handler (IJ008 lease over,
//            IJ003 job final, IJ005 attempt ended: skipped, never sent);
//            the handler raced against the deadline, heartbeats every
//            third of the timeout; then completeAttempt (won, lost,
//            rejected), failAttempt (a Failure, or {"code": "exception"}),
//            or markUnknown('timeout') when the deadline came first: the
//            handler keeps running and its late answer is still reported
//            (the server decides won or lost)
//   stop()   no more claims; running handlers get `grace` ms, the rest are
//            marked unknown; abandonAttempts(name) gives up what is held,
//            and releases what was claimed but never begun
import {
  Failure, LeaseExpired, JobFinished, InvalidTransition,
} from './errors.js';

const sleep = (ms, signal) => new Promise((resolve) => {
  if (signal && signal.aborted) { resolve(); return; }
  const t = setTimeout(done, ms);
  function done() { clearTimeout(t); if (signal) signal.removeEventListener('abort', done); resolve(); }
  if (signal) signal.addEventListener('abort', done, { once: true });
});

const NOT_SENT = [LeaseExpired, JobFinished, InvalidTransition];

function describe(e) {
  return { error: e && e.name, sqlstate: e && e.sqlstate, message: String(e && e.message) };
}

export class Worker {
  /**
   * new Worker({client, name, handlers: {intent: async (job, ctx) => result},
   *   concurrency = 1, timeout = 30000, wait = 5000, heartbeat = timeout / 3,
   *   intents = Object.keys(handlers), errorBackoff = 1000, onEvent})
   * Times in milliseconds.  `name` identifies this worker across restarts:
   * one running process per name.
   */
  constructor({
    client, name, handlers, concurrency = 1, timeout = 30000, wait = 5000, heartbeat,
    intents, errorBackoff = 1000, onEvent,
  } = {}) {
    if (!client) throw new TypeError('Worker: client is required');
    if (typeof name !== 'string' || !name) throw new TypeError('Worker: name is required');
    if (!handlers || typeof handlers !== 'object' || Object.keys(handlers).length === 0) {
      throw new TypeError('Worker: handlers must map at least one intent to a function');
    }
    for (const [intent, h] of Object.entries(handlers)) {
      if (typeof h !== 'function') throw new TypeError(`Worker: the handler of ${intent} is not a function`);
    }
    if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 1000) {
      throw new TypeError('Worker: concurrency is an integer from 1 to 1000');
    }
    if (!(timeout > 0)) throw new TypeError('Worker: timeout is a positive number of milliseconds');
    this.client = client;
    this.name = name;
    this.handlers = handlers;
    this.intents = intents || Object.keys(handlers);
    this.concurrency = concurrency;
    this.timeout = timeout;
    this.wait = wait;
    this.heartbeatEvery = heartbeat === undefined ? timeout / 3 : heartbeat;
    this.errorBackoff = errorBackoff;
    this.onEvent = onEvent;
    this.counters = {
      claimed: 0, skipped: 0, won: 0, lost: 0, rejected: 0, failed: 0, inDoubt: 0, late: 0, errors: 0,
    };
    this._running = new Set(); // tasks from claim to their report
    this._late = new Set(); // handlers still running after markUnknown
    this._stopping = false;
    this._stop = new AbortController();
    this._loop = null;
    this._slotFreed = null;
  }

  _emit(name, fields = {}) {
    if (!this.onEvent) return;
    try {
      this.onEvent(name, { worker: this.name, ...fields });
    } catch {
      // a logger's error is not the worker's
    }
  }

  _error(where, e, fields = {}) {
    this.counters.errors++;
    this._emit('error', { where, ...fields, ...describe(e) });
  }

  /** Gives up what an earlier run left (abandonAttempts), then runs the loop; resolves to how many were abandoned. */
  async start() {
    if (this._loop) throw new Error('Worker: already started');
    const abandoned = await this.client.abandonAttempts(this.name);
    this._emit('started', { abandoned });
    this._loop = this._run();
    return abandoned;
  }

  /** Handlers running or claimed now (late ones not counted). */
  get busy() {
    return this._running.size;
  }

  async _run() {
    while (!this._stopping) {
      const free = this.concurrency - this._running.size;
      if (free <= 0) {
        const signal = this._stop.signal;
        let wake;
        await new Promise((resolve) => {
          wake = resolve;
          this._slotFreed = resolve;
          signal.addEventListener('abort', resolve, { once: true });
        });
        signal.removeEventListener('abort', wake);
        this._slotFreed = null;
        continue;
      }
      let claimed;
      try {
        this._emit('claiming', { maxJobs: free });
        claimed = await this.client.claim(this.name, {
          intents: this.intents, maxJobs: free, timeout: this.timeout, wait: this.wait, lease: true,
        });
      } catch (e) {
        this._error('claim', e);
        if (this.client._ended) break; // nothing more can be done; stop() gives up nothing either
        await sleep(this.errorBackoff, this._stop.signal);
        continue;
      }
      if (this._stopping) {
        // claimed, never begun: never sent; stop()'s abandonAttempts releases them
        for (const job of claimed) this._emit('not_begun', { attemptId: job.attemptId, jobId: job.jobId });
        break;
      }
      for (const job of claimed) {
        this.counters.claimed++;
        const task = { job, detached: false, inHandler: false, controller: new AbortController() };
        this._running.add(task);
        task.promise = this._task(task).finally(() => {
          this._running.delete(task);
          if (this._slotFreed) this._slotFreed();
        });
      }
    }
  }

  async _task(task) {
    const { job } = task;
    const ids = { attemptId: job.attemptId, jobId: job.jobId, intent: job.intent, provider: job.provider };
    this._emit('claimed', ids);
    if (this._stopping) { this._emit('not_begun', ids); return; }
    try {
      await this.client.beginAttempt(job.attemptId);
    } catch (e) {
      if (NOT_SENT.some((C) => e instanceof C)) {
        this.counters.skipped++;
        this._emit('skipped', { ...ids, sqlstate: e.sqlstate, state: e.state });
      } else {
        this._error('beginAttempt', e, ids);
      }
      return;
    }
    const handler = this.handlers[job.intent];
    if (!handler) {
      await this._report(task, ids, 'fail', { code: 'no_handler', intent: job.intent }, false);
      return;
    }
    const started = Date.now();
    const deadline = started + this.timeout;
    const ctx = {
      provider: job.provider, deadline: new Date(deadline), attemptId: job.attemptId, jobId: job.jobId,
      attemptNo: job.attemptNo, worker: this.name, signal: task.controller.signal,
    };
    this._emit('begun', ids);
    task.inHandler = true;
    const answer = Promise.resolve().then(() => handler(job, ctx)).then(
      (value) => ({ ok: true, value }), (error) => ({ ok: false, error }));
    let beat;
    let beating = true; // until the handler answers or the deadline passes
    if (this.heartbeatEvery > 0) {
      beat = setInterval(() => {
        this.client.heartbeat(job.attemptId, { extend: this.timeout }).then(
          () => this._emit('heartbeat', ids),
          (e) => {
            if (!beating) return; // answered meanwhile: the report says what the server thinks
            if (e instanceof InvalidTransition || e instanceof LeaseExpired) {
              // the attempt ended on the server (cancelled, fenced): tell the handler
              clearInterval(beat);
              task.refused = true;
              this._emit('heartbeat_refused', { ...ids, sqlstate: e.sqlstate, state: e.state });
              task.controller.abort(e);
            } else {
              this._error('heartbeat', e, ids);
            }
          });
      }, this.heartbeatEvery);
    }
    let timer;
    const timedOut = new Promise((resolve) => {
      timer = setTimeout(() => resolve(null), Math.max(0, deadline - Date.now()));
      task.detach = () => resolve(null);
    });
    const first = await Promise.race([answer, timedOut]);
    beating = false;
    clearTimeout(timer);
    clearInterval(beat);
    task.inHandler = false;
    if (task.detached) return; // stop() marked it unknown and gave it up
    if (first) {
      this._emit('answered', { ...ids, ok: first.ok, ms: Date.now() - started });
      if (first.ok) await this._report(task, ids, 'complete', first.value);
      else if (task.refused) this._emit('gave_up', { ...ids, ...describe(first.error) }); // ended by the server: nothing to report
      else if (first.error instanceof Failure) await this._report(task, ids, 'fail', first.error.error, first.error.retryable);
      else await this._report(task, ids, 'fail', exceptionError(first.error), true);
      return;
    }
    // the deadline came first: in doubt, never failed; the handler goes on
    this.counters.inDoubt++;
    try {
      await this.client.markUnknown(job.attemptId, { reason: 'timeout' });
      this._emit('unknown', ids);
    } catch (e) {
      this._error('markUnknown', e, ids);
    }
    const late = { task, ids };
    this._late.add(late);
    late.promise = answer.then(async (a) => {
      if (task.detached) return;
      if (a.ok) {
        this.counters.late++;
        await this._report(task, ids, 'complete', a.value, undefined, true);
      } else {
        // an error after the deadline says nothing certain about the provider: left in doubt
        this._emit('late_error', { ...ids, ...describe(a.error) });
      }
    }).finally(() => this._late.delete(late));
  }

  async _report(task, ids, kind, value, retryable, late = false) {
    try {
      if (kind === 'complete') {
        const r = await this.client.completeAttempt(ids.attemptId, value);
        if (r.outcome in this.counters) this.counters[r.outcome]++;
        this._emit(late ? 'late' : 'completed', { ...ids, outcome: r.outcome, jobVersion: r.jobVersion });
      } else {
        const a = await this.client.failAttempt(ids.attemptId, { error: value, retryable });
        this.counters.failed++;
        this._emit('failed', { ...ids, error: value, retryable, state: a.state });
      }
    } catch (e) {
      this._error(kind === 'complete' ? 'completeAttempt' : 'failAttempt', e, ids);
    }
  }

  /**
   * Stops claiming; handlers still running after `grace` ms (late ones
   * too) are marked unknown and their answers no longer reported; then
   * abandonAttempts(name).  Resolves once nothing of this worker runs.
   */
  async stop({ grace = 10000 } = {}) {
    if (this._stopping) return this._stopped;
    this._stopping = true;
    this._stop.abort();
    this._stopped = (async () => {
      if (this._loop) await this._loop; // an in-flight claim ends within `wait`
      const all = () => [...this._running].map((t) => t.promise).concat([...this._late].map((l) => l.promise));
      let graceTimer;
      await Promise.race([
        Promise.allSettled(all()),
        new Promise((resolve) => { graceTimer = setTimeout(resolve, grace); }),
      ]);
      clearTimeout(graceTimer);
      const left = [...this._running].filter((t) => t.inHandler);
      for (const t of left) {
        t.detached = true;
        if (t.detach) t.detach();
        t.controller.abort(new Error('worker stopped'));
        this.counters.inDoubt++;
        try {
          await this.client.markUnknown(t.job.attemptId, { reason: 'worker stopped' });
        } catch (e) {
          this._error('markUnknown', e, { attemptId: t.job.attemptId });
        }
      }
      for (const l of this._late) l.task.detached = true;
      // reports under way finish before the worker gives up what it holds
      await Promise.allSettled([...this._running].map((t) => t.promise));
      let abandoned = 0;
      if (this._loop) {
        try {
          abandoned = await this.client.abandonAttempts(this.name);
        } catch (e) {
          this._error('abandonAttempts', e);
        }
      }
      this._emit('stopped', { abandoned, unknown: left.length });
      return abandoned;
    })();
    return this._stopped;
  }
}

function exceptionError(e) {
  const out = { code: 'exception' };
  if (e && typeof e === 'object') {
    if (e.name) out.name = String(e.name);
    if (e.message !== undefined) out.message = String(e.message);
  } else {
    out.message = String(e);
  }
  return out;
}
