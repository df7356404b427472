#!/usr/bin/env bash
# test/sanitize.sh: idemjob under AddressSanitizer + UndefinedBehaviorSanitizer.
#
# Builds the extension with -fsanitize=address,undefined into a private,
# (or, where libasan cannot be preloaded into postgres, runs the backends
# under valgrind: SAN_MODE=asan|valgrind forces one)
# relocated copy of the PostgreSQL installation (PostgreSQL itself is not
# instrumented: the postmaster runs with libasan preloaded), starts a
# throw-away cluster on SAN_PORT (5650), and runs there:
#   make installcheck (the regression suite), the hostile battery and a
#   short soak.
# Any sanitizer report (files under the work directory), any crash line in
# the server log or any failing suite makes it exit non-zero.
# SAN_CONF: lines added to the cluster's configuration (for example
# "idemjob.partitions = 4": the suites in the partitioned layout).
# Run from the repository root, as root or as a user who can write SAN_DIR.
set -uo pipefail

tests=$(cd "$(dirname "$0")" && pwd)
src=${SAN_SRC:-$(cd "$tests/.." && pwd)}	# the tree to build (default: this one)
PG_CONFIG=${PG_CONFIG:-$(command -v pg_config || echo /usr/lib/postgresql/15/bin/pg_config)}
port=${SAN_PORT:-5650}
dir=${SAN_DIR:-$(mktemp -d /tmp/idemjob-san.XXXXXX)}
mkdir -p "$dir"
chmod 755 "$dir"

# a private copy of the installation, so the system one is left alone
pgroot=$(cd "$("$PG_CONFIG" --bindir)/.." && pwd)
share=$("$PG_CONFIG" --sharedir)
inc=$(dirname "$("$PG_CONFIG" --includedir-server)")
inc=$(dirname "$inc")
(cd / && cp -a --parents "${pgroot#/}" "${share#/}" "${inc#/}" "$dir/")
SAN_PG_CONFIG=$dir$pgroot/bin/pg_config
bin=$("$SAN_PG_CONFIG" --bindir)

# build from a copy of the tree
rm -rf "$dir/src" && mkdir "$dir/src"
(cd "$src" && tar --exclude=.git --exclude='*.o' --exclude='*.so' --exclude='*.bc' -cf - .) | tar -C "$dir/src" -xf -
make -s -C "$dir/src" clean >/dev/null 2>&1
if ! make -s -C "$dir/src" PG_CONFIG="$SAN_PG_CONFIG" \
	COPT='-fsanitize=address,undefined -fno-omit-frame-pointer -g -O1' >"$dir/build.log" 2>&1 ||
	! make -s -C "$dir/src" PG_CONFIG="$SAN_PG_CONFIG" install >>"$dir/build.log" 2>&1; then
	cat "$dir/build.log" >&2
	exit 1
fi
[ "$(ldd "$("$SAN_PG_CONFIG" --pkglibdir)/idemjob.so" | grep -c libasan)" -gt 0 ] || { echo "idemjob.so is not instrumented" >&2; exit 1; }

as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
[ "$(id -u)" = 0 ] && chown -R postgres: "$dir"
as_pg "$bin/initdb" -D "$dir/data" -U postgres -A trust --no-sync -E UTF8 --locale=C >/dev/null
cat >>"$dir/data/postgresql.conf" <<CONF
port = $port
listen_addresses = ''
unix_socket_directories = '$dir'
fsync = off
max_connections = 60
${SAN_CONF:-}
CONF
asan=$(gcc -print-file-name=libasan.so)
ubsan=$(gcc -print-file-name=libubsan.so)
# Debian's postgres hangs at start with libasan preloaded (seen on Debian 12,
# gcc 12): then run the backends under valgrind instead, and count only the
# errors with an idemjob frame (PostgreSQL itself is not built for valgrind)
mode=${SAN_MODE:-}
if [ -z "$mode" ]; then
	if (timeout -s KILL 10 env LD_PRELOAD="$asan" ASAN_OPTIONS=detect_leaks=0 "$bin/postgres" --version) >/dev/null 2>&1; then
		mode=asan
	else
		mode=valgrind
	fi
fi
echo "sanitize: mode $mode"
if [ $mode = asan ]; then
	as_pg env LD_PRELOAD="$asan $ubsan" \
		ASAN_OPTIONS="detect_leaks=0:abort_on_error=0:log_path=$dir/asan:verify_asan_link_order=0" \
		UBSAN_OPTIONS="print_stacktrace=1:log_path=$dir/ubsan" \
		"$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w start >/dev/null || { cat "$dir/server.log" >&2; exit 1; }
