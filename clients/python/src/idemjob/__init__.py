"""idemjob for Python: a client over psycopg 3 and psycopg_pool, typed
errors, the in-doubt rule, and a worker runtime.

    import idemjob
    client = idemjob.connect("dbname=app", max_size=8)
    job = client.submit("user-42", "checkout-7f3a", "charge_card", {"amount_cents": 1999})
    client.await_job(job.job_id, 10)

See clients/README.md for the design shared with the Node and Go packages.
"""
from .client import CALLS, Client, connect, resend_safe
from .errors import (AttemptInDoubt, ConnectionLost, IdemjobError, IdempotencyConflict,
                     InvalidArgument, InvalidTransition, JobFinished, KeyExpired, LeaseExpired,
                     NotFound, PermissionDenied, ProviderNotCertified, RetryTransaction,
                     Unavailable, error_class)
from .records import (FINAL_JOB_STATES, Attempt, Certification, Claim, CompleteResult, InDoubtRow,
                      Job, ProviderStats, QueueStats, RetryPolicy, Route, SubmitResult)
from .worker import Context, Failure, Worker

__version__ = "1.2.0"

__all__ = [
    "connect", "Client", "resend_safe", "CALLS",
    "IdemjobError", "IdempotencyConflict", "AttemptInDoubt", "JobFinished", "ProviderNotCertified",
    "InvalidTransition", "NotFound", "KeyExpired", "LeaseExpired", "InvalidArgument",
    "PermissionDenied", "RetryTransaction", "Unavailable", "ConnectionLost", "error_class",
    "FINAL_JOB_STATES", "SubmitResult", "Job", "Attempt", "Claim", "CompleteResult", "InDoubtRow",
    "QueueStats", "ProviderStats", "RetryPolicy", "Route", "Certification",
    "Worker", "Failure", "Context",
]
