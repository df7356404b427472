"""Typed errors: one class per condition of clients/README.md's table.

Every error a call ends with is an :class:`IdemjobError` (the psycopg error
is its ``__cause__``).  Switch on the class (or ``sqlstate``), and read ids
from the parsed error fields (``job_id``, ``attempt_id``, ``state``,
``deadline``, ``retry_after``): idemjob puts them in
``PG_DIAG_CONSTRAINT_NAME`` as ``key=value`` pairs; they are never read
from the message text.
"""
from __future__ import annotations

import datetime as _dt
import re
import uuid
from typing import Any, ClassVar, Dict, Mapping, Optional, Tuple, Type

import psycopg
import psycopg.errors

try:  # psycopg_pool is a dependency; keep the errors importable without it
    from psycopg_pool import PoolClosed, PoolTimeout, TooManyRequests

    _POOL_ERRORS: Tuple[type, ...] = (PoolTimeout, PoolClosed, TooManyRequests)
except ImportError:  # pragma: no cover
    _POOL_ERRORS = ()

__all__ = [
    "IdemjobError", "IdempotencyConflict", "AttemptInDoubt", "JobFinished",
    "ProviderNotCertified", "InvalidTransition", "NotFound", "KeyExpired",
    "LeaseExpired", "InvalidArgument", "PermissionDenied", "RetryTransaction",
    "Unavailable", "ConnectionLost", "error_class", "from_psycopg",
]


class IdemjobError(Exception):
    """An error from the server (or the connection to it), with its SQLSTATE,
    its texts, the parsed error fields and the HTTP status an API in front
    answers with (docs/reference.md#errors)."""

    status: ClassVar[int] = 500
    condition: ClassVar[Optional[str]] = None

    def __init__(self, message: str, *, sqlstate: Optional[str] = None,
                 detail: Optional[str] = None, hint: Optional[str] = None,
                 fields: Optional[Mapping[str, str]] = None,
                 schema_name: Optional[str] = None, table_name: Optional[str] = None,
                 call: Optional[str] = None) -> None:
        super().__init__(message)
        self.message = message
        self.sqlstate = sqlstate
        self.detail = detail
        self.hint = hint
        self.fields: Dict[str, str] = dict(fields or {})
        self.schema_name = schema_name
        self.table_name = table_name
        self.call = call

    # ---- the error fields, typed
    @property
    def job_id(self) -> Optional[uuid.UUID]:
        return _uuid(self.fields.get("job_id"))

    @property
    def attempt_id(self) -> Optional[uuid.UUID]:
        return _uuid(self.fields.get("attempt_id"))

    @property
    def state(self) -> Optional[str]:
        return self.fields.get("state")

    @property
    def deadline(self) -> Optional[_dt.datetime]:
        v = self.fields.get("deadline")
        if not v:
            return None
        try:
            return _dt.datetime.fromisoformat(v[:-1] + "+00:00" if v.endswith("Z") else v)
        except ValueError:
            return None

    @property
    def retry_after(self) -> Optional[int]:
        v = self.fields.get("retry_after")
        return int(v) if v is not None and v.isdigit() else None

    @property
    def error_name(self) -> str:
        """The condition name: ``idempotency_conflict``, ``null_value_not_allowed``..."""
        if self.condition:
            return self.condition
        if self.sqlstate:
            try:
                return _snake(psycopg.errors.lookup(self.sqlstate).__name__)
            except KeyError:
                return "internal_error"
        return _snake(type(self).__name__)

    # ---- HTTP
    def http_status(self) -> int:
        return self.status

    def headers(self) -> Dict[str, str]:
        return {}

    def body(self) -> Dict[str, Any]:
        """A JSON body: ``error``, ``sqlstate``, ``message`` and the ids and
        state of the error fields (as text)."""
        b: Dict[str, Any] = {"error": self.error_name, "sqlstate": self.sqlstate,
                             "message": self.message}
        for k in ("job_id", "attempt_id", "state", "deadline"):
            if k in self.fields:
                b[k] = self.fields[k]
        return b

    def to_http(self) -> "tuple[int, Dict[str, str], Dict[str, Any]]":
        return self.http_status(), self.headers(), self.body()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.sqlstate!r}, {self.message!r}, fields={self.fields!r})"


class IdempotencyConflict(IdemjobError):
    """IJ001: the key was used for another request (``job_id`` holds it), or
    an attempt was completed again with another result."""
    status, condition = 409, "idempotency_conflict"


