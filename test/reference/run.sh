#!/usr/bin/env bash
# test/reference/run.sh: docs/reference.md against the catalog, both ways.
#
#   bash test/reference/run.sh
#
# Needs a running cluster with idemjob installed (PGHOST, PGPORT, PGUSER of
# a superuser, as test/lib.sh exports them).  It creates a database, runs
# CREATE EXTENSION idemjob and LOAD 'idemjob', reads the catalog, and
# compares it with the page, one check per category:
#   functions     every function of schema idemjob: name, arguments as
#                 pg_get_function_arguments prints them (defaults included)
#                 and pg_get_function_result; the page lists each in a table
#                 under "## Functions", `name(args)` in the first column and
#                 `result` in the second
#   capabilities  who may call each function the page lists as callable:
#                 the capabilities whose roles hold EXECUTE (four roles made
#                 here, one per capability), PUBLIC, or owner (neither)
#   views, tables every view and ordinary table of the schema, with its
#                 columns in order and their types (format_type; the page
#                 may write timestamptz)
#   types         every enum of the schema and its values in order, and every
#                 base type (documented as "base type ...")
#   settings      every idemjob.% row of pg_settings: its built-in default
#                 (boot_val written with its unit as SHOW writes it: 5min,
#                 1MB) and its context (user, superuser, sighup = reload,
#                 postmaster = restart)
#   SQLSTATEs     every code the code can raise, read from the source:
#                 the IJ codes of src/idemjob.h, errcode(ERRCODE_...) in
#                 src/*.c mapped through PostgreSQL's utils/errcodes.h,
#                 elog(ERROR) (XX000), check_stack_depth() (54001),
#                 CHECK_FOR_INTERRUPTS() (57014), RAISE EXCEPTION in
#                 sql/idemjob--*.sql (ERRCODE = '...', else P0001); and the
#                 codes PostgreSQL raises around a call (input functions,
#                 serialization, locks, connections: a list below, each
#                 with its reason).  Each code's name is checked against
#                 PostgreSQL's errcodes.txt (or the IJ macro's name).
#   error fields  the keys and tables idemjob puts in an error's fields
#                 (ij_errfields calls in src/*.c)
# Each difference is printed: missing from the page, or stale (on the page
# but not in the catalog or the code).
#
# Then it proves it can fail: it runs the same comparison on copies of the
# page with one thing changed each (a function removed, a default changed, a
# setting removed, a context changed, a column added, ...) and requires each
# copy to fail, naming what was changed.
#
# Prints one line per check and a summary; exits non-zero if any check
# failed.  REFERENCE_DOC names another page to compare.

set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
: "${PG_CONFIG:=/usr/lib/postgresql/15/bin/pg_config}"
PG_BIN=$("$PG_CONFIG" --bindir)
errcodes_h=$("$PG_CONFIG" --includedir-server)/utils/errcodes.h
errcodes_txt=$("$PG_CONFIG" --sharedir)/errcodes.txt

doc=${REFERENCE_DOC:-$repo/docs/reference.md}
db=idemjob_reference
roles=(client worker operator admin monitor)
role_prefix=ij_reference_

passed=0
failed=0
label=reference
source "$repo/test/checks.sh"

work=$(mktemp -d /tmp/idemjob-reference.XXXXXX)
cleanup() {
	q -d postgres -c "DROP DATABASE IF EXISTS $db" >/dev/null 2>&1
	for r in "${roles[@]}"; do q -d postgres -c "DROP ROLE IF EXISTS $role_prefix$r" >/dev/null 2>&1; done
	rm -rf "$work"
}
trap cleanup EXIT

[ -r "$doc" ] || die "cannot read $doc"
[ -r "$errcodes_h" ] || die "cannot read $errcodes_h (postgresql-server-dev)"

# --- the catalog

q -d postgres -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS $db" ||
	die "cannot drop database $db"
for r in "${roles[@]}"; do
	q -d postgres -c "SET client_min_messages = warning" -c "DROP ROLE IF EXISTS $role_prefix$r" -c "CREATE ROLE $role_prefix$r NOLOGIN" ||
		die "cannot create role $role_prefix$r"
done
q -d postgres -c "CREATE DATABASE $db" || die "cannot create database $db"
q -d "$db" -c "CREATE EXTENSION idemjob" || die "CREATE EXTENSION idemjob failed"
for r in "${roles[@]}"; do
	q -d "$db" -c "SELECT idemjob.grant_capability('$role_prefix$r', '$r')" >/dev/null ||
		die "grant_capability('$role_prefix$r', '$r') failed"
done

