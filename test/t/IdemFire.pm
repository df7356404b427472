# test/t/IdemFire.pm: persistent clients and checks for the crash and
# failover tests (010_crash.pl, 020_failover.pl).
#
# A client is one psql process (IPC::Run) holding one connection; calls are
# sent asynchronously, so that many clients have a call in flight when the
# server is killed.  Each client works through jobs: submit, start_attempt,
# sometimes fail_attempt and a second start_attempt, then complete_attempt.
# A call is acknowledged when its answer arrives; when the connection is
# lost first, the call is in doubt and the client sends it again, with the
# same arguments, once it can connect (to the same server after a restart,
# or to another after a failover).  The client's model records every
# acknowledged answer; check_model() then proves each one is in the
# database and that retries created nothing new.

package IdemFire;

my %canon;		# result text as sent => as jsonb stores it

use strict;
use warnings;
use IPC::Run;
use Time::HiRes qw(time usleep);
use Test::More;

our $SLEEP = 0.02;		# seconds each call sleeps inside its transaction

sub new
{
	my ($class, %args) = @_;
	my $self = bless {
		id => $args{id},
		node => $args{node},
		jobs => {},			# n => { key, job_id, attempts => [...], result, outcome }
		n => 0,				# current job number
		step => undef,		# current call: { kind, sql, ... }
		in_doubt => 0,		# calls that lost their connection
		acked => 0,
		retries_after_doubt => 0,
		doubtful => [],		# every call that was ever in doubt (for the final replay)
		stop => 0,
		errors => [],
	}, $class;
	return $self;
}

sub connect
{
	my ($self) = @_;
	my ($in, $out, $err) = ('', '', '');
	$self->{in} = \$in;
	$self->{out} = \$out;
	$self->{err} = \$err;
	my $h = IPC::Run::start(
		[ 'psql', '-X', '-A', '-t', '-q', '-v', 'ON_ERROR_STOP=0',
		  '-v', 'VERBOSITY=sqlstate', '-d', $self->{node}->connstr('postgres') ],
		'<', \$in, '>', \$out, '2>', \$err);
	$self->{h} = $h;
	$self->{seq}++;
	$in .= "\\set VERBOSITY sqlstate\nSELECT 'pid', pg_backend_pid();\n\\echo __END_$self->{seq}__\n";
	my $deadline = time + 10;
	while (time < $deadline)
	{
		eval { $h->pump_nb; };
		my ($pid) = $out =~ /^pid\|(\d+)\n/m;
		if (defined $pid && $out =~ /__END_$self->{seq}__/)
		{
			$self->{pid} = $pid;
			$out = '';
			$err = '';
			return 1;
		}
		last unless $h->pumpable;
		usleep(10_000);
	}
	eval { $h->kill_kill; };
	$self->{h} = undef;
	return 0;
}

sub connected { my ($self) = @_; return defined $self->{h}; }

# the next call of this client's workload
sub next_step
{
	my ($self) = @_;
	my $c = $self->{id};
	my $j = $self->{jobs}{ $self->{n} };
	if (!$j || $j->{done})
	{
		return undef if $self->{stop};
		$self->{n}++;
		my $n = $self->{n};
		$j = $self->{jobs}{$n} = { key => "c$c-k$n", owner => "o$c", attempts => [], n => $n };
		return { kind => 'submit', job => $n,
			sql => "SELECT 'ans', s.job_id, s.created FROM idemjob.submit('o$c', 'c$c-k$n', 'crash', '{\"c\": $c, \"n\": $n}') s, pg_sleep($SLEEP)" };
	}
	my $n = $j->{n};
	if (!@{ $j->{attempts} } || ($j->{failed} && @{ $j->{attempts} } == 1))
	{
		return { kind => 'start', job => $n,
			sql => "SELECT 'ans', a.id, a.attempt_no FROM idemjob.start_attempt('$j->{job_id}', NULL, NULL, 'w$c') a, pg_sleep($SLEEP)" };
	}
	my $att = $j->{attempts}[-1];
	if ($n % 4 == 0 && !$j->{failed})
	{
		return { kind => 'fail', job => $n,
			sql => "SELECT 'ans', a.id, a.state FROM idemjob.fail_attempt('$att', '{\"code\": \"flaky\"}') a, pg_sleep($SLEEP)" };
	}
	my $result = "{\"c\": $c, \"n\": $n, \"attempt\": \"$att\", \"pad\": \"" . ('x' x ($n % 50)) . "\"}";
	$j->{result} = $result;
	return { kind => 'complete', job => $n,
		sql => "SELECT 'ans', c.outcome, c.winner_attempt_id FROM idemjob.complete_attempt('$att', '$result') c, pg_sleep($SLEEP)" };
}

