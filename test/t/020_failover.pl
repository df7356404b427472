# test/t/020_failover.pl: failover to a synchronous standby loses nothing.
#
# A primary with a synchronous standby (synchronous_commit = remote_apply):
# six persistent clients (IdemFire.pm) work on jobs; replay on the standby
# is paused so that every commit waits, two completions of one job race
# (attempt a1 cancelled without a fence, a2 started: both may still win),
# the primary is crashed with calls in flight, the standby is promoted, and
# the clients resend their in-doubt calls to it.  Zero acknowledged jobs or
# results may be lost, zero duplicated, and exactly one of the racing
# completions wins.
#
# The negative control: the same harness against an asynchronous standby
# whose WAL receiver is stopped must find acknowledged jobs missing after
# the failover, so the zero above means something.

use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(time usleep);
use IdemFire;

sub pair
{
	my ($name, $port, $sync) = @_;
	my $primary = PostgreSQL::Test::Cluster->new("${name}_primary", port => $port);
	$primary->init(allows_streaming => 1);
	$primary->append_conf('postgresql.conf', "max_connections = 40\nlog_min_messages = warning\n");
	$primary->start;
	$primary->safe_psql('postgres', 'CREATE EXTENSION idemjob; CREATE EXTENSION amcheck;');
	$primary->backup("${name}_backup");
	my $standby = PostgreSQL::Test::Cluster->new("${name}_standby", port => $port + 1);
	$standby->init_from_backup($primary, "${name}_backup", has_streaming => 1);
	$standby->start;
	$primary->wait_for_catchup($standby, 'replay', $primary->lsn('insert'));
	if ($sync)
	{
		$primary->append_conf('postgresql.conf',
			"synchronous_standby_names = '*'\nsynchronous_commit = remote_apply\n");
		$primary->reload;
		$primary->poll_query_until('postgres',
			"SELECT count(*) = 1 FROM pg_stat_replication WHERE sync_state = 'sync'")
			or die 'standby did not become synchronous';
		is($primary->safe_psql('postgres', 'SHOW synchronous_commit'), 'remote_apply', 'synchronous_commit = remote_apply');
	}
	return ($primary, $standby);
}

# a call sent without waiting for its answer
sub send_call
{
	my ($node, $sql) = @_;
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start([ 'psql', '-X', '-A', '-t', '-q', '-v', 'VERBOSITY=sqlstate',
		'-d', $node->connstr('postgres'), '-c', $sql ], '>', \$out, '2>', \$err);
	return { h => $h, out => \$out, err => \$err };
}

sub switch_clients
{
	my ($clients, $node) = @_;
	for my $c (@$clients) { $c->{node} = $node; }
}

# ------------------------------------------------------------ synchronous
my ($primary, $standby) = pair('sync', 5620, 1);
my @clients = map { IdemFire->new(id => $_, node => $primary) } 1 .. 6;
my $t0 = time;
IdemFire::run_clients(\@clients, time + 4);

# the race: a1 cancelled without a fence, a2 started; both can still win
my ($job, $a1, $a2) = split /\|/, $primary->safe_psql('postgres', q{
	WITH j AS (SELECT job_id FROM idemjob.submit('race', 'r1', 'race', '{"race": 1}')),
	a1 AS (SELECT a.id FROM j, idemjob.start_attempt(j.job_id) a)
	SELECT j.job_id, a1.id FROM j, a1});
$primary->safe_psql('postgres', "SELECT idemjob.cancel_attempt('$a1', 'no answer yet')");
$a2 = $primary->safe_psql('postgres', "SELECT id FROM idemjob.start_attempt('$job')");
$primary->wait_for_catchup($standby, 'replay', $primary->lsn('insert'));

# from now on every commit on the primary waits for the standby to apply it
$standby->safe_psql('postgres', 'SELECT pg_wal_replay_pause()');
my $race_a = send_call($primary,
	"SELECT outcome FROM idemjob.complete_attempt('$a1', '{\"by\": \"a1\"}')");
IdemFire::run_clients(\@clients, time + 2);
my $in_flight = scalar grep { $_->busy } @clients;
ok($race_a->{h}->pumpable, 'the racing completion waits for the standby');
cmp_ok($in_flight, '>', 0, "$in_flight client calls in flight at the crash");

# crash the primary, promote the standby
$primary->stop('immediate');
eval { $race_a->{h}->finish; };
note("racing completion on the old primary: out=${ $race_a->{out} } err=${ $race_a->{err} }");
my $a_acked = ${ $race_a->{out} } =~ /^(won|lost)$/m ? $1 : undef;
$standby->promote;
ok($standby->safe_psql('postgres', 'SELECT NOT pg_is_in_recovery()') eq 't', 'standby promoted');

