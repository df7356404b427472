// Package idemjob is the Go client of idemjob, the PostgreSQL extension
// for exactly-once effects of jobs that call outside providers. Its SQL
// functions are the only transport: the package adds no guarantee the
// database does not enforce (clients/README.md is the design it shares
// with the Python and Node packages).
//
// Connect returns a Client over a pgxpool pool that is safe through
// pgbouncer in transaction pooling. It has one method per SQL function
// (Submit, Job, AwaitJob, CancelJob, StartAttempt, BeginAttempt,
// CompleteAttempt, FailAttempt, MarkUnknown, CancelAttempt, Heartbeat,
// Claim, AbandonAttempts, ExpireAttempts, DefineContract, CertifyProvider,
// RevokeProvider, SetRetryPolicy, SetRoute, Purge, PurgeRaceLog) and view
// (InDoubt, QueueStats, ProviderStats), and BeginAttempts and
// CompleteAttempts: begin_attempt and complete_attempt for many attempts in
// one statement, all or nothing. Optional SQL arguments are option
// structs or plain parameters whose zero value (or nil) is the SQL default;
// only the arguments given are sent, by name.
//
// Every error a method returns is an *Error: the SQLSTATE, message,
// detail, hint, the error fields (job_id, attempt_id, state, deadline,
// retry_after) parsed from the constraint name, HTTPStatus, Headers and
// Body for an API in front, and a kind matched with errors.Is
// (ErrAttemptInDoubt, ErrNotFound, ErrConnectionLost, ...).
//
// A call whose answer was lost may have committed. The Client sends the
// resend-safe ones (ResendSafe) again itself, up to WithRetries times.
//
// Worker runs handlers for claimed jobs: abandon_attempts at start, claim
// with a lease, begin_attempt right before each handler, heartbeats,
// complete_attempt / fail_attempt / mark_unknown, late answers still
// reported, and Stop with a grace.
//
//	c, err := idemjob.Connect(ctx, "host=/tmp dbname=app user=worker")
//	w := idemjob.NewWorker(c, "worker-1", map[string]idemjob.Handler{
//		"charge_card": func(ctx context.Context, job idemjob.Claimed) (any, error) {
//			return callProvider(ctx, job.Provider, job.Params)
//		},
//	}, idemjob.WorkerOptions{Concurrency: 8, Timeout: 30 * time.Second})
//	err = w.Run(ctx)
package idemjob
