#!/usr/bin/env bash
# test/monitoring/run.sh: the Prometheus exporter against idemjob.
#
# Against the server in PGHOST/PGPORT/PGUSER (a superuser): a fresh
# database with idemjob and a role holding only the monitor capability;
# jobs in every state the metrics count (due, scheduled, running, in doubt,
# a race lost, a rejected result, a purged job); then Debian's
# prometheus-postgres-exporter (installed when missing) started as that
# role on 127.0.0.1:EXPORTER_PORT (5719) with examples/monitoring/
# queries.yaml, its /metrics page fetched, and every idemjob metric checked
# against the value the data must give.  Also: the exporter's own default
# metrics work as that role (pg_up 1, no scrape error), and the role
# cannot read a table.  Prints "monitoring: N passed, M failed" and exits
# non-zero on any failure.
set -uo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
PG_BIN=${PG_BIN:-$("${PG_CONFIG:-pg_config}" --bindir 2>/dev/null || echo /usr/lib/postgresql/15/bin)}
PSQL="env PGOPTIONS=--client-min-messages=warning $PG_BIN/psql -X -q -v ON_ERROR_STOP=1"
server_host=${PGHOST:?PGHOST must name the server}
server_port=${PGPORT:-5432}
eport=${EXPORTER_PORT:-5719}
db=idemjob_monitoring
role=idemjob_exporter
exporter=/usr/bin/prometheus-postgres-exporter

# the package, installed the way test/lib.sh installs every package (its
# service kept from starting), in a subshell: lib.sh sets PG_CONFIG & co.
if [ ! -x "$exporter" ]; then
	(IDEMJOB_PACKAGES=prometheus-postgres-exporter; source "$root/test/lib.sh"; ij_install_packages) ||
		{ echo "monitoring: could not install prometheus-postgres-exporter" >&2; exit 1; }
fi

dir=$(mktemp -d /tmp/idemjob-monitoring.XXXXXX)
exporter_pid=
cleanup() {
	if [ -n "$exporter_pid" ]; then
		kill "$exporter_pid" 2>/dev/null
		wait "$exporter_pid" 2>/dev/null
	fi
	$PSQL -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1
	$PSQL -d postgres -c "DROP ROLE IF EXISTS $role" >/dev/null 2>&1
	rm -rf "$dir"
}
trap cleanup EXIT

# ---- the database, the role, the jobs
$PSQL -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db" >/dev/null || exit 1
$PSQL -d postgres -c "DROP ROLE IF EXISTS $role" -c "CREATE ROLE $role LOGIN" >/dev/null || exit 1
$PSQL -d "$db" >/dev/null <<SQL || { echo "monitoring: the set-up failed" >&2; exit 1; }
CREATE EXTENSION idemjob;
SELECT idemjob.grant_capability('$role', 'monitor');
SELECT idemjob.define_contract('charge', '{"type": "object", "required": ["charge_id"]}');
SELECT idemjob.certify_provider('charge', 'psp_a');
SELECT idemjob.certify_provider('charge', 'psp_b');
-- a rejected result backs off an hour: that job is scheduled, not due
SELECT idemjob.set_retry_policy('charge', retry_backoff => '1 hour');

-- a job won, then purged: one spent key, its attempt gone
SELECT job_id AS j FROM idemjob.submit('o', 'purged', 'charge', '{}', 'psp_a') \gset
SELECT id AS a FROM idemjob.start_attempt(:'j') \gset
SELECT idemjob.complete_attempt(:'a', '{"charge_id": "ch_0"}');
SELECT idemjob.purge('0') = 1 AS purged \gset
\if :purged
\else
  \echo 'purge did not purge the job'
  SELECT 1/0;
\endif