tsv() { q -F $'\t' -d "$db" -c "LOAD 'idemjob'" -c "$1" >"$work/$2" || die "reading the catalog ($2) failed"; }

# name, arguments, result, who may call it (PUBLIC; else the capabilities
# holding EXECUTE; else owner)
tsv "SELECT p.proname, pg_catalog.pg_get_function_arguments(p.oid),
		pg_catalog.pg_get_function_result(p.oid),
		CASE WHEN EXISTS (SELECT FROM pg_catalog.aclexplode(coalesce(p.proacl, pg_catalog.acldefault('f', p.proowner))) a
						  WHERE a.grantee = 0 AND a.privilege_type = 'EXECUTE') THEN 'PUBLIC'
			 ELSE coalesce((SELECT pg_catalog.string_agg(c, ',' ORDER BY o) FROM
							  unnest(ARRAY['client', 'worker', 'operator', 'admin', 'monitor']) WITH ORDINALITY AS u(c, o)
							WHERE pg_catalog.has_function_privilege('$role_prefix' || c, p.oid, 'EXECUTE')),
						   'owner') END
	FROM pg_catalog.pg_proc p
	WHERE p.pronamespace = 'idemjob'::pg_catalog.regnamespace
	  -- a base type's input, output, operator and index support functions
	  -- are documented with the type
	  AND NOT EXISTS (SELECT FROM pg_catalog.pg_type t
					  WHERE p.oid IN (t.typinput, t.typoutput, t.typreceive, t.typsend))
	  AND NOT EXISTS (SELECT FROM pg_catalog.pg_operator o WHERE o.oprcode = p.oid)
	  AND NOT EXISTS (SELECT FROM pg_catalog.pg_amproc a WHERE a.amproc = p.oid)
	ORDER BY 1, 2" functions.tsv
# kind (table or view), relation, column, type, in column order
tsv "SELECT CASE WHEN c.relkind IN ('r', 'p') THEN 'table' ELSE 'view' END, c.relname, a.attname,
		pg_catalog.format_type(a.atttypid, a.atttypmod)
	FROM pg_catalog.pg_class c
	JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
	WHERE c.relnamespace = 'idemjob'::pg_catalog.regnamespace AND c.relkind IN ('r', 'p', 'v', 'm')
	ORDER BY c.relname, a.attnum" relations.tsv
# every type of the schema that is not a relation's row type or an array:
# name, kind, enum values in order
tsv "SELECT t.typname, t.typtype,
		coalesce((SELECT pg_catalog.string_agg(e.enumlabel, ',' ORDER BY e.enumsortorder)
				  FROM pg_catalog.pg_enum e WHERE e.enumtypid = t.oid), '')
	FROM pg_catalog.pg_type t
	WHERE t.typnamespace = 'idemjob'::pg_catalog.regnamespace
	  AND (t.typrelid = 0 OR (SELECT c.relkind FROM pg_catalog.pg_class c WHERE c.oid = t.typrelid) = 'c')
	  AND NOT EXISTS (SELECT FROM pg_catalog.pg_type e WHERE e.typarray = t.oid)
	ORDER BY 1" types.tsv
tsv "SELECT name, boot_val, coalesce(unit, ''), context, vartype
	FROM pg_catalog.pg_settings WHERE name LIKE 'idemjob.%' ORDER BY 1" settings.tsv

# --- the comparison: compare.pl DOC REPO WORKDIR ERRCODES_H ERRCODES_TXT
# prints "@@ ok SUMMARY" or "@@ fail SUMMARY" and the differences below it;
# exits 1 if any category differs
cat >"$work/compare.pl" <<'PERL'
use strict;
use warnings;

my ($doc, $repo, $work, $errcodes_h, $errcodes_txt) = @ARGV;
my $docname = 'docs/reference.md';
my $anyfail = 0;

sub report {
	my ($summary, @diffs) = @_;
	if (@diffs) {
		$anyfail = 1;
		print "@@ fail $summary\n";
		print "$_\n" for @diffs;
	} else {
		print "@@ ok $summary\n";
	}
}

