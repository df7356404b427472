"""idemjob from Python (psycopg 3): an HTTP-style handler and a worker.

Pooler-safe: autocommit, prepare_threshold=None (no server-side prepared
statements), so it works through pgbouncer in transaction pooling.
Types: bigint -> int, uuid -> uuid.UUID, jsonb -> dict, timestamptz ->
aware datetime, interval -> timedelta.
"""
import concurrent.futures as cf
import time

import psycopg
from psycopg.types.json import Jsonb


def connect(dsn):
    return psycopg.connect(dsn, autocommit=True, prepare_threshold=None)


# ---- errors: SQLSTATE -> HTTP; ids from the error fields, never from DETAIL
HTTP = {"IJ001": (409, "idempotency_conflict"), "IJ002": (409, "attempt_in_doubt"),
        "IJ003": (409, "job_finished"), "IJ004": (422, "provider_not_certified"),
        "IJ005": (409, "invalid_transition"), "IJ006": (404, "not_found"),
        "IJ007": (410, "key_expired"), "IJ008": (409, "lease_expired"),
        "22004": (400, "null_value_not_allowed"), "22023": (400, "invalid_parameter_value"),
        "22P02": (400, "invalid_text_representation"), "42501": (403, "insufficient_privilege"),
        "57014": (503, "query_canceled"), "0A000": (500, "feature_not_supported")}


def fields(e):
    """idemjob's key=value list in the constraint_name field, as a dict."""
    kv = e.diag.constraint_name if e.diag.schema_name == "idemjob" else None
    return dict(p.split("=", 1) for p in (kv or "").split())


def http_error(e):
    status, name = HTTP.get(e.sqlstate, (500, "internal_error"))
    body = {"error": name, "sqlstate": e.sqlstate, "message": e.diag.message_primary}
    f = fields(e)
    body.update({k: f[k] for k in ("job_id", "attempt_id", "state", "deadline") if k in f})
    headers = {"Retry-After": f["retry_after"]} if "retry_after" in f else {}
    return status, headers, body


def job_body(row):
    return {"job_id": str(row["id"]), "state": row["state"], "version": row["version"],
            "result": row["result"]}


def handle(conn, method, path, owner, key=None, body=None, wait="2s"):
    """POST /jobs (Idempotency-Key: key) and GET /jobs/<id>: (status, headers, json)."""
    try:
        cur = conn.cursor(row_factory=psycopg.rows.dict_row)
        if method == "POST":
            sub = cur.execute("SELECT * FROM idemjob.submit(%s, %s, %s, %s)",
                              (owner, key, body["intent"], Jsonb(body.get("params", {})))).fetchone()
            job_id = sub["job_id"]
        else:
            job_id = path.rsplit("/", 1)[1]       # a malformed id is 22P02 -> 400
        job = cur.execute("SELECT * FROM idemjob.await_job(%s, %s)", (job_id, wait)).fetchone()
        final = job["state"] in ("succeeded", "failed", "cancelled")
        return (200 if final else 202), {}, job_body(job)
    except psycopg.Error as e:
        if e.sqlstate is None:                    # connection lost: in doubt, retry the same call
            raise
        return http_error(e)


# ---- worker: claim with a lease, begin right before calling the provider the
# claim row names, heartbeats, report. Failover is the server's: after a failure
# or a fenced doubt, claim returns the job on the next provider of its route.
NOT_SENT = ("IJ003", "IJ005", "IJ008")    # job ended, attempt ended, lease over


