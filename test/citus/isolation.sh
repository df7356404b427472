# test/citus/isolation.sh: the isolation specs (test/isolation) through the
# coordinator of a running cluster; sourced by test/citus/run.sh, after
# test/checks.sh and ij_citus_start.
#
# Each spec's setup begins with a fresh extension (DROP and CREATE
# EXTENSION), for every permutation.  On Citus an extension is distributed
# once, into empty tables, so each permutation runs alone instead
# (isolationtester with a copy of the spec that keeps that one
# permutation and leaves those two statements out), in a database of its
# own where idemjob is installed and distributed; the permutations'
# outputs, put together, must equal the spec's expected output.  Blocking
# is seen through the whole cluster (Citus's replacement of
# pg_isolation_test_session_is_blocked, which reads the wait graph of the
# distributed transactions): a call waits on a worker, for a lock another
# session's call holds there.
#
# Left out, each for a difference the product documents (docs/scaling.md#citus):
#   notify            LISTEN on the coordinator: a call's notifications are
#                     sent on the node of its rows
#   retry_claim, lease_race
#                     a session's SET idemjob.retry_backoff / claim_lease does
#                     not reach the node that runs the call
#   claim_race        its steps lock jobs with SELECT ... FOR UPDATE over the
#                     distributed table, which Citus refuses across shards

# A call in FROM whose argument is a subquery over a distributed table,
# FROM idemjob.f((SELECT id FROM idemjob.attempts)), Citus runs on every
# shard, each with its own shard's answer (docs/scaling.md#citus): such a
# subquery is made one Citus cannot push down (OFFSET 0), in the spec and
# in the output it expects
offset0='s/(\(SELECT [a-z_]* FROM idemjob\.\(jobs\|attempts\)[^()]*\))/(\1 OFFSET 0)/g'

# The tables a spec makes (ids: the ids it names its jobs and attempts
# by) become reference tables, which Citus joins with the distributed ones
reference_setup='setup
{
	DO $$ BEGIN
		PERFORM pg_catalog.create_reference_table(c.oid) FROM pg_catalog.pg_class c
		 WHERE c.relnamespace = '"'"'public'"'"'::regnamespace AND c.relkind = '"'"'r'"'"';
	END $$;
}
'

isolation_skip=" notify retry_claim lease_race claim_race "

# citus_isolation: one ok/FAIL line per spec
citus_isolation() {
	local bin=${IJ_CITUS_BIN:-$PG_BIN} tester spec name perms n k dir out
	tester=$("$bin/pg_config" --pkglibdir)/pgxs/src/test/isolation/isolationtester
	[ -x "$tester" ] || { not_ok "isolationtester at $tester"; return; }
	dir=$(mktemp -d /tmp/idemjob-citus-iso.XXXXXX)
	n=0
	for spec in test/isolation/specs/*.spec; do
		name=$(basename "$spec" .spec)
		if [[ "$isolation_skip" == *" $name "* ]]; then
			echo "skip - isolation $name through the coordinator (see test/citus/isolation.sh)"
			continue
		fi
		mapfile -t perms < <(grep '^permutation' "$spec")
		: >"$dir/$name.out"
		for ((k = 0; k < ${#perms[@]}; k++)); do
			n=$((n + 1))
			# the spec without its permutations and its fresh extension, and one permutation
			{
				grep -v -e '^permutation' -e 'DROP EXTENSION IF EXISTS idemjob CASCADE;' \
					-e '^[[:space:]]*CREATE EXTENSION idemjob;' "$spec" | sed "$offset0" |
					awk -v extra="$reference_setup" '!done && /^(teardown|session)/ { print extra; done = 1 } { print }'
				printf '%s\n' "${perms[$k]}"
			} >"$dir/$name.$k.spec"
			for port in "${IJ_CITUS_PORTS[@]}"; do
				q -d postgres -p "$port" -c "DROP DATABASE IF EXISTS iso_$n WITH (FORCE)" >/dev/null 2>&1
			done
			if ! ij_citus_db "iso_$n" ||
				! q -d "iso_$n" -c "CREATE EXTENSION idemjob" -c "SELECT idemjob.distribute(8)" \
					-c "SELECT citus_internal.replace_isolation_tester_func()" >/dev/null; then
				echo "(could not make database iso_$n)" >>"$dir/$name.out"
				continue
			fi
			# (NOTICEs are part of the output: not the caller's client_min_messages)
			PGOPTIONS= timeout 300 "$tester" "host=$IJ_CITUS_DIR port=${IJ_CITUS_PORTS[0]} user=postgres dbname=iso_$n" \
				<"$dir/$name.$k.spec" >"$dir/$name.$k.out" 2>>"$dir/stderr"
			# one header for the spec, as one run of all permutations prints
			if [ "$k" -gt 0 ]; then sed -i '1d' "$dir/$name.$k.out"; fi
			cat "$dir/$name.$k.out" >>"$dir/$name.out"
			for port in "${IJ_CITUS_PORTS[@]}"; do
				q -d postgres -p "$port" -c "DROP DATABASE iso_$n WITH (FORCE)" >/dev/null 2>&1
			done
		done
		sed "$offset0" test/isolation/expected/$name.out >"$dir/$name.want"
		if diff -u "$dir/$name.want" "$dir/$name.out" >"$dir/$name.diff"; then
			ok "isolation $name through the coordinator: ${#perms[@]} permutations"
		else
			not_ok "isolation $name through the coordinator" "$(cat "$dir/$name.diff")"
		fi
	done
	[ -z "${IJ_KEEP_CLUSTER:-}" ] && rm -rf "$dir"
}