# the clients resend what was in doubt to the new primary, and go on
switch_clients(\@clients, $standby);
my $b_answer = $standby->safe_psql('postgres',
	"SELECT outcome FROM idemjob.complete_attempt('$a2', '{\"by\": \"a2\"}')");
my $a_answer = $standby->safe_psql('postgres',
	"SELECT outcome FROM idemjob.complete_attempt('$a1', '{\"by\": \"a1\"}')");
IdemFire::run_clients(\@clients, time + 3);
IdemFire::drain(\@clients, 60);

my ($winner, $result) = split /\|/, $standby->safe_psql('postgres',
	"SELECT completed_by, result->>'by' FROM idemjob.jobs WHERE id = '$job'");
is(scalar(grep { $_ eq 'won' } $a_answer, $b_answer), 1,
	"exactly one winner of the completion racing the failover (a1: $a_answer, a2: $b_answer)");
is($winner, $a_answer eq 'won' ? $a1 : $a2, 'completed_by is the attempt told "won"');
is($result, $a_answer eq 'won' ? 'a1' : 'a2', "the stored result is the winner's");
is($a_answer, $a_acked, 'the racing call acknowledged before the crash kept its answer') if defined $a_acked;
is($standby->safe_psql('postgres', "SELECT count(*) FROM idemjob.race_log WHERE job_id = '$job'"), '1',
	'the loser is in the race log');

my $doubt = 0;
my $acked = 0;
my $doubt_committed = 0;
my @errors;
for my $c (@clients)
{
	$doubt += $c->{in_doubt};
	$acked += $c->{acked};
	$doubt_committed += $c->{doubt_committed} // 0;
	push @errors, @{ $c->{errors} };
}
is(scalar @errors, 0, 'no client call failed outright') or diag(join "\n", @errors[0 .. ($#errors < 9 ? $#errors : 9)]);
cmp_ok($doubt, '>', 0, "$doubt calls in doubt across the failover");
my $m = IdemFire::check_model($standby, \@clients, 'sync failover');
is($m->{lost_jobs}, 0, "sync: no acknowledged job lost ($m->{acknowledged_jobs} acknowledged)");
is($m->{lost_results}, 0, 'sync: no acknowledged result lost');
is($m->{stored_jobs}, $m->{acknowledged_jobs}, 'sync: no duplicate or extra job');
is($m->{extra_attempts}, 0, 'sync: no extra attempt');
is(IdemFire::check_invariants($standby, 'sync failover'), 0, 'sync: invariants and amcheck on the new primary');
my $fp = IdemFire::fingerprint($standby);
my $replayed = IdemFire::replay_in_doubt($standby, \@clients);
is(IdemFire::fingerprint($standby), $fp, "sync: replaying the $replayed in-doubt calls changes nothing");
my $sync_secs = time - $t0;
$standby->stop;

# ------------------------------------------------------------ negative control
my ($p2, $s2) = pair('async', 5622, 0);
my @c2 = map { IdemFire->new(id => $_, node => $p2) } 1 .. 6;
IdemFire::run_clients(\@c2, time + 2);
$p2->wait_for_catchup($s2, 'replay', $p2->lsn('insert'));
# cut the standby off: what the primary acknowledges now never reaches it
$s2->safe_psql('postgres', "ALTER SYSTEM SET primary_conninfo = ''; SELECT pg_reload_conf();");
$s2->poll_query_until('postgres', 'SELECT count(*) = 0 FROM pg_stat_wal_receiver')
	or die 'WAL receiver did not stop';
IdemFire::run_clients(\@c2, time + 2);
$p2->stop('immediate');
$_->close for @c2;
$s2->promote;
my $m2 = IdemFire::check_model($s2, \@c2, 'async control');
cmp_ok($m2->{lost_jobs}, '>', 0,
	"async control: the harness detects loss ($m2->{lost_jobs} of $m2->{acknowledged_jobs} acknowledged jobs missing)");
$s2->stop;

diag(sprintf("failover: %d clients, %d calls acknowledged, %d in doubt and retried on the new primary "
	. "(%d submits had committed unseen), %d jobs; lost: %d jobs, %d results; race: a1 %s, a2 %s; "
	. "async control lost %d of %d; %.0fs",
	scalar @clients, $acked, $doubt, $doubt_committed, $m->{acknowledged_jobs}, $m->{lost_jobs},
	$m->{lost_results}, $a_answer, $b_answer, $m2->{lost_jobs}, $m2->{acknowledged_jobs}, $sync_secs));

done_testing();
