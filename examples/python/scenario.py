"""Runs the example once: the handler and the worker through every case the
README promises, printing one JSON line per check (test/examples/run.sh reads
them and checks the database).  DSNs: IJ_CLIENT_DSN, IJ_WORKER_DSN, IJ_ADMIN_DSN.
Needs the idemjob package (pip install ./clients/python)."""
import concurrent.futures as cf
import json
import os
import threading
import time

import idemjob
from app import connect, handle, make_worker


printing = threading.Lock()


def emit(obj):                       # one JSON line, whole, whichever thread prints
    with printing:
        print(json.dumps(obj, default=str), flush=True)


hung = threading.Event()             # set: the hanging primary answers at last


def primary(params):                 # the fake provider: slow, failing, hanging, or fine
    mode = params.get("mode", "ok")
    if mode == "fail":
        raise idemjob.Failure({"code": "provider_error", "message": "provider said no"})
    if mode == "hang":
        hung.wait(30)
    time.sleep(1.0 if mode == "slow" else 0.05)
    return {"by": "primary", "amount": params.get("amount")}


def fallback(params):
    return {"by": "fallback", "amount": params.get("amount")}


PROVIDERS = {"primary": primary, "fallback": fallback}


class Events(list):
    """A worker's events, (name, fields), for the checks."""

    def __call__(self, name, fields):
        self.append((name, fields))
        if name == "claimed":
            emit({"event": name, "attempt_ids": [c.attempt_id for c in fields["attempts"]]})
        elif name in ("abandoned", "skipped", "unknown", "completed", "failed", "error"):
            emit({"event": name, **{k: v for k, v in fields.items() if k != "error"}})

    def find(self, name, **match):
        return [f for n, f in list(self) if n == name and all(str(f.get(k)) == str(v) for k, v in match.items())]


def until(cond, tick=lambda: None, timeout=15):   # tick() every 0.1 s until cond()
    end = time.monotonic() + timeout
    while not cond() and time.monotonic() < end:
        tick()
        time.sleep(0.1)


def final(job_id):
    until(lambda: handle(client, "GET", "/jobs/" + job_id, owner, wait=0.5)[0] == 200)
    return handle(client, "GET", "/jobs/" + job_id, owner)


client = connect(os.environ["IJ_CLIENT_DSN"])
wclient = connect(os.environ["IJ_WORKER_DSN"], max_size=6)
admin = connect(os.environ["IJ_ADMIN_DSN"], max_size=2)
owner = "shop-1"
charge = {"intent": "ex.charge", "params": {"amount": 42}}

# a previous run of this worker died after sending a job: at start the worker
# gives it up (abandon_attempts), and the server routes the job to the fallback
_, _, body = handle(client, "POST", "/jobs", owner, "crash",
                    {"intent": "ex.charge", "params": {"amount": 4}}, 0)
(crashed,) = wclient.claim("py-worker", lease=True)
wclient.begin_attempt(crashed.attempt_id)            # ... and the process died here
events = Events()
worker = make_worker(wclient, "py-worker", PROVIDERS, on_event=events).start()
until(lambda: events.find("abandoned"))
status, _, done = final(body["job_id"])
emit({"check": "restart", "abandoned": events.find("abandoned")[0]["count"], "job_id": body["job_id"],
      "status": status, "state": done["state"], "result": done["result"]})

# double click: two concurrent POSTs with one key (two connections of the pool)
with cf.ThreadPoolExecutor(2) as pool:
    answers = list(pool.map(lambda _: handle(client, "POST", "/jobs", owner, "dbl", charge, 0.2), range(2)))
emit({"check": "double_click", "statuses": [a[0] for a in answers],
      "job_ids": [a[2]["job_id"] for a in answers]})
status, _, body = final(answers[0][2]["job_id"])
emit({"check": "double_click_done", "status": status, **body})

# the same key with another request: 409, the job id from the error fields
status, headers, body = handle(client, "POST", "/jobs", owner, "dbl",
                               {"intent": "ex.charge", "params": {"amount": 43}})
emit({"check": "key_reuse", "status": status, "body": body})

status, headers, body = handle(client, "GET", "/jobs/not-a-uuid", owner)
emit({"check": "bad_uuid", "status": status, "body": body})

# slow provider: heartbeats keep the attempt alive
_, _, body = handle(client, "POST", "/jobs", owner, "slow",
                    {"intent": "ex.charge", "params": {"amount": 1, "mode": "slow"}}, 0)