else
	# rebuild without the sanitizers, with debug info, for valgrind
	make -s -C "$dir/src" clean >/dev/null 2>&1
	make -s -C "$dir/src" PG_CONFIG="$SAN_PG_CONFIG" COPT='-g -O1 -fno-omit-frame-pointer' >>"$dir/build.log" 2>&1 &&
		make -s -C "$dir/src" PG_CONFIG="$SAN_PG_CONFIG" install >>"$dir/build.log" 2>&1 || { cat "$dir/build.log" >&2; exit 1; }
	as_pg bash -c "cd '$dir' && exec valgrind --quiet --trace-children=yes --track-origins=no \
		--read-var-info=no --num-callers=30 --error-limit=no --log-file='$dir/valgrind.%p' \
		'$bin/postgres' -D '$dir/data' >'$dir/server.log' 2>&1" &
	for _ in $(seq 1 120); do
		"$bin/pg_isready" -q -h "$dir" -p "$port" && break
		sleep 1
	done
fi
stop() { as_pg "$bin/pg_ctl" -D "$dir/data" -m fast -w -t 300 stop >/dev/null 2>&1; }
trap stop EXIT
export PGHOST=$dir PGPORT=$port PGUSER=postgres PG_CONFIG=$SAN_PG_CONFIG PG_BIN=$bin
"$bin/psql" -X -q -d postgres -c "CREATE EXTENSION amcheck" >/dev/null

fail=0
echo "== installcheck ($mode)"
if [ "$(id -u)" = 0 ]; then
	as_pg make -C "$dir/src" PG_CONFIG="$SAN_PG_CONFIG" installcheck >"$dir/installcheck.log" 2>&1 || fail=1
else
	make -C "$dir/src" PG_CONFIG="$SAN_PG_CONFIG" installcheck >"$dir/installcheck.log" 2>&1 || fail=1
fi
grep -E "^(ok|not ok)|tests passed|failed|All [0-9]+ tests" "$dir/installcheck.log" | tail -40
[ $fail = 0 ] || { echo "installcheck failed"; cat "$dir/src/regression.diffs" 2>/dev/null | head -50; }

echo "== hostile battery ($mode)"
slow=()
[ "$mode" = valgrind ] && slow=(HOSTILE_STATEMENT_TIMEOUT=6s SOAK_MIN_COMMITS=5 SOAK_DUP_SECONDS=10 SOAK_MIX_SECONDS=30)
env "${slow[@]}" HOSTILE_SERVER_LOG=$dir/server.log "$tests/hostile/run.sh" >"$dir/hostile.log" 2>&1
hrc=$?
tail -3 "$dir/hostile.log"
[ $hrc = 0 ] || fail=1

echo "== short soak ($mode)"
env "${slow[@]}" "$tests/soak/run.sh" --short >"$dir/soak.log" 2>&1 || fail=1
tail -3 "$dir/soak.log"

stop
trap - EXIT
reports=$(ls "$dir"/asan.* "$dir"/ubsan.* 2>/dev/null)
if [ "$mode" = valgrind ]; then
	# only errors with a frame in idemjob's code
	reports=$(grep -l -E "idemjob\.so|src/[a-z_0-9]+\.c" "$dir"/valgrind.* 2>/dev/null)
	echo "valgrind: $(cat "$dir"/valgrind.* 2>/dev/null | grep -c '^==[0-9]*== [A-Z]') error lines in all processes, $(echo -n "$reports" | grep -c .) logs with an idemjob frame"
fi
crash=$(grep -E "terminated by signal|TRAP:|PANIC|AddressSanitizer|runtime error:" "$dir/server.log" | head -20)
if [ -n "$reports" ]; then
	echo "sanitizer reports:" >&2
	for f in $reports; do echo "--- $f" >&2; head -60 "$f" >&2; done
	fail=1
fi
if [ -n "$crash" ]; then
	echo "server log:" >&2
	echo "$crash" >&2
	fail=1
fi
echo "sanitize: sanitizer reports: $(echo -n "$reports" | grep -c . ), crash lines: $(echo -n "$crash" | grep -c .), installcheck: $([ -s "$dir/installcheck.log" ] && grep -q 'not ok\|failed' "$dir/installcheck.log" && echo FAILED || echo ok), hostile battery exit $hrc (see $dir/hostile.log)"
if [ $fail = 0 ]; then
	[ -n "${SAN_KEEP:-}" ] || rm -rf "$dir"
	echo "sanitize: CLEAN"
else
	echo "sanitize: FAILED (work directory kept: $dir)" >&2
	exit 1
fi
