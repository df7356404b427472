# test/t/050_dead_client.pl: a waiting call whose client has gone.
#
# A worker killed while claim(wait => ...) waits in the server must not
# have a job claimed for it: 1.1 went on waiting, claimed the next job that
# arrived, committed an attempt nobody would run, and the job sat in doubt
# until its deadline and then until an operator came.  Since 1.2 the wait
# loops of claim and await_job look at the client's socket each round and
# end the session (FATAL "connection to client lost", the transaction
# aborted) as soon as it is closed.  Checks, for claim and for await_job:
# the client process killed with SIGKILL mid-wait, the backend ends within
# seconds (not at the end of its 60 s wait); a job submitted after the kill
# stays pending with no attempt; the log says why.  And the negative
# control: the same wait with a live client claims the job.

use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;

my $node = PostgreSQL::Test::Cluster->new('deadclient',
	port => $ENV{IDEMJOB_DEAD_CLIENT_PORT} // 5628);
$node->init;
$node->append_conf('postgresql.conf', "idemjob.max_wait = '5min'\n");
$node->start;
$node->safe_psql('postgres', 'CREATE DATABASE app');
$node->safe_psql('app', 'CREATE EXTENSION idemjob');

# start a psql that runs one waiting statement; returns the harness
sub waiter
{
	my ($sql) = @_;
	my ($in, $out, $err) = ('', '', '');
	my $h = IPC::Run::start(
		[ 'psql', '-X', '-A', '-t', '-q', '-d', $node->connstr('app'), '-c', $sql ],
		\$in, \$out, \$err);
	ok($node->poll_query_until('app', q{
			SELECT count(*) = 1 FROM pg_stat_activity
			WHERE datname = 'app' AND state = 'active' AND query LIKE '%wait-probe%'
			AND pid <> pg_backend_pid()}),
		'the call is waiting in the server');
	my $pid = $node->safe_psql('app', q{
		SELECT pid FROM pg_stat_activity
		WHERE datname = 'app' AND query LIKE '%wait-probe%' AND pid <> pg_backend_pid()});
	return ($h, $pid, \$out);
}

sub kill_client
{
	my ($h) = @_;
	kill 'KILL', $h->{KIDS}[0]{PID};
	eval { $h->finish };
}

sub backend_gone
{
	my ($pid, $what) = @_;
	ok($node->poll_query_until('app',
			"SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $pid"),
		$what);
}

# 1. claim(wait): the client killed, then a job arrives
my $log_offset = -s $node->logfile;
my ($h, $pid) = waiter(q{SELECT attempt_id /* wait-probe */
	FROM idemjob.claim('w1', ARRAY['dead'], 1, NULL, '60 seconds')});
kill_client($h);
my $t0 = time;
# the job arrives at once: 1.1's claim, still waiting, took it
my $job = $node->safe_psql('app',
	q{SELECT job_id FROM idemjob.submit('o', 'k1', 'dead', '{}')});
backend_gone($pid, 'claim: the backend of a killed client ends');
cmp_ok(time - $t0, '<', 30, 'claim: well before its 60 s wait is over');
is($node->safe_psql('app', qq{
		SELECT state || ' ' || attempt_count FROM idemjob.jobs WHERE id = '$job'}),
	'pending 0', 'claim: a job submitted after the kill stays pending, no attempt');
ok($node->log_contains(qr/connection to client lost/, $log_offset),
	'claim: the log says the client connection was lost');

# the negative control: a live client waiting in claim gets a job that
# arrives (another intent: the job above is due, and would be taken at once)
my $out;
($h, $pid, $out) = waiter(q{SELECT job_id /* wait-probe */
	FROM idemjob.claim('w2', ARRAY['live'], 1, NULL, '60 seconds')});
my $job2 = $node->safe_psql('app',
	q{SELECT job_id FROM idemjob.submit('o', 'k2', 'live', '{}')});
$h->finish;
like($$out, qr/^$job2$/m, 'a live client waiting in claim takes the job that arrives');
is($node->safe_psql('app', qq{
		SELECT state || ' ' || attempt_count FROM idemjob.jobs WHERE id = '$job2'}),
	'running 1', '... and starts an attempt on it');
is($node->safe_psql('app', q{SELECT job_id FROM idemjob.claim('w3', ARRAY['dead'])}),
	$job, 'the job the killed worker did not take is claimed by the next one');

# 2. await_job: the client killed mid-wait
my $job3 = $node->safe_psql('app',
	q{SELECT job_id FROM idemjob.submit('o', 'k3', 'dead', '{}')});
$log_offset = -s $node->logfile;
($h, $pid) = waiter(qq{SELECT state /* wait-probe */
	FROM idemjob.await_job('$job3', '60 seconds')});
kill_client($h);
$t0 = time;
backend_gone($pid, 'await_job: the backend of a killed client ends');
cmp_ok(time - $t0, '<', 30, 'await_job: well before its 60 s wait is over');
ok($node->log_contains(qr/connection to client lost/, $log_offset),
	'await_job: the log says the client connection was lost');

$node->stop('fast');
done_testing();
