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
# notify runs on the worker that holds its owner's rows, not through the
# coordinator: a call's notifications are sent on the node of its rows, and
# a LISTEN is heard on its own node (docs/scaling.md#citus).  Its calls
# then run on that node (Citus delegates a call whose rows are local to the
# session itself), and its session settings apply as on one server.  Its
# restored jobs' ids carry the owner's hash in their last 32 bits, as a
# distributed install's ids must, so a call given one is sent to its node.

# A call in FROM whose argument is a subquery over a distributed table,
# FROM idemjob.f((SELECT id FROM idemjob.attempts)), Citus runs on every
# shard, each with its own shard's answer (docs/scaling.md#citus): such a
# subquery is made one Citus cannot push down (OFFSET 0), in the spec and
# in the output it expects
offset0='s/(\(SELECT [a-z_]* FROM idemjob\.\(jobs\|attempts\)[^()]*\))/(\1 OFFSET 0)/g'

# A spec's own queries, written as docs/scaling.md#citus says a user's are:
# a join of jobs and attempts names owner_hash too (Citus joins distributed
# tables only on their distribution column), and a row lock names the
# owner's hash (Citus locks rows of one shard, not across shards).  The same
# rewrite is made in the spec and in the output it expects.
join_rule='s/\(ON\) j\.id = a\.job_id\( \|$\)/\1 j.owner_hash = a.owner_hash AND j.id = a.job_id\2/g; s/\(ON\) a\.job_id = j\.id\( \|$\)/\1 a.owner_hash = j.owner_hash AND a.job_id = j.id\2/g'
lock_rule="s/FROM idemjob\.jobs WHERE idempotency_key = 'job-1' FOR UPDATE/FROM idemjob.jobs WHERE owner_hash = idemjob.owner_hash('cr'::text) AND owner_id = 'cr' AND idempotency_key = 'job-1' FOR UPDATE/"
# A session's SET of an idemjob setting does not reach the node that runs
# the call (docs/scaling.md#citus); it is set as that page says, for the
# database on every node, where connections made after it read it
set_rule='s/SET \(idemjob\.[a-z_]*\) = \([^;]*\);/DO $$ BEGIN PERFORM pg_catalog.run_command_on_all_nodes(pg_catalog.format($f$ALTER DATABASE %I SET \1 = %L$f$, pg_catalog.current_database(), \2)); END $$;/g'
rewrite="$offset0; $join_rule; $lock_rule; $set_rule"

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

# notify_ids: the rewrite of notify's restored ids into ids with its owner's
# hash (the i in ...8000-00000000000i becomes ...8000-000iHHHHHHHH)
notify_ids() {
	local hex
	hex=$(q -d "$1" -c "SELECT pg_catalog.lpad(pg_catalog.to_hex(idemjob.owner_hash('nt'::text)::int4), 8, '0')")
	echo "s/00000000-0000-7000-8000-00000000000\([1-4]\)/00000000-0000-7000-8000-000\1$hex/g; s/('00000000-0000-7000-8000-00000000000' || i)::uuid/('00000000-0000-7000-8000-000' || i || '$hex')::uuid/"
}

# node_of DB OWNER: the port of the worker holding OWNER's jobs shard
node_of() {
	q -d "$1" -c "SELECT p.nodeport FROM pg_catalog.pg_dist_shard_placement p
		WHERE p.shardid = pg_catalog.get_shard_id_for_distribution_column('idemjob.jobs', idemjob.owner_hash('$2'::text))"
}

# citus_isolation: one ok/FAIL line per spec
citus_isolation() {
	local bin=${IJ_CITUS_BIN:-$PG_BIN} tester spec name perms n k dir out port sed_spec where
	tester=$("$bin/pg_config" --pkglibdir)/pgxs/src/test/isolation/isolationtester
	[ -x "$tester" ] || { not_ok "isolationtester at $tester"; return; }
	dir=$(mktemp -d /tmp/idemjob-citus-iso.XXXXXX)
	n=0
	for spec in test/isolation/specs/*.spec; do
		name=$(basename "$spec" .spec)
		mapfile -t perms < <(grep '^permutation' "$spec")
		: >"$dir/$name.out"
		sed_spec=$rewrite where="through the coordinator"
		for ((k = 0; k < ${#perms[@]}; k++)); do
			n=$((n + 1))
			for port in "${IJ_CITUS_PORTS[@]}"; do
				q -d postgres -p "$port" -c "DROP DATABASE IF EXISTS iso_$n WITH (FORCE)" >/dev/null 2>&1
			done
			if ! ij_citus_db "iso_$n" ||
				! q -d "iso_$n" -c "CREATE EXTENSION idemjob" -c "SELECT idemjob.distribute(8)" \
					-c "SELECT citus_internal.replace_isolation_tester_func()" >/dev/null; then
				echo "(could not make database iso_$n)" >>"$dir/$name.out"
				continue
			fi
			port=${IJ_CITUS_PORTS[0]}
			if [ "$name" = notify ]; then
				port=$(node_of "iso_$n" nt)
				sed_spec="$offset0; $join_rule; $(notify_ids "iso_$n")" where="on the worker of its owner"
			fi
			# the spec without its permutations and its fresh extension, and one permutation
			{
				grep -v -e '^permutation' -e 'DROP EXTENSION IF EXISTS idemjob CASCADE;' \
					-e '^[[:space:]]*CREATE EXTENSION idemjob;' "$spec" | sed "$sed_spec" |
					awk -v extra="$reference_setup" '!done && /^(teardown|session)/ { print extra; done = 1 } { print }'
				printf '%s\n' "${perms[$k]}"
			} >"$dir/$name.$k.spec"
			# (NOTICEs are part of the output: not the caller's client_min_messages)
			PGOPTIONS= timeout 300 "$tester" "host=$IJ_CITUS_DIR port=$port user=postgres dbname=iso_$n" \
				<"$dir/$name.$k.spec" >"$dir/$name.$k.out" 2>>"$dir/stderr"
			# one header for the spec, as one run of all permutations prints
			if [ "$k" -gt 0 ]; then sed -i '1d' "$dir/$name.$k.out"; fi
			cat "$dir/$name.$k.out" >>"$dir/$name.out"
			for port in "${IJ_CITUS_PORTS[@]}"; do
				q -d postgres -p "$port" -c "DROP DATABASE iso_$n WITH (FORCE)" >/dev/null 2>&1
			done
		done
		sed "$sed_spec" test/isolation/expected/$name.out >"$dir/$name.want"
		if diff -u "$dir/$name.want" "$dir/$name.out" >"$dir/$name.diff"; then
			ok "isolation $name $where: ${#perms[@]} permutations"
		else
			not_ok "isolation $name $where" "$(cat "$dir/$name.diff")"
		fi
	done
	[ -z "${IJ_KEEP_CLUSTER:-}" ] && rm -rf "$dir"
}