# advance: send a call if idle, read its answer if one is in flight.
# Returns 1 while the client has work.
sub pump
{
	my ($self) = @_;
	if (!$self->connected)
	{
		return 1 if $self->{next_connect} && time < $self->{next_connect};
		if (!$self->connect)
		{
			$self->{next_connect} = time + 0.2;
			return 1;
		}
	}
	my $h = $self->{h};
	if (!$self->{step})
	{
		my $s = $self->next_step;
		return 0 unless $s;
		$self->{step} = $s;
	}
	my $s = $self->{step};
	if (!$s->{sent})
	{
		$self->{seq}++;
		${ $self->{out} } = '';
		${ $self->{err} } = '';
		${ $self->{in} } .= "$s->{sql};\n\\echo __END_$self->{seq}__\n";
		$s->{sent} = 1;
		$s->{sent_at} = time;
	}
	eval { $h->pump_nb; };
	my $out = ${ $self->{out} };
	my $lost = 0;
	if ($out =~ /__END_$self->{seq}__/)
	{
		my $err = ${ $self->{err} };
		if ($out =~ /^ans\|/m
			|| $err !~ /57P0\d|server closed the connection|connection to server|no connection to the server|terminating connection/)
		{
			$self->answer($s, $out, $err);
			return 1;
		}
		$lost = 1;	# psql went on after losing the connection
	}
	if ($lost || !$h->pumpable || $@)
	{
		eval { $h->kill_kill; };
		# the connection is gone: the call is in doubt
		eval { $h->finish; };
		$self->{h} = undef;
		$self->{in_doubt}++;
		$s->{doubt}++;
		push @{ $self->{doubtful} }, { %$s } if $s->{doubt} == 1;
		$s->{sent} = 0;		# send it again, same arguments
		$self->{next_connect} = time + 0.1;
	}
	return 1;
}

sub answer
{
	my ($self, $s, $out, $err) = @_;
	my $j = $self->{jobs}{ $s->{job} };
	my ($line) = $out =~ /^ans\|(.*)$/m;
	$self->{step} = undef;
	if (!defined $line)
	{
		push @{ $self->{errors} }, "$s->{kind} on job $s->{job}: no answer: $err";
		$j->{done} = 1;
		return;
	}
	$self->{acked}++;
	$self->{retries_after_doubt}++ if $s->{doubt};
	my @f = split /\|/, $line;
	if ($s->{kind} eq 'submit')
	{
		push @{ $self->{errors} }, "job $s->{job}: submit answered another job id"
			if $j->{job_id} && $j->{job_id} ne $f[0];
		$j->{job_id} = $f[0];
		$j->{created_seen}++ if $f[1] eq 't';
		# in doubt, and the retry found it made: it had committed unseen
		$self->{doubt_committed}++ if $s->{doubt} && $f[1] eq 'f';
	}
	elsif ($s->{kind} eq 'start')
	{
		push @{ $j->{attempts} }, $f[0];
		$j->{attempt_no}{ $f[0] } = $f[1];
	}
	elsif ($s->{kind} eq 'fail')
	{
		$j->{failed} = 1;
	}
	elsif ($s->{kind} eq 'complete')
	{
		$j->{outcome} = $f[0];
		$j->{winner} = $f[1];
		$j->{done} = 1;
	}
}

sub backend_pid { my ($self) = @_; return $self->{pid}; }
sub busy { my ($self) = @_; return $self->connected && $self->{step} && $self->{step}{sent}; }

sub close
{
	my ($self) = @_;
	return unless $self->{h};
	${ $self->{in} } .= "\\q\n";
	eval { $self->{h}->finish; };
	$self->{h} = undef;
}

