#!/usr/bin/perl
#
# test/jsonschema/run.pl
#	Run the official JSON-Schema-Test-Suite (draft 2020-12) through
#	idemjob.validate() on a running server.
#
# Usage:
#	perl test/jsonschema/run.pl [--dir DIR] [--optional] [--verbose]
#
# The connection comes from the standard PG* environment variables
# (PGHOST, PGPORT, PGDATABASE, PGUSER, ...); the database must have the
# idemjob extension installed.  psql must be on PATH (or set PSQL).
#
# The suite ships in Debian's libtest-json-schema-acceptance-perl; DIR
# defaults to its draft2020-12 directory.  Every test group (one schema and
# its cases) runs unless its schema uses something idemjob deliberately does
# not support (a keyword outside the contract, a $ref that is not a local
# JSON Pointer, $id below the root) or its data cannot be stored in jsonb
# (U+0000).  A group skipped for an unsupported feature is still sent to the
# server, which must refuse its schema with SQLSTATE 22023 (the contract:
# unsupported keywords are refused, never ignored).  Every case of every
# other group must give the suite's expected answer.  The script prints the
# files and cases run and passed, every skipped group with its reason, and
# exits non-zero on any failure.
#
# --optional also runs the files under optional/ (bignum, float overflow,
# ECMA-262 regex dialect, ...) and reports them separately; their failures
# are listed but do not change the exit status.
#
# Needs only perl core modules (JSON::PP, File::Temp, Getopt::Long).
#

use strict;
use warnings;

use File::Basename qw(basename);
use File::Temp qw(tempfile);
use Getopt::Long;
use JSON::PP;

my $dir;
my $optional = 0;
my $verbose = 0;
GetOptions(
	'dir=s' => \$dir,
	'optional' => \$optional,
	'verbose' => \$verbose) or die "usage: $0 [--dir DIR] [--optional] [--verbose]\n";

unless (defined $dir)
{
	for my $base ('/usr/share/perl5/auto/share/dist/Test-JSON-Schema-Acceptance',
		'/usr/local/share/perl5/auto/share/dist/Test-JSON-Schema-Acceptance')
	{
		if (-d "$base/tests/draft2020-12")
		{
			$dir = "$base/tests/draft2020-12";
			last;
		}
	}
	if (!defined $dir && eval { require File::ShareDir; 1 })
	{
		my $base = eval { File::ShareDir::dist_dir('Test-JSON-Schema-Acceptance') };
		$dir = "$base/tests/draft2020-12" if $base && -d "$base/tests/draft2020-12";
	}
	die "JSON-Schema-Test-Suite not found; install libtest-json-schema-acceptance-perl or use --dir\n"
	  unless defined $dir;
}
die "$dir: not a directory\n" unless -d $dir;

# The keywords idemjob supports (CONTRACT.md, define_contract).
my %supported = map { $_ => 1 } qw(
  type enum const properties required additionalProperties patternProperties
  propertyNames minProperties maxProperties dependentRequired dependentSchemas
  items prefixItems contains minContains maxContains minItems maxItems
  uniqueItems minLength maxLength pattern minimum maximum exclusiveMinimum
  exclusiveMaximum multipleOf allOf anyOf oneOf not if then else $defs $ref
  title description default examples deprecated readOnly writeOnly $comment
  $schema $id format contentEncoding contentMediaType contentSchema);

# Where subschemas sit, to walk a schema without mistaking data for one.
my %one_schema = map { $_ => 1 } qw(
  additionalProperties propertyNames items contains not if then else
  contentSchema);
my %schema_map = map { $_ => 1 } qw(properties patternProperties
  dependentSchemas $defs);
my %schema_list = map { $_ => 1 } qw(prefixItems allOf anyOf oneOf);