sub slurp { my ($f) = @_; open(my $h, '<', $f) or die "$f: $!"; local $/; my $s = <$h>; close $h; return $s; }
sub tsv {
	my ($f) = @_;
	my @rows;
	for (split /\n/, slurp("$work/$f")) { push @rows, [split /\t/, $_, -1]; }
	return @rows;
}
# the rest of a C call after its "(", up to the matching ")"
my $rest_of_call = qr/(?<args>(?:"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|[^()"']++|\((?&args)\))*)\)/;
sub code1 { my ($cell) = @_; return $cell =~ /^`([^`]*)`$/ ? $1 : undef; }

# ---- the page: its tables, with the headings they stand under
my @tables;
{
	my ($h2, $h3, $fence, $cur) = ('', '', 0, undef);
	my $n = 0;
	for my $line (split /\n/, slurp($doc)) {
		$n++;
		if ($line =~ /^```/) { $fence = !$fence; $cur = undef; next; }
		next if $fence;
		if ($line =~ /^## (.*?)\s*$/) { ($h2, $h3, $cur) = ($1, '', undef); next; }
		if ($line =~ /^### (.*?)\s*$/) { ($h3, $cur) = ($1, undef); next; }
		if ($line !~ /^\|/) { $cur = undef; next; }
		# cells: split on | outside code spans
		my ($cell, $code, @cells) = ('', 0);
		my $body = $line;
		$body =~ s/^\|//;
		$body =~ s/\|\s*$//;
		for my $ch (split //, $body) {
			if ($ch eq '`') { $code = !$code; }
			if ($ch eq '|' && !$code) { push @cells, $cell; $cell = ''; next; }
			$cell .= $ch;
		}
		push @cells, $cell;
		s/^\s+|\s+$//g for @cells;
		if (!$cur) {
			$cur = { h2 => $h2, h3 => $h3, header => [@cells], rows => [], line => $n };
			push @tables, $cur;
		} elsif ($cells[0] =~ /^-+$/ && !@{$cur->{rows}}) {
			next;
		} else {
			push @{$cur->{rows}}, { cells => [@cells], line => $n };
		}
	}
}
sub tables_under {
	my ($h2, $first) = @_;
	return grep { $_->{h2} eq $h2 && $_->{header}[0] eq $first } @tables;
}

