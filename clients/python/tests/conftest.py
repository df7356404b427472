"""Fixtures for the suite: the cluster test/clients/run.sh gives in
IDEMJOB_TEST_DSN (direct or through pgbouncer, IDEMJOB_TEST_VIA),
IDEMJOB_TEST_ADMIN_DSN (always direct, superuser: set-up, inspection,
pg_terminate_backend), and the roles ij_cl_client, ij_cl_worker,
ij_cl_operator, ij_cl_admin (connect as one by replacing user=).

No sweeper is assumed: where the sweeper would act, the tests call
expire_attempts() through the admin DSN (a no-op where one runs).
"""
from __future__ import annotations

import os
import time
import uuid
from typing import Any, Callable, Iterator, List, Optional

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

import idemjob

DSN = os.environ.get("IDEMJOB_TEST_DSN", "")
ADMIN_DSN = os.environ.get("IDEMJOB_TEST_ADMIN_DSN", "")
VIA = os.environ.get("IDEMJOB_TEST_VIA", "direct")
CLAIM_LEASE = "1s"   # ij_cl_worker's claim_lease in this database (set below)

if not DSN or not ADMIN_DSN:
    pytest.exit("IDEMJOB_TEST_DSN and IDEMJOB_TEST_ADMIN_DSN must be set (see test/clients/run.sh)", 2)


def dsn_as(role: str, dsn: str = DSN) -> str:
    d = conninfo_to_dict(dsn)
    d["user"] = role
    return make_conninfo(**d)


def uniq(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def eventually(cond: Callable[[], Any], timeout: float = 10.0, tick: Optional[Callable[[], Any]] = None,
               every: float = 0.1) -> Any:
    """Calls tick() then cond() until cond() is truthy; fails after timeout."""
    end = time.monotonic() + timeout
    while True:
        if tick:
            tick()
        v = cond()
        if v:
            return v
        if time.monotonic() > end:
            raise AssertionError(f"not within {timeout}s: {cond}")
        time.sleep(every)


class Admin:
    """Direct superuser SQL for set-up and inspection (never through the pooler)."""

    def __init__(self, dsn: str) -> None:
        self.conn = psycopg.connect(dsn, autocommit=True)

    def rows(self, sql: str, *args: Any) -> List[tuple]:
        with self.conn.cursor() as cur:
            cur.execute(sql, args or None)
            return cur.fetchall() if cur.description else []

    def one(self, sql: str, *args: Any) -> Any:
        r = self.rows(sql, *args)
        return r[0][0] if r else None

    def attempts(self, job_id: Any) -> str:
        """'provider:state,...' of a job's attempts, in order."""
        return self.one("SELECT string_agg(provider || ':' || state, ',' ORDER BY attempt_no)"
                        " FROM idemjob.attempts WHERE job_id = %s", job_id) or ""


@pytest.fixture(scope="session", autouse=True)
def _database_settings() -> Iterator[None]:
    # a short claim lease for the worker role, so that the tests of an
    # unconfirmed lease do not wait 5 s; set before any connection of that
    # role to this database (the pooler's server connections read it at start)
    with psycopg.connect(ADMIN_DSN, autocommit=True) as c:
        db = c.execute("SELECT current_database()").fetchone()[0]
        c.execute(f'ALTER ROLE ij_cl_worker IN DATABASE "{db}" SET idemjob.claim_lease = {CLAIM_LEASE!r}')
    yield


@pytest.fixture(scope="session")
def admin() -> Iterator[Admin]:
    a = Admin(ADMIN_DSN)
    yield a
    a.conn.close()


def _client(role: Optional[str], **kw: Any) -> idemjob.Client:
    return idemjob.connect(dsn_as(role) if role else DSN, min_size=1, max_size=kw.pop("max_size", 6), **kw)


@pytest.fixture(scope="session")
def su() -> Iterator[idemjob.Client]:
    """The superuser, through the DSN under test."""
    c = _client(None)
    yield c
    c.close()


@pytest.fixture(scope="session")
def client() -> Iterator[idemjob.Client]:
    c = _client("ij_cl_client")
    yield c
    c.close()


@pytest.fixture(scope="session")
def wclient() -> Iterator[idemjob.Client]:
    c = _client("ij_cl_worker", max_size=10)
    yield c
    c.close()


@pytest.fixture(scope="session")
def operator() -> Iterator[idemjob.Client]:
    c = _client("ij_cl_operator")
    yield c
    c.close()


@pytest.fixture(scope="session")
def admin_client() -> Iterator[idemjob.Client]:
    c = _client("ij_cl_admin")
    yield c
    c.close()


@pytest.fixture(scope="session")
def sweeper() -> Iterator[idemjob.Client]:
    """What the sweeper does, through the admin DSN: expire_attempts()."""
    c = idemjob.connect(ADMIN_DSN, min_size=1, max_size=2)
    yield c
    c.close()


@pytest.fixture
def intent(admin_client: idemjob.Client) -> Callable[..., str]:
    """A fresh intent: intent(contract=..., route=[...], certify=[...], **policy)."""

    def make(prefix: str = "t", *, contract: Any = None, route: Optional[List[str]] = None,
             certify: Optional[List[str]] = None, **policy: Any) -> str:
        name = uniq(prefix)
        if contract is not None or certify:
            admin_client.define_contract(name, contract if contract is not None else {"type": "object"})
        for p in certify or []:
            admin_client.certify_provider(name, p, {"suite": "pytest"})
        if route is not None:
            admin_client.set_route(name, route)
        if policy:
            admin_client.set_retry_policy(name, **policy)
        return name

    return make
