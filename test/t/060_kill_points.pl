# test/t/060_kill_points.pl: a worker killed at each point of its loop.
#
# The worker loop of the README (claim with a lease, begin_attempt right
# before the provider, the provider, complete_attempt) runs as a psql
# process with only the worker capability; the test sends it one call at a
# time and kills it (SIGKILL) at one point of the loop per job:
#
#   p1  waiting in claim(wait => ...)         nothing is claimed for it
#   p2  after claim, before begin_attempt     its lease ends: released, never
#                                             sent, no retry counted
#   p3  after begin_attempt, before the call  deadline: unknown; the intent's
#                                             fence_unknown_after gives it up
#   p4  during the provider call              restarted under its name:
#                                             abandon_attempts() gives it up
#   p5  after the provider answered, before   the same, and the answer it
#       complete_attempt                      never reported is not needed
#   op  as p3, on an intent without           left in doubt for an operator
#       fence_unknown_after                   (the policy says so)
#
# Then a new worker (worker rights only) runs the loop until nothing is
# due, after the restarted ones have called abandon_attempts().  The
# sweeper (a background worker) is the only other actor: no operator call
# is made.  Every job of p1-p5 ends succeeded, exactly one attempt won,
# those whose attempt was sent (p3-p5) on the route's certified fallback,
# the others on their own provider; the op job is in_doubt, untouched.
# The table printed at the end is the issue's kill point x outcome.

use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use IPC::Run;

my $node = PostgreSQL::Test::Cluster->new('killpoints',
	port => $ENV{IDEMJOB_KILL_POINTS_PORT} // 5629);
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'idemjob'
idemjob.sweeper_databases = 'app'
idemjob.sweeper_interval = '100ms'
idemjob.max_wait = '5min'
});
$node->start;
$node->safe_psql('postgres', 'CREATE DATABASE app; CREATE ROLE kw LOGIN;');
$node->restart;		# the sweeper starts for app at once

my @points = qw(p1 p2 p3 p4 p5 op);
my $setup = q{
	CREATE EXTENSION idemjob;
	SELECT idemjob.grant_capability('kw', 'worker');
};
for my $p (@points)
{
	my $fence = $p eq 'op' ? 'NULL' : q{'1s'};
	$setup .= qq{
	SELECT idemjob.define_contract('kill.$p', '{"type": "object", "required": ["by"]}');
	SELECT idemjob.certify_provider('kill.$p', 'fallback');
	SELECT idemjob.set_route('kill.$p', '{primary,fallback}');
	SELECT idemjob.set_retry_policy('kill.$p', retry_backoff => '0', fence_unknown_after => $fence);
	};
}
$node->safe_psql('app', $setup);

# a worker: one psql process as role kw, fed one call at a time
my $seq = 0;
sub worker
{
	my ($name) = @_;
	my ($in, $out, $err) = ('', '', '');
	my $h = IPC::Run::start(
		[ 'psql', '-X', '-A', '-t', '-q', '-v', 'VERBOSITY=sqlstate',
		  '-d', $node->connstr('app') . ' user=kw' ],
		'<', \$in, '>', \$out, '2>', \$err);
	my $w = { name => $name, h => $h, in => \$in, out => \$out, err => \$err };
	call($w, "SET idemjob.claim_lease = '1s'");
	return $w;
}

# send one statement and wait for its answer (the last line of output)
sub call
{
	my ($w, $sql) = @_;
	$seq++;
	${ $w->{out} } = '';
	${ $w->{in} } .= "$sql;\n\\echo __done_$seq\n";
	my $deadline = time + 60;
	while (${ $w->{out} } !~ /__done_$seq/)
	{
		die "no answer from $w->{name} to: $sql\n${ $w->{err} }" if time > $deadline;
		$w->{h}->pump_nb;
		usleep(10_000);
	}
	my $answer = ${ $w->{out} };
	$answer =~ s/__done_$seq\n?//;
	chomp $answer;
	return $answer;
}

# send a statement without waiting for its answer
sub send_only
{
	my ($w, $sql) = @_;
	${ $w->{in} } .= "$sql;\n";
	$w->{h}->pump_nb while ${ $w->{in} } ne '';
}

sub kill_worker
{
	my ($w) = @_;
	kill 'KILL', $w->{h}->{KIDS}[0]{PID};
	eval { $w->{h}->finish };
}

sub claim_sql
{
	my ($w, $intent, $wait) = @_;
	$wait //= '0';
	return "SELECT attempt_id || ' ' || provider FROM idemjob.claim('$w->{name}', "
	  . "'{kill.$intent}', timeout => '2s', wait => '$wait', lease => true)";
}

sub submit
{
	my ($p, $more) = @_;
	$more //= '';
	return $node->safe_psql('app',
		"SELECT job_id FROM idemjob.submit('o', 'key-$p', 'kill.$p', '{}', 'primary'$more)");
}

my %job;
my %killed_attempt;