# Why idemjob will not run a schema: a list of reasons, empty if it will.
sub scan_schema
{
	my ($s, $is_root, $reasons) = @_;

	return unless ref $s eq 'HASH';
	for my $k (sort keys %$s)
	{
		my $v = $s->{$k};

		if (!$supported{$k})
		{
			push @$reasons, "keyword \"$k\" is not supported";
			next;
		}
		if ($k eq '$schema' && !ref $v
			&& $v ne 'https://json-schema.org/draft/2020-12/schema')
		{
			# accepted as an annotation, so not refused: only not run
			push @$reasons, "~custom metaschema \"$v\" (vocabularies are out of scope)";
		}
		elsif ($k eq '$id' && !$is_root)
		{
			push @$reasons, '"$id" below the root (identifier-based references are not supported)';
		}
		elsif ($k eq '$ref' && (ref $v || $v !~ m{^#(/|$)}))
		{
			push @$reasons, "\"\$ref\": \"$v\" is not a local JSON Pointer";
		}
		elsif ($one_schema{$k})
		{
			scan_schema($v, 0, $reasons);
		}
		elsif ($schema_map{$k} && ref $v eq 'HASH')
		{
			scan_schema($v->{$_}, 0, $reasons) for sort keys %$v;
		}
		elsif ($schema_list{$k} && ref $v eq 'ARRAY')
		{
			scan_schema($_, 0, $reasons) for @$v;
		}
	}
}

# jsonb cannot store U+0000 in a string
sub has_nul
{
	my ($v) = @_;

	if (ref $v eq 'HASH')
	{
		for (keys %$v)
		{
			return 1 if /\x{0}/ || has_nul($v->{$_});
		}
	}
	elsif (ref $v eq 'ARRAY')
	{
		for (@$v)
		{
			return 1 if has_nul($_);
		}
	}
	elsif (defined $v && !ref $v)
	{
		return 1 if $v =~ /\x{0}/;
	}
	return 0;
}

sub uniq
{
	my %seen;
	return grep { !$seen{$_}++ } @_;
}

sub dollar_quote
{
	my ($text) = @_;
	my $tag = 'ijt';

	$tag .= 'x' while index($text, "\$$tag\$") >= 0;
	return "\$$tag\$$text\$$tag\$";
}

my @files = map { { path => $_, optional => 0 } } sort glob("$dir/*.json");
push @files, map { { path => $_, optional => 1 } } sort glob("$dir/optional/*.json")
  if $optional;
die "no test files in $dir\n" unless @files;

my $json = JSON::PP->new->utf8;
my $sql = <<'EOS';
\set ON_ERROR_STOP 1
SET client_min_messages = warning;
CREATE FUNCTION pg_temp.ij_try(s json, v json) RETURNS text
LANGUAGE plpgsql AS $f$
DECLARE
	r jsonb;
BEGIN
	r := idemjob.validate(s::jsonb, v::jsonb);
	RETURN CASE WHEN r IS NULL THEN 'valid' ELSE 'invalid ' || r::text END;
EXCEPTION WHEN OTHERS THEN
	RETURN 'error ' || SQLSTATE || ' ' || replace(SQLERRM, E'\n', ' ');
END
$f$;
EOS

my @plan;	# per file: groups, which to run, skip reasons
for my $f (@files)
{
	my $raw = do { local (@ARGV, $/) = ($f->{path}); <> };
	my $groups = $json->decode($raw);
	my $name = ($f->{optional} ? 'optional/' : '') . basename($f->{path});
	my (@run, @refuse);
	my %skip;

	for my $gi (0 .. $#$groups)
	{
		my $g = $groups->[$gi];
		my @reasons;

		scan_schema($g->{schema}, 1, \@reasons);
		if (@reasons)
		{
			# a reason starting with "~" is not one idemjob refuses
			my @refused = grep { !/^~/ } @reasons;

			s/^~// for @reasons;
			$skip{$gi} = join('; ', uniq(@reasons))
			  . (@refused ? '' : ' [not refused: only not run]');
			push @refuse, $gi + 1 if @refused;
		}
		elsif (has_nul($g->{schema}) || grep { has_nul($_->{data}) } @{ $g->{tests} })
		{
			$skip{$gi} = 'a string contains U+0000, which jsonb cannot store';
		}
		else
		{
			push @run, $gi + 1;
		}
	}
	push @plan, { %$f, name => $name, groups => $groups, skip => \%skip,
		nrun => scalar(@run) };

	my $q = dollar_quote($raw);
	if (@run)
	{
		$sql .= "SELECT 'case' || E'\\t' || g.i || E'\\t' || t.j || E'\\t' || "
		  . "pg_temp.ij_try(g.v->'schema', t.v->'data')\n"
		  . "FROM json_array_elements(${q}::json) WITH ORDINALITY g(v, i),\n"
		  . "  json_array_elements(g.v->'tests') WITH ORDINALITY t(v, j)\n"
		  . "WHERE g.i = ANY('{" . join(',', @run) . "}'::bigint[]) ORDER BY g.i, t.j;\n";
	}
	if (@refuse)
	{
		$sql .= "SELECT 'refuse' || E'\\t' || g.i || E'\\t0\\t' || "
		  . "pg_temp.ij_try(g.v->'schema', 'null')\n"
		  . "FROM json_array_elements(${q}::json) WITH ORDINALITY g(v, i)\n"
		  . "WHERE g.i = ANY('{" . join(',', @refuse) . "}'::bigint[]) ORDER BY g.i;\n";
	}
	$sql .= "SELECT 'end';\n";
}

my ($fh, $sqlfile) = tempfile('ij-jsonschema-XXXXXX', SUFFIX => '.sql',
	TMPDIR => 1, UNLINK => 1);
binmode $fh;
print $fh $sql;
close $fh;

my $psql = $ENV{PSQL} // 'psql';
open(my $out, '-|', $psql, '-X', '-q', '-A', '-t', '-f', $sqlfile)
  or die "could not run $psql: $!\n";
my @lines = <$out>;
close $out;
die "psql failed (exit status " . ($? >> 8) . ")\n" if $? != 0;

# psql output: per file, its case lines and refusal lines, then "end"
my @results = ([]);
for my $line (@lines)
{
	chomp $line;
	next if $line eq '';
	if ($line eq 'end')
	{
		push @results, [];
		next;
	}
	push @{ $results[-1] }, [ split(/\t/, $line, 4) ];
}

my %tot = map { ($_ => 0) } qw(files_run files_skipped cases_run cases_passed
  groups_skipped cases_skipped refusals refusals_ok);
my %opt = %tot;
my (@failures, @opt_failures, @skipped_files, @skip_lines, @opt_lines);

for my $fi (0 .. $#plan)
{
	my $p = $plan[$fi];
	my $t = $p->{optional} ? \%opt : \%tot;
	my $fails = $p->{optional} ? \@opt_failures : \@failures;
	my ($run, $passed) = (0, 0);

	for my $r (@{ $results[$fi] })
	{
		my ($kind, $gi, $ci, $got) = @$r;
		my $g = $p->{groups}[ $gi - 1 ];

		if ($kind eq 'refuse')
		{
			$t->{refusals}++;
			if ($got =~ /^error 22023 /)
			{
				$t->{refusals_ok}++;
			}
			else
			{
				push @$fails, "$p->{name}: \"$g->{description}\": schema not refused with 22023, got: $got";
			}
			next;
		}
		my $case = $g->{tests}[ $ci - 1 ];
		my $want = $case->{valid} ? 'valid' : 'invalid';
		my ($verdict) = $got =~ /^(\S+)/;

		$run++;
		if ($verdict eq $want)
		{
			$passed++;
			print "ok   $p->{name}: $g->{description}: $case->{description}\n" if $verbose;
		}
		else
		{
			push @$fails, "$p->{name}: \"$g->{description}\": \"$case->{description}\": expected $want, got: $got";
		}
	}
	$t->{cases_run} += $run;
	$t->{cases_passed} += $passed;

	my @skipped = sort { $a <=> $b } keys %{ $p->{skip} };
	for my $gi (@skipped)
	{
		my $g = $p->{groups}[$gi];
		my $n = scalar @{ $g->{tests} };

		$t->{groups_skipped}++;
		$t->{cases_skipped} += $n;
		push @{ $p->{optional} ? \@opt_lines : \@skip_lines },
		  sprintf("  %-32s \"%s\" (%d case%s): %s", "$p->{name}:", $g->{description},
			$n, $n == 1 ? '' : 's', $p->{skip}{$gi});
	}
	if ($p->{nrun} == 0)
	{
		$t->{files_skipped}++;
		push @skipped_files, $p->{name} unless $p->{optional};
	}
	else
	{
		$t->{files_run}++;
	}
	printf("%-40s %4d/%-4d cases passed, %d group%s skipped\n",
		$p->{name}, $passed, $run, scalar(@skipped), @skipped == 1 ? '' : 's');
}

print "\nSkipped groups (their schemas must be, and were checked to be, refused with 22023 unless noted):\n";
print "$_\n" for @skip_lines;
print "\nSkipped files (no group runnable): ",
  (@skipped_files ? join(', ', @skipped_files) : 'none'), "\n";

if ($optional)
{
	print "\nOptional files (informational):\n";
	print "$_\n" for @opt_lines;
	printf("optional: %d files run, %d cases run, %d passed, %d failed; %d groups skipped\n",
		$opt{files_run}, $opt{cases_run}, $opt{cases_passed},
		$opt{cases_run} - $opt{cases_passed}, $opt{groups_skipped});
	print "  FAIL (optional) $_\n" for @opt_failures;
}

print "\n";
print "FAIL $_\n" for @failures;
printf("draft2020-12: %d files run, %d skipped; %d cases run, %d passed, %d failed; "
	  . "%d groups (%d cases) skipped; %d/%d unsupported schemas refused with 22023\n",
	$tot{files_run}, $tot{files_skipped}, $tot{cases_run}, $tot{cases_passed},
	$tot{cases_run} - $tot{cases_passed}, $tot{groups_skipped}, $tot{cases_skipped},
	$tot{refusals_ok}, $tot{refusals});

exit(@failures ? 1 : 0);