# drive clients until $until (epoch seconds), calling $tick->() each round
sub run_clients
{
	my ($clients, $until, $tick) = @_;
	while (time < $until)
	{
		$_->pump for @$clients;
		$tick->() if $tick;
		usleep(2_000);
	}
}

# let every client finish its current job (and retry what is in doubt)
sub drain
{
	my ($clients, $timeout) = @_;
	$_->{stop} = 1 for @$clients;
	my $deadline = time + ($timeout // 60);
	while (time < $deadline)
	{
		my $busy = 0;
		for my $c (@$clients) { $busy += $c->pump; }
		last unless $busy;
		usleep(2_000);
	}
	$_->close for @$clients;
}

# every acknowledged write is stored, and retries created nothing new
sub check_model
{
	my ($node, $clients, $label) = @_;
	my ($jobs_expected, $lost, $wrong, $extra_attempts, $results_lost) = (0, 0, 0, 0, 0);
	my %stored;
	for my $row (split /\n/, $node->safe_psql('postgres',
		"SELECT j.owner_id, j.idempotency_key, j.id, j.state, j.completed_by, j.result::text,
				(SELECT count(*) FROM idemjob.attempts a WHERE a.job_id = j.id)
		 FROM idemjob.jobs j WHERE j.intent = 'crash'"))
	{
		my @f = split /\|/, $row, 7;
		$stored{"$f[0]/$f[1]"} = { id => $f[2], state => $f[3], completed_by => $f[4], result => $f[5], attempts => $f[6] };
	}
	# the stored text of every acknowledged result, in one round trip
	my @sent;
	for my $c (@$clients)
	{
		push @sent, map { $_->{result} } grep { defined $_->{outcome} } values %{ $c->{jobs} };
	}
	if (@sent)
	{
		my $i = 0;
		my $values = join ",\n", map { $i++; "($i, '$_')" } @sent;
		my @canon = split /\n/, $node->safe_psql('postgres',
			"SELECT v::jsonb::text FROM (VALUES $values) t(i, v) ORDER BY i");
		$canon{ $sent[$_] } = $canon[$_] for 0 .. $#sent;
	}
	my $created_twice = 0;
	for my $c (@$clients)
	{
		for my $j (values %{ $c->{jobs} })
		{
			next unless $j->{job_id};		# never acknowledged
			$jobs_expected++;
			my $s = $stored{"$j->{owner}/$j->{key}"};
			if (!$s || $s->{id} ne $j->{job_id})
			{
				$lost++;
				diag("$label: acknowledged job $j->{owner}/$j->{key} $j->{job_id} is missing") if $lost <= 5;
				next;
			}
			$created_twice++ if ($j->{created_seen} // 0) > 1;
			my $want_attempts = scalar @{ $j->{attempts} };
			if ($s->{attempts} > $want_attempts && $j->{done})
			{
				$extra_attempts++;
				diag("$label: job $j->{key} has $s->{attempts} attempts, the client started $want_attempts");
			}
			if (defined $j->{outcome})
			{
				if ($j->{outcome} ne 'won'
					|| $s->{completed_by} ne $j->{attempts}[-1]
					|| $s->{result} ne canonical($node, $j->{result}))
				{
					$results_lost++;
					diag("$label: acknowledged result of $j->{key} ($j->{outcome}) not stored as sent") if $results_lost <= 5;
				}
			}
		}
	}
	my $total_jobs = scalar keys %stored;
	return {
		acknowledged_jobs => $jobs_expected,
		lost_jobs => $lost,
		lost_results => $results_lost,
		extra_attempts => $extra_attempts,
		created_twice => $created_twice,
		stored_jobs => $total_jobs,
	};
}

sub canonical
{
	my ($node, $json) = @_;
	return $canon{$json} //= $node->safe_psql('postgres', "SELECT '$json'::jsonb::text");
}

# invariants on the stored state (any node), and amcheck; returns the
# number of violations, with diag() of each
sub check_invariants
{
	my ($node, $label) = @_;
	$node->safe_psql('postgres', 'CREATE EXTENSION IF NOT EXISTS amcheck');
	my $out = $node->safe_psql('postgres', q{
		SELECT 'duplicate key', count(*) FROM (SELECT 1 FROM idemjob.jobs GROUP BY owner_id, idempotency_key HAVING count(*) > 1) x
		UNION ALL
		SELECT 'two in doubt', count(*) FROM (SELECT 1 FROM idemjob.attempts WHERE state IN ('started', 'unknown') GROUP BY job_id HAVING count(*) > 1) x
		UNION ALL
		SELECT 'two winners', count(*) FROM (SELECT 1 FROM idemjob.attempts WHERE state = 'succeeded' GROUP BY job_id HAVING count(*) > 1) x
		UNION ALL
		SELECT 'completed_by not the succeeded attempt', count(*) FROM idemjob.jobs j
			WHERE (j.completed_by IS NOT NULL) <> (j.state = 'succeeded')
			   OR (j.completed_by IS NOT NULL AND NOT EXISTS (SELECT 1 FROM idemjob.attempts a WHERE a.id = j.completed_by AND a.state = 'succeeded'))
		UNION ALL
		SELECT 'superseded without one race_log row', count(*) FROM idemjob.attempts a
			WHERE (a.state = 'superseded') <> ((SELECT count(*) FROM idemjob.race_log r WHERE r.attempt_id = a.id) = 1)
		UNION ALL
		SELECT 'attempt numbering', count(*) FROM idemjob.jobs j
			WHERE j.attempt_count <> (SELECT count(*) FROM idemjob.attempts a WHERE a.job_id = j.id)
			   OR j.attempt_count <> coalesce((SELECT max(attempt_no) FROM idemjob.attempts a WHERE a.job_id = j.id), 0)
		UNION ALL
		SELECT 'job state vs attempts', count(*) FROM idemjob.jobs j
			WHERE (j.state = 'pending' AND EXISTS (SELECT 1 FROM idemjob.attempts a WHERE a.job_id = j.id AND a.state IN ('started', 'unknown')))
			   OR (j.state = 'running' AND NOT EXISTS (SELECT 1 FROM idemjob.attempts a WHERE a.job_id = j.id AND a.state = 'started'))
			   OR (j.state = 'in_doubt' AND NOT EXISTS (SELECT 1 FROM idemjob.attempts a WHERE a.job_id = j.id AND a.state = 'unknown'))
		UNION ALL
		SELECT 'amcheck btree', count(*) FROM (
			SELECT bt_index_check(c.oid, true) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
			JOIN pg_am am ON am.oid = c.relam AND am.amname = 'btree'
			WHERE c.relnamespace = 'idemjob'::regnamespace) x WHERE false
		UNION ALL
		SELECT 'amcheck heap', count(*) FROM pg_class c, LATERAL verify_heapam(c.oid, check_toast => true)
			WHERE c.relnamespace = 'idemjob'::regnamespace AND c.relkind = 'r'
	});
	my $bad = 0;
	for my $row (split /\n/, $out)
	{
		my ($what, $n) = split /\|/, $row;
		if ($n != 0)
		{
			diag("$label: $what: $n");
			$bad += $n;
		}
	}
	return $bad;
}

# a fingerprint of every stored row (a replayed call must not change it)
sub fingerprint
{
	my ($node) = @_;
	return $node->safe_psql('postgres', q{
		SELECT md5(concat_ws('/',
			(SELECT string_agg(j::text, ',' ORDER BY j.id) FROM idemjob.jobs j),
			(SELECT string_agg(a::text, ',' ORDER BY a.id) FROM idemjob.attempts a),
			(SELECT string_agg(r::text, ',' ORDER BY r.attempt_id) FROM idemjob.race_log r)))});
}

# send every call that was ever in doubt once more, as it was sent; return
# the number of calls replayed
sub replay_in_doubt
{
	my ($node, $clients) = @_;
	my $n = 0;
	for my $c (@$clients)
	{
		for my $s (@{ $c->{doubtful} })
		{
			my $sql = $s->{sql};
			$sql =~ s/, pg_sleep\([0-9.]+\)//;
			$node->psql('postgres', $sql);	# an error (e.g. IJ003 for a start on a finished job) is fine
			$n++;
		}
	}
	return $n;
}

1;