# p1: killed while waiting in claim; the job arrives after the kill
{
	my $w = worker('w-p1');
	send_only($w, claim_sql($w, 'p1', '60 seconds'));
	ok($node->poll_query_until('app', q{SELECT count(*) = 1 FROM pg_stat_activity
			WHERE usename = 'kw' AND state = 'active' AND query LIKE '%claim(''w-p1''%'}),
		'p1: the worker waits in claim');
	kill_worker($w);
	ok($node->poll_query_until('app', q{SELECT count(*) = 0 FROM pg_stat_activity
			WHERE usename = 'kw' AND query LIKE '%claim(''w-p1''%'}),
		'p1: its backend ends');
	$job{p1} = submit('p1');
}

# p2: claimed (leased), killed before begin_attempt; max_attempts 1: the
# released attempt is not counted, or the job could not run again
{
	$job{p2} = submit('p2', ', max_attempts => 1');
	my $w = worker('w-p2');
	($killed_attempt{p2}) = split / /, call($w, claim_sql($w, 'p2'));
	kill_worker($w);
}

# p3, op: confirmed, killed before the provider call; never restarted
for my $p (qw(p3 op))
{
	$job{$p} = submit($p);
	my $w = worker("w-$p");
	($killed_attempt{$p}) = split / /, call($w, claim_sql($w, $p));
	call($w, "SELECT state FROM idemjob.begin_attempt('$killed_attempt{$p}')");
	kill_worker($w);
}

# p4: killed during the provider call (a call that takes long)
# p5: the provider answered, killed before complete_attempt
# both restarted under the same name below
for my $p (qw(p4 p5))
{
	$job{$p} = submit($p);
	my $w = worker("w-$p");
	($killed_attempt{$p}) = split / /, call($w, claim_sql($w, $p));
	is(call($w, "SELECT state FROM idemjob.begin_attempt('$killed_attempt{$p}')"), 'started',
		"$p: confirmed before the provider call");
	usleep(200_000) if $p eq 'p4';		# the provider is working
	kill_worker($w);
}

# the restarted workers clear what their predecessors left
for my $p (qw(p4 p5))
{
	my $w = worker("w-$p");
	is(call($w, "SELECT idemjob.abandon_attempts('w-$p')"), '1',
		"$p: the restarted worker gives up the attempt it left");
	kill_worker($w);
}

# a new worker runs the loop until the five jobs are final; the sweeper
# releases p2's lease and expires then fences p3's attempt meanwhile
my $w = worker('w-new');
my $deadline = time + 90;
my $final_q = "SELECT count(*) FROM idemjob.jobs WHERE state IN ('succeeded', 'failed')"
  . " AND intent <> 'kill.op'";
while (time < $deadline)
{
	for my $p (grep { $_ ne 'op' } @points)
	{
		my $row = call($w, claim_sql($w, $p));
		next if $row eq '';
		my ($attempt, $provider) = split / /, $row;
		call($w, "SELECT state FROM idemjob.begin_attempt('$attempt')");
		call($w, "SELECT outcome FROM idemjob.complete_attempt('$attempt', "
			  . "'{\"by\": \"$provider\"}')");
	}
	last if $node->safe_psql('app', $final_q) == 5;
	usleep(100_000);
}
kill_worker($w);

# the outcome of each kill point
my %expect = (
	p1 => [ 'succeeded', 'primary', '1 succeeded' ],
	p2 => [ 'succeeded', 'primary', '2 released,succeeded' ],
	p3 => [ 'succeeded', 'fallback', '2 cancelled,succeeded' ],
	p4 => [ 'succeeded', 'fallback', '2 cancelled,succeeded' ],
	p5 => [ 'succeeded', 'fallback', '2 cancelled,succeeded' ],
	op => [ 'in_doubt', undef, '1 unknown' ],
);
my @table;
for my $p (@points)
{
	my $row = $node->safe_psql('app', qq{
		SELECT j.state, coalesce(w.provider, '-'),
			(SELECT count(*) || ' ' || string_agg(a.state::text, ',' ORDER BY a.attempt_no)
			 FROM idemjob.attempts a WHERE a.job_id = j.id),
			(SELECT count(*) FROM idemjob.attempts a
			 WHERE a.job_id = j.id AND a.state = 'succeeded'),
			coalesce((SELECT a.state::text FROM idemjob.attempts a
					  WHERE a.id = '@{[ $killed_attempt{$p} // '00000000-0000-0000-0000-000000000000' ]}'), '-')
		FROM idemjob.jobs j LEFT JOIN idemjob.attempts w ON w.id = j.completed_by
		WHERE j.id = '$job{$p}'});
	my ($state, $provider, $attempts, $winners, $killed) = split /\|/, $row;
	my ($es, $ep, $ea) = @{ $expect{$p} };
	is($state, $es, "$p: the job ends $es");
	is($attempts, $ea, "$p: its attempts: $ea");
	if (defined $ep)
	{
		is($provider, $ep, "$p: the winner ran on $ep");
		is($winners, 1, "$p: exactly one attempt won");
	}
	push @table, sprintf("%-3s %-10s %-9s %-8s %s", $p, $state, $provider, $killed, $attempts);
}
is($node->safe_psql('app', q{SELECT count(*) FROM idemjob.race_log}), '0',
	'no result was dropped: no killed worker reported late');
ok($node->log_contains(qr/connection to client lost/),
	'p1: the waiting claim noticed its client was gone');

diag("kill point x outcome (job, winner's provider, the killed worker's attempt, attempts):");
diag($_) for @table;

$node->stop('fast');
done_testing();
