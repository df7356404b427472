"""The rows the calls return, as frozen dataclasses with the SQL column names.

Types as psycopg 3 reads them: ``bigint`` -> ``int`` (exact), ``uuid`` ->
``uuid.UUID``, ``jsonb`` -> ``dict``/``list``/... (integers exact),
``timestamptz`` -> aware ``datetime`` (microseconds), ``interval`` ->
``timedelta``, the enum states -> ``str``.  A column the server adds in a
later version is ignored; one it lacks keeps its default.
"""
from __future__ import annotations

import dataclasses
import datetime as _dt
import uuid
from dataclasses import dataclass
from typing import Any, List, Mapping, Optional, Type, TypeVar

__all__ = [
    "FINAL_JOB_STATES", "SubmitResult", "Job", "Attempt", "Claim", "CompleteResult",
    "InDoubtRow", "QueueStats", "ProviderStats", "RetryPolicy", "Route", "Certification",
]

FINAL_JOB_STATES = frozenset({"succeeded", "failed", "cancelled"})
FINAL_ATTEMPT_STATES = frozenset({"succeeded", "superseded", "failed", "released"})

T = TypeVar("T")


def from_row(cls: Type[T], row: Mapping[str, Any]) -> T:
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in row.items() if k in names})


@dataclass(frozen=True)
class SubmitResult:
    """``submit``: the job, and whether this call created it."""
    job_id: uuid.UUID
    created: bool
    state: str
    version: int
    result: Any = None

    @property
    def final(self) -> bool:
        return self.state in FINAL_JOB_STATES


@dataclass(frozen=True)
class Job:
    """A row of ``idemjob.jobs`` (``job``, ``await_job``, ``cancel_job``)."""
    id: uuid.UUID
    owner_id: str
    idempotency_key: str
    intent: str
    params: Any
    provider: str
    state: str
    version: int
    attempt_count: int
    completed_by: Optional[uuid.UUID] = None
    result: Any = None
    created_at: Optional[_dt.datetime] = None
    updated_at: Optional[_dt.datetime] = None
    completed_at: Optional[_dt.datetime] = None
    cancel_reason: Optional[str] = None
    priority: int = 0
    run_at: Optional[_dt.datetime] = None
    max_attempts: Optional[int] = None
    error: Any = None
    next_provider: Optional[str] = None

    @property
    def job_id(self) -> uuid.UUID:
        return self.id

    @property
    def final(self) -> bool:
        return self.state in FINAL_JOB_STATES


@dataclass(frozen=True)
class Attempt:
    """A row of ``idemjob.attempts`` (``start_attempt``, ``begin_attempt``,
    ``fail_attempt``, ``mark_unknown``, ``cancel_attempt``, ``heartbeat``)."""
    id: uuid.UUID
    job_id: uuid.UUID
    owner_id: str
    attempt_no: int
    provider: str
    state: str
    read_version: int
    worker: Optional[str] = None
    started_at: Optional[_dt.datetime] = None
    deadline: Optional[_dt.datetime] = None
    finished_at: Optional[_dt.datetime] = None
    error: Any = None
    result_sha256: Optional[bytes] = None
    unknown_at: Optional[_dt.datetime] = None
    dropped_result: Any = None
    lease_until: Optional[_dt.datetime] = None

    @property
    def attempt_id(self) -> uuid.UUID:
        return self.id


@dataclass(frozen=True)
class Claim:
    """A row of ``claim``: an attempt taken for a worker (leased or not)."""
    attempt_id: uuid.UUID
    job_id: uuid.UUID
    owner_id: str
    intent: str
    params: Any
    provider: str
    attempt_no: int
    read_version: int
    deadline: Optional[_dt.datetime] = None


@dataclass(frozen=True)
class CompleteResult:
    """``complete_attempt``: ``won``, ``lost`` or ``rejected``."""
    outcome: str
    job_id: uuid.UUID
    job_version: int
    winner_attempt_id: Optional[uuid.UUID] = None

    @property
    def won(self) -> bool:
        return self.outcome == "won"


@dataclass(frozen=True)
class InDoubtRow:
    """A row of the ``idemjob.in_doubt`` view."""
    job_id: uuid.UUID
    owner_id: str
    intent: str
    attempt_id: uuid.UUID
    attempt_no: int
    provider: str
    worker: Optional[str]
    state: str
    started_at: _dt.datetime
    deadline: Optional[_dt.datetime] = None
    unknown_at: Optional[_dt.datetime] = None
    in_doubt_since: Optional[_dt.datetime] = None
    age: Optional[_dt.timedelta] = None


@dataclass(frozen=True)
class QueueStats:
    """A row of the ``idemjob.queue_stats`` view."""
    intent: str
    due: int
    scheduled: int
    running: int
    in_doubt: int
    oldest_due_age: Optional[_dt.timedelta] = None


@dataclass(frozen=True)
class ProviderStats:
    """A row of the ``idemjob.provider_stats`` view."""
    intent: str
    provider: str
    attempts: int
    succeeded: int
    superseded: int
    rejected: int
    failed: int
    in_doubt: int
    cancelled: int
    p50_ms: Optional[float] = None
    p95_ms: Optional[float] = None
    last_started_at: Optional[_dt.datetime] = None
    released: int = 0


@dataclass(frozen=True)
class RetryPolicy:
    """A row of ``idemjob.retry_policies`` (``set_retry_policy``)."""
    intent: str
    max_attempts: Optional[int] = None
    retry_backoff: Optional[_dt.timedelta] = None
    retry_backoff_max: Optional[_dt.timedelta] = None
    updated_at: Optional[_dt.datetime] = None
    fence_unknown_after: Optional[_dt.timedelta] = None


@dataclass(frozen=True)
class Route:
    """A row of ``idemjob.routes`` (``set_route``)."""
    intent: str
    providers: List[str]
    updated_at: Optional[_dt.datetime] = None


@dataclass(frozen=True)
class Certification:
    """A row of ``idemjob.certifications`` (``certify_provider``,
    ``revoke_provider``)."""
    intent: str
    provider: str
    contract_version: int
    certified_at: Optional[_dt.datetime] = None
    evidence: Any = None
    revoked_at: Optional[_dt.datetime] = None
    revoke_reason: Optional[str] = None
