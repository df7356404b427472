# test/t/030_sweeper.pl: the sweeper background worker.
#
# A cluster with idemjob in shared_preload_libraries, one database listed in
# idemjob.sweeper_databases and idemjob.sweeper_interval = 200ms.  Checks:
# the sweeper shows in pg_stat_activity as "idemjob sweeper"; a started
# attempt past its deadline becomes unknown (and its job in_doubt) with
# nobody calling expire_attempts(); a database not listed is not swept;
# the list is read again on reload (a database added gets a sweeper, one
# removed loses it, a missing one is logged once a minute, not every few
# seconds), and a restarted launcher never starts a second sweeper for a
# database;
# sweeper_interval = 0 (on reload) stops it and a new interval starts it
# again; pg_terminate_backend() of the sweeper and kill -9 of its process
# (which takes the whole server through crash recovery) both end with a
# sweeper running again, and sweeping; a row held in another session's open
# transaction is passed over, not waited on; the sweeper runs as the
# extension's owner (a role other than the superuser it connects as) and
# calls expire_attempts()'s C code, not a function of that name; a pass
# that expired an attempt is one LOG line, and a pass within the minute after
# it adds its counts to the next line (written when the sweeper exits).

use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use IPC::Run;

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
# the launcher tries a listed database that does not exist yet again a
# minute later; a restart makes it immediate
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

