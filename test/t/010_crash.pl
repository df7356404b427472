# test/t/010_crash.pl: crash recovery under load.
#
# Eight persistent clients (IdemFire.pm) submit, start, fail and complete
# jobs while the server is killed: kill -9 of a backend that has a call in
# flight, three times (each takes the whole server through crash recovery),
# kill -9 of the postmaster once, and one stop('immediate').  Clients treat
# a lost connection as "in doubt" and resend the same call once they can
# connect again.  Afterwards: every acknowledged submit and completion is
# stored as acknowledged, no retry created a job or an attempt, the
# invariants hold, amcheck finds nothing, and replaying every call that was
# ever in doubt changes nothing at all.  The server log must show each kill.

use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use IdemFire;

my $node = PostgreSQL::Test::Cluster->new('crash', port => 5610);
$node->init;
$node->append_conf('postgresql.conf', qq{
restart_after_crash = on
max_connections = 40
log_min_messages = warning
});
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION idemjob; CREATE EXTENSION amcheck;');

my @clients = map { IdemFire->new(id => $_, node => $node) } 1 .. 8;

# wait for the server to accept connections again
sub wait_up
{
	for (1 .. 120)
	{
		my ($rc) = $node->psql('postgres', 'SELECT 1');
		return 1 if $rc == 0;
		usleep(250_000);
	}
	return 0;
}

my %injected = (backend => 0, postmaster => 0, immediate => 0);
my $in_doubt_at_kill = 0;

# kill -9 the backend of a client whose call is in flight
sub kill_backend
{
	my @busy = grep { $_->busy } @clients;
	for (1 .. 200)
	{
		last if @busy;
		IdemFire::run_clients(\@clients, time + 0.01);
		@busy = grep { $_->busy } @clients;
	}
	my $victim = $busy[0] or return 0;
	$in_doubt_at_kill += scalar grep { $_->busy } @clients;
	kill 'KILL', $victim->backend_pid;
	note("killed backend " . $victim->backend_pid . " of client $victim->{id}");
	$injected{backend}++;
	return 1;
}

my $t0 = time;
IdemFire::run_clients(\@clients, time + 3);
for my $i (1 .. 3)
{
	kill_backend();
	IdemFire::run_clients(\@clients, time + 1);
	ok(wait_up(), "server back after backend kill $i");
	IdemFire::run_clients(\@clients, time + 3);
}

# kill -9 the postmaster: its backends exit once they notice; then start it
{
	$in_doubt_at_kill += scalar grep { $_->busy } @clients;
	my $pmpid = $node->{_pid};
	$node->kill9;
	$injected{postmaster}++;
	note("killed postmaster $pmpid");
	IdemFire::run_clients(\@clients, time + 1);
	# orphaned backends hold the shared memory until they notice: retry
	my $started = 0;
	for (1 .. 60)
	{
		$node->{_pid} = undef;
		if ($node->start(fail_ok => 1)) { $started = 1; last; }
		sleep 1;
	}
	ok($started, 'server restarted after postmaster kill -9');
	IdemFire::run_clients(\@clients, time + 4);
}

# an immediate shutdown (no checkpoint), then start
{
	$in_doubt_at_kill += scalar grep { $_->busy } @clients;
	$node->stop('immediate');
	$injected{immediate}++;
	IdemFire::run_clients(\@clients, time + 1);
	$node->start;
	IdemFire::run_clients(\@clients, time + 4);
}

IdemFire::drain(\@clients, 60);
my $elapsed = time - $t0;

my $acked = 0;
my $doubt = 0;
my $retried = 0;
my $doubt_committed = 0;
my @errors;
for my $c (@clients)
{
	$doubt_committed += $c->{doubt_committed} // 0;
	$acked += $c->{acked};
	$doubt += $c->{in_doubt};
	$retried += $c->{retries_after_doubt};
	push @errors, @{ $c->{errors} };
}
is(scalar @errors, 0, 'no call failed outright') or diag(join "\n", @errors[0 .. ($#errors < 9 ? $#errors : 9)]);
cmp_ok($doubt, '>', 0, "calls were in doubt at the kills ($doubt)");

my $m = IdemFire::check_model($node, \@clients, 'crash');
is($m->{lost_jobs}, 0, "acknowledged jobs present ($m->{acknowledged_jobs} acknowledged)");
is($m->{lost_results}, 0, 'acknowledged completions present, byte for byte');
is($m->{extra_attempts}, 0, 'no retry started an extra attempt');
is($m->{stored_jobs}, $m->{acknowledged_jobs}, 'no retry created an extra job');
is($m->{created_twice}, 0, 'no key answered created = true twice');
is(IdemFire::check_invariants($node, 'crash'), 0, 'invariants and amcheck after recovery');

my $fp = IdemFire::fingerprint($node);
my $replayed = IdemFire::replay_in_doubt($node, \@clients);
is(IdemFire::fingerprint($node), $fp, "replaying the $replayed in-doubt calls changes nothing");

# prove the kills landed
my $log = slurp_file($node->logfile);
my $sig9 = () = $log =~ /server process \(PID \d+\) was terminated by signal 9/g;
my $recoveries = () = $log =~ /database system was (?:interrupted|not properly shut down)/g;
my $immediate = () = $log =~ /received immediate shutdown request/g;
is($sig9, $injected{backend}, "server log: $sig9 backends terminated by signal 9");
cmp_ok($recoveries, '>=', $injected{backend} + $injected{postmaster} + $injected{immediate},
	"server log: $recoveries crash recoveries");
is($immediate, 1, 'server log: the immediate shutdown');

diag(sprintf("crash: %d clients, %d calls acknowledged, %d in doubt and retried (%d submits had committed unseen), %d jobs, "
	. "crashes injected: %d backend kill -9, %d postmaster kill -9, %d immediate stop; "
	. "lost: %d jobs, %d results; %.0fs",
	scalar @clients, $acked, $doubt, $doubt_committed, $m->{acknowledged_jobs},
	$injected{backend}, $injected{postmaster}, $injected{immediate},
	$m->{lost_jobs}, $m->{lost_results}, $elapsed));

$node->stop;
done_testing();