class Worker:
    def __init__(self, conn, name, providers, give_up=1.5, beat=0.4, emit=print):
        self.conn, self.name, self.providers = conn, name, providers
        self.give_up, self.beat, self.emit = give_up, beat, emit
        self.pool = cf.ThreadPoolExecutor(8)
        self.late = []        # (attempt_id, future): answers that came after mark_unknown

    def call(self, sql, *args):
        return self.conn.execute(sql, args).fetchone()

    def start(self):
        """Once, at start: give up what an earlier run of this worker left behind."""
        return self.call("SELECT idemjob.abandon_attempts(%s)", self.name)[0]

    def begin(self, attempt_id):
        """Confirm the attempt immediately before calling the provider; False: do not call it."""
        try:
            self.call("SELECT state FROM idemjob.begin_attempt(%s)", attempt_id)
            return True
        except psycopg.Error as e:
            if e.sqlstate not in NOT_SENT:
                raise
            self.emit({"event": "not_sent", "attempt_id": str(attempt_id), "sqlstate": e.sqlstate})
            return False

    def complete(self, attempt_id, result):
        """Report a provider's answer: the database decides won, lost or rejected."""
        return self.call("SELECT outcome FROM idemjob.complete_attempt(%s, %s)",
                         attempt_id, Jsonb(result))[0]

    def fail(self, attempt_id, exc):
        """A definite provider error: the attempt failed; the server retries the job
        on the next provider of its route."""
        self.call("SELECT state FROM idemjob.fail_attempt(%s, %s, true)",
                  attempt_id, Jsonb({"code": "provider_error", "message": str(exc)}))

    def run(self, attempt_id, job_id, provider, params):
        fut = self.pool.submit(self.providers[provider], params)
        t0 = time.monotonic()
        while True:
            try:
                result = fut.result(timeout=self.beat)
                break
            except cf.TimeoutError:
                if time.monotonic() - t0 > self.give_up:   # no answer: unknown, never failed
                    self.call("SELECT state FROM idemjob.mark_unknown(%s)", attempt_id)
                    self.late.append((attempt_id, fut))
                    self.emit({"event": "unknown", "attempt_id": str(attempt_id)})
                    return
                self.call("SELECT state FROM idemjob.heartbeat(%s, '1s')", attempt_id)
            except Exception as exc:                       # a definite failure
                self.fail(attempt_id, exc)
                return
        outcome = self.complete(attempt_id, result)
        self.emit({"event": "completed", "attempt_id": str(attempt_id), "job_id": str(job_id),
                   "provider": provider, "outcome": outcome})

    def step(self, wait="1s"):
        for attempt_id, fut in [x for x in self.late if x[1].done()]:
            self.late.remove((attempt_id, fut))
            if fut.exception() is None:                    # report it: the database decides
                outcome = self.complete(attempt_id, fut.result())
                self.emit({"event": "late_result", "attempt_id": str(attempt_id), "outcome": outcome})
        claimed = self.conn.execute(
            "SELECT attempt_id, job_id, provider, params FROM idemjob.claim(%s, wait => %s,"
            " timeout => '1s', lease => true)", (self.name, wait)).fetchall()
        for attempt_id, job_id, provider, params in claimed:
            if self.begin(attempt_id):
                self.run(attempt_id, job_id, provider, params)
        return len(claimed)

    def batch_step(self, max_jobs=100, wait="1s", before_begin=None, before_report=None):
        """Claim up to max_jobs jobs, confirm them in one statement, run them
        side by side, and report the results in one statement: one
        complete_attempt per job (its own compare-and-swap and answer), one
        transaction.  If a call of either statement errors, nothing of it is
        written and the calls go one by one (the begins then skip what must
        not be sent); if the connection drops, resend the same statement.
        before_begin / before_report(attempt_ids): the scenario's hooks."""
        claimed = self.conn.execute(
            "SELECT attempt_id, provider, params FROM idemjob.claim(%s, max_jobs => %s,"
            " wait => %s, timeout => '30s', lease => true)", (self.name, max_jobs, wait)).fetchall()
        if before_begin:
            before_begin([a for a, _, _ in claimed])
        sent = claimed
        if claimed:
            try:
                self.conn.execute("SELECT b.id FROM unnest(%s::uuid[]) a,"
                                  " LATERAL idemjob.begin_attempt(a) b", ([a for a, _, _ in claimed],))
            except psycopg.Error as e:
                if e.sqlstate is None:                     # in doubt: resend the same batch
                    raise
                sent = [c for c in claimed if self.begin(c[0])]
        running = [(a, self.pool.submit(self.providers[p], params)) for a, p, params in sent]
        results = []
        for attempt_id, fut in running:
            try:
                results.append((attempt_id, fut.result()))
            except Exception as exc:                       # a definite failure
                self.fail(attempt_id, exc)
        if before_report:
            before_report([a for a, _ in results])
        outcomes = {}
        if results:
            try:
                outcomes = dict(self.conn.execute(
                    "SELECT r.attempt_id, c.outcome"
                    " FROM unnest(%s::uuid[], %s::jsonb[]) AS r(attempt_id, result),"
                    " LATERAL idemjob.complete_attempt(r.attempt_id, r.result) c",
                    ([a for a, _ in results], [Jsonb(r) for _, r in results])).fetchall())
            except psycopg.Error as e:
                if e.sqlstate is None:                     # in doubt: resend the same batch
                    raise
                for attempt_id, result in results:
                    try:
                        outcomes[attempt_id] = self.complete(attempt_id, result)
                    except psycopg.Error as e1:
                        if e1.sqlstate is None:
                            raise
                        outcomes[attempt_id] = e1.sqlstate
        self.emit({"event": "batch", "claimed": len(claimed), "sent": len(sent),
                   "outcomes": [outcomes.get(a) for a, _ in results]})
        return len(claimed)