# wait (10 s at most) for the log, past offset, to match re count times
sub wait_for_log
{
	my ($re, $offset, $count) = @_;
	$count //= 1;
	for (1 .. 100)
	{
		my @m = substr(slurp_file($node->logfile), $offset) =~ /$re/g;
		return 1 if @m >= $count;
		usleep(100_000);
	}
	diag(substr(slurp_file($node->logfile), $offset));
	return 0;
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
my $summary_offset = -s $node->logfile;
my $a1 = short_attempt('app');
like(state_of('app', $a1), qr/^started running/, 'the attempt starts');
my $o1 = short_attempt('other');
swept($a1, 'the sweeper expires the attempt (nobody calls expire_attempts)');
# the pass that did something is one LOG line, at once (the first)
my $summary = qr/LOG:  idemjob expire_attempts: 0 leased attempts released, (\d+) started attempts past their deadline now unknown, 0 unknown attempts fenced/;
ok(wait_for_log($summary, $summary_offset),
	'a sweeper pass that expired an attempt writes a summary line');
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

# a second pass within the minute: no second line yet; its count is
# written when the sweeper exits (or a minute after the first line)
my @lines = substr(slurp_file($node->logfile), $summary_offset) =~ /$summary/g;
is(scalar(@lines), 1, 'the next pass within a minute writes no line of its own');

# pg_terminate_backend: the launcher starts it again
$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
ok(wait_for_log(qr/${summary}\n.*DETAIL:  1 pass over \d+ s/, $summary_offset, 2),
	'... its count is written when the sweeper exits');
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

# a row a worker holds in an open transaction does not stop expiry for the
# others (1.1 waited on it, and every tenant's attempts stayed started)
# (the sweeper is off while the row is taken, so that it cannot expire the
# attempt first)
$node->append_conf('postgresql.conf', "idemjob.sweeper_interval = 0\n");
$node->reload;
sleep 1;
my $held = short_attempt('app');
my $free = short_attempt('app');
my ($in, $out, $err) = ('', '', '');
my $holder = IPC::Run::start(
	[ 'psql', '-X', '-q', '-d', $node->connstr('app') ], \$in, \$out, \$err);
$in .= "BEGIN; SELECT 1 FROM idemjob.attempts WHERE id = '$held' FOR UPDATE;\n";
$holder->pump_nb;
ok($node->poll_query_until('postgres', q{
		SELECT count(*) = 1 FROM pg_stat_activity
		WHERE datname = 'app' AND state = 'idle in transaction'}),
	'another session holds one expired attempt\'s row');
like(state_of('app', $held), qr/^started running/, 'the held attempt is still started');
$node->append_conf('postgresql.conf', "idemjob.sweeper_interval = '200ms'\n");
$node->reload;
swept($free, 'the sweeper expires the others meanwhile (SKIP LOCKED)');
like(state_of('app', $held), qr/^started running/, '... and passes over the held one');
$in .= "COMMIT;\n\\q\n";
$holder->finish;
swept($held, 'the held attempt expires once its row is free');

# idemjob.sweeper_databases is read on reload (1.1 needed a restart)
sub sweepers_in
{
	return $node->safe_psql('postgres', qq{
		SELECT count(*) FROM pg_stat_activity
		WHERE backend_type = 'idemjob sweeper' AND datname = '$_[0]'});
}
$node->append_conf('postgresql.conf', "idemjob.sweeper_databases = 'app,other'\n");
$node->reload;
ok($node->poll_query_until('other', qq{
		SELECT state = 'unknown' FROM idemjob.attempts WHERE id = '$o1'}),
	'a database added to the list on reload is swept');
is(sweepers_in('other'), '1', '... by a sweeper of its own');
$log_offset = -s $node->logfile;
$node->append_conf('postgresql.conf', "idemjob.sweeper_databases = 'app'\n");
$node->reload;
ok($node->poll_query_until('postgres', qq{
		SELECT count(*) = 0 FROM pg_stat_activity
		WHERE backend_type = 'idemjob sweeper' AND datname = 'other'}),
	'a database removed from the list on reload loses its sweeper');
ok($node->log_contains(qr/sweeper for database "other" stops/, $log_offset),
	'... and the log says why');
is(sweepers_in('app'), '1', 'the other sweeper stays');

# a database that does not exist: tried at once, again 5 s later, then
# once a minute (1.1: every 5 s)
$log_offset = -s $node->logfile;
$node->append_conf('postgresql.conf', "idemjob.sweeper_databases = 'app, nodb'\n");
$node->reload;
sleep 20;
my $log = substr(slurp_file($node->logfile), $log_offset);
my $missing = () = $log =~ /database "nodb" does not exist/g;
ok($missing >= 1 && $missing <= 2,
	"a missing database is logged at most twice in 20 s ($missing times)");
$node->append_conf('postgresql.conf', "idemjob.sweeper_databases = 'app'\n");
$node->reload;

# a restarted launcher finds the sweeper still running and starts no second
my $launcher = $node->safe_psql('postgres', q{
	SELECT pid FROM pg_stat_activity WHERE backend_type = 'idemjob sweeper launcher'});
like($launcher, qr/^\d+$/, 'one sweeper launcher runs');
$pid = sweeper_pid();
$node->safe_psql('postgres', "SELECT pg_terminate_backend($launcher)");
ok($node->poll_query_until('postgres', qq{
		SELECT count(*) = 1 FROM pg_stat_activity
		WHERE backend_type = 'idemjob sweeper launcher' AND pid <> $launcher}),
	'a terminated launcher is started again');
sleep 3;
is($node->safe_psql('postgres', $sweeper_q), $pid,
	'the sweeper it left runs on, alone (the new launcher\'s second one left)');

# The sweeper connects as the bootstrap superuser; it runs as the
# extension's owner, and calls expire_attempts()'s C code, not whatever a
# function of that name does.  An extension owned by another role, a DBA's
# trigger that records who runs it, and the SQL function replaced by one
# that would make that owner a superuser.
$node->safe_psql('app', q{
	CREATE ROLE ij_owner SUPERUSER;
	DROP EXTENSION idemjob;
	DROP SCHEMA idemjob;
	SET ROLE ij_owner;
	CREATE EXTENSION idemjob;
	RESET ROLE;
	ALTER ROLE ij_owner NOSUPERUSER;
	CREATE TABLE public.sweep_who (who text, sess text);
	GRANT INSERT ON public.sweep_who TO PUBLIC;
	CREATE FUNCTION public.sweep_who() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN
		INSERT INTO public.sweep_who VALUES (current_user, session_user);
		RETURN NULL;
	END $$;
	CREATE TRIGGER sweep_who AFTER UPDATE ON idemjob.attempts
		FOR EACH ROW EXECUTE FUNCTION public.sweep_who();
	CREATE OR REPLACE FUNCTION idemjob.expire_attempts() RETURNS integer
		LANGUAGE sql AS $$ ALTER ROLE ij_owner SUPERUSER; SELECT 0 $$;
});
my $a9 = short_attempt('app');
swept($a9, 'the sweeper expires with expire_attempts() replaced');
is($node->safe_psql('app', 'SELECT DISTINCT who FROM public.sweep_who'),
	'ij_owner', 'as the extension\'s owner, not the superuser it connects as');
is($node->safe_psql('app', q{SELECT rolsuper FROM pg_roles WHERE rolname = 'ij_owner'}),
	'f', 'the replaced function never ran');

# the server stops cleanly with the sweeper running (SIGTERM is served)
$node->stop('fast');
ok(1, 'fast shutdown with the sweeper running');

done_testing();
