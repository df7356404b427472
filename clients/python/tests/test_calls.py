"""The calls and their types: double submit, bigint and jsonb numbers exact,
timestamps to the microsecond, intervals, uuids, the views, the pool."""
import datetime as dt
import uuid

import psycopg
import pytest

import idemjob
from conftest import DSN, VIA, dsn_as, uniq

UTC = dt.timezone.utc


def test_double_submit_same_job(client, admin):
    owner, key, it = uniq("o"), uniq("k"), uniq("t")
    a = client.submit(owner, key, it, {"amount": 42})
    b = client.submit(owner, key, it, {"amount": 42})
    assert a.created and not b.created and a.job_id == b.job_id
    assert (a.state, a.version, a.result) == ("pending", 0, None)
    assert isinstance(a.job_id, uuid.UUID) and type(a.version) is int
    assert admin.one("SELECT count(*) FROM idemjob.jobs WHERE owner_id = %s", owner) == 1
    # scheduling arguments are not part of the request: a replay with other ones is the same job
    c = client.submit(owner, key, it, {"amount": 42}, priority=5, max_attempts=2)
    assert c.job_id == a.job_id and client.job(a.job_id).priority == 0


def test_defaults_are_not_sent(client, admin):
    # params omitted: the SQL default '{}'; provider omitted: idemjob.default_provider
    s = client.submit(uniq("o"), uniq("k"), uniq("t"))
    j = client.job(s.job_id)
    assert j.params == {} and j.provider == "default" and j.max_attempts is None and j.priority == 0
    assert not j.final and j.job_id == j.id


BIG = {"int64_max": 2**63 - 1, "int64_min": -(2**63), "past_int64": 2**64 + 1, "huge": -(2**70) - 3,
       "past_double": 2**53 + 1, "nested": [9007199254740993, {"x": [18446744073709551617]}],
       "float": 0.1, "small": 1.5e-7, "text": "x\u00e9\u4e2d"}


def test_bigint_and_jsonb_numbers_exact(client, wclient, intent):
    it = intent("t")
    s = client.submit(uniq("o"), uniq("k"), it, BIG)
    j = client.job(s.job_id)
    assert j.params == BIG
    assert type(j.params["past_double"]) is int and j.params["past_double"] == 9007199254740993
    assert type(j.version) is int and type(j.attempt_count) is int
    (c,) = wclient.claim("w", [it], lease=True)
    assert c.params == BIG and type(c.read_version) is int
    wclient.begin_attempt(c.attempt_id)
    result = {"charge": 2**63 - 1, "ids": [2**53 + 1, 2**53 + 3], "cents": 123456789012345678901234567890}
    r = wclient.complete_attempt(c.attempt_id, result)
    assert r.outcome == "won" and type(r.job_version) is int
    assert client.job(s.job_id).result == result
    # the same result again, exactly: the first answer (the server compares its hash)
    assert wclient.complete_attempt(c.attempt_id, dict(result)) == r
    with pytest.raises(idemjob.IdempotencyConflict):
        wclient.complete_attempt(c.attempt_id, dict(result, charge=2**63 - 2))


def test_decimal_and_json_scalars(client, wclient, intent):
    it = intent("t")
    s = client.submit(uniq("o"), uniq("k"), it, [1, "two", None, True])
    assert client.job(s.job_id).params == [1, "two", None, True]
    a = wclient.start_attempt(s.job_id, worker="w")
    r = wclient.complete_attempt(a.id, None)          # JSON null
    assert r.outcome == "won" and client.job(s.job_id).result is None


def test_timestamps_microseconds(client, wclient, intent):
    it = intent("t")
    run_at = dt.datetime(2031, 2, 3, 4, 5, 6, 789012, tzinfo=UTC)
    s = client.submit(uniq("o"), uniq("k"), it, run_at=run_at)
    j = client.job(s.job_id)
    assert j.run_at == run_at and j.run_at.microsecond == 789012 and j.run_at.utcoffset() is not None
    # another zone, the same instant
    ist = dt.timezone(dt.timedelta(hours=5, minutes=30))
    run_at2 = dt.datetime(2031, 2, 3, 9, 35, 6, 1, tzinfo=ist)
    s2 = client.submit(uniq("o"), uniq("k"), it, run_at=run_at2)
    assert client.job(s2.job_id).run_at == run_at2
    assert client.job(s2.job_id).run_at.astimezone(UTC) == dt.datetime(2031, 2, 3, 4, 5, 6, 1, tzinfo=UTC)
    # not due: claim passes it over
    assert wclient.claim("w", [it], max_jobs=10) == []
    # the deadline of an attempt, to the microsecond, as the server set it
    s3 = client.submit(uniq("o"), uniq("k"), it, run_at=dt.datetime(2000, 1, 1, tzinfo=UTC))
    a = wclient.start_attempt(s3.job_id, timeout=dt.timedelta(seconds=10, microseconds=123457), worker="w")
    assert a.deadline - a.started_at == dt.timedelta(seconds=10, microseconds=123457)