class AttemptInDoubt(IdemjobError):
    """IJ002: an attempt of the job is ``started`` or ``unknown``; ask again
    after ``retry_after`` seconds."""
    status, condition = 409, "attempt_in_doubt"

    def headers(self) -> Dict[str, str]:
        ra = self.retry_after
        return {"Retry-After": str(ra)} if ra is not None else {}


class JobFinished(IdemjobError):
    """IJ003: the job is final."""
    status, condition = 409, "job_finished"


class ProviderNotCertified(IdemjobError):
    """IJ004: a failover to a provider without a current certification."""
    status, condition = 422, "provider_not_certified"


class InvalidTransition(IdemjobError):
    """IJ005: the state machine forbids the change."""
    status, condition = 409, "invalid_transition"


class NotFound(IdemjobError):
    """IJ006: no such job, attempt, contract or certification."""
    status, condition = 404, "not_found"


class KeyExpired(IdemjobError):
    """IJ007: the key's job was purged (the same request)."""
    status, condition = 410, "key_expired"


class LeaseExpired(IdemjobError):
    """IJ008: a leased attempt past its lease, or released: it was never
    sent; do not call the provider."""
    status, condition = 409, "lease_expired"


class InvalidArgument(IdemjobError):
    """22xxx, 42602, 42704: an argument the server refuses (or one the driver
    could not send)."""
    status = 400


class PermissionDenied(IdemjobError):
    """42501: outside the caller's capabilities or owner binding."""
    status = 403


class RetryTransaction(IdemjobError):
    """40001, 40P01, 55P03: nothing was written; send the call again."""
    status = 503


class Unavailable(IdemjobError):
    """25006, 55000, 53xxx, 57014 (and no connection from the pool): the
    server cannot take the call now."""
    status = 503


class ConnectionLost(IdemjobError):
    """No SQLSTATE, 08xxx, 57P0x: the connection broke after the call was
    sent; it may have committed (in doubt).  Send the same call again with the
    same arguments (the client does it itself for resend-safe calls)."""
    status, condition = 503, "connection_lost"


_IJ: Dict[str, Type[IdemjobError]] = {
    "IJ001": IdempotencyConflict, "IJ002": AttemptInDoubt, "IJ003": JobFinished,
    "IJ004": ProviderNotCertified, "IJ005": InvalidTransition, "IJ006": NotFound,
    "IJ007": KeyExpired, "IJ008": LeaseExpired,
}


def error_class(sqlstate: Optional[str]) -> Type[IdemjobError]:
    """The class for a SQLSTATE (``None``: no SQLSTATE, the connection lost)."""
    if not sqlstate:
        return ConnectionLost
    s = sqlstate.upper()
    if s in _IJ:
        return _IJ[s]
    if s.startswith("22") or s in ("42602", "42704"):
        return InvalidArgument
    if s == "42501":
        return PermissionDenied
    if s in ("40001", "40P01", "55P03"):
        return RetryTransaction
    if s in ("25006", "55000", "57014") or s.startswith("53"):
        return Unavailable
    if s.startswith("08") or s.startswith("57P0"):
        return ConnectionLost
    return IdemjobError


def parse_fields(text: Optional[str]) -> Dict[str, str]:
    """idemjob's ``key=value key=value`` error fields."""
    out: Dict[str, str] = {}
    for pair in (text or "").split():
        k, sep, v = pair.partition("=")
        if sep and k:
            out[k] = v
    return out


def from_psycopg(exc: BaseException, call: Optional[str] = None) -> IdemjobError:
    """The typed error for an exception psycopg (or its pool) raised."""
    if isinstance(exc, IdemjobError):
        return exc
    if _POOL_ERRORS and isinstance(exc, _POOL_ERRORS):
        # no connection was had: the call was never sent
        return Unavailable(str(exc), call=call)
    if not isinstance(exc, psycopg.Error):
        return IdemjobError(str(exc), call=call)
    sqlstate = exc.sqlstate
    diag = exc.diag
    message = diag.message_primary or str(exc).strip() or type(exc).__name__
    if sqlstate is None and not isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError)):
        # raised by the driver before sending (an argument it cannot adapt)
        cls: Type[IdemjobError] = InvalidArgument
    else:
        cls = error_class(sqlstate)
    fields = parse_fields(diag.constraint_name) if diag.schema_name == "idemjob" else {}
    return cls(message, sqlstate=sqlstate, detail=diag.message_detail, hint=diag.message_hint,
               fields=fields, schema_name=diag.schema_name, table_name=diag.table_name, call=call)


def _uuid(v: Optional[str]) -> Optional[uuid.UUID]:
    try:
        return uuid.UUID(v) if v else None
    except ValueError:
        return None


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()