# ---- functions and capabilities
{
	my (%cat, %cat_caps);
	for my $r (tsv('functions.tsv')) {
		my ($name, $args, $result, $caps) = @$r;
		$cat{"$name($args)"} = $result;
		$cat_caps{"$name($args)"} = join(', ', split /,/, $caps);
	}
	my (%doc, %doc_caps, @bad);
	for my $t (tables_under('Functions', 'function')) {
		my $capcol = -1;
		for my $i (0 .. $#{$t->{header}}) { $capcol = $i if $t->{header}[$i] eq 'capability'; }
		push @bad, "  line $t->{line}: a function table's second column must be \"returns\""
			unless ($t->{header}[1] // '') eq 'returns';
		for my $row (@{$t->{rows}}) {
			my @c = @{$row->{cells}};
			my $sig = code1($c[0]);
			my $ret = code1($c[1] // '');
			if (!defined $sig || $sig !~ /^\w+\(.*\)$/ || !defined $ret) {
				push @bad, "  line $row->{line}: not `name(arguments)` | `result`: $c[0]";
				next;
			}
			push @bad, "  line $row->{line}: $sig is listed twice" if exists $doc{$sig};
			$doc{$sig} = $ret;
			if ($capcol >= 0) {
				my $cap = $c[$capcol] // '';
				$cap =~ s/`//g;
				for my $w (split /,\s*/, $cap) {
					push @bad, "  line $row->{line}: capability \"$w\" is none of client, worker, operator, admin, monitor, PUBLIC, owner"
						unless $w =~ /^(client|worker|operator|admin|monitor|PUBLIC|owner)$/;
				}
				$doc_caps{$sig} = $cap;
			}
		}
	}
	my @diff = @bad;
	my %docname = map { /^(\w+)\(/; ($1 => $_) } keys %doc;
	for my $sig (sort keys %cat) {
		if (!exists $doc{$sig}) {
			my ($name) = $sig =~ /^(\w+)\(/;
			push @diff, exists $docname{$name} && !exists $cat{$docname{$name}}
				? "  signature differs: the catalog has $sig, $docname has $docname{$name}"
				: "  missing from $docname: $sig";
		} elsif ($doc{$sig} ne $cat{$sig}) {
			push @diff, "  $sig returns $cat{$sig}, $docname says $doc{$sig}";
		}
	}
	my %catname = map { /^(\w+)\(/; ($1 => 1) } keys %cat;
	for my $sig (sort keys %doc) {
		next if exists $cat{$sig};
		my ($name) = $sig =~ /^(\w+)\(/;
		push @diff, "  stale in $docname (no such function in the catalog): $sig" unless $catname{$name};
	}
	report(sprintf("functions: %d in the catalog, %d in %s", scalar(keys %cat), scalar(keys %doc), $docname), @diff);

	my @cdiff;
	for my $sig (sort keys %doc_caps) {
		next unless exists $cat_caps{$sig};
		my $want = join(', ', sort split /,\s*/, $cat_caps{$sig});
		my $have = join(', ', sort split /,\s*/, $doc_caps{$sig});
		push @cdiff, "  $sig: callable by $cat_caps{$sig}, $docname says $doc_caps{$sig}" if $want ne $have;
	}
	my $withcap = grep { exists $cat_caps{$_} } keys %doc_caps;
	report(sprintf("capabilities: who may call each of the %d callable functions in %s", $withcap, $docname), @cdiff);
}

# ---- views and tables
sub normtype { my ($t) = @_; $t =~ s/^timestamptz$/timestamp with time zone/; return $t; }
for my $kind (['view', 'Views'], ['table', 'Tables']) {
	my ($k, $section) = @$kind;
	my (%cat, %catn);
	for my $r (tsv('relations.tsv')) {
		next unless $r->[0] eq $k;
		push @{$cat{$r->[1]}}, [$r->[2], $r->[3]];
		$catn{$r->[1]} = 1;
	}
	my (%doc, @diff);
	for my $t (tables_under($section, 'column')) {
		my ($rel) = $t->{h3} =~ /^`idemjob\.(\w+)`$/;
		if (!defined $rel) { push @diff, "  line $t->{line}: a column table under a heading that is not `idemjob.NAME`: $t->{h3}"; next; }
		push @diff, "  line $t->{line}: idemjob.$rel is listed twice" if exists $doc{$rel};
		$doc{$rel} = [];
		for my $row (@{$t->{rows}}) {
			my ($col, $type) = (code1($row->{cells}[0]), code1($row->{cells}[1] // ''));
			if (!defined $col || !defined $type) { push @diff, "  line $row->{line}: not `column` | `type`: $row->{cells}[0]"; next; }
			push @{$doc{$rel}}, [$col, normtype($type)];
		}
	}
	my ($ncat, $ndoc) = (0, 0);
	$ncat += @{$cat{$_}} for keys %cat;
	$ndoc += @{$doc{$_}} for keys %doc;
	for my $rel (sort keys %cat) {
		if (!exists $doc{$rel}) { push @diff, "  missing from $docname: $k idemjob.$rel"; next; }
		my %d = map { ($_->[0] => $_->[1]) } @{$doc{$rel}};
		my %c = map { ($_->[0] => $_->[1]) } @{$cat{$rel}};
		for my $col (@{$cat{$rel}}) {
			if (!exists $d{$col->[0]}) { push @diff, "  missing from $docname: column idemjob.$rel.$col->[0] ($col->[1])"; }
			elsif ($d{$col->[0]} ne $col->[1]) { push @diff, "  idemjob.$rel.$col->[0] is $col->[1], $docname says $d{$col->[0]}"; }
		}
		for my $col (@{$doc{$rel}}) {
			push @diff, "  stale in $docname (no such column): idemjob.$rel.$col->[0]" unless exists $c{$col->[0]};
		}
		my @co = grep { exists $d{$_} } map { $_->[0] } @{$cat{$rel}};
		my @do = grep { exists $c{$_} } map { $_->[0] } @{$doc{$rel}};
		push @diff, "  idemjob.$rel: columns in another order than the catalog's (" . join(', ', @co) . ")"
			if "@co" ne "@do";
	}
	for my $rel (sort keys %doc) {
		push @diff, "  stale in $docname (no such $k in the catalog): idemjob.$rel" unless exists $cat{$rel};
	}
	report(sprintf("%ss: %d in the catalog (%d columns), %d in %s (%d columns)",
		$k, scalar(keys %cat), $ncat, scalar(keys %doc), $docname, $ndoc), @diff);
}

# ---- types
{
	my (%cat, @diff, %doc);
	for my $r (tsv('types.tsv')) {
		my ($name, $kind, $labels) = @$r;
		if ($kind eq 'b') { $cat{$name} = '(base type)'; next; }
		if ($kind ne 'e') { push @diff, "  type idemjob.$name (typtype $kind) is neither an enum nor a base type: this test knows those only"; next; }
		$cat{$name} = $labels;
	}
	for my $t (tables_under('Types', 'type')) {
		for my $row (@{$t->{rows}}) {
			my ($name) = ($row->{cells}[0] // '') =~ /^`idemjob\.(\w+)`$/;
			if (!defined $name) { push @diff, "  line $row->{line}: not `idemjob.TYPE`: $row->{cells}[0]"; next; }
			my $v = $row->{cells}[1] // '';
			if ($v =~ /^base type\b/) { $doc{$name} = '(base type)'; next; }
			my @labels = $v =~ /`([^`]*)`/g;
			(my $rest = $v) =~ s/`[^`]*`//g;
			push @diff, "  line $row->{line}: the values of idemjob.$name must be code spans separated by commas" if $rest !~ /^[\s,]*$/;
			$doc{$name} = join(',', @labels);
		}
	}
	for my $name (sort keys %cat) {
		if (!exists $doc{$name}) { push @diff, "  missing from $docname: type idemjob.$name ($cat{$name})"; }
		elsif ($doc{$name} ne $cat{$name}) { push @diff, "  idemjob.$name is ($cat{$name}), $docname says ($doc{$name})"; }
	}
	for my $name (sort keys %doc) {
		push @diff, "  stale in $docname (no such type): idemjob.$name" unless exists $cat{$name};
	}
	report(sprintf("types: %d in the catalog, %d in %s", scalar(keys %cat), scalar(keys %doc), $docname), @diff);
}

# ---- settings
# a value in its base unit written as SHOW writes it: the largest unit that
# divides it, no unit for 0 (PostgreSQL's convert_int_from_base_unit)
my %units = (
	ms => [[d => 86400000], [h => 3600000], [min => 60000], [s => 1000], [ms => 1]],
	s => [[d => 86400], [h => 3600], [min => 60], [s => 1]],
	min => [[d => 1440], [h => 60], [min => 1]],
	B => [[TB => 1024**4], [GB => 1024**3], [MB => 1024**2], [kB => 1024], [B => 1]],
	kB => [[TB => 1024**3], [GB => 1024**2], [MB => 1024], [kB => 1]],
);
sub show_value {
	my ($val, $unit, $type) = @_;
	return $val if $unit eq '' || $type !~ /^(integer|real)$/ || $val eq '0';
	return undef unless $units{$unit} && $type eq 'integer';
	for my $u (@{$units{$unit}}) {
		return ($val / $u->[1]) . $u->[0] if $val % $u->[1] == 0;
	}
	return undef;
}
{
	my %ctx = (user => 'user', superuser => 'superuser', sighup => 'reload', postmaster => 'restart');
	my (%cat, %doc, @diff);
	for my $r (tsv('settings.tsv')) {
		my ($name, $boot, $unit, $context, $type) = @$r;
		my $show = show_value($boot, $unit, $type);
		push @diff, "  $name: cannot write its default $boot $unit ($type) as SHOW does" unless defined $show;
		push @diff, "  $name: context $context has no word on the page (user, superuser, reload, restart)" unless $ctx{$context};
		$cat{$name} = [$show // "$boot$unit", $ctx{$context} // $context];
	}
	for my $t (tables_under('Settings', 'setting')) {
		for my $row (@{$t->{rows}}) {
			my @c = @{$row->{cells}};
			my $name = code1($c[0]);
			my $default = ($c[1] // '') eq 'empty' ? '' : code1($c[1] // '');
			my $context = $c[2] // '';
			if (!defined $name || !defined $default) { push @diff, "  line $row->{line}: not `setting` | `default` (or empty) | context: $c[0]"; next; }
			push @diff, "  line $row->{line}: $name is listed twice" if exists $doc{$name};
			$doc{$name} = [$default, $context];
		}
	}
	for my $name (sort keys %cat) {
		if (!exists $doc{$name}) { push @diff, "  missing from $docname: $name (default '$cat{$name}[0]', $cat{$name}[1])"; next; }
		push @diff, "  $name: the default is '$cat{$name}[0]', $docname says '$doc{$name}[0]'" if $doc{$name}[0] ne $cat{$name}[0];
		push @diff, "  $name: the context is $cat{$name}[1], $docname says $doc{$name}[1]" if $doc{$name}[1] ne $cat{$name}[1];
	}
	for my $name (sort keys %doc) {
		push @diff, "  stale in $docname (not in pg_settings): $name" unless exists $cat{$name};
	}
	report(sprintf("settings: %d in pg_settings, %d in %s", scalar(keys %cat), scalar(keys %doc), $docname), @diff);
}

# ---- SQLSTATEs
{
	my (%macro, %cond, %condcode, @diff);
	for my $f ($errcodes_h, "$repo/src/idemjob.h") {
		my $h = slurp($f);
		while ($h =~ /#define\s+(ERRCODE_\w+)\s+MAKE_SQLSTATE\('(.)',\s*'(.)',\s*'(.)',\s*'(.)',\s*'(.)'\)/g) {
			$macro{$1} = "$2$3$4$5$6";
		}
	}
	if (-r $errcodes_txt) {
		for (split /\n/, slurp($errcodes_txt)) {
			next unless /^([0-9A-Z]{5})\s+[EWS]\s+ERRCODE_\w+\s+(\w+)/;
			$cond{$1} //= $2;
			$condcode{$2} = $1;
		}
	}
	# the IJ codes' names: their macros' (ERRCODE_IJ_NOT_FOUND: not_found)
	for (keys %macro) { $cond{$macro{$_}} = lc($1) if /^ERRCODE_IJ_(\w+)$/; }

	my %src;	# code => where it comes from
	my $add = sub { my ($code, $why) = @_; $src{$code} //= $why; };
	my $ijh = slurp("$repo/src/idemjob.h");
	while ($ijh =~ /#define\s+(ERRCODE_IJ_\w+)\s+MAKE_SQLSTATE/g) {
		$add->($macro{$1}, "src/idemjob.h: $1");
	}
	for my $f (sort glob("$repo/src/*.c")) {
		(my $c = slurp($f)) =~ s{/\*.*?\*/}{}gs;
		(my $short = $f) =~ s{^\Q$repo\E/}{};
		# a report below ERROR ends no call: leave out its errcode
		$c =~ s/\bereport\(\s*(?:DEBUG\d?|LOG|INFO|NOTICE|WARNING)\s*,$rest_of_call//g;
		while ($c =~ /\berrcode\(\s*(\w+)\s*\)/g) {
			my $m = $1;
			next unless $m =~ /^ERRCODE_/;
			if (exists $macro{$m}) { $add->($macro{$m}, "$short: $m"); }
			else { push @diff, "  $short: errcode($m) is in neither errcodes.h nor src/idemjob.h"; }
		}
		$add->('XX000', "$short: elog(ERROR)") if $c =~ /\belog\(\s*(ERROR|FATAL|PANIC)\b/;
		$add->('54001', "$short: check_stack_depth()") if $c =~ /\bcheck_stack_depth\(\)/;
		$add->('57014', "$short: CHECK_FOR_INTERRUPTS()") if $c =~ /\bCHECK_FOR_INTERRUPTS\(\)/;
	}
	for my $f (sort glob("$repo/sql/idemjob--*.sql")) {
		(my $short = $f) =~ s{^\Q$repo\E/}{};
		my $s = slurp($f);
		while ($s =~ /\bRAISE\b(.*?);[ \t]*$/gms) {
			my $stmt = $1;
			next if $stmt =~ /^\s*(DEBUG|LOG|INFO|NOTICE|WARNING)\b/;
			my $code;
			if ($stmt =~ /\bERRCODE\s*=\s*'([^']+)'/ || $stmt =~ /^\s*SQLSTATE\s+'([^']+)'/) {
				$code = $1;
				if ($code !~ /^[0-9A-Z]{5}$/) {
					my $name = $code;
					$code = $condcode{$name} // $macro{'ERRCODE_' . uc($name)};
					if (!defined $code) { push @diff, "  $short: unknown condition name $name"; next; }
				}
			} elsif ($stmt =~ /^\s*(EXCEPTION\b|')/) {
				$code = 'P0001';
			} else {
				next;
			}
			$add->($code, "$short: RAISE");
		}
	}
	# Raised by PostgreSQL around a call, not by idemjob's code: a caller can
	# get each, and the page must say so.
	my %pg = (
		'22P02' => 'input functions: a malformed uuid, jsonb or interval argument',
		'22003' => 'input functions: an integer argument or a jsonb number out of range',
		'22007' => 'timestamptz input: a malformed run_at',
		'22008' => 'timestamptz input: a run_at past the timestamp range',
		'22015' => 'interval input: an interval past its range',
		'22021' => 'text input: bytes invalid in the database encoding',
		'22P05' => 'jsonb input: \u0000 in a string',
		'42602' => 'regrole input: a malformed role name',
		'42704' => 'regrole input: an unknown role',
		'42883' => 'function resolution: no idemjob function takes these argument types',
		'25006' => 'a call that writes, on a standby or in a read-only transaction',
		'40001' => 'REPEATABLE READ and SERIALIZABLE: serialization failures',
		'40P01' => 'row locks taken in different orders by two transactions',
		'55P03' => 'the caller\'s lock_timeout while a call waits for a row lock',
		'53xxx' => 'class 53, insufficient resources: out of memory, disk full, connections',
		'08xxx' => 'class 08, connection exceptions: the call is in doubt',
		'57P01' => 'the server ends the session (shutdown, pg_terminate_backend): in doubt',
	);
	$add->($_, "PostgreSQL: $pg{$_}") for keys %pg;

	my (%doc, %docname_);
	for my $t (grep { $_->{h3} eq '' } tables_under('Errors', 'SQLSTATE')) {
		for my $row (@{$t->{rows}}) {
			my ($c0, $name) = ($row->{cells}[0], $row->{cells}[1] // '');
			my @codes = $c0 =~ /`([0-9A-Z]{2}[0-9A-Zx]{3})`/g;
			(my $rest = $c0) =~ s/`[^`]*`//g;
			if (!@codes || $rest !~ /^[\s,]*$/) { push @diff, "  line $row->{line}: not `SQLSTATE` (or several, comma-separated): $c0"; next; }
			for my $code (@codes) {
				push @diff, "  line $row->{line}: $code is listed twice" if exists $doc{$code};
				$doc{$code} = $row->{line};
			}
			(my $n = $name) =~ s/`//g;
			if (@codes == 1 && $n =~ /^\w+$/ && exists $cond{$codes[0]} && $cond{$codes[0]} ne $n) {
				push @diff, "  line $row->{line}: $codes[0] is $cond{$codes[0]}, $docname says $n";
			}
		}
	}
	for my $code (sort keys %src) {
		push @diff, "  missing from $docname: $code ($src{$code})" unless exists $doc{$code};
	}
	for my $code (sort keys %doc) {
		push @diff, "  stale in $docname (raised neither by the code nor by PostgreSQL around a call, as far as this test knows): $code"
			unless exists $src{$code};
	}
	my $nsrc = grep { $src{$_} !~ /^PostgreSQL/ } keys %src;
	report(sprintf("SQLSTATEs: %d from the code and %d from PostgreSQL around a call, %d in %s",
		$nsrc, scalar(keys %src) - $nsrc, scalar(keys %doc), $docname), @diff);
}

# ---- error fields
{
	my (%keys, %tabs, @diff);
	for my $f (sort glob("$repo/src/*.c")) {
		(my $c = slurp($f)) =~ s{/\*.*?\*/}{}gs;
		while ($c =~ /\bij_errfields\(/g) {
			my ($pos, $depth, $args) = (pos($c), 1, '');
			while ($depth > 0 && $pos < length $c) {
				my $ch = substr($c, $pos++, 1);
				$depth++ if $ch eq '(';
				$depth-- if $ch eq ')';
				$args .= $ch if $depth > 0;
			}
			next unless $args =~ /^\s*"(\w+)"/;	# the definition, not a call
			$tabs{$1} = 1;
			my $lits = join(' ', $args =~ /"((?:[^"\\]|\\.)*)"/g);
			$keys{$1} = 1 while $lits =~ /(?:^|\s)(\w+)=/g;
		}
	}
	my (%dkeys, %dtabs);
	for my $t (grep { $_->{h3} eq 'Error fields' } @tables) {
		if ($t->{header}[0] eq 'key') {
			for my $row (@{$t->{rows}}) {
				my $k = code1($row->{cells}[0]);
				if (!defined $k) { push @diff, "  line $row->{line}: not `key`: $row->{cells}[0]"; next; }
				$dkeys{$k} = 1;
			}
		}
		for my $row (@{$t->{rows}}) {
			next unless $row->{cells}[0] eq '`PG_DIAG_TABLE_NAME`';
			my $v = $row->{cells}[-1];
			$dtabs{$_} = 1 for $v =~ /`(\w+)`/g;
		}
	}
	for (sort keys %keys) { push @diff, "  missing from $docname: key $_" unless $dkeys{$_}; }
	for (sort keys %dkeys) { push @diff, "  stale in $docname (no error sets it): key $_" unless $keys{$_}; }
	for (sort keys %tabs) { push @diff, "  missing from $docname: table $_ in PG_DIAG_TABLE_NAME" unless $dtabs{$_}; }
	for (sort keys %dtabs) { push @diff, "  stale in $docname (no error names it): table $_ in PG_DIAG_TABLE_NAME" unless $tabs{$_}; }
	report(sprintf("error fields: %d keys and %d tables in the code, %d and %d in %s",
		scalar(keys %keys), scalar(keys %tabs), scalar(keys %dkeys), scalar(keys %dtabs), $docname), @diff);
}

exit $anyfail;
PERL

compare() { perl "$work/compare.pl" "$1" "$repo" "$work" "$errcodes_h" "$errcodes_txt"; }

# the comparator's output, as ok / not_ok lines
report() {
	local line msg="" detail="" status=""
	while IFS= read -r line || [ -n "$line" ]; do
		case $line in
		"@@ ok "* | "@@ fail "*)
			if [ "$status" = ok ]; then ok "$msg"; elif [ -n "$status" ]; then not_ok "$msg" "$detail"; fi
			status=${line#@@ }
			status=${status%% *}
			msg=${line#@@ $status }
			detail=""
			;;
		*) detail+="${detail:+$'\n'}$line" ;;
		esac
	done <"$1"
	if [ "$status" = ok ]; then ok "$msg"; elif [ -n "$status" ]; then not_ok "$msg" "$detail"; fi
}

compare "$doc" >"$work/out" 2>&1
rc=$?
report "$work/out"
[ $rc -le 1 ] || not_ok "the comparison itself failed (exit $rc)" "$(tail -5 "$work/out")"

# --- self-check: the comparison fails on a page with one thing changed
# mutate DESCRIPTION EXPECTED PERL-EXPRESSION: runs the expression (perl
# -0777 -pe, the whole page in $_) on a copy; the comparison of that copy
# must fail and name EXPECTED among the differences
mutate() {
	local what=$1 expected=$2 expr=$3 copy=$work/mutated.md
	perl -0777 -pe "$expr" "$doc" >"$copy"
	if cmp -s "$doc" "$copy"; then
		not_ok "self-check: $what: the change did not apply to the page"
		return
	fi
	compare "$copy" >"$work/mutated.out" 2>&1
	local rc=$?
	if [ $rc -eq 1 ] && grep -v '^@@ ok ' "$work/mutated.out" | grep -qF -- "$expected"; then
		ok "self-check: $what: caught"
	else
		not_ok "self-check: $what: not caught (exit $rc; expected a difference naming \"$expected\")" \
			"$(grep -v '^@@ ok ' "$work/mutated.out")"
	fi
}
mutate "a function removed" "missing from docs/reference.md: claim(" \
	's/^\| `claim\(.*\n//m'
mutate "a default changed" "claim(worker text" \
	's/max_jobs integer DEFAULT 1,/max_jobs integer DEFAULT 2,/'
mutate "a result type changed" "returns integer" \
	's/^(\| `expire_attempts\(\)` \| )`integer`/$1`bigint`/m'
mutate "a capability changed" "cancel_attempt(" \
	's/^(\| `cancel_attempt\(.*?\| )operator, admin \|/$1worker, operator, admin |/m'
mutate "a stale function added" "stale in docs/reference.md (no such function in the catalog): resubmit(" \
	's/^(\| `job\(job_id uuid\)`.*\n)/$1| `resubmit(job_id uuid)` | `idemjob.jobs` | client | stale |\n/m'
mutate "a setting removed" "missing from docs/reference.md: idemjob.notify" \
	's/^\| `idemjob\.notify`.*\n//m'
mutate "a setting's default changed" "idemjob.attempt_timeout: the default" \
	's/^(\| `idemjob\.attempt_timeout` \| )`5min`/$1`10min`/m'
mutate "a setting's context changed" "idemjob.sweeper_databases: the context" \
	's/^(\| `idemjob\.sweeper_databases` \| empty \| )reload/${1}restart/m'
mutate "a table column removed" "missing from docs/reference.md: column idemjob.spent_keys.open_attempts" \
	's/^\| `open_attempts`.*\n//m'
mutate "a stale column added" "stale in docs/reference.md (no such column): idemjob.jobs.bogus" \
	's/^(\| `cancel_reason` .*\n)/$1| `bogus` | `text` | stale |\n/m'
mutate "a column type changed" "idemjob.queue_stats.due is bigint" \
	's/^\| `due` \| `bigint`/| `due` | `integer`/m'
mutate "a view removed" "missing from docs/reference.md: view idemjob.provider_stats" \
	's/^### `idemjob\.provider_stats`\n.*?(?=^## )//ms'
mutate "enum values reordered" "idemjob.job_state is" \
	's/`pending`, `running`, `in_doubt`/`pending`, `in_doubt`, `running`/'
mutate "an SQLSTATE removed" "missing from docs/reference.md: 0A000" \
	's/^\| `0A000`.*\n//m'
mutate "a stale SQLSTATE added" "stale in docs/reference.md (raised neither" \
	's/^(\| `22004` .*\n)/$1| `22012` | division_by_zero | never | 500 |\n/m'
mutate "an SQLSTATE's name changed" "0A000 is feature_not_supported" \
	's/^\| `0A000` \| feature_not_supported/| `0A000` | not_supported/m'
mutate "an error field key removed" "missing from docs/reference.md: key retry_after" \
	's/^\| `retry_after`.*\n//m'

echo
echo "$label: $passed checks passed, $failed failed"
[ "$failed" -eq 0 ]