-- two due, one scheduled in an hour
SELECT idemjob.submit('o', 'due1', 'charge', '{}', 'psp_a');
SELECT idemjob.submit('o', 'due2', 'charge', '{}', 'psp_a');
SELECT idemjob.submit('o', 'later', 'charge', '{}', 'psp_a', now() + interval '1 hour');
-- one running
SELECT job_id AS j FROM idemjob.submit('o', 'running', 'charge', '{}', 'psp_a') \gset
SELECT idemjob.start_attempt(:'j', NULL, '1 hour');
-- one in doubt
SELECT job_id AS j FROM idemjob.submit('o', 'doubt', 'charge', '{}', 'psp_a') \gset
SELECT idemjob.mark_unknown((SELECT id FROM idemjob.start_attempt(:'j', NULL, '1 hour')));
-- a race lost on psp_b: the first attempt cancelled, the second won, then
-- the first one's late result
SELECT job_id AS j FROM idemjob.submit('o', 'race', 'charge', '{}', 'psp_b') \gset
SELECT id AS a1 FROM idemjob.start_attempt(:'j') \gset
SELECT idemjob.cancel_attempt(:'a1', 'operator');
SELECT id AS a2 FROM idemjob.start_attempt(:'j') \gset
SELECT idemjob.complete_attempt(:'a2', '{"charge_id": "ch_1"}');
SELECT outcome = 'lost' AS lost FROM idemjob.complete_attempt(:'a1', '{"charge_id": "ch_2"}') \gset
-- a result rejected on psp_b (no charge_id)
SELECT job_id AS j FROM idemjob.submit('o', 'rejected', 'charge', '{}', 'psp_b') \gset
SELECT id AS a FROM idemjob.start_attempt(:'j') \gset
SELECT outcome = 'rejected' AS rejected FROM idemjob.complete_attempt(:'a', '{"amount": 1}') \gset
\if :lost
\else
  SELECT 1/0;
\endif
\if :rejected
\else
  SELECT 1/0;
\endif
-- the estimates (pg_class.reltuples) as they are after autovacuum's ANALYZE
ANALYZE idemjob.jobs, idemjob.spent_keys, idemjob.race_log;
SQL

# ---- the exporter, as the monitor role
export DATA_SOURCE_NAME="host=$server_host port=$server_port user=$role dbname=$db sslmode=disable"
"$exporter" --web.listen-address="127.0.0.1:$eport" \
	--extend.query-path="$root/examples/monitoring/queries.yaml" \
	--log.level=info >"$dir/exporter.log" 2>&1 &
exporter_pid=$!

python3 - "$eport" "$dir/exporter.log" "$root/examples/monitoring" <<'PY'
import json, re, sys, time, urllib.request

port, log, examples = sys.argv[1], sys.argv[2], sys.argv[3]
url = f"http://127.0.0.1:{port}/metrics"
text = None
for _ in range(100):
    try:
        text = urllib.request.urlopen(url, timeout=5).read().decode()
        break
    except OSError:
        time.sleep(0.1)
if text is None:
    print(f"monitoring: nothing answered on {url}")
    print(open(log).read())
    print("monitoring: 0 passed, 1 failed")
    sys.exit(1)

samples = {}
for line in text.splitlines():
    if not line or line.startswith("#"):
        continue
    m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$', line)
    if not m:
        continue
    labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(3) or ""))
    # the exporter adds a "server" label to the user queries; not ours to check
    labels.pop("server", None)
    samples[(m.group(1), tuple(sorted(labels.items())))] = float(m.group(4))

passed = failed = 0
def check(name, labels, want, tol=None):
    global passed, failed
    key = (name, tuple(sorted(labels.items())))
    got = samples.get(key)
    if got is None:
        ok, shown = False, "absent"
    elif tol is not None:
        ok, shown = want[0] <= got <= want[1], got
    else:
        ok, shown = got == want, got
    lab = ",".join(f'{k}="{v}"' for k, v in labels.items())
    print(f"{'ok' if ok else 'FAILED'}: {name}{{{lab}}} = {shown} (want {want})")
    if ok:
        passed += 1
    else:
        failed += 1