final(body["job_id"])
emit({"check": "slow", "job_id": body["job_id"]})

# failing provider: fail_attempt; the next claim returns the job on the fallback
_, _, body = handle(client, "POST", "/jobs", owner, "fail",
                    {"intent": "ex.charge", "params": {"amount": 2, "mode": "fail"}}, 0)
status, _, done = final(body["job_id"])
emit({"check": "failover", "job_id": body["job_id"], "status": status, "state": done["state"],
      "result": done["result"]})

# the primary hangs: mark_unknown; another worker's start meanwhile is IJ002
# (409 + Retry-After); after fence_unknown_after the server fences the doubt
# and the next claim returns the job on the fallback, which wins; the
# primary's late answer is still reported, and is lost
_, _, body = handle(client, "POST", "/jobs", owner, "hang",
                    {"intent": "ex.charge", "params": {"amount": 3, "mode": "hang"}}, 0)
late_job = body["job_id"]
until(lambda: events.find("begun", job_id=late_job))
try:
    wclient.start_attempt(late_job, timeout=1, worker="py-other")
    refused = (201, {}, {})
except idemjob.IdemjobError as e:
    refused = e.to_http()
emit({"check": "in_doubt", "status": refused[0], "headers": refused[1], "body": refused[2],
      "job_id": late_job})
# the sweeper's tick, which needs the operator capability (the worker role
# lacks it), so the admin connection calls it; a no-op where a sweeper runs
until(lambda: events.find("completed", job_id=late_job, late=False), tick=admin.expire_attempts)
hung.set()
until(lambda: events.find("completed", job_id=late_job, late=True))
late = (events.find("completed", job_id=late_job, late=True) or [{}])[0]
emit({"check": "late", "job_id": late_job, "attempt_id": late.get("attempt_id"),
      "outcome": late.get("outcome")})
status, _, body = handle(client, "GET", "/jobs/" + late_job, owner)
emit({"check": "late_job", "status": status, **body})
worker.stop()

# a batch: 20 jobs due before the worker starts, claimed in one call (up to
# its free slots), each begun right before its provider call, run side by side
batch_ids = [handle(client, "POST", "/jobs", owner, "batch-%d" % i,
                    {"intent": "ex.charge", "params": {"amount": 100 + i}}, 0)[2]["job_id"]
             for i in range(20)]
events = Events()
worker = make_worker(wclient, "py-worker", PROVIDERS, concurrency=100, on_event=events).start()
for j in batch_ids:
    final(j)
worker.stop()
outcomes = {str(f["job_id"]): f["outcome"] for f in events.find("completed")}
emit({"check": "batch", "claimed": len(events.find("claimed")[0]["attempts"]), "job_ids": batch_ids,
      "outcomes": [outcomes.get(j) for j in batch_ids]})

# a batch in which one job is cancelled before its begin (IJ003: skipped, never
# sent) and one attempt is failed by an operator before its report (IJ005)
batch2 = [handle(client, "POST", "/jobs", owner, "batch2-%d" % i,
                 {"intent": "ex.charge", "params": {"amount": 200 + i}}, 0)[2]["job_id"] for i in range(5)]
meanwhile = []


def meddle(name, fields):
    if name == "claimed" and not meanwhile:
        first, second = fields["attempts"][:2]
        meanwhile.extend([str(first.attempt_id), str(second.attempt_id)])
        admin.cancel_job(first.job_id, "changed my mind")
    if name == "answered" and meanwhile and str(fields["attempt_id"]) == meanwhile[1]:
        admin.fail_attempt(fields["attempt_id"], {"code": "operator"}, retryable=False)
    events(name, fields)


events = Events()
worker = make_worker(wclient, "py-worker", PROVIDERS, concurrency=100, on_event=meddle).start()
for j in batch2:
    final(j)
until(lambda: len(events.find("completed")) + len(events.find("error")) >= 4)
claimed = events.find("claimed")[0]["attempts"]
answers = {str(f["attempt_id"]): f["outcome"] for f in events.find("completed")}
answers.update({str(f["attempt_id"]): f["sqlstate"] for f in events.find("error", call="complete_attempt")})
sent = [str(c.attempt_id) for c in claimed if events.find("begun", attempt_id=c.attempt_id)]
emit({"check": "batch_fallback", "claimed": len(claimed), "sent": len(sent), "meanwhile": meanwhile,
      "outcomes": [answers.get(a) for a in sent]})
worker.stop()
for c in (client, wclient, admin):
    c.close()
