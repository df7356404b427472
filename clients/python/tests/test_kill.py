"""A Worker killed (SIGKILL, its own process) at each point of its loop:
every job ends final with no operator call.  The points, and what ends
what the dead worker left (as docs/operations.md#workers says):

  claiming   waiting in claim(wait)      nothing claimed for it; another worker runs the job
  claimed    after claim, before begin   its lease ends (the sweeper: expire_attempts):
                                         released, never sent; another worker runs it
  begun      after begin, before the     its deadline: unknown; the intent's
             provider                    fence_unknown_after (the sweeper) gives it up,
                                         the job goes on to the certified fallback
  handler    during the provider call    restarted under its name: abandon_attempts at
  answered   after the answer, before    start gives it up, the job goes on to the
             complete_attempt            fallback, which the restarted worker runs
  completed  after complete_attempt      already final; the restart finds nothing

The sweeper's part is played by expire_attempts() through the admin DSN (a
no-op where a sweeper runs); the lease is 1 s (conftest.py).
"""
import os
import signal
import subprocess
import sys

import idemjob
from conftest import VIA, dsn_as, eventually, uniq

KILLWORKER = os.path.join(os.path.dirname(__file__), "killworker.py")
POINTS = ["claiming", "claimed", "begun", "handler", "answered", "completed"]
RESTARTED = ["handler", "answered", "completed"]


def provider(job, ctx):
    return {"by": ctx.provider}


def test_worker_killed_at_each_point(client, wclient, sweeper, admin, intent):
    intents = {p: intent(f"kill-{p}", contract={"type": "object", "required": ["by"]},
                         route=["primary", "fallback"], certify=["fallback"], retry_backoff=0,
                         fence_unknown_after=0.5) for p in POINTS}
    names = {p: uniq(f"kw-{p}") for p in POINTS}
    owner = uniq("o")
    # max_attempts 1 for "claimed": a released attempt is not counted against it
    jobs = {p: client.submit(owner, p, intents[p], {"point": p}, provider="primary",
                             max_attempts=1 if p == "claimed" else None).job_id
            for p in POINTS if p != "claiming"}
    procs = {p: subprocess.Popen([sys.executable, KILLWORKER, dsn_as("ij_cl_worker"), names[p], intents[p], p],
                                 stdout=subprocess.PIPE, text=True) for p in POINTS}
    try:
        # killed while it waits in claim; its job arrives after its death
        for line in procs["claiming"].stdout:
            if '"event": "claiming"' in line:
                break
        eventually(lambda: admin.one("SELECT count(*) FROM pg_stat_activity WHERE state = 'active'"
                                     " AND query LIKE '%%idemjob.claim(%%' AND application_name = %s",
                                     names["claiming"]), timeout=5)
        procs["claiming"].send_signal(signal.SIGKILL)
        for p, proc in procs.items():
            assert proc.wait(20) == -signal.SIGKILL, f"{p}: the worker was not killed"
        jobs["claiming"] = client.submit(owner, "claiming", intents["claiming"], {"point": "claiming"},
                                         provider="primary").job_id
        order = [jobs[p] for p in POINTS]
        # the ones restarted under their name; one other worker for the rest
        events = {p: [] for p in RESTARTED}
        workers = [idemjob.Worker(wclient, names[p], {intents[p]: provider}, concurrency=1, wait=0.2,
                                  on_event=lambda n, f, p=p: events[p].append((n, f))).start()
                   for p in RESTARTED]
        workers.append(idemjob.Worker(wclient, uniq("kw-other"),
                                      {intents[p]: provider for p in POINTS if p not in RESTARTED},
                                      concurrency=4, wait=0.2).start())
        try:
            eventually(lambda: all(client.job(j).final for j in order), tick=sweeper.expire_attempts,
                       timeout=20, every=0.2)
        finally:
            for w in workers:
                w.stop(grace=2)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
            proc.stdout.close()

    got = {p: admin.attempts(jobs[p]) for p in POINTS}
    for p in POINTS:
        job = client.job(jobs[p])
        assert job.state == "succeeded", (p, got[p])
        assert admin.one("SELECT count(*) FROM idemjob.attempts WHERE job_id = %s AND state = 'succeeded'",
                         jobs[p]) == 1
    if VIA == "direct":
        assert got["claiming"] == "primary:succeeded"          # nothing claimed for the dead worker
    else:   # a pooler may keep the server connection: at worst a lease, released
        assert got["claiming"] in ("primary:succeeded", "primary:released,primary:succeeded"), got
    assert got["claimed"] == "primary:released,primary:succeeded", got         # never sent
    assert got["begun"] == "primary:cancelled,fallback:succeeded", got
    assert admin.one("SELECT error ->> 'reason' FROM idemjob.attempts WHERE job_id = %s AND attempt_no = 1",
                     jobs["begun"]) == "unknown for longer than its intent's fence_unknown_after"
    for p in ("handler", "answered"):
        assert got[p] == "primary:cancelled,fallback:succeeded", got
        assert admin.one("SELECT error ->> 'reason' FROM idemjob.attempts WHERE job_id = %s AND attempt_no = 1",
                         jobs[p]) == "abandoned by its worker"
        assert [f["count"] for n, f in events[p] if n == "abandoned"][0] == 1
    assert got["completed"] == "primary:succeeded", got
    assert [f["count"] for n, f in events["completed"] if n == "abandoned"][0] == 0
    assert admin.one("SELECT error ->> 'reason' FROM idemjob.attempts WHERE job_id = %s AND attempt_no = 1",
                     jobs["claimed"]) == "not confirmed before its claim lease ended"
