"""The Worker runtime: claim with a lease, begin right before the handler,
heartbeats, the deadline race, and the report (docs/operations.md#workers).

Threads: the loop that claims (``run()``, or a thread of ``start()``), a
ticker that sends heartbeats and watches deadlines, and a
``ThreadPoolExecutor`` of ``concurrency`` threads, one per attempt, that
begins it, runs the handler and reports its answer.
"""
from __future__ import annotations

import concurrent.futures as cf
import datetime as _dt
import logging
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Union

from .client import Client
from .errors import (ConnectionLost, IdemjobError, InvalidTransition, JobFinished, LeaseExpired,
                     RetryTransaction, Unavailable)
from .records import Claim, from_row

__all__ = ["Worker", "Failure", "Context", "Handler"]

log = logging.getLogger("idemjob.worker")

COUNTERS = ("claimed", "skipped", "won", "lost", "rejected", "failed", "in_doubt", "late", "errors")
_TRANSIENT = (ConnectionLost, RetryTransaction, Unavailable)


class Failure(Exception):
    """Raised by a handler: the provider answered with a definite failure
    (it did not act).  ``error`` is sent as the attempt's error (a mapping;
    a string is ``{"code": error}``); ``retryable=False`` ends the job
    ``failed`` at once."""

    def __init__(self, error: Any = None, retryable: bool = True) -> None:
        if error is None:
            error = {"code": "failed"}
        elif isinstance(error, str):
            error = {"code": error}
        super().__init__(error)
        self.error = error
        self.retryable = retryable


@dataclass
class Context:
    """What a handler gets besides the job: the provider to call (the server
    chose it, after failover by route), the deadline, and ``cancelled``, set
    when the deadline passed (the attempt is then marked unknown: an answer
    is still reported), the attempt was ended by someone else, or the worker
    stops past its grace."""
    worker: str
    attempt_id: uuid.UUID
    job_id: uuid.UUID
    provider: str
    attempt_no: int
    deadline: _dt.datetime
    cancelled: threading.Event = field(default_factory=threading.Event)
    _deadline_mono: float = 0.0

    def remaining(self) -> float:
        """Seconds left until the deadline (0 when passed)."""
        return max(0.0, self._deadline_mono - time.monotonic())


Handler = Callable[[Claim, Context], Any]


class _Run:
    """One claimed attempt, from its claim to its report."""

    def __init__(self, claim: Claim) -> None:
        self.claim = claim
        self.lock = threading.Lock()
        self.phase = "leased"   # leased, beginning, running, timed_out, reporting, done
        self.ctx: Optional[Context] = None
        self.deadline = 0.0
        self.next_beat = 0.0
        self.beating = True
        self.unknown_sent = threading.Event()


def _seconds(v: Union[float, int, _dt.timedelta]) -> float:
    return v.total_seconds() if isinstance(v, _dt.timedelta) else float(v)


