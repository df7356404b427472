"""Typed errors: every SQLSTATE class of clients/README.md's table, the
error fields parsed from PG_DIAG_CONSTRAINT_NAME, and http_status()."""
import datetime as dt
import threading
import time
import uuid

import psycopg
import psycopg.errors
import pytest
from psycopg_pool import PoolTimeout

import idemjob
from conftest import eventually, uniq

TABLE = [
    ("IJ001", idemjob.IdempotencyConflict, 409), ("IJ002", idemjob.AttemptInDoubt, 409),
    ("IJ003", idemjob.JobFinished, 409), ("IJ004", idemjob.ProviderNotCertified, 422),
    ("IJ005", idemjob.InvalidTransition, 409), ("IJ006", idemjob.NotFound, 404),
    ("IJ007", idemjob.KeyExpired, 410), ("IJ008", idemjob.LeaseExpired, 409),
    ("22004", idemjob.InvalidArgument, 400), ("22023", idemjob.InvalidArgument, 400),
    ("22P02", idemjob.InvalidArgument, 400), ("22003", idemjob.InvalidArgument, 400),
    ("22007", idemjob.InvalidArgument, 400), ("22008", idemjob.InvalidArgument, 400),
    ("22015", idemjob.InvalidArgument, 400), ("22021", idemjob.InvalidArgument, 400),
    ("22P05", idemjob.InvalidArgument, 400), ("2201B", idemjob.InvalidArgument, 400),
    ("42602", idemjob.InvalidArgument, 400), ("42704", idemjob.InvalidArgument, 400),
    ("42501", idemjob.PermissionDenied, 403),
    ("40001", idemjob.RetryTransaction, 503), ("40P01", idemjob.RetryTransaction, 503),
    ("55P03", idemjob.RetryTransaction, 503),
    ("25006", idemjob.Unavailable, 503), ("55000", idemjob.Unavailable, 503),
    ("53000", idemjob.Unavailable, 503), ("53100", idemjob.Unavailable, 503),
    ("53200", idemjob.Unavailable, 503), ("53300", idemjob.Unavailable, 503),
    ("57014", idemjob.Unavailable, 503),
    (None, idemjob.ConnectionLost, 503), ("08000", idemjob.ConnectionLost, 503),
    ("08003", idemjob.ConnectionLost, 503), ("08006", idemjob.ConnectionLost, 503),
    ("08P01", idemjob.ConnectionLost, 503), ("57P01", idemjob.ConnectionLost, 503),
    ("57P02", idemjob.ConnectionLost, 503), ("57P03", idemjob.ConnectionLost, 503),
    ("42883", idemjob.IdemjobError, 500), ("0A000", idemjob.IdemjobError, 500),
    ("54000", idemjob.IdemjobError, 500), ("XX000", idemjob.IdemjobError, 500),
    ("42P01", idemjob.IdemjobError, 500), ("23505", idemjob.IdemjobError, 500),
]


@pytest.mark.parametrize("sqlstate,cls,status", TABLE, ids=[str(t[0]) for t in TABLE])
def test_sqlstate_class_mapping(sqlstate, cls, status):
    assert idemjob.error_class(sqlstate) is cls
    assert issubclass(cls, idemjob.IdemjobError)
    # a psycopg error of that SQLSTATE, as the driver raises it, becomes that class
    if sqlstate and not sqlstate.startswith("IJ"):
        try:
            pe = psycopg.errors.lookup(sqlstate)("boom")
        except KeyError:
            pe = None
        if pe is not None:
            err = idemjob.errors.from_psycopg(pe)
            assert type(err) is cls and err.sqlstate == sqlstate and err.http_status() == status
    err = cls("x", sqlstate=sqlstate)
    assert err.http_status() == status


