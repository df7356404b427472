"""idemjob from Python, on the idemjob package (clients/python): an
HTTP-style handler and a worker, with no SQL.

The package's client is pooler-safe (autocommit, no prepared statements),
sends a call again by itself when its answer was lost and the call is safe
to resend, and raises one typed error per SQLSTATE, which knows its HTTP
status, headers (IJ002: Retry-After) and JSON body, with the ids from the
error fields.  Its Worker does the loop of docs/operations.md#workers.
"""
import idemjob


def connect(dsn, max_size=4):
    """A client over a pool of connections to dsn."""
    return idemjob.connect(dsn, min_size=1, max_size=max_size)


# ---- handler: submit, then wait in the server for the outcome (no LISTEN)
def handle(client, method, path, owner, key=None, body=None, wait=2.0):
    """POST /jobs (Idempotency-Key: key) and GET /jobs/<id>: (status, headers, json)."""
    try:
        if method == "POST":
            job_id = client.submit(owner, key, body["intent"], body.get("params", {})).job_id
        else:
            job_id = path.rsplit("/", 1)[1]        # a malformed id is 22P02 -> 400
        job = client.await_job(job_id, wait)
        return (200 if job.final else 202), {}, {"job_id": str(job.id), "state": job.state,
                                                 "version": job.version, "result": job.result}
    except idemjob.IdemjobError as e:
        # ConnectionLost, once the client's own resends failed: 503, and the
        # caller sends the request again with the same key
        return e.http_status(), e.headers(), e.body()


# ---- worker: the package's runtime calls charge() for each ex.charge job,
# with the provider the server chose (failover by route is the server's);
# a providers[...] function returns the answer, or raises idemjob.Failure
# for a definite failure (any other exception is a retryable failure too);
# past `timeout` the attempt is marked unknown and a late answer is still
# reported (the server decides: won or lost).
def make_worker(client, name, providers, concurrency=4, on_event=None):
    """The worker `name`: abandons what its last run left, then claims ex.charge jobs."""
    def charge(job, ctx):
        return providers[ctx.provider](job.params)

    return idemjob.Worker(client, name, {"ex.charge": charge}, concurrency=concurrency,
                          timeout=1.5, heartbeat=0.4, wait=1.0, on_event=on_event)
