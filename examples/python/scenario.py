"""Runs the example once: the handler and the worker through every case the
README promises, printing one JSON line per check (test/examples/run.sh reads
them and checks the database).  DSNs: IJ_CLIENT_DSN, IJ_WORKER_DSN, IJ_ADMIN_DSN."""
import concurrent.futures as cf
import json
import os
import time

from app import Worker, connect, handle


def emit(obj):
    print(json.dumps(obj, default=str), flush=True)


def primary(params):                 # the fake provider: slow, failing, late, or fine
    mode = params.get("mode", "ok")
    if mode == "fail":
        raise RuntimeError("provider said no")
    time.sleep({"slow": 1.0, "late": 3.0}.get(mode, 0.05))
    return {"by": "primary", "amount": params.get("amount")}


def fallback(params):
    return {"by": "fallback", "amount": params.get("amount")}


client, admin = (connect(os.environ[v]) for v in ("IJ_CLIENT_DSN", "IJ_ADMIN_DSN"))
events = []
worker = Worker(connect(os.environ["IJ_WORKER_DSN"]), "py-worker",
                {"primary": primary, "fallback": fallback},
                emit=lambda e: (events.append(e), emit(e)))
owner = "shop-1"
charge = {"intent": "ex.charge", "params": {"amount": 42}}

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

# failing provider: fail_attempt, then failover to the certified fallback
_, _, body = handle(client, "POST", "/jobs", owner, "fail",
                    {"intent": "ex.charge", "params": {"amount": 2, "mode": "fail"}}, "0s")
worker.step()
status, _, done = handle(client, "GET", "/jobs/" + body["job_id"], owner)
emit({"check": "failover", "job_id": body["job_id"], "status": status, "state": done["state"],
      "result": done["result"]})

# no answer: unknown, failover refused (IJ002 -> 409 + Retry-After), an
# operator cancels the attempt, the fallback wins, the late answer loses
_, _, body = handle(client, "POST", "/jobs", owner, "late",
                    {"intent": "ex.charge", "params": {"amount": 3, "mode": "late"}}, "0s")
late_job = body["job_id"]
worker.step()
refused = next(e for e in events if e["event"] == "failover_refused")
emit({"check": "in_doubt", "status": refused["status"], "headers": refused["headers"],
      "body": refused["body"], "job_id": late_job})
admin.execute("SELECT idemjob.cancel_attempt(%s, 'operator: the provider never answered')",
              (refused["body"]["attempt_id"],))
worker.step(wait="0s")
for _ in range(50):
    if any(e["event"] == "late_result" for e in events):
        break
    time.sleep(0.1)
    worker.step(wait="0s")
late = next((e for e in events if e["event"] == "late_result"), {})
emit({"check": "late", "job_id": late_job, "attempt_id": late.get("attempt_id"),
      "outcome": late.get("outcome")})
status, _, body = handle(client, "GET", "/jobs/" + late_job, owner)
emit({"check": "late_job", "status": status, **body})
# a batch: 20 jobs claimed in one call, run side by side, reported in one statement
batch_ids = [handle(client, "POST", "/jobs", owner, "batch-%d" % i,
                    {"intent": "ex.charge", "params": {"amount": 100 + i}}, "0s")[2]["job_id"]
             for i in range(20)]
claimed = worker.batch_step(max_jobs=100, wait="0s")
batch = next((e for e in events if e["event"] == "batch"), {})
emit({"check": "batch", "claimed": claimed, "job_ids": batch_ids, "outcomes": batch.get("outcomes")})

# a batch in which one attempt was failed meanwhile: the statement errors
# (IJ005), nothing of it is written, the results go one by one
for i in range(5):
    handle(client, "POST", "/jobs", owner, "batch2-%d" % i,
           {"intent": "ex.charge", "params": {"amount": 200 + i}}, "0s")
failed_meanwhile = []


def fail_one(attempt_ids):
    failed_meanwhile.append(str(attempt_ids[0]))
    admin.execute("SELECT idemjob.fail_attempt(%s, '{\"code\": \"operator\"}', false)",
                  (attempt_ids[0],))


claimed = worker.batch_step(max_jobs=100, wait="0s", before_report=fail_one)
batch = [e for e in events if e["event"] == "batch"][-1]
emit({"check": "batch_fallback", "claimed": claimed, "failed": failed_meanwhile,
      "outcomes": batch.get("outcomes")})
worker.pool.shutdown()
