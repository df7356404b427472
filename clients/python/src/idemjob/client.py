"""The Client: one method per SQL function, over a psycopg_pool.ConnectionPool.

Every call is one statement in autocommit, sent with unnamed statements
(``prepare_threshold=None``), so the client works through pgbouncer in
transaction pooling.  A call names only the arguments it is given
(``idemjob.f(a => %s, ...)``): ``None`` leaves the SQL default.
"""
from __future__ import annotations

import datetime as _dt
import random
import threading
import time
import uuid
from typing import (Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple,
                    Type, TypeVar, Union)

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool

from .errors import ConnectionLost, IdemjobError, RetryTransaction, from_psycopg
from .records import (Attempt, Certification, Claim, CompleteResult, InDoubtRow, Job,
                      ProviderStats, QueueStats, RetryPolicy, Route, SubmitResult, from_row)

__all__ = ["Client", "connect", "resend_safe", "CALLS"]

T = TypeVar("T")
Interval = Union[_dt.timedelta, int, float, str]
Id = Union[uuid.UUID, str]

# Each function's arguments in SQL order: (name, SQL type, has a SQL default).
# A required argument is always sent (None is NULL: 22004); one with a default
# only when it is not None.
_SIGS: Dict[str, Tuple[Tuple[str, str, bool], ...]] = {
    "submit": (("owner_id", "text", False), ("idempotency_key", "text", False), ("intent", "text", False),
               ("params", "jsonb", True), ("provider", "text", True), ("run_at", "timestamptz", True),
               ("priority", "integer", True), ("max_attempts", "integer", True)),
    "job": (("job_id", "uuid", False),),
    "await_job": (("job_id", "uuid", False), ("timeout", "interval", False)),
    "cancel_job": (("job_id", "uuid", False), ("reason", "text", False)),
    "start_attempt": (("job_id", "uuid", False), ("provider", "text", True), ("timeout", "interval", True),
                      ("worker", "text", True)),
    "begin_attempt": (("attempt_id", "uuid", False),),
    "complete_attempt": (("attempt_id", "uuid", False), ("result", "jsonb", False)),
    "fail_attempt": (("attempt_id", "uuid", False), ("error", "jsonb", True), ("retryable", "boolean", True)),
    "mark_unknown": (("attempt_id", "uuid", False), ("reason", "text", True)),
    "cancel_attempt": (("attempt_id", "uuid", False), ("reason", "text", False), ("fence", "boolean", True)),
    "heartbeat": (("attempt_id", "uuid", False), ("extend", "interval", True)),
    "claim": (("worker", "text", False), ("intents", "text[]", True), ("max_jobs", "integer", True),
              ("timeout", "interval", True), ("wait", "interval", True), ("lease", "boolean", True)),
    "abandon_attempts": (("worker", "text", False),),
    "expire_attempts": (),
    "define_contract": (("intent", "text", False), ("output_schema", "jsonb", False)),
    "certify_provider": (("intent", "text", False), ("provider", "text", False), ("evidence", "jsonb", True)),
    "revoke_provider": (("intent", "text", False), ("provider", "text", False), ("reason", "text", False)),
    "set_retry_policy": (("intent", "text", False), ("max_attempts", "integer", True),
                         ("retry_backoff", "interval", True), ("retry_backoff_max", "interval", True),
                         ("fence_unknown_after", "interval", True)),
    "set_route": (("intent", "text", False), ("providers", "text[]", False)),
    "purge": (("older_than", "interval", False), ("max_jobs", "integer", True)),
    "purge_race_log": (("older_than", "interval", False),),
}
_VIEWS = {"in_doubt": "idemjob.in_doubt", "queue_stats": "idemjob.queue_stats",
          "provider_stats": "idemjob.provider_stats"}

#: every call of the client, by its SQL name
CALLS = frozenset(_SIGS) | frozenset(_VIEWS)


def resend_safe(call: str, args: Optional[Mapping[str, Any]] = None, **kwargs: Any) -> bool:
    """Whether ``call`` with these arguments answers the same when sent again
    (the in-doubt rule, I7): every call but ``claim`` without a lease,
    ``start_attempt`` without a ``worker``, ``purge`` and ``purge_race_log``.

    >>> resend_safe("submit"), resend_safe("claim"), resend_safe("claim", lease=True)
    (True, False, True)
    """
    a = dict(args or {}, **kwargs)
    if call not in CALLS:
        raise ValueError(f"no idemjob call {call!r}")
    if call == "claim":
        return bool(a.get("lease"))
    if call == "start_attempt":
        return a.get("worker") is not None
    return call not in ("purge", "purge_race_log")


def _interval(v: Any) -> Any:
    if isinstance(v, bool):
        raise TypeError("an interval is a timedelta, a number of seconds or a string")
    if isinstance(v, (int, float)):
        return _dt.timedelta(seconds=v)
    return v