class Worker:
    """Runs handlers for the intents in ``handlers`` (``{intent: fn(job, ctx)
    -> result}``), ``concurrency`` at a time.

    ``timeout``: how long a handler may run (``ctx.deadline``); past it the
    attempt is marked ``unknown`` ('timeout') and the handler keeps running:
    its late answer is still reported.  ``heartbeat``: seconds between
    heartbeats (default ``timeout / 3``); the attempt's deadline in the
    server is kept at three heartbeats ahead (the claim's ``timeout``, each
    heartbeat's ``extend``), so a worker that dies leaves it in doubt within
    that.  ``wait``: how long one ``claim`` waits in the server for a job.
    ``on_event(name, fields)``: called in the worker's threads, synchronously,
    at each step (``abandoned``, ``claiming``, ``claimed``, ``skipped``,
    ``begun``, ``heartbeat``, ``unknown``, ``answered``, ``completed``,
    ``failed``, ``error``, ``stopping``, ``stopped``).
    """

    def __init__(self, client: Client, name: str, handlers: Mapping[str, Handler], *,
                 concurrency: int = 4, timeout: Union[float, _dt.timedelta] = 60.0,
                 wait: Union[float, _dt.timedelta] = 5.0,
                 heartbeat: Optional[Union[float, _dt.timedelta]] = None,
                 on_event: Optional[Callable[[str, Dict[str, Any]], None]] = None,
                 error_backoff: float = 1.0) -> None:
        if not handlers:
            raise ValueError("a worker needs at least one handler")
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.client = client
        self.name = name
        self.handlers = dict(handlers)
        self.concurrency = concurrency
        self.timeout = _seconds(timeout)
        self.wait = _seconds(wait)
        self.heartbeat = _seconds(heartbeat) if heartbeat is not None else self.timeout / 3
        if self.timeout <= 0 or self.heartbeat <= 0 or self.wait < 0:
            raise ValueError("timeout and heartbeat must be positive, wait not negative")
        self.window = 3 * self.heartbeat
        self.on_event = on_event
        self.error_backoff = error_backoff
        self._counters = {k: 0 for k in COUNTERS}
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._runs: Dict[uuid.UUID, _Run] = {}
        self._stop = threading.Event()
        self._grace = 10.0
        self._claim_conn: Any = None
        self._claim_sends = 0
        self._uncertain = False     # a claim's answer may have been lost: leases it never saw
        self._unbegun = 0           # claimed, not begun because of stop()
        self._thread: Optional[threading.Thread] = None
        self._run_thread: Optional[threading.Thread] = None
        self._done = threading.Event()
        self._pool: Optional[cf.ThreadPoolExecutor] = None
        self._control: Optional[cf.ThreadPoolExecutor] = None

    # ---- public
    @property
    def counters(self) -> Dict[str, int]:
        with self._lock:
            return dict(self._counters)

    @property
    def active(self) -> int:
        """Attempts claimed and not yet reported (or skipped)."""
        with self._lock:
            return len(self._runs)

    def start(self) -> "Worker":
        """Runs :meth:`run` in a thread; returns at once."""
        self._thread = threading.Thread(target=self.run, name=f"idemjob-worker-{self.name}", daemon=True)
        self._run_thread = self._thread
        self._thread.start()
        return self

    def run(self) -> None:
        """Abandons what an earlier run left, then claims and runs jobs until
        :meth:`stop`; then shuts down (grace, unknown, abandon) and returns."""
        self._run_thread = threading.current_thread()
        self._pool = cf.ThreadPoolExecutor(self.concurrency, thread_name_prefix=f"idemjob-{self.name}")
        self._control = cf.ThreadPoolExecutor(2, thread_name_prefix=f"idemjob-{self.name}-control")
        ticker = threading.Thread(target=self._tick, name=f"idemjob-ticker-{self.name}", daemon=True)
        try:
            n = self._retrying(lambda: self.client.abandon_attempts(self.name), "abandon_attempts")
            if n is None:
                return
            self._emit("abandoned", count=n, at="start")
            ticker.start()
            self._loop()
        finally:
            self._shutdown()
            self._done.set()

    def stop(self, grace: float = 10.0) -> None:
        """Stops claiming, lets running handlers finish within ``grace``
        seconds, marks the rest ``unknown`` and gives up
        (``abandon_attempts``) what the worker holds.  Called from another
        thread than :meth:`run`'s, it returns when that is done."""
        self._grace = grace
        if not self._stop.is_set():
            self._stop.set()
            self._emit("stopping", grace=grace)
        with self._changed:
            self._changed.notify_all()
        if self._run_thread is None or threading.current_thread() is self._run_thread:
            return
        while not self._done.wait(0.1):
            self._cancel_claim()

    def __enter__(self) -> "Worker":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # ---- the claiming loop
    def _loop(self) -> None:
        intents = list(self.handlers)
        errors = 0
        while not self._stop.is_set():
            with self._changed:
                free = self.concurrency - len(self._runs)
                if free <= 0:
                    self._changed.wait(0.5)
                    continue
            self._emit("claiming", max_jobs=free)
            self._claim_sends = 0
            try:
                claims = self.client._invoke(
                    "claim", {"worker": self.name, "intents": intents, "max_jobs": free,
                              "timeout": self.window, "wait": self.wait, "lease": True},
                    on_connection=self._set_claim_conn)
            except IdemjobError as e:
                if isinstance(e, ConnectionLost):
                    self._uncertain = True
                if self._stop.is_set():
                    break
                errors += 1
                self._count("errors")
                self._emit("error", call="claim", error=e, sqlstate=e.sqlstate)
                self._stop.wait(min(self.error_backoff * errors, 10 * self.error_backoff))
                continue
            errors = 0
            if self._claim_sends > 1:
                self._uncertain = True      # resent by the client: the lost answer's leases
            if not claims:
                continue
            batch = [from_row(Claim, r) for r in claims]
            self._count("claimed", len(batch))
            self._emit("claimed", attempts=batch)
            with self._lock:
                runs = [_Run(c) for c in batch]
                for r in runs:
                    self._runs[r.claim.attempt_id] = r
            for r in runs:
                assert self._pool is not None
                self._pool.submit(self._attempt, r)

    def _set_claim_conn(self, conn: Any) -> None:
        with self._lock:
            self._claim_conn = conn
            if conn is not None:
                self._claim_sends += 1

    def _cancel_claim(self) -> None:
        # under the lock: the connection cannot go back to the pool (and carry
        # another call) while the cancel request is sent
        with self._lock:
            if self._claim_conn is not None:
                try:
                    self._claim_conn.cancel()
                except Exception:  # pragma: no cover - best effort
                    pass

    # ---- one attempt, in a pool thread
    def _attempt(self, r: _Run) -> None:
        c = r.claim
        try:
            with r.lock:
                if self._stop.is_set():
                    self._unbegun += 1
                    return   # never begun: abandon_attempts releases it
                r.phase = "beginning"
            try:
                self.client.begin_attempt(c.attempt_id)
            except (LeaseExpired, JobFinished, InvalidTransition) as e:
                self._count("skipped")
                self._emit("skipped", attempt_id=c.attempt_id, job_id=c.job_id, sqlstate=e.sqlstate)
                return
            except IdemjobError as e:
                self._count("errors")
                self._emit("error", call="begin_attempt", attempt_id=c.attempt_id, error=e, sqlstate=e.sqlstate)
                return
            now = time.monotonic()
            ctx = Context(self.name, c.attempt_id, c.job_id, c.provider, c.attempt_no,
                          _dt.datetime.now(_dt.timezone.utc) + _dt.timedelta(seconds=self.timeout),
                          _deadline_mono=now + self.timeout)
            with r.lock:
                r.ctx, r.deadline, r.next_beat = ctx, now + self.timeout, now + self.heartbeat
                r.phase = "running"
            self._emit("begun", attempt_id=c.attempt_id, job_id=c.job_id, intent=c.intent,
                       provider=c.provider, attempt_no=c.attempt_no)
            kind: str
            answer: Any
            try:
                answer, kind = self.handlers[c.intent](c, ctx), "result"
            except Failure as f:
                answer, kind = f, "failure"
            except Exception as ex:
                answer, kind = ex, "exception"
            with r.lock:
                late = r.phase == "timed_out"
                r.phase = "reporting"
            if late:
                r.unknown_sent.wait()
            self._emit("answered", attempt_id=c.attempt_id, job_id=c.job_id, kind=kind, late=late)
            self._report(r, kind, answer, late)
        except BaseException as e:  # pragma: no cover - a bug here must not kill the pool thread silently
            self._count("errors")
            self._emit("error", call="worker", attempt_id=c.attempt_id, error=e)
        finally:
            with self._changed:
                r.phase = "done"
                self._runs.pop(c.attempt_id, None)
                self._changed.notify_all()

    def _report(self, r: _Run, kind: str, answer: Any, late: bool) -> None:
        c = r.claim
        ids = {"attempt_id": c.attempt_id, "job_id": c.job_id, "provider": c.provider, "late": late}
        try:
            if kind == "result":
                res = self.client.complete_attempt(c.attempt_id, answer)
                self._count(res.outcome)
                if late:
                    self._count("late")
                self._emit("completed", outcome=res.outcome, **ids)
            elif kind == "failure":
                self.client.fail_attempt(c.attempt_id, answer.error, answer.retryable)
                self._count("failed")
                if late:
                    self._count("late")
                self._emit("failed", error=answer.error, retryable=answer.retryable, **ids)
            elif not late:
                error = {"code": "exception", "type": type(answer).__name__, "message": str(answer)[:1000]}
                self.client.fail_attempt(c.attempt_id, error, True)
                self._count("failed")
                self._emit("failed", error=error, retryable=True, **ids)
            else:
                # an exception after the deadline says nothing about whether the
                # provider acted: the attempt stays unknown
                self._count("late")
                self._emit("error", call="handler", error=answer, sqlstate=None, **ids)
        except IdemjobError as e:
            self._count("errors")
            call = {"result": "complete_attempt"}.get(kind, "fail_attempt")
            self._emit("error", call=call, error=e, sqlstate=e.sqlstate, **ids)
        except (TypeError, ValueError) as e:
            # an answer that is not JSON: the provider acted, nothing can be
            # recorded; the attempt is in doubt, for the doubt policy or an operator
            self._count("errors")
            self._emit("error", call="complete_attempt", error=e, sqlstate=None, **ids)
            if not late:
                self._mark_unknown(r, "unreportable answer")

    # ---- heartbeats and deadlines
    def _tick(self) -> None:
        step = min(0.05, self.heartbeat / 4)
        while not self._done.is_set():
            now = time.monotonic()
            with self._lock:
                runs = list(self._runs.values())
            for r in runs:
                with r.lock:
                    if r.phase != "running":
                        continue
                    if now >= r.deadline:
                        r.phase = "timed_out"
                        if r.ctx:
                            r.ctx.cancelled.set()
                        self._submit_control(self._mark_unknown, r, "timeout")
                    elif r.beating and now >= r.next_beat:
                        r.next_beat = now + self.heartbeat
                        self._submit_control(self._beat, r)
            self._done.wait(step)

    def _submit_control(self, fn: Callable[..., None], *args: Any) -> None:
        try:
            assert self._control is not None
            self._control.submit(fn, *args)
        except RuntimeError:  # shut down
            fn(*args)

    def _beat(self, r: _Run) -> None:
        c = r.claim
        try:
            self.client.heartbeat(c.attempt_id, self.window)
            self._emit("heartbeat", attempt_id=c.attempt_id)
        except (InvalidTransition, LeaseExpired) as e:
            # ended by someone else (an operator, abandon, the sweeper): tell the handler
            r.beating = False
            if r.ctx:
                r.ctx.cancelled.set()
            self._emit("error", call="heartbeat", attempt_id=c.attempt_id, error=e, sqlstate=e.sqlstate)
        except IdemjobError as e:
            self._count("errors")
            self._emit("error", call="heartbeat", attempt_id=c.attempt_id, error=e, sqlstate=e.sqlstate)

    def _mark_unknown(self, r: _Run, reason: str) -> None:
        c = r.claim
        try:
            self.client.mark_unknown(c.attempt_id, reason)
            self._count("in_doubt")
            self._emit("unknown", attempt_id=c.attempt_id, job_id=c.job_id, provider=c.provider, reason=reason)
        except IdemjobError as e:
            self._count("errors")
            self._emit("error", call="mark_unknown", attempt_id=c.attempt_id, error=e, sqlstate=e.sqlstate)
        finally:
            r.unknown_sent.set()

    # ---- stopping
    def _shutdown(self) -> None:
        end = time.monotonic() + self._grace
        with self._changed:
            while self._runs and time.monotonic() < end:
                self._changed.wait(min(0.1, max(0.0, end - time.monotonic())))
            # attempts being begun get to run (or not), and answers being
            # reported get there, before the rest is given up
            while any(r.phase in ("beginning", "reporting") for r in self._runs.values()):
                self._changed.wait(0.05)
            left = [r for r in self._runs.values() if r.phase != "done"]
        marked: List[_Run] = []
        for r in left:
            with r.lock:
                if r.phase == "running":
                    r.phase = "timed_out"
                    marked.append(r)
            if r.ctx:
                r.ctx.cancelled.set()
        for r in marked:
            self._mark_unknown(r, "shutdown")
        # give up what it holds: what still runs, what it claimed and did not
        # begin, and what a claim whose answer was lost may have leased
        if left or self._unbegun or self._uncertain:
            try:
                n = self._retrying(lambda: self.client.abandon_attempts(self.name), "abandon_attempts",
                                   until_stopped=False)
                if n is not None:
                    self._emit("abandoned", count=n, at="stop")
            except IdemjobError as e:
                self._count("errors")
                self._emit("error", call="abandon_attempts", error=e, sqlstate=e.sqlstate)
        self._close_pools()
        self._emit("stopped", counters=self.counters)

    def _close_pools(self) -> None:
        if self._pool:
            self._pool.shutdown(wait=False)
        if self._control:
            self._control.shutdown(wait=True)

    # ---- helpers
    def _retrying(self, fn: Callable[[], Any], call: str, until_stopped: bool = True) -> Any:
        """fn() again after transient errors (the client already resent it
        ``retries`` times); None when stopped first.  Other errors raise."""
        tries = 0
        while True:
            try:
                return fn()
            except _TRANSIENT as e:
                tries += 1
                self._count("errors")
                self._emit("error", call=call, error=e, sqlstate=e.sqlstate)
                if (until_stopped and self._stop.is_set()) or (not until_stopped and tries >= 3):
                    return None
                self._stop.wait(self.error_backoff) if until_stopped else time.sleep(self.error_backoff)

    def _count(self, key: str, n: int = 1) -> None:
        with self._lock:
            self._counters[key] = self._counters.get(key, 0) + n

    def _emit(self, name: str, **fields: Any) -> None:
        log.debug("%s %s %s", self.name, name, fields)
        if self.on_event is not None:
            try:
                self.on_event(name, fields)
            except Exception:
                log.exception("idemjob worker %s: on_event(%r) raised", self.name, name)
