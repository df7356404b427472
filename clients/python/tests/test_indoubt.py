"""The in-doubt rule: a lost answer on every resend-safe call (the call
committed, the client sends it again, the same answer, nothing doubled);
the others raise ConnectionLost; a real lost connection is resent."""
import datetime as dt
import threading
import time

import pytest

import idemjob
from conftest import CLAIM_LEASE, eventually, uniq


def lost(client, call, fn):
    """fn() with the answer of its first execution of `call` lost."""
    client._lose_next_response(call)
    r = fn()
    assert client._lose.get(call) == 0, f"{call}: the loss was not injected"
    return r


def test_resend_safe_table():
    safe = {c for c in idemjob.CALLS if idemjob.resend_safe(c)}
    assert idemjob.CALLS - safe == {"claim", "start_attempt", "purge", "purge_race_log"}
    assert idemjob.resend_safe("claim", lease=True)
    assert idemjob.resend_safe("start_attempt", {"worker": "w"})
    assert not idemjob.resend_safe("claim", lease=False)
    with pytest.raises(ValueError):
        idemjob.resend_safe("no_such_call")


def test_lost_answers_jobs(client, admin):
    owner, key, it = uniq("o"), uniq("k"), uniq("t")
    s = lost(client, "submit", lambda: client.submit(owner, key, it, {"n": 1}))
    assert s.created is False          # the resend found the job the lost call created
    assert admin.one("SELECT count(*) FROM idemjob.jobs WHERE owner_id = %s", owner) == 1
    assert admin.one("SELECT id FROM idemjob.jobs WHERE owner_id = %s", owner) == s.job_id
    j = lost(client, "job", lambda: client.job(s.job_id))
    assert j == client.job(s.job_id)
    j = lost(client, "await_job", lambda: client.await_job(s.job_id, 0))
    assert j.id == s.job_id and j.state == "pending"
    c = lost(client, "cancel_job", lambda: client.cancel_job(s.job_id, "changed my mind"))
    assert c.state == "cancelled" and c.version == 1      # once: version + 1, not + 2
    assert client.cancel_job(s.job_id, "again") == c


def test_lost_answers_attempts(client, wclient, operator, admin, intent):
    it = intent("t", contract={"type": "object"}, retry_backoff=0)
    owner = uniq("o")
    # start_attempt with a worker: the same attempt back
    j = client.submit(owner, uniq("k"), it)
    a = lost(wclient, "start_attempt", lambda: wclient.start_attempt(j.job_id, timeout=30, worker="w"))
    assert admin.one("SELECT count(*) FROM idemjob.attempts WHERE job_id = %s", j.job_id) == 1
    assert a.attempt_no == 1 and a.state == "started"
    hb = lost(wclient, "heartbeat", lambda: wclient.heartbeat(a.id, 60))
    assert hb.id == a.id and hb.state == "started"
    # complete_attempt: the first answer again, the job won once
    r = lost(wclient, "complete_attempt", lambda: wclient.complete_attempt(a.id, {"v": 1}))
    assert r.outcome == "won" and r.job_version == 1 and r.winner_attempt_id == a.id
    assert wclient.complete_attempt(a.id, {"v": 1}) == r
    assert client.job(j.job_id).version == 1
    assert admin.one("SELECT count(*) FROM idemjob.race_log WHERE job_id = %s", j.job_id) == 0

    # fail_attempt: failed once, the job retried once
    j = client.submit(owner, uniq("k"), it)
    a = wclient.start_attempt(j.job_id, worker="w")
    f = lost(wclient, "fail_attempt", lambda: wclient.fail_attempt(a.id, {"code": "declined"}))
    assert f.state == "failed" and f.error == {"code": "declined"}
    jj = client.job(j.job_id)
    assert (jj.state, jj.attempt_count, jj.version) == ("pending", 1, 0)

    # mark_unknown, then cancel_attempt (operator)
    a = wclient.start_attempt(j.job_id, worker="w")
    u = lost(wclient, "mark_unknown", lambda: wclient.mark_unknown(a.id, "timeout"))
    assert u.state == "unknown" and client.job(j.job_id).state == "in_doubt"
    x = lost(operator, "cancel_attempt", lambda: operator.cancel_attempt(a.id, "resolved", fence=True))
    assert x.state == "cancelled"
    jj = client.job(j.job_id)
    assert jj.version == 1 and jj.attempt_count == 2   # fenced once

    # claim with a lease: the lost answer's attempt is never confirmed and is
    # released (lease); the resend finds nothing; the job comes back
    it = intent("t")
    j = client.submit(owner, uniq("k"), it)
    got = lost(wclient, "claim", lambda: wclient.claim("lw", [it], max_jobs=5, lease=True))
    assert got == []
    lost_att = admin.one("SELECT id FROM idemjob.attempts WHERE job_id = %s", j.job_id)
    # begin_attempt: the same row
    j2 = client.submit(owner, uniq("k"), it)
    time.sleep(float(CLAIM_LEASE.rstrip("s")) + 0.1)
    operator.expire_attempts()
    assert admin.one("SELECT state::text FROM idemjob.attempts WHERE id = %s", lost_att) == "released"
    claims = eventually(lambda: wclient.claim("lw", [it], max_jobs=5, lease=True), timeout=5)
    assert {c.job_id for c in claims} == {j.job_id, j2.job_id}
    for c in claims:
        b = lost(wclient, "begin_attempt", lambda: wclient.begin_attempt(c.attempt_id))
        assert b.state == "started" and b.lease_until is None
        wclient.complete_attempt(c.attempt_id, {})
    assert client.job(j.job_id).state == "succeeded"
    assert admin.attempts(j.job_id).split(",")[0].endswith(":released")


