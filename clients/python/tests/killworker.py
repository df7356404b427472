"""A Worker in its own process, for test_kill.py: it prints each event as a
JSON line and SIGKILLs itself at the named point of its loop.

    python killworker.py DSN NAME INTENT POINT

POINT: claiming (the parent kills it while it waits in claim), claimed
(after claim, before begin_attempt), begun (after begin_attempt, before the
provider), handler (during the provider call), answered (after the provider
answered, before complete_attempt), completed (after complete_attempt).
"""
import json
import os
import signal
import sys

import idemjob

dsn, name, intent, point = sys.argv[1:5]


def die() -> None:
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def on_event(event: str, fields: dict) -> None:
    print(json.dumps({"event": event, **{k: str(v) for k, v in fields.items()}}), flush=True)
    if event == point and point != "claiming":
        die()


def provider(job: idemjob.Claim, ctx: idemjob.Context) -> dict:
    if point == "handler":
        die()
    return {"by": ctx.provider}


client = idemjob.connect(dsn, min_size=1, max_size=4, application_name=name)
idemjob.Worker(client, name, {intent: provider}, concurrency=1, timeout=1.0, wait=10.0,
               on_event=on_event).run()
