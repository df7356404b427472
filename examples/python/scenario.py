"""Runs the example once: the handler and the worker through every case the
README promises, printing one JSON line per check (test/examples/run.sh reads
them and checks the database).  DSNs: IJ_CLIENT_DSN, IJ_WORKER_DSN, IJ_ADMIN_DSN."""
import concurrent.futures as cf
import json
import os
import threading
import time

import psycopg

from app import Worker, connect, handle, http_error


def emit(obj):
    print(json.dumps(obj, default=str), flush=True)


hung = threading.Event()             # set: the hanging primary answers at last


def primary(params):                 # the fake provider: slow, failing, hanging, or fine
    mode = params.get("mode", "ok")
    if mode == "fail":
        raise RuntimeError("provider said no")
    if mode == "hang":
        hung.wait(30)
    time.sleep(1.0 if mode == "slow" else 0.05)
    return {"by": "primary", "amount": params.get("amount")}


def fallback(params):
    return {"by": "fallback", "amount": params.get("amount")}


def until(cond, tick):               # tick() every 0.1 s until cond(), at most 5 s
    for _ in range(50):
        tick()
        if cond():
            return
        time.sleep(0.1)


client, admin = (connect(os.environ[v]) for v in ("IJ_CLIENT_DSN", "IJ_ADMIN_DSN"))
events = []
owner = "shop-1"
charge = {"intent": "ex.charge", "params": {"amount": 42}}

# a previous run of this worker died after sending a job: at start the worker
# gives it up (abandon_attempts), and the server routes the job to the fallback
_, _, body = handle(client, "POST", "/jobs", owner, "crash",
                    {"intent": "ex.charge", "params": {"amount": 4}}, "0s")
with connect(os.environ["IJ_WORKER_DSN"]) as crashed:
    crashed.execute("SELECT idemjob.begin_attempt(attempt_id)"
                    " FROM idemjob.claim('py-worker', lease => true)")
worker = Worker(connect(os.environ["IJ_WORKER_DSN"]), "py-worker",
                {"primary": primary, "fallback": fallback},
                emit=lambda e: (events.append(e), emit(e)))
abandoned = worker.start()
worker.step()
status, _, done = handle(client, "GET", "/jobs/" + body["job_id"], owner)
emit({"check": "restart", "abandoned": abandoned, "job_id": body["job_id"], "status": status,
      "state": done["state"], "result": done["result"]})

# double click: two concurrent POSTs with one key, each on its own connection
with cf.ThreadPoolExecutor(2) as pool:
    conns = [connect(os.environ["IJ_CLIENT_DSN"]) for _ in range(2)]
    answers = list(pool.map(lambda c: handle(c, "POST", "/jobs", owner, "dbl", charge, "0.2s"), conns))
emit({"check": "double_click", "statuses": [a[0] for a in answers],
      "job_ids": [a[2]["job_id"] for a in answers]})
worker.step()
status, _, body = handle(client, "GET", "/jobs/" + answers[0][2]["job_id"], owner)
emit({"check": "double_click_done", "status": status, **body})

# the same key with another request: 409, the job id from the error fields
status, headers, body = handle(client, "POST", "/jobs", owner, "dbl",
                               {"intent": "ex.charge", "params": {"amount": 43}})
emit({"check": "key_reuse", "status": status, "body": body})

status, headers, body = handle(client, "GET", "/jobs/not-a-uuid", owner)
emit({"check": "bad_uuid", "status": status, "body": body})

# slow provider: heartbeats keep the attempt alive
_, _, body = handle(client, "POST", "/jobs", owner, "slow",
                    {"intent": "ex.charge", "params": {"amount": 1, "mode": "slow"}}, "0s")
worker.step()
emit({"check": "slow", "job_id": body["job_id"]})

# failing provider: fail_attempt; the next claim returns the job on the fallback
_, _, body = handle(client, "POST", "/jobs", owner, "fail",
                    {"intent": "ex.charge", "params": {"amount": 2, "mode": "fail"}}, "0s")
worker.step()
worker.step()
status, _, done = handle(client, "GET", "/jobs/" + body["job_id"], owner)
emit({"check": "failover", "job_id": body["job_id"], "status": status, "state": done["state"],
      "result": done["result"]})

# the primary hangs: mark_unknown; another worker's start meanwhile is IJ002
# (409 + Retry-After); after fence_unknown_after the server fences the doubt
# and the next claim returns the job on the fallback, which wins; the
# primary's late answer is still reported, and is lost
_, _, body = handle(client, "POST", "/jobs", owner, "hang",
                    {"intent": "ex.charge", "params": {"amount": 3, "mode": "hang"}}, "0s")
late_job = body["job_id"]
worker.step()
try:
    worker.conn.execute("SELECT idemjob.start_attempt(%s, NULL, '1s', 'py-other')", (late_job,))
    refused = (201, {}, {})
except psycopg.Error as e:
    refused = http_error(e)
emit({"check": "in_doubt", "status": refused[0], "headers": refused[1], "body": refused[2],
      "job_id": late_job})
# the sweeper's tick, which needs the operator capability (the worker role
# lacks it), so the admin connection calls it; a no-op where a sweeper runs
until(lambda: any(e.get("job_id") == late_job and e["event"] == "completed" for e in events),
      lambda: (admin.execute("SELECT idemjob.expire_attempts()"), worker.step(wait="0s")))
hung.set()
until(lambda: any(e["event"] == "late_result" for e in events), lambda: worker.step(wait="0s"))
late = next((e for e in events if e["event"] == "late_result"), {})
emit({"check": "late", "job_id": late_job, "attempt_id": late.get("attempt_id"),
      "outcome": late.get("outcome")})
status, _, body = handle(client, "GET", "/jobs/" + late_job, owner)
emit({"check": "late_job", "status": status, **body})

# a batch: 20 jobs claimed in one call, confirmed in one statement, run side
# by side, reported in one statement
batch_ids = [handle(client, "POST", "/jobs", owner, "batch-%d" % i,
                    {"intent": "ex.charge", "params": {"amount": 100 + i}}, "0s")[2]["job_id"]
             for i in range(20)]
claimed = worker.batch_step(max_jobs=100, wait="0s")
batch = next((e for e in events if e["event"] == "batch"), {})
emit({"check": "batch", "claimed": claimed, "job_ids": batch_ids, "outcomes": batch.get("outcomes")})

# a batch in which one job was cancelled before its begin (IJ003: not sent)
# and one attempt failed before the report (IJ005): each statement errors,
# nothing of it is written, and its calls go one by one
for i in range(5):
    handle(client, "POST", "/jobs", owner, "batch2-%d" % i,
           {"intent": "ex.charge", "params": {"amount": 200 + i}}, "0s")
meanwhile = []


def cancel_one(attempt_ids):
    meanwhile.append(str(attempt_ids[0]))
    admin.execute("SELECT idemjob.cancel_job(job_id, 'changed my mind') FROM idemjob.attempts"
                  " WHERE id = %s", (attempt_ids[0],))


def fail_one(attempt_ids):
    meanwhile.append(str(attempt_ids[0]))
    admin.execute("SELECT idemjob.fail_attempt(%s, '{\"code\": \"operator\"}', false)",
                  (attempt_ids[0],))


claimed = worker.batch_step(max_jobs=100, wait="0s", before_begin=cancel_one, before_report=fail_one)
batch = [e for e in events if e["event"] == "batch"][-1]
emit({"check": "batch_fallback", "claimed": claimed, "sent": batch["sent"], "meanwhile": meanwhile,
      "outcomes": batch.get("outcomes")})
worker.pool.shutdown()