def test_lost_answers_workers_admin_views(client, wclient, operator, admin_client, admin, intent):
    it = intent("t")
    owner = uniq("o")
    j = client.submit(owner, uniq("k"), it)
    a = wclient.start_attempt(j.job_id, timeout=60, worker="gone-w")
    n = lost(wclient, "abandon_attempts", lambda: wclient.abandon_attempts("gone-w"))
    assert n == 0   # the lost call gave it up; the resend finds nothing more
    assert admin.one("SELECT state::text FROM idemjob.attempts WHERE id = %s", a.id) == "cancelled"
    assert client.job(j.job_id).attempt_count == 1

    a = wclient.start_attempt(j.job_id, timeout=dt.timedelta(milliseconds=1), worker="w")
    time.sleep(0.05)
    n = lost(operator, "expire_attempts", lambda: operator.expire_attempts())
    assert admin.one("SELECT state::text FROM idemjob.attempts WHERE id = %s", a.id) == "unknown"
    assert admin.one("SELECT error ->> 'reason' FROM idemjob.attempts WHERE id = %s", a.id) == "deadline"

    it2 = uniq("t")
    v = lost(admin_client, "define_contract", lambda: admin_client.define_contract(it2, {"type": "object"}))
    assert v == 1 and admin_client.define_contract(it2, {"type": "object"}) == 1
    c = lost(admin_client, "certify_provider", lambda: admin_client.certify_provider(it2, "px", {"run": 1}))
    assert c == admin_client.certify_provider(it2, "px", {"run": 1})
    r = lost(admin_client, "revoke_provider", lambda: admin_client.revoke_provider(it2, "px", "flaky"))
    assert r.revoked_at is not None and r == admin_client.revoke_provider(it2, "px", "flaky")
    p = lost(admin_client, "set_retry_policy",
             lambda: admin_client.set_retry_policy(it2, 3, 0, dt.timedelta(minutes=1), 2))
    assert p == admin_client.set_retry_policy(it2, 3, 0, dt.timedelta(minutes=1), 2)
    assert p.fence_unknown_after == dt.timedelta(seconds=2) and p.retry_backoff == dt.timedelta(0)
    rt = lost(admin_client, "set_route", lambda: admin_client.set_route(it2, ["a", "b"]))
    assert rt == admin_client.set_route(it2, ["a", "b"]) and rt.providers == ["a", "b"]

    for view in ("in_doubt", "queue_stats", "provider_stats"):
        rows = lost(operator, view, getattr(operator, view))
        assert isinstance(rows, list)
    assert any(r.attempt_id == a.id for r in operator.in_doubt())


def test_not_resend_safe_raise_connection_lost(client, wclient, operator, admin, intent):
    it = intent("t")
    j = client.submit(uniq("o"), uniq("k"), it)
    with pytest.raises(idemjob.ConnectionLost):
        lost(wclient, "start_attempt", lambda: wclient.start_attempt(j.job_id))    # no worker
    assert admin.one("SELECT count(*) FROM idemjob.attempts WHERE job_id = %s", j.job_id) == 1   # committed
    for call, fn in [("purge", lambda: operator.purge(dt.timedelta(days=3650))),
                     ("purge_race_log", lambda: operator.purge_race_log(dt.timedelta(days=3650)))]:
        with pytest.raises(idemjob.ConnectionLost) as ei:
            lost(operator, call, fn)
        assert ei.value.http_status() == 503
    it2 = intent("t")
    client.submit(uniq("o"), uniq("k"), it2)
    with pytest.raises(idemjob.ConnectionLost):
        lost(wclient, "claim", lambda: wclient.claim("nl", [it2]))                  # no lease


def test_real_connection_loss_is_resent(client, admin):
    """The server ends the session while await_job waits (57P01, or the
    pooler's lost server connection): the client sends it again and answers."""
    j = client.submit(uniq("o"), uniq("k"), uniq("t"))
    out = {}

    def wait():
        t0 = time.monotonic()
        out["job"], out["t"] = client.await_job(j.job_id, 1.5), time.monotonic() - t0

    th = threading.Thread(target=wait)
    th.start()
    pid = eventually(lambda: admin.one("SELECT pid FROM pg_stat_activity WHERE usename = 'ij_cl_client'"
                                       " AND state = 'active' AND wait_event_type = 'Extension'"
                                       " AND query LIKE '%idemjob.await_job%'"), timeout=5)
    assert admin.one("SELECT pg_terminate_backend(%s)", pid)
    th.join(15)
    assert out["job"].id == j.job_id and out["job"].state == "pending"
    assert out["t"] >= 1.5     # the resent call waited its own timeout