def test_intervals(client, wclient, intent):
    it = intent("t")
    s = client.submit(uniq("o"), uniq("k"), it)
    a = wclient.start_attempt(s.job_id, timeout=dt.timedelta(milliseconds=1500), worker="w")
    assert a.deadline - a.started_at == dt.timedelta(milliseconds=1500)
    for extend, want in [(2.5, dt.timedelta(seconds=2.5)), (7, dt.timedelta(seconds=7)),
                         ("3 minutes", dt.timedelta(minutes=3)), (dt.timedelta(hours=1), dt.timedelta(hours=1))]:
        hb = wclient.heartbeat(a.id, extend)
        now = dt.datetime.now(UTC)      # the server's clock is this host's
        assert abs((hb.deadline - now) - want) < dt.timedelta(seconds=1)
    with pytest.raises(idemjob.InvalidArgument):
        wclient.heartbeat(a.id, -1)
    with pytest.raises(TypeError):
        wclient.heartbeat(a.id, True)


def test_uuid_as_text_or_uuid(client):
    s = client.submit(uniq("o"), uniq("k"), uniq("t"))
    assert client.job(str(s.job_id)) == client.job(s.job_id)
    assert client.job(str(s.job_id).upper()).id == s.job_id


def test_views_typed(client, wclient, operator, intent):
    it = intent("t")
    s = client.submit(uniq("o"), uniq("k"), it)
    client.submit(uniq("o"), uniq("k"), it, run_at=dt.datetime(2099, 1, 1, tzinfo=UTC))
    q = [r for r in operator.queue_stats() if r.intent == it]
    assert len(q) == 1 and (q[0].due, q[0].scheduled, q[0].running, q[0].in_doubt) == (1, 1, 0, 0)
    assert isinstance(q[0].oldest_due_age, dt.timedelta)
    a = wclient.start_attempt(s.job_id, provider=None, timeout=30, worker="w")
    wclient.mark_unknown(a.id)
    (d,) = [r for r in operator.in_doubt() if r.intent == it]
    assert isinstance(d, idemjob.InDoubtRow)
    assert (d.attempt_id, d.job_id, d.state, d.worker, d.provider) == (a.id, s.job_id, "unknown", "w", "default")
    assert isinstance(d.age, dt.timedelta) and d.in_doubt_since == d.unknown_at
    (p,) = [r for r in operator.provider_stats() if r.intent == it]
    assert isinstance(p, idemjob.ProviderStats) and p.attempts == 1 and p.in_doubt == 1
    with pytest.raises(idemjob.PermissionDenied):
        client.in_doubt()


def test_connect_options():
    c = idemjob.connect(DSN, min_size=0, max_size=2, retries=0, wait=False, application_name="idemjob-pytest")
    try:
        with c.pool.connection() as conn:
            assert conn.autocommit and conn.prepare_threshold is None
            assert conn.info.parameter_status("application_name") in ("idemjob-pytest", None)
        assert c.retries == 0
    finally:
        c.close()


def test_pooler_safe_many_calls(client, wclient, intent):
    """Many calls of each statement: psycopg would prepare after 5 runs, which
    breaks through pgbouncer in transaction pooling; the client never does."""
    it = intent("t")
    owner = uniq("o")
    ids = [client.submit(owner, f"k{i}", it, {"i": i}).job_id for i in range(60)]
    for _ in range(3):
        for jid in ids:
            assert client.job(jid).intent == it
    claims = wclient.claim("pw", [it], max_jobs=60, lease=True)
    assert len(claims) == 60
    for c in claims:
        wclient.begin_attempt(c.attempt_id)
        assert wclient.complete_attempt(c.attempt_id, {"ok": c.params["i"]}).outcome == "won"
    assert all(client.await_job(j, 0).state == "succeeded" for j in ids)


@pytest.mark.skipif(VIA != "pgbouncer", reason="only meaningful through the pooler")
def test_pooler_really_breaks_prepared_statements():
    """The control: psycopg's default (prepare after 5 runs) fails through this
    pooler once several server connections serve one client."""
    import concurrent.futures as cf
    d = dsn_as("ij_cl_client")
    def sleep(_):
        with psycopg.connect(d, autocommit=True) as c:
            c.execute("SELECT pg_sleep(0.3)")

    with cf.ThreadPoolExecutor(4) as ex:    # four server connections in the pool
        list(ex.map(sleep, range(4)))
    with psycopg.connect(d, autocommit=True) as conn:
        with pytest.raises(psycopg.Error, match="prepared statement"):
            for i in range(40):
                conn.execute("SELECT %s::int", (i,)).fetchone()
