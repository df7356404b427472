# test/t/040_pg_cron.pl: the pg_cron recipe of docs/operations.md, without the sweeper.
#
# A cluster with pg_cron (Debian's postgresql-15-cron) preloaded and idemjob
# not preloaded (so no sweeper runs).  The two cron.schedule() calls are
# taken from docs/operations.md's "Without preloading" block as written, and run
# as they are.  Checks: a started attempt past its deadline becomes
# unknown (its job in_doubt) with nobody calling expire_attempts(), at the
# next minute at the latest; pg_cron records the run as succeeded; the
# purge job's command runs as written.  Skipped when pg_cron is not
# installed (run-tests.sh installs it).

use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use File::Basename qw(dirname);

my $libdir = `pg_config --pkglibdir`;
chomp $libdir;
plan skip_all => 'pg_cron is not installed (postgresql-15-cron)'
  unless -e "$libdir/pg_cron.so";

# the recipe, from docs/operations.md (run.sh says where it is)
my $ops = $ENV{IDEMJOB_OPERATIONS} // dirname(__FILE__) . '/../../docs/operations.md';
open(my $fh, '<', $ops) or die "cannot open $ops: $!";
my $text = do { local $/; <$fh> };
close $fh;
my ($recipe) = $text =~ /Without preloading, schedule it with pg_cron.*?```sql\n(.*?)```/s;
ok(defined $recipe && $recipe =~ /cron\.schedule/, 'docs/operations.md has a pg_cron recipe');

my $node = PostgreSQL::Test::Cluster->new('cron',
	port => $ENV{IDEMJOB_CRON_PORT} // 5627);
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'pg_cron'
cron.database_name = 'app'
cron.use_background_workers = on
max_worker_processes = 16
});
$node->start;
$node->safe_psql('postgres', 'CREATE DATABASE app');
$node->safe_psql('app', 'CREATE EXTENSION idemjob; CREATE EXTENSION pg_cron;');

is($node->safe_psql('postgres',
		q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'idemjob sweeper'}),
	'0', 'no sweeper: idemjob is not preloaded');

$node->safe_psql('app', $recipe);
is($node->safe_psql('app', q{SELECT string_agg(jobname, ' ' ORDER BY jobname) FROM cron.job}),
	'idemjob-expire idemjob-purge', 'both jobs are scheduled');

my $attempt = $node->safe_psql('app', q{
	SELECT a.id FROM idemjob.submit('cron', 'job-1', 'sweep') s,
		idemjob.start_attempt(s.job_id, timeout => '300 ms') a});
like($attempt, qr/^[0-9a-f-]{36}$/, 'an attempt starts with a 300 ms deadline');

# pg_cron 1.4 (Debian 12) runs jobs on minute boundaries
ok($node->poll_query_until('app', qq{
		SELECT state = 'unknown' FROM idemjob.attempts WHERE id = '$attempt'}),
	'pg_cron expires the attempt (nobody calls expire_attempts)');
is($node->safe_psql('app', qq{
		SELECT j.state || ' ' || (a.error->>'reason')
		  FROM idemjob.attempts a JOIN idemjob.jobs j ON j.id = a.job_id
		 WHERE a.id = '$attempt'}),
	'in_doubt deadline', 'the attempt is unknown by deadline, its job in doubt');
ok($node->poll_query_until('app', q{
		SELECT count(*) > 0 FROM cron.job_run_details d JOIN cron.job j USING (jobid)
		 WHERE j.jobname = 'idemjob-expire' AND d.status = 'succeeded'}),
	'pg_cron records the run as succeeded');

# the purge job runs at night: run its command as scheduled, now
my ($rc, $out, $err) = $node->psql('app', q{
	DO $$ BEGIN EXECUTE (SELECT command FROM cron.job WHERE jobname = 'idemjob-purge'); END $$});
is($rc, 0, "the purge job's command runs as written") or diag $err;

$node->stop;
done_testing();
