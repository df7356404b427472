# test/upgrade/lib.sh: shared by test/upgrade/run.sh (from 1.0) and
# test/upgrade/from_1_1.sh.  The caller sets here, repo, PG_CONFIG, PG_BIN,
# tmp, passed, failed and old_installed, and names its checks' prefix in
# $label (printed by die(); "upgrade" if unset).

label=${label:-upgrade}
source "$repo/test/checks.sh"

install_tree() {
	make -s -C "$repo" PG_CONFIG="$PG_CONFIG" >"$tmp/make-current.log" 2>&1 &&
		make -s -C "$repo" install PG_CONFIG="$PG_CONFIG" >>"$tmp/make-current.log" 2>&1
}
finish() {
	if [ "$old_installed" = 1 ]; then
		install_tree || cat "$tmp/make-current.log" >&2
	fi
	if [ "$failed" -eq 0 ]; then rm -rf "$tmp"; else echo "$label: outputs kept in $tmp"; fi
}
trap finish EXIT
trap 'exit 130' INT TERM	# so that finish() puts this tree back

git_() { git -c safe.directory="$repo" -C "$repo" "$@"; }

# preflight COMMIT: the release is in history, the installation writable,
# the server up and PGUSER a superuser
preflight() {
	git_ cat-file -e "$1^{commit}" 2>/dev/null ||
		die "commit $1 is not in $repo's history (a shallow clone? fetch it with: git fetch --unshallow)"
	local d
	for d in "$("$PG_CONFIG" --pkglibdir)" "$("$PG_CONFIG" --sharedir)/extension"; do
		[ -w "$d" ] || die "$d is not writable by $(id -un): run as root, or as the owner of the installation"
	done
	q -d postgres -c "SELECT 1" >/dev/null || die "no server (PGHOST=${PGHOST:-} PGPORT=${PGPORT:-})"
	[ "$(q -d postgres -c "SELECT rolsuper FROM pg_roles WHERE rolname = current_user")" = t ] ||
		die "PGUSER must be a superuser"
}

# install_release COMMIT VERSION: build a released version from git history
# and install it (as released: without -Werror, which newer compilers trip
# on in old code, e.g. gcc 15's unterminated-string-initialization)
install_release() {
	echo "# building $2 from commit $1"
	mkdir "$tmp/v$2"
	git_ archive "$1" | tar -x -C "$tmp/v$2" || die "git archive $1 failed"
	grep -q "default_version = '$2'" "$tmp/v$2/idemjob.control" || die "commit $1 is not $2"
	# 1.1 never built on PostgreSQL 17+: its one call whose signature 17
	# changed gets the argument it lacks, so that the update from 1.1's SQL
	# objects is tested there too (as after a pg_upgrade from 15)
	if [ "$("$PG_CONFIG" --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/')" -ge 17 ] &&
		grep -q 'makeJsonLexContextCstringLen((char \*) json,' "$tmp/v$2/src/rights.c" 2>/dev/null; then
		echo "# $2: makeJsonLexContextCstringLen given 17's first argument (NULL)"
		sed -i 's/makeJsonLexContextCstringLen((char \*) json,/makeJsonLexContextCstringLen(NULL, (char *) json,/' "$tmp/v$2/src/rights.c"
	fi
	make -s -C "$tmp/v$2" PG_CONFIG="$PG_CONFIG" PG_CFLAGS="-Wall -Wno-unused-parameter" >"$tmp/make-$2.log" 2>&1 ||
		{ cat "$tmp/make-$2.log" >&2; die "$2 does not build"; }
	old_installed=1
	make -s -C "$tmp/v$2" install PG_CONFIG="$PG_CONFIG" >>"$tmp/make-$2.log" 2>&1 ||
		{ cat "$tmp/make-$2.log" >&2; die "$2 does not install"; }
}

# the settings pg_regress gives the databases it creates
regress_settings() {
	q -d postgres -c "ALTER DATABASE $1 SET lc_messages TO 'C'" \
		-c "ALTER DATABASE $1 SET lc_monetary TO 'C'" \
		-c "ALTER DATABASE $1 SET lc_numeric TO 'C'" \
		-c "ALTER DATABASE $1 SET lc_time TO 'C'" \
		-c "ALTER DATABASE $1 SET bytea_output TO 'hex'" \
		-c "ALTER DATABASE $1 SET timezone_abbreviations TO 'Default'"
}

# the pg_regress suite's tests: sql/NAME.sql beside the install scripts
regress_test_names() {
	(cd "$repo/sql" && ls *.sql | grep -v '^idemjob--' | sed 's/\.sql$//' | sort)
}

# run_regress DB OUTDIR: the whole pg_regress suite on an existing database
run_regress() {
	local conn_opts=() tests=()
	[ -n "${PGHOST:-}" ] && conn_opts+=(--host="$PGHOST")
	[ -n "${PGPORT:-}" ] && conn_opts+=(--port="$PGPORT")
	[ -n "${PGUSER:-}" ] && conn_opts+=(--user="$PGUSER")
	mapfile -t tests < <(regress_test_names)
	mkdir -p "$2"
	"$(dirname "$(dirname "$("$PG_CONFIG" --pgxs)")")/test/regress/pg_regress" \
		--inputdir="$repo" --outputdir="$2" --bindir="$PG_BIN" "${conn_opts[@]}" \
		--use-existing --dbname="$1" "${tests[@]}" >"$2/log" 2>&1
}

# what differs and why (normalize() removes it):
# - object identifiers, relfilenodes, xids and LSNs in --binary-upgrade mode
# - the 1.0 README's "GRANT USAGE ON SCHEMA idemjob TO <app>" ($app): a grant on the
#   schema made by the DBA, not by the extension; the update takes back the
#   table privileges, and USAGE alone reaches nothing but validate() and
#   uuid_v7(), which PUBLIC may call anyway (checked above)
# - ACL entries with no GRANT or REVOKE: the upgraded tables carry an
#   explicit owner-only ACL (what is left after taking back the grants),
#   the fresh ones the default, which is the same owner-only ACL (the
#   effective privileges are compared below)
normalize() {
	grep -v -E '^-- Dumped (from|by)|^\\(un)?restrict ' |
		grep -v -F "GRANT USAGE ON SCHEMA idemjob TO $app;" |
		sed -E "s/binary_upgrade_set_next_([a-z_]+)\('[0-9]+'::pg_catalog\.oid\)/binary_upgrade_set_next_\1(OID)/
			s/^SET relfrozenxid = '[0-9]+', relminmxid = '[0-9]+'/SET relfrozenxid = XID, relminmxid = MXID/
			s/^WHERE oid = '[0-9]+';/WHERE oid = OID;/
			s/(binary_upgrade_create_empty_extension\(.*, )'\{[0-9,]+\}'/\1'{OIDS}'/
			s/binary_upgrade_set_next_attribute_versions\('[^']*'/binary_upgrade_set_next_attribute_versions('LSNS'/
			s/^-- Name: (.*); Schema: (.*); Owner: .*/-- Name: \1; Schema: \2/" |
		awk 'function flush() { if (!(acl && !grant)) printf "%s", blk; blk = ""; acl = 0; grant = 0 }
			$0 == "--" || $0 == "" { next }
			/^-- Name: / { flush(); acl = ($0 ~ /Type: ACL;/) }
			{ blk = blk $0 "\n"; if ($0 ~ /^(GRANT|REVOKE) /) grant = 1 }
			END { flush() }'
}
