"""The Worker runtime end to end: several intents, concurrency, batches,
results, failures, exceptions, rejections, heartbeats, the deadline race
(mark_unknown, then the late answer reported and lost), failover by route
to the certified fallback, skipped attempts, and stop()."""
import threading
import time

import pytest

import idemjob
from conftest import eventually, uniq

SUM = {"type": "object", "required": ["sum"]}
BY = {"type": "object", "required": ["by"]}


def recorder():
    events = []
    lock = threading.Lock()

    def on_event(name, fields):
        with lock:
            events.append((name, fields))
    return events, on_event


def test_worker_end_to_end(client, wclient, admin, intent):
    add, fail, boom, rej = (intent("add", contract=SUM), intent("fail"), intent("boom", retry_backoff=0),
                            intent("rej", contract=SUM))
    owner = uniq("o")
    adds = [client.submit(owner, f"a{i}", add, {"a": i, "b": 10 * i}).job_id for i in range(24)]
    fails = [client.submit(owner, f"f{i}", fail).job_id for i in range(2)]
    booms = [client.submit(owner, f"b{i}", boom, max_attempts=2).job_id for i in range(2)]
    rejected = client.submit(owner, "r", rej, max_attempts=1).job_id
    everything = adds + fails + booms + [rejected]
    lock = threading.Lock()
    now = {"running": 0, "peak": 0}

    def on_add(job, ctx):
        assert isinstance(job, idemjob.Claim) and isinstance(ctx, idemjob.Context)
        assert ctx.job_id == job.job_id and ctx.provider == job.provider == "default" and ctx.remaining() > 0
        with lock:
            now["running"] += 1
            now["peak"] = max(now["peak"], now["running"])
        try:
            time.sleep(0.05)
            return {"sum": job.params["a"] + job.params["b"]}
        finally:
            with lock:
                now["running"] -= 1

    def on_fail(job, ctx):
        raise idemjob.Failure({"code": "declined", "reason": "card"}, retryable=False)

    def on_boom(job, ctx):
        raise RuntimeError("provider exploded")

    events, on_event = recorder()
    w = idemjob.Worker(wclient, uniq("w"), {add: on_add, fail: on_fail, boom: on_boom, rej: lambda j, c: {}},
                       concurrency=8, timeout=10, wait=0.2, on_event=on_event)
    with w:
        eventually(lambda: all(client.job(j).final for j in everything), timeout=20)
    c = w.counters
    assert c == {"claimed": 31, "skipped": 0, "won": 24, "lost": 0, "rejected": 1, "failed": 6,
                 "in_doubt": 0, "late": 0, "errors": 0}, c
    rounds = [len(f["attempts"]) for n, f in events if n == "claimed"]
    assert rounds[0] == 8                      # a batch: max_jobs = the free slots
    assert 2 <= now["peak"] <= 8               # side by side, never more than concurrency
    assert [n for n, _ in events][:2] == ["abandoned", "claiming"] and events[-1][0] == "stopped"
    for i, j in enumerate(adds):
        job = client.job(j)
        assert (job.state, job.result, job.attempt_count) == ("succeeded", {"sum": 11 * i}, 1)
    for j in fails:
        assert client.job(j).state == "failed"
        assert admin.one("SELECT error FROM idemjob.attempts WHERE job_id = %s", j) == \
            {"code": "declined", "reason": "card"}
    for j in booms:
        job = client.job(j)
        assert job.state == "failed" and job.attempt_count == 2 and job.error["code"] == "max_attempts"
        errs = [r[0] for r in admin.rows("SELECT error FROM idemjob.attempts WHERE job_id = %s", j)]
        assert all(e["code"] == "exception" and e["type"] == "RuntimeError" for e in errs)
    assert client.job(rejected).state == "failed"


def test_worker_heartbeats_keep_a_slow_handler_alive(client, wclient, sweeper, admin, intent):
    it = intent("slow")
    s = client.submit(uniq("o"), uniq("k"), it)
    events, on_event = recorder()

    def slow(job, ctx):
        end = time.monotonic() + 1.5
        while time.monotonic() < end:          # the sweeper runs meanwhile
            sweeper.expire_attempts()
            time.sleep(0.1)
        return {"slow": True}

    with idemjob.Worker(wclient, uniq("w"), {it: slow}, concurrency=1, timeout=5, heartbeat=0.3,
                        wait=0.2, on_event=on_event) as w:
        eventually(lambda: client.job(s.job_id).final, timeout=10)
    assert client.job(s.job_id).state == "succeeded" and w.counters["won"] == 1
    assert sum(1 for n, _ in events if n == "heartbeat") >= 3
    # the window is 3 heartbeats (0.9 s): without them the deadline would have passed
    assert admin.one("SELECT deadline > started_at + interval '1.5 s' FROM idemjob.attempts WHERE job_id = %s",
                     s.job_id)