def test_driver_errors():
    # the connection broken, no SQLSTATE: in doubt
    assert type(idemjob.errors.from_psycopg(psycopg.OperationalError("server closed the connection"))) \
        is idemjob.ConnectionLost
    assert type(idemjob.errors.from_psycopg(psycopg.InterfaceError("the connection is closed"))) \
        is idemjob.ConnectionLost
    # no connection from the pool: never sent, not in doubt
    assert type(idemjob.errors.from_psycopg(PoolTimeout("no connection"))) is idemjob.Unavailable
    # refused by the driver before sending
    assert type(idemjob.errors.from_psycopg(psycopg.ProgrammingError("cannot adapt"))) is idemjob.InvalidArgument


def test_fields_parsing():
    f = idemjob.errors.parse_fields("job_id=01a2 attempt_id=01b3 state=unknown "
                                    "deadline=2026-12-03T04:33:16.343372Z retry_after=7 future=x")
    e = idemjob.AttemptInDoubt("m", sqlstate="IJ002", fields=f)
    assert e.state == "unknown" and e.retry_after == 7 and e.fields["future"] == "x"
    assert e.deadline == dt.datetime(2026, 12, 3, 4, 33, 16, 343372, tzinfo=dt.timezone.utc)
    assert e.headers() == {"Retry-After": "7"}
    assert e.job_id is None   # not a uuid: not guessed


def test_key_reuse_conflict(client):
    owner, key, it = uniq("o"), uniq("k"), uniq("t")
    first = client.submit(owner, key, it, {"amount": 1})
    with pytest.raises(idemjob.IdempotencyConflict) as ei:
        client.submit(owner, key, it, {"amount": 2})
    e = ei.value
    assert e.sqlstate == "IJ001" and e.http_status() == 409
    assert e.job_id == first.job_id and e.table_name == "jobs" and e.schema_name == "idemjob"
    assert e.body()["job_id"] == str(first.job_id) and e.body()["error"] == "idempotency_conflict"
    assert e.detail   # says what differs


def test_attempt_in_doubt_retry_after(client, wclient):
    owner, it = uniq("o"), uniq("t")
    job = client.submit(owner, uniq("k"), it)
    a = wclient.start_attempt(job.job_id, timeout=dt.timedelta(seconds=30), worker="w1")
    with pytest.raises(idemjob.AttemptInDoubt) as ei:
        wclient.start_attempt(job.job_id, timeout=5, worker="w2")
    e = ei.value
    assert e.http_status() == 409
    assert isinstance(e.retry_after, int) and 28 <= e.retry_after <= 30
    assert e.headers() == {"Retry-After": str(e.retry_after)}
    assert e.job_id == job.job_id and e.attempt_id == a.id and e.state == "started"
    assert abs((e.deadline - a.deadline).total_seconds()) < 1e-6
    # the same worker gets its attempt back (I7)
    assert wclient.start_attempt(job.job_id, timeout=30, worker="w1").id == a.id
    # unknown: still in doubt
    wclient.mark_unknown(a.id)
    with pytest.raises(idemjob.AttemptInDoubt) as ei:
        wclient.start_attempt(job.job_id, worker="w2")
    assert ei.value.state == "unknown" and ei.value.retry_after >= 1