c = {"intent": "charge"}
a = {"intent": "charge", "provider": "psp_a"}
b = {"intent": "charge", "provider": "psp_b"}
# the exporter itself, connected as the monitor role
check("pg_up", {}, 1)
check("pg_exporter_last_scrape_error", {}, 0)
# queue depth and the oldest due job's age, per intent
check("idemjob_queue_due", c, 2)
check("idemjob_queue_scheduled", c, 2)
check("idemjob_queue_running", c, 1)
check("idemjob_queue_in_doubt", c, 1)
check("idemjob_queue_oldest_due_age_seconds", c, (0.0001, 600), tol=True)
# in doubt
check("idemjob_in_doubt_attempts", {}, 1)
check("idemjob_in_doubt_oldest_age_seconds", {}, (0.0001, 600), tol=True)
# per provider over five minutes: wins, losses, rejections
check("idemjob_provider_attempts", a, 2)
check("idemjob_provider_in_doubt", a, 2)
check("idemjob_provider_succeeded", a, 0)
check("idemjob_provider_attempts", b, 3)
check("idemjob_provider_succeeded", b, 1)
check("idemjob_provider_superseded", b, 1)
check("idemjob_provider_rejected", b, 1)
check("idemjob_provider_failed", b, 0)
check("idemjob_provider_races_lost", b, 1)
check("idemjob_provider_races_lost", a, 0)
check("idemjob_provider_p50_ms", b, (0, 60000), tol=True)
check("idemjob_provider_late_by_p50_ms", b, (0, 60000), tol=True)
# purge and spent keys
check("idemjob_retention_final_jobs", {}, 1)
check("idemjob_retention_spent_keys", {}, 1)
check("idemjob_retention_race_log_rows", {}, 2)	# the lost race and the rejected result
check("idemjob_retention_oldest_final_age_seconds", {}, (0.0001, 600), tol=True)
check("idemjob_retention_oldest_race_log_age_seconds", {}, (0.0001, 600), tol=True)
# every metric of the file is on the page and in a panel of the dashboard
metrics, ns, name = [], None, None
for line in open(f"{examples}/queries.yaml"):
    if m := re.match(r"^(\w+):\s*$", line):
        ns = m.group(1)
    elif m := re.match(r"^\s+- (\w+):\s*$", line):
        name = m.group(1)
    elif (m := re.match(r'^\s+usage: "(\w+)"', line)) and m.group(1) != "LABEL":
        metrics.append(f"{ns}_{name}")
exprs = " ".join(t["expr"] for p in json.load(open(f"{examples}/grafana-dashboard.json"))["panels"]
                 for t in p.get("targets", []))
on_page = {n for n, _ in samples}
missing_page = [m for m in metrics if m not in on_page]
missing_panel = [m for m in metrics if not re.search(rf"\b{m}\b", exprs)]
for what, missing in (("on /metrics", missing_page), ("in a dashboard panel", missing_panel)):
    if missing or len(metrics) < 20:
        failed += 1
        print(f"FAILED: metrics of queries.yaml not {what}: {missing} (of {len(metrics)})")
    else:
        passed += 1
        print(f"ok: all {len(metrics)} metrics of queries.yaml are {what}")
# no query of the file failed
errors = [l for l in open(log) if "level=error" in l or "level=warn" in l]
if errors:
    failed += 1
    print("FAILED: the exporter logged:\n" + "".join(errors))
else:
    passed += 1
    print("ok: the exporter logged no warning or error")
with open(log + ".passed", "w") as f:
    f.write(f"{passed} {failed}\n")
sys.exit(1 if failed else 0)
PY
rc=$?
read -r passed failed <"$dir/exporter.log.passed" 2>/dev/null || { passed=0; failed=1; }

# the monitor role reads the views, not the tables
if $PSQL -U "$role" -d "$db" -c "SELECT count(*) FROM idemjob.jobs" >/dev/null 2>"$dir/denied.txt"; then
	echo "FAILED: $role read idemjob.jobs"
	failed=$((failed + 1))
elif grep -q "permission denied" "$dir/denied.txt"; then
	echo "ok: $role cannot read idemjob.jobs"
	passed=$((passed + 1))
else
	echo "FAILED: $role reading idemjob.jobs: $(cat "$dir/denied.txt")"
	failed=$((failed + 1))
fi

echo "monitoring: $passed passed, $failed failed"
[ "$rc" = 0 ] && [ "$failed" = 0 ]