def test_worker_timeout_failover_and_late_answer(client, wclient, sweeper, admin, intent):
    """The provider of the job hangs: the deadline passes, mark_unknown; the
    intent's fence_unknown_after gives the doubt up (the sweeper), and the
    job goes to the next certified provider of its route (b is not
    certified: c), where it wins; the hung provider answers late: reported,
    lost, one race_log row."""
    it = intent("fo", contract=BY, route=["a", "b", "c"], certify=["c"], retry_backoff=0,
                fence_unknown_after=0.3)
    release = threading.Event()

    def handler(job, ctx):
        if ctx.provider == "a":
            assert ctx.cancelled.wait(10)      # the deadline passed
            release.wait(10)
            return {"by": "a"}
        return {"by": ctx.provider}

    events, on_event = recorder()
    s = client.submit(uniq("o"), uniq("k"), it, provider="a")
    with idemjob.Worker(wclient, uniq("w"), {it: handler}, concurrency=2, timeout=0.5, heartbeat=0.15,
                        wait=0.2, on_event=on_event) as w:
        eventually(lambda: any(n == "unknown" for n, _ in events), timeout=5)
        with pytest.raises(idemjob.AttemptInDoubt) as ei:      # another worker meanwhile
            wclient.start_attempt(s.job_id, worker="other")
        assert ei.value.http_status() == 409 and ei.value.headers()["Retry-After"].isdigit()
        eventually(lambda: client.job(s.job_id).final, tick=sweeper.expire_attempts, timeout=10)
        job = client.job(s.job_id)
        assert (job.state, job.result, job.next_provider) == ("succeeded", {"by": "c"}, "c")
        release.set()
        eventually(lambda: w.counters["late"] == 1, timeout=5)
    c = w.counters
    assert (c["won"], c["lost"], c["in_doubt"], c["late"], c["errors"]) == (1, 1, 1, 1, 0), c
    assert admin.attempts(s.job_id) == "a:superseded,c:succeeded"
    assert admin.rows("SELECT a.error ->> 'reason', r.reason, r.winner_attempt_id FROM idemjob.race_log r"
                      " JOIN idemjob.attempts a ON a.id = r.attempt_id WHERE r.job_id = %s", s.job_id) == \
        [("unknown for longer than its intent's fence_unknown_after", "slot_taken", job.completed_by)]
    late = [f for n, f in events if n == "completed" and f["late"]]
    assert len(late) == 1 and late[0]["outcome"] == "lost" and late[0]["provider"] == "a"


def test_worker_skips_what_must_not_be_sent(client, wclient, intent):
    it = intent("skip")
    s = client.submit(uniq("o"), uniq("k"), it)
    called = []
    events, record = recorder()

    def on_event(name, fields):
        record(name, fields)
        if name == "claimed":          # cancelled between the claim and the begin: IJ003
            for c in fields["attempts"]:
                client.cancel_job(c.job_id, "changed my mind")

    with idemjob.Worker(wclient, uniq("w"), {it: lambda j, c: called.append(j)}, wait=0.2,
                        on_event=on_event) as w:
        eventually(lambda: w.counters["skipped"] == 1, timeout=5)
    assert called == [] and client.job(s.job_id).state == "cancelled"
    assert [f["sqlstate"] for n, f in events if n == "skipped"] == ["IJ003"]


def test_worker_stop_gives_up_what_it_holds(client, wclient, admin, intent):
    it = intent("stop", retry_backoff=0)
    s = client.submit(uniq("o"), uniq("k"), it)
    started, release = threading.Event(), threading.Event()

    def hang(job, ctx):
        started.set()
        ctx.cancelled.wait(10)
        release.wait(10)
        return {"late": True}

    w = idemjob.Worker(wclient, uniq("w"), {it: hang}, concurrency=2, timeout=30, wait=0.2).start()
    assert started.wait(5)
    t0 = time.monotonic()
    w.stop(grace=0.3)
    assert time.monotonic() - t0 < 3
    # marked unknown, then given up: cancelled and fenced, the job retried
    assert admin.one("SELECT state || ':' || (error ->> 'reason') FROM idemjob.attempts WHERE job_id = %s",
                     s.job_id) == "cancelled:abandoned by its worker"
    job = client.job(s.job_id)
    assert (job.state, job.version) == ("pending", 1)
    assert w.counters["in_doubt"] == 1
    release.set()               # the handler answers after the stop: reported, lost
    eventually(lambda: w.counters["lost"] == 1, timeout=5)
    assert admin.one("SELECT reason FROM idemjob.race_log WHERE job_id = %s", s.job_id) == "version_moved"


def test_worker_stop_releases_what_it_did_not_begin(client, wclient, admin, intent):
    it = intent("rel")
    ids = [client.submit(uniq("o"), uniq("k"), it).job_id for _ in range(3)]
    called = []

    def on_event(name, fields):
        if name == "claimed":          # stop between the claim and the begins
            threading.Thread(target=w.stop, args=(1.0,)).start()
            time.sleep(0.3)

    w = idemjob.Worker(wclient, uniq("w"), {it: lambda j, c: called.append(j)}, concurrency=4, wait=0.2,
                       on_event=on_event)
    runner = threading.Thread(target=w.run)
    runner.start()
    runner.join(10)
    assert not runner.is_alive() and called == []
    assert w.counters["claimed"] == 3
    for j in ids:   # never sent: released, the job due again, no retry counted
        assert admin.attempts(j) == "default:released"
        assert client.job(j).state == "pending"


def test_worker_unreportable_answer_is_in_doubt(client, wclient, admin, intent):
    """An answer that is not JSON cannot be recorded, but the provider acted:
    the attempt is marked unknown at once (never failed)."""
    it = intent("nojson")
    s = client.submit(uniq("o"), uniq("k"), it)
    with idemjob.Worker(wclient, uniq("w"), {it: lambda j, c: {"when": object()}}, wait=0.2) as w:
        eventually(lambda: client.job(s.job_id).state == "in_doubt", timeout=5)
    assert (w.counters["errors"], w.counters["in_doubt"], w.counters["failed"]) == (1, 1, 0)
    assert admin.one("SELECT error ->> 'reason' FROM idemjob.attempts WHERE job_id = %s", s.job_id) == \
        "unreportable answer"