def test_state_machine_errors(client, wclient, operator, intent):
    it = intent("t", contract={"type": "object"}, route=["p1", "p2"], retry_backoff=0)
    owner = uniq("o")
    # IJ006 not found: the id asked for in the fields
    missing = uuid.uuid4()
    with pytest.raises(idemjob.NotFound) as ei:
        client.job(missing)
    assert ei.value.job_id == missing and ei.value.http_status() == 404
    # IJ004: a failover to a provider never certified
    job = client.submit(owner, uniq("k"), it, provider="p1")
    with pytest.raises(idemjob.ProviderNotCertified) as ei:
        wclient.start_attempt(job.job_id, provider="p2")
    assert ei.value.http_status() == 422 and ei.value.job_id == job.job_id
    # IJ005: a heartbeat on a failed attempt
    a = wclient.start_attempt(job.job_id, worker="w")
    wclient.fail_attempt(a.id, {"code": "nope"}, retryable=False)
    with pytest.raises(idemjob.InvalidTransition) as ei:
        wclient.heartbeat(a.id)
    e = ei.value
    assert (e.attempt_id, e.job_id, e.state, e.http_status()) == (a.id, job.job_id, "failed", 409)
    # IJ003: a new attempt on a final job
    with pytest.raises(idemjob.JobFinished) as ei:
        wclient.start_attempt(job.job_id)
    assert ei.value.state == "failed" and ei.value.job_id == job.job_id
    # IJ008: begin after the lease ended (released by the worker's abandon)
    job2 = client.submit(owner, uniq("k"), it, provider="p1")
    (c,) = wclient.claim("lease-w", [it], lease=True)
    assert wclient.abandon_attempts("lease-w") == 1
    with pytest.raises(idemjob.LeaseExpired) as ei:
        wclient.begin_attempt(c.attempt_id)
    e = ei.value
    assert (e.attempt_id, e.job_id, e.state, e.http_status()) == (c.attempt_id, job2.job_id, "released", 409)
    # IJ007: a purged key, the same request (IJ001 for another)
    key = uniq("k")
    job3 = client.submit(owner, key, it, {"n": 1}, provider="p1")
    client.cancel_job(job3.job_id, "no longer wanted")
    eventually(lambda: _purged(operator, client, job3.job_id), timeout=5)
    with pytest.raises(idemjob.KeyExpired) as ei:
        client.submit(owner, key, it, {"n": 1}, provider="p1")
    assert ei.value.http_status() == 410 and ei.value.job_id == job3.job_id
    with pytest.raises(idemjob.IdempotencyConflict):
        client.submit(owner, key, it, {"n": 2}, provider="p1")


def _purged(operator, client, job_id):
    operator.purge(dt.timedelta(0), 100000)
    try:
        client.job(job_id)
        return False
    except idemjob.NotFound:
        return True


def test_argument_errors(client, wclient):
    with pytest.raises(idemjob.InvalidArgument) as ei:
        client.submit(None, "k", "t")          # a required argument NULL
    assert ei.value.sqlstate == "22004" and ei.value.http_status() == 400
    with pytest.raises(idemjob.InvalidArgument) as ei:
        wclient.claim("w", max_jobs=0)
    assert ei.value.sqlstate == "22023"
    with pytest.raises(idemjob.InvalidArgument) as ei:
        client.job("not-a-uuid")
    assert ei.value.sqlstate == "22P02" and ei.value.body()["error"] == "invalid_text_representation"
    with pytest.raises(idemjob.InvalidArgument) as ei:
        client.submit("o", "", "t")            # an empty name
    assert ei.value.sqlstate == "22023"


def test_permission_denied(client):
    with pytest.raises(idemjob.PermissionDenied) as ei:
        client.claim("w")                       # the client capability may not claim
    assert ei.value.sqlstate == "42501" and ei.value.http_status() == 403


def test_query_canceled_is_unavailable_and_not_resent(client, admin):
    job = client.submit(uniq("o"), uniq("k"), uniq("t"))
    out = {}

    def wait():
        t0 = time.monotonic()
        try:
            client.await_job(job.job_id, 20)
        except idemjob.IdemjobError as e:
            out["e"], out["t"] = e, time.monotonic() - t0

    th = threading.Thread(target=wait)
    th.start()
    pid = eventually(lambda: admin.one("SELECT pid FROM pg_stat_activity WHERE usename = 'ij_cl_client'"
                                       " AND state = 'active' AND query LIKE '%idemjob.await_job%'"), timeout=5)
    admin.one("SELECT pg_cancel_backend(%s)", pid)
    th.join(10)
    e = out["e"]
    assert type(e) is idemjob.Unavailable and e.sqlstate == "57014" and e.http_status() == 503
    assert out["t"] < 10