def _adapt(sqltype: str, v: Any) -> Any:
    if sqltype == "jsonb":
        return v if isinstance(v, Jsonb) else Jsonb(v)
    if sqltype == "interval":
        return _interval(v)
    if sqltype == "text[]" and v is not None and not isinstance(v, (list, tuple)):
        return list(v)
    if sqltype == "uuid" and isinstance(v, uuid.UUID):
        return str(v)
    return v


class Client:
    """idemjob's calls over a connection pool (see :func:`connect`).

    ``retries``: how many times a resend-safe call is sent again after
    ``ConnectionLost`` or ``RetryTransaction`` (and any call after
    ``RetryTransaction``, which wrote nothing), with a short backoff.
    Thread-safe: share one client between threads.
    """

    def __init__(self, pool: ConnectionPool, *, retries: int = 3, backoff: float = 0.05,
                 max_backoff: float = 1.0, owns_pool: bool = False) -> None:
        self.pool = pool
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self._owns_pool = owns_pool
        self._lose: Dict[str, int] = {}
        self._lose_lock = threading.Lock()

    # ---- life cycle
    def close(self) -> None:
        if self._owns_pool:
            self.pool.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ---- jobs
    def submit(self, owner_id: str, idempotency_key: str, intent: str, params: Any = None,
               provider: Optional[str] = None, run_at: Optional[_dt.datetime] = None,
               priority: Optional[int] = None, max_attempts: Optional[int] = None) -> SubmitResult:
        return self._one(SubmitResult, "submit", locals())

    def job(self, job_id: Id) -> Job:
        return self._one(Job, "job", locals())

    def await_job(self, job_id: Id, timeout: Interval) -> Job:
        """Waits in the server until the job is final or ``timeout`` passed."""
        return self._one(Job, "await_job", locals())

    def cancel_job(self, job_id: Id, reason: str) -> Job:
        return self._one(Job, "cancel_job", locals())

    # ---- attempts
    def start_attempt(self, job_id: Id, provider: Optional[str] = None,
                      timeout: Optional[Interval] = None, worker: Optional[str] = None) -> Attempt:
        return self._one(Attempt, "start_attempt", locals())

    def begin_attempt(self, attempt_id: Id) -> Attempt:
        return self._one(Attempt, "begin_attempt", locals())

    def complete_attempt(self, attempt_id: Id, result: Any) -> CompleteResult:
        """``result`` is sent as jsonb (``None``: JSON ``null``)."""
        return self._one(CompleteResult, "complete_attempt", locals())

    def fail_attempt(self, attempt_id: Id, error: Any = None, retryable: Optional[bool] = None) -> Attempt:
        return self._one(Attempt, "fail_attempt", locals())

    def mark_unknown(self, attempt_id: Id, reason: Optional[str] = None) -> Attempt:
        return self._one(Attempt, "mark_unknown", locals())

    def cancel_attempt(self, attempt_id: Id, reason: str, fence: Optional[bool] = None) -> Attempt:
        return self._one(Attempt, "cancel_attempt", locals())

    def heartbeat(self, attempt_id: Id, extend: Optional[Interval] = None) -> Attempt:
        return self._one(Attempt, "heartbeat", locals())

    # ---- workers
    def claim(self, worker: str, intents: Optional[Sequence[str]] = None, max_jobs: Optional[int] = None,
              timeout: Optional[Interval] = None, wait: Optional[Interval] = None,
              lease: Optional[bool] = None) -> List[Claim]:
        return self._all(Claim, "claim", locals())

    def abandon_attempts(self, worker: str) -> int:
        return self._scalar("abandon_attempts", locals())

    def expire_attempts(self) -> int:
        return self._scalar("expire_attempts", {})

    # ---- admin
    def define_contract(self, intent: str, output_schema: Any) -> int:
        return self._scalar("define_contract", locals())

    def certify_provider(self, intent: str, provider: str, evidence: Any = None) -> Certification:
        return self._one(Certification, "certify_provider", locals())

    def revoke_provider(self, intent: str, provider: str, reason: str) -> Certification:
        return self._one(Certification, "revoke_provider", locals())

    def set_retry_policy(self, intent: str, max_attempts: Optional[int] = None,
                         retry_backoff: Optional[Interval] = None,
                         retry_backoff_max: Optional[Interval] = None,
                         fence_unknown_after: Optional[Interval] = None) -> RetryPolicy:
        return self._one(RetryPolicy, "set_retry_policy", locals())

    def set_route(self, intent: str, providers: Sequence[str]) -> Route:
        return self._one(Route, "set_route", locals())

    def purge(self, older_than: Interval, max_jobs: Optional[int] = None) -> int:
        """Not resend-safe: a lost answer raises ConnectionLost."""
        return self._scalar("purge", locals())

    def purge_race_log(self, older_than: Interval) -> int:
        """Not resend-safe: a lost answer raises ConnectionLost."""
        return self._scalar("purge_race_log", locals())

    # ---- views
    def in_doubt(self) -> List[InDoubtRow]:
        return [from_row(InDoubtRow, r) for r in self._view("in_doubt")]

    def queue_stats(self) -> List[QueueStats]:
        return [from_row(QueueStats, r) for r in self._view("queue_stats")]

    def provider_stats(self) -> List[ProviderStats]:
        return [from_row(ProviderStats, r) for r in self._view("provider_stats")]

    # ---- test-only: fault injection
    def _lose_next_response(self, call: str, times: int = 1) -> None:
        """TEST ONLY.  The next ``times`` executions of ``call`` run and
        commit, then their answer is lost: the connection is closed and the
        call raises ConnectionLost inside the client, which sends it again
        (resend-safe calls) or raises it (the others), exactly as after a
        real loss."""
        if call not in CALLS:
            raise ValueError(f"no idemjob call {call!r}")
        with self._lose_lock:
            self._lose[call] = self._lose.get(call, 0) + times

    # ---- machinery
    def _one(self, cls: Type[T], call: str, given: Mapping[str, Any]) -> T:
        rows = self._invoke(call, given)
        return from_row(cls, rows[0])

    def _all(self, cls: Type[T], call: str, given: Mapping[str, Any]) -> List[T]:
        return [from_row(cls, r) for r in self._invoke(call, given)]

    def _scalar(self, call: str, given: Mapping[str, Any]) -> int:
        return int(self._invoke(call, given)[0][call])

    def _view(self, name: str) -> List[Dict[str, Any]]:
        return self._execute(name, f"SELECT * FROM {_VIEWS[name]}", (), True)

    def _invoke(self, call: str, given: Mapping[str, Any],
                on_connection: Optional[Callable[[Optional["psycopg.Connection[Any]"]], None]] = None
                ) -> List[Dict[str, Any]]:
        parts: List[str] = []
        values: List[Any] = []
        for name, sqltype, has_default in _SIGS[call]:
            v = given.get(name)
            if v is None and has_default:
                continue
            parts.append(f"{name} => %s::{sqltype}")
            values.append(_adapt(sqltype, v) if v is not None or sqltype == "jsonb" else None)
        sql = f"SELECT * FROM idemjob.{call}({', '.join(parts)})"
        safe = resend_safe(call, given)
        return self._execute(call, sql, values, safe, on_connection)

    def _execute(self, call: str, sql: str, values: Sequence[Any], safe: bool,
                 on_connection: Optional[Callable[[Optional["psycopg.Connection[Any]"]], None]] = None
                 ) -> List[Dict[str, Any]]:
        tries = 0
        while True:
            try:
                with self.pool.connection() as conn:
                    if on_connection:
                        on_connection(conn)
                    try:
                        with conn.cursor(row_factory=dict_row) as cur:
                            cur.execute(sql, values)
                            rows = cur.fetchall()
                        if self._lose and self._take_loss(call):
                            conn.close()
                            raise ConnectionLost("the answer was lost (injected)", call=call)
                        return rows
                    finally:
                        if on_connection:
                            on_connection(None)
            except (psycopg.Error, IdemjobError) as e:
                err = from_psycopg(e, call)
                cause: BaseException = e
            if tries < self.retries and (
                    isinstance(err, RetryTransaction) or (safe and isinstance(err, ConnectionLost))):
                tries += 1
                delay = min(self.max_backoff, self.backoff * (2 ** (tries - 1)))
                time.sleep(delay * (0.5 + random.random() / 2))
                continue
            if err is cause:
                raise err
            raise err from cause

    def _take_loss(self, call: str) -> bool:
        with self._lose_lock:
            n = self._lose.get(call, 0)
            if n <= 0:
                return False
            self._lose[call] = n - 1
            return True


def connect(dsn: str = "", *, min_size: int = 1, max_size: int = 10, retries: int = 3,
            backoff: float = 0.05, timeout: float = 30.0, name: Optional[str] = None,
            wait: bool = False, **kwargs: Any) -> Client:
    """A :class:`Client` over a new ``psycopg_pool.ConnectionPool`` of
    ``min_size``..``max_size`` connections, each with ``autocommit=True`` and
    ``prepare_threshold=None`` (no named prepared statements: safe through
    pgbouncer in transaction pooling).  ``timeout``: how long a call waits
    for a free connection (then ``Unavailable``); ``wait``: block until
    ``min_size`` connections are open; ``kwargs``: more ``psycopg.connect``
    arguments.  ``client.close()`` (or ``with``) closes the pool."""
    conn_kwargs: Dict[str, Any] = {"autocommit": True, "prepare_threshold": None}
    conn_kwargs.update(kwargs)
    pool = ConnectionPool(dsn, min_size=min_size, max_size=max_size, kwargs=conn_kwargs,
                          timeout=timeout, name=name, open=True)
    if wait:
        pool.wait(timeout)
    return Client(pool, retries=retries, backoff=backoff, owns_pool=True)
