#!/usr/bin/env bash
# test/clients/run.sh: the client packages' own test suites, each in its
# ecosystem's runner (clients/python: pytest; clients/node: node --test;
# clients/go: go test), against the server in PGHOST/PGPORT/PGUSER (a
# superuser), each run twice: directly, and through pgbouncer in
# transaction pooling (server_round_robin: consecutive transactions on
# other backends).  Each package is installed from the checkout with its
# own tool first (pip into a venv over Debian's packages, npm ci, a GOPATH
# over Debian's Go sources), as a user would.
#
# Per package a fresh database idemjob_cl_<lang> with the extension, and
# the roles ij_cl_client, ij_cl_worker, ij_cl_operator and ij_cl_admin
# (LOGIN) holding those capabilities there.  The suites read:
#   IDEMJOB_TEST_DSN        libpq key=value DSN of that database as the
#                           superuser, direct or through the pooler
#   IDEMJOB_TEST_URL        the same as a postgresql:// URL
#   IDEMJOB_TEST_ADMIN_DSN  always direct, superuser (set-up, inspection,
#                           pg_terminate_backend)
#   IDEMJOB_TEST_VIA        direct | pgbouncer
# and connect as a role by replacing user= (user in the URL).
#
# CLIENTS="python node go" picks some; PGBOUNCER_PORT (5693) the pooler's
# port.  Prints "clients: N passed, M failed" and exits non-zero on any
# failure.
set -uo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
PG_BIN=${PG_BIN:-$("${PG_CONFIG:-pg_config}" --bindir 2>/dev/null || echo /usr/lib/postgresql/15/bin)}
PSQL="env PGOPTIONS=--client-min-messages=warning $PG_BIN/psql -X -q -v ON_ERROR_STOP=1"
server_host=${PGHOST:?PGHOST must name the server}
server_port=${PGPORT:-5432}
user=${PGUSER:-postgres}
bport=${PGBOUNCER_PORT:-5693}
clients=${CLIENTS:-python node go}
roles="ij_cl_client ij_cl_worker ij_cl_operator ij_cl_admin"
export GO111MODULE=off GOCACHE=${GOCACHE:-/tmp/idemjob-clients-gocache} GOFLAGS=

# ---- what the suites need, from Debian's packages (and npm's registry)
need=()
for p in python3-psycopg python3-psycopg-pool python3-pytest python3-setuptools python3-venv \
	golang-go golang-github-jackc-pgx-v4-dev pgbouncer; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || need+=("$p")
done
# node and npm as commands: a nodejs from elsewhere (NodeSource) bundles npm
command -v node >/dev/null || need+=(nodejs)
command -v npm >/dev/null || need+=(npm)
if [ ${#need[@]} -gt 0 ]; then
	echo "clients: installing ${need[*]}"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}" >/dev/null ||
		{ apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}" >/dev/null; } ||
		{ echo "clients: could not install ${need[*]}" >&2; exit 1; }
fi

work=$(mktemp -d /tmp/idemjob-clients.XXXXXX)
chmod 755 "$work"
source "$root/test/pooler.sh"
cleanup() { ij_pooler_cleanup "$work" idemjob_cl_; }
trap cleanup EXIT
export PGHOST=$server_host PGPORT=$server_port PGUSER=$user

# ---- pgbouncer, transaction pooling
ij_pooler_start "$work" "$bport" "$server_host" "$server_port" "$user" $roles || exit 1

# ---- one database per package, with its roles' capabilities
$PSQL -d postgres <<SQL >/dev/null || { echo "clients: cannot create the roles" >&2; exit 1; }
DO \$\$
DECLARE r text;
BEGIN
	FOREACH r IN ARRAY string_to_array('$roles', ' ') LOOP
		IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = r) THEN
			EXECUTE format('CREATE ROLE %I LOGIN', r);
		END IF;
	END LOOP;
END \$\$;
SQL
fresh_db() {
	local db=$1
	$PSQL -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db" >/dev/null &&
		$PSQL -d "$db" -c "CREATE EXTENSION idemjob" \
			-c "SELECT idemjob.grant_capability('ij_cl_client', 'client'), idemjob.grant_capability('ij_cl_worker', 'worker'),
				idemjob.grant_capability('ij_cl_operator', 'operator'), idemjob.grant_capability('ij_cl_admin', 'admin')" >/dev/null
}

# ---- install each package from the checkout, as its users would
install_python() {
	/usr/bin/python3 -m venv --system-site-packages "$work/venv" &&
		"$work/venv/bin/pip" install -q --no-build-isolation --no-index "$root/clients/python" >"$work/pip.log" 2>&1 ||
		{ cat "$work/pip.log" >&2; return 1; }
}
install_node() {
	(cd "$root/clients/node" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
}
install_go() {
	# GOPATH mode over Debian's Go sources: the package at its import path
	local ip
	ip=$(sed -n 's/^module //p' "$root/clients/go/go.mod")
	mkdir -p "$work/gopath/src/$(dirname "$ip")" &&
		ln -sfn "$root/clients/go" "$work/gopath/src/$ip" &&
		echo "$ip" >"$work/go.importpath"
}
run_python() { (cd "$root/clients/python" && "$work/venv/bin/python" -m pytest -q -p no:cacheprovider tests); }
run_node() { (cd "$root/clients/node" && node --test test/); }
run_go() {
	(cd "$work/gopath/src/$(cat "$work/go.importpath")" &&
		GOPATH="$work/gopath:/usr/share/gocode" go test -count=1 ./...)
}

passed=0
failed=0
for lang in $clients; do
	db=idemjob_cl_$lang
	if ! "install_$lang"; then
		echo "  FAIL $lang: the package does not install from the checkout"
		failed=$((failed + 1))
		continue
	fi
	for via in direct pgbouncer; do
		fresh_db "$db" || { echo "  FAIL $lang/$via: no database"; failed=$((failed + 1)); continue; }
		if [ "$via" = direct ]; then h=$server_host; p=$server_port; else h=$work; p=$bport; fi
		export IDEMJOB_TEST_DSN="host=$h port=$p dbname=$db user=$user"
		export IDEMJOB_TEST_URL="postgresql://$user@/$db?host=$h&port=$p"
		export IDEMJOB_TEST_ADMIN_DSN="host=$server_host port=$server_port dbname=$db user=$user"
		export IDEMJOB_TEST_VIA=$via
		log="$work/$lang-$via.log"
		t0=$(date +%s.%N)
		if "run_$lang" >"$log" 2>&1; then
			passed=$((passed + 1))
			printf '  ok   %-16s %4.1f s  %s\n' "$lang/$via" "$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')" "$(grep -v '^\s*$' "$log" | tail -1)"
		else
			failed=$((failed + 1))
			echo "  FAIL $lang/$via"
			tail -60 "$log" | sed 's/^/       /'
		fi
	done
done
echo "clients: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
