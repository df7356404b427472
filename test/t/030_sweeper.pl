# test/t/030_sweeper.pl: the sweeper background worker.
#
# A cluster with idemjob in shared_preload_libraries, one database listed in
# idemjob.sweeper_databases and idemjob.sweeper_interval = 200ms.  Checks:
# the sweeper shows in pg_stat_activity as "idemjob sweeper"; a started
# attempt past its deadline becomes unknown (and its job in_doubt) with
# nobody calling expire_attempts(); a database not listed is not swept;
# sweeper_interval = 0 (on reload) stops it and a new interval starts it
# again; pg_terminate_backend() of the sweeper and kill -9 of its process
# (which takes the whole server through crash recovery) both end with a
# sweeper running again, and sweeping.

use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my $node = PostgreSQL::Test::Cluster->new('sweeper',
	port => $ENV{IDEMJOB_SWEEPER_PORT} // 5626);
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'idemjob'
idemjob.sweeper_databases = 'app'
idemjob.sweeper_interval = '200ms'
restart_after_crash = on
});
$node->start;
$node->safe_psql('postgres', 'CREATE DATABASE app; CREATE DATABASE other;');
$node->safe_psql($_, 'CREATE EXTENSION idemjob') for qw(app other);
# the sweeper of a database created after startup is started again by the
# postmaster (bgw_restart_time); a restart makes it immediate
$node->restart;

my $sweeper_q = q{SELECT pid FROM pg_stat_activity
	WHERE backend_type = 'idemjob sweeper' AND datname = 'app'};

sub sweeper_pid
{
	ok($node->poll_query_until('postgres',
			"SELECT count(*) = 1 FROM ($sweeper_q) s"),
		$_[0] // 'a sweeper runs in database app');
	return $node->safe_psql('postgres', $sweeper_q);
}

# start an attempt with a short deadline in a database; returns its id
my $n = 0;
sub short_attempt
{
	my ($db) = @_;
	$n++;
	return $node->safe_psql($db, qq{
		SELECT a.id FROM idemjob.submit('sw', 'job-$n', 'sweep') s,
			idemjob.start_attempt(s.job_id, timeout => '300 ms') a});
}

sub state_of
{
	my ($db, $attempt) = @_;
	return $node->safe_psql($db, qq{
		SELECT a.state || ' ' || j.state || ' ' || coalesce(a.error::text, '')
		FROM idemjob.attempts a JOIN idemjob.jobs j ON j.id = a.job_id
		WHERE a.id = '$attempt'});
}

sub swept
{
	my ($attempt, $what) = @_;
	ok($node->poll_query_until('app', qq{
			SELECT state = 'unknown' FROM idemjob.attempts WHERE id = '$attempt'}),
		$what);
	is(state_of('app', $attempt),
		'unknown in_doubt {"code": "unknown", "reason": "deadline"}',
		'the attempt is unknown by deadline, its job in doubt');
}

my $pid = sweeper_pid('the sweeper shows in pg_stat_activity');
is($node->safe_psql('postgres', qq{
		SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'idemjob sweeper'}),
	'1', 'one sweeper: only the listed database');
like($node->safe_psql('postgres',
		"SELECT application_name FROM pg_stat_activity WHERE pid = $pid"),
	qr/idemjob sweeper/, 'its application_name names it');

# a started attempt past its deadline becomes unknown by itself
my $a1 = short_attempt('app');
like(state_of('app', $a1), qr/^started running/, 'the attempt starts');
my $o1 = short_attempt('other');
swept($a1, 'the sweeper expires the attempt (nobody calls expire_attempts)');
# the unlisted database is not swept
sleep 1;
like(state_of('other', $o1), qr/^started running/,
	'a database not in idemjob.sweeper_databases is not swept');

# interval 0 on reload: off; a new interval: on again
$node->append_conf('postgresql.conf', "idemjob.sweeper_interval = 0\n");
$node->reload;
sleep 1;
my $a2 = short_attempt('app');
sleep 2;
like(state_of('app', $a2), qr/^started running/,
	'sweeper_interval = 0 turns the sweeper off');
$node->append_conf('postgresql.conf', "idemjob.sweeper_interval = '200ms'\n");
$node->reload;
# the worker sleeps up to 10 s while off before it reads the setting again
ok($node->poll_query_until('app', qq{
		SELECT state = 'unknown' FROM idemjob.attempts WHERE id = '$a2'}),
	'a new interval turns it on again');

# pg_terminate_backend: the postmaster starts it again (bgw_restart_time)
$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
ok($node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM ($sweeper_q) s WHERE pid <> $pid"),
	'a terminated sweeper is started again');
$pid = sweeper_pid();
swept(short_attempt('app'), 'the restarted sweeper sweeps');

# kill -9 of the sweeper's process (not the postmaster): crash recovery,
# then the sweeper comes back
my $log_offset = -s $node->logfile;
kill 'KILL', $pid or die "could not kill $pid: $!";
ok($node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM ($sweeper_q) s WHERE pid <> $pid"),
	'the sweeper runs again after a kill -9 of its process');
ok($node->log_contains(qr/terminated by signal 9/, $log_offset),
	'the server log shows the kill');
$pid = sweeper_pid();
swept(short_attempt('app'), 'the sweeper sweeps again after the crash');

# the server stops cleanly with the sweeper running (SIGTERM is served)
$node->stop('fast');
ok(1, 'fast shutdown with the sweeper running');

done_testing();
