package idemjob

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/jackc/pgx/v4"
)

// JobState is idemjob.job_state.
type JobState string

const (
	JobPending   JobState = "pending"
	JobRunning   JobState = "running"
	JobInDoubt   JobState = "in_doubt"
	JobSucceeded JobState = "succeeded"
	JobFailed    JobState = "failed"
	JobCancelled JobState = "cancelled"
)

// Final reports whether the state is succeeded, failed or cancelled.
func (s JobState) Final() bool { return s == JobSucceeded || s == JobFailed || s == JobCancelled }

// AttemptState is idemjob.attempt_state.
type AttemptState string

const (
	AttemptStarted    AttemptState = "started"
	AttemptUnknown    AttemptState = "unknown"
	AttemptSucceeded  AttemptState = "succeeded"
	AttemptSuperseded AttemptState = "superseded"
	AttemptFailed     AttemptState = "failed"
	AttemptCancelled  AttemptState = "cancelled"
	AttemptReleased   AttemptState = "released"
)

// Outcome is complete_attempt's answer.
type Outcome string

const (
	Won      Outcome = "won"
	Lost     Outcome = "lost"
	Rejected Outcome = "rejected"
)

// Ptr returns a pointer to v, for the option fields where the zero value
// is a value of its own (FailOptions.Retryable, RetryPolicy's backoffs).
func Ptr[T any](v T) *T { return &v }

// In the result types, a NULL column leaves the field's zero value (an
// empty string, a zero time.Time, 0, a nil json.RawMessage; a jsonb
// 'null' is json.RawMessage("null")). uuids are strings, jsonb
// json.RawMessage (numbers keep every digit), bigint int64, timestamptz
// time.Time (microseconds), interval time.Duration (a day as 24 h, a
// month as 30 days).

// Submitted is submit's answer.
type Submitted struct {
	JobID   string
	Created bool // false: the job already existed under this key
	State   JobState
	Version int64
	Result  json.RawMessage
}

// Job is a row of idemjob.jobs.
type Job struct {
	ID             string
	OwnerID        string
	IdempotencyKey string
	Intent         string
	Params         json.RawMessage
	Provider       string
	State          JobState
	Version        int64
	AttemptCount   int
	CompletedBy    string
	Result         json.RawMessage
	CreatedAt      time.Time
	UpdatedAt      time.Time
	CompletedAt    time.Time
	CancelReason   string
	Priority       int
	RunAt          time.Time
	MaxAttempts    int
	Error          json.RawMessage
	NextProvider   string
}

// Attempt is a row of idemjob.attempts.
type Attempt struct {
	ID            string
	JobID         string
	OwnerID       string
	AttemptNo     int
	Provider      string
	State         AttemptState
	ReadVersion   int64
	Worker        string
	StartedAt     time.Time
	Deadline      time.Time
	FinishedAt    time.Time
	Error         json.RawMessage
	ResultSHA256  []byte
	UnknownAt     time.Time
	DroppedResult json.RawMessage
	LeaseUntil    time.Time
}

// Completed is complete_attempt's answer.
type Completed struct {
	Outcome         Outcome
	JobID           string
	JobVersion      int64
	WinnerAttemptID string
}

// Claimed is a row of claim: an attempt to run, on Provider.
type Claimed struct {
	AttemptID   string
	JobID       string
	OwnerID     string
	Intent      string
	Params      json.RawMessage
	Provider    string // the provider to call: the server chose it (routes)
	AttemptNo   int
	ReadVersion int64
	// Deadline is the attempt's, as claimed (zero: none); in a Worker's
	// handler, when the worker gives up waiting for the handler.
	Deadline time.Time
}

// Certification is a row of idemjob.certifications.
type Certification struct {
	Intent          string
	Provider        string
	ContractVersion int
	CertifiedAt     time.Time
	Evidence        json.RawMessage
	RevokedAt       time.Time
	RevokeReason    string
}

// RetryPolicy is a row of idemjob.retry_policies; nil or zero: the
// setting of that name applies.
type RetryPolicy struct {
	Intent            string
	MaxAttempts       int
	RetryBackoff      *time.Duration
	RetryBackoffMax   *time.Duration
	UpdatedAt         time.Time
	FenceUnknownAfter time.Duration
}

// Route is a row of idemjob.routes.
type Route struct {
	Intent    string
	Providers []string
	UpdatedAt time.Time
}

// InDoubt is a row of the view idemjob.in_doubt.
type InDoubt struct {
	JobID        string
	OwnerID      string
	Intent       string
	AttemptID    string
	AttemptNo    int
	Provider     string
	Worker       string
	State        AttemptState
	StartedAt    time.Time
	Deadline     time.Time
	UnknownAt    time.Time
	InDoubtSince time.Time
	Age          time.Duration
}

// QueueStat is a row of the view idemjob.queue_stats.
type QueueStat struct {
	Intent       string
	Due          int64
	Scheduled    int64
	Running      int64
	InDoubt      int64
	OldestDueAge time.Duration
}

// ProviderStat is a row of the view idemjob.provider_stats.
type ProviderStat struct {
	Intent        string
	Provider      string
	Attempts      int64
	Succeeded     int64
	Superseded    int64
	Rejected      int64
	Failed        int64
	InDoubt       int64
	Cancelled     int64
	P50Ms         float64
	P95Ms         float64
	LastStartedAt time.Time
	Released      int64
}

// ---- scanning: NULL leaves the zero value

type row struct {
	dst   []any
	fixes []func()
}

func (r *row) v(dst ...any) *row { r.dst = append(r.dst, dst...); return r }

func null[T any](r *row, dst *T) {
	p := new(*T)
	r.dst = append(r.dst, p)
	r.fixes = append(r.fixes, func() {
		if *p != nil {
			*dst = **p
		} else {
			var zero T
			*dst = zero
		}
	})
}

func (r *row) scan(rows pgx.Rows) error {
	if err := rows.Scan(r.dst...); err != nil {
		return err
	}
	for _, f := range r.fixes {
		f()
	}
	return nil
}

// js: a jsonb argument. json.RawMessage and []byte are JSON text, sent as
// they are (the server checks them: 22P02); anything else is marshalled.
func js(call, name string, v any) (arg, *Error) {
	switch t := v.(type) {
	case json.RawMessage:
		return arg{name: name, value: []byte(t)}, nil
	case []byte:
		return arg{name: name, value: t}, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return arg{}, &Error{Call: call, Message: name + ": " + err.Error(), Kind: ErrInvalidArgument, Err: err}
	}
	return arg{name: name, value: b}, nil
}

func id(name, v string) arg { return arg{name: name, value: v, cast: "::text::uuid"} }

const jobCols = "id, owner_id, idempotency_key, intent, params, provider, state::text, version, attempt_count, " +
	"completed_by, result, created_at, updated_at, completed_at, cancel_reason, priority, run_at, max_attempts, " +
	"error, next_provider"

func jobRow(j *Job) *row {
	r := &row{}
	r.v(&j.ID, &j.OwnerID, &j.IdempotencyKey, &j.Intent, (*[]byte)(&j.Params), &j.Provider, (*string)(&j.State),
		&j.Version, &j.AttemptCount)
	null(r, &j.CompletedBy)
	r.v((*[]byte)(&j.Result), &j.CreatedAt, &j.UpdatedAt)
	null(r, &j.CompletedAt)
	null(r, &j.CancelReason)
	r.v(&j.Priority, &j.RunAt)
	null(r, &j.MaxAttempts)
	r.v((*[]byte)(&j.Error))
	null(r, &j.NextProvider)
	return r
}

const attemptCols = "id, job_id, owner_id, attempt_no, provider, state::text, read_version, worker, started_at, " +
	"deadline, finished_at, error, result_sha256, unknown_at, dropped_result, lease_until"

func attemptRow(a *Attempt) *row {
	r := &row{}
	r.v(&a.ID, &a.JobID, &a.OwnerID, &a.AttemptNo, &a.Provider, (*string)(&a.State), &a.ReadVersion)
	null(r, &a.Worker)
	r.v(&a.StartedAt)
	null(r, &a.Deadline)
	null(r, &a.FinishedAt)
	r.v((*[]byte)(&a.Error), &a.ResultSHA256)
	null(r, &a.UnknownAt)
	r.v((*[]byte)(&a.DroppedResult))
	null(r, &a.LeaseUntil)
	return r
}

const certCols = "intent, provider, contract_version, certified_at, evidence, revoked_at, revoke_reason"

func certRow(c *Certification) *row {
	r := &row{}
	r.v(&c.Intent, &c.Provider, &c.ContractVersion, &c.CertifiedAt, (*[]byte)(&c.Evidence))
	null(r, &c.RevokedAt)
	null(r, &c.RevokeReason)
	return r
}

// one scans the call's one row into the row r binds.
func one(r *row) func(pgx.Rows) error { return r.scan }

func (c *Client) job(ctx context.Context, fn string, args []arg) (Job, error) {
	var j Job
	err := c.call(ctx, fn, fn, jobCols, args, one(jobRow(&j)))
	return j, err
}

func (c *Client) attempt(ctx context.Context, fn, policy string, args []arg) (Attempt, error) {
	var a Attempt
	err := c.call(ctx, fn, policy, attemptCols, args, one(attemptRow(&a)))
	return a, err
}

func (c *Client) count(ctx context.Context, fn string, args []arg) (int, error) {
	var n int
	err := c.call(ctx, fn, fn, fn, args, func(rows pgx.Rows) error { return rows.Scan(&n) })
	return n, err
}

// ---- jobs

// SubmitOptions are submit's optional arguments; zero values are the SQL
// defaults.
type SubmitOptions struct {
	Provider    string    // "": idemjob.default_provider
	RunAt       time.Time // zero: now
	Priority    int       // higher is claimed first
	MaxAttempts int       // 0: idemjob.max_attempts (or the intent's retry policy)
}

// Submit creates the job, or returns the one already under the key
// (Created false). params: nil for '{}', json.RawMessage or []byte as JSON
// text, anything else marshalled with encoding/json. Another request under
// the key is ErrIdempotencyConflict, with Fields.JobID.
func (c *Client) Submit(ctx context.Context, ownerID, idempotencyKey, intent string, params any, o *SubmitOptions) (Submitted, error) {
	args := []arg{{name: "owner_id", value: ownerID}, {name: "idempotency_key", value: idempotencyKey},
		{name: "intent", value: intent}}
	if params != nil {
		a, err := js("submit", "params", params)
		if err != nil {
			return Submitted{}, err
		}
		args = append(args, a)
	}
	if o != nil {
		if o.Provider != "" {
			args = append(args, arg{name: "provider", value: o.Provider})
		}
		if !o.RunAt.IsZero() {
			args = append(args, arg{name: "run_at", value: o.RunAt})
		}
		if o.Priority != 0 {
			args = append(args, arg{name: "priority", value: int32(o.Priority)})
		}
		if o.MaxAttempts != 0 {
			args = append(args, arg{name: "max_attempts", value: int32(o.MaxAttempts)})
		}
	}
	var s Submitted
	err := c.call(ctx, "submit", "submit", "job_id, created, state::text, version, result", args, func(rows pgx.Rows) error {
		return rows.Scan(&s.JobID, &s.Created, (*string)(&s.State), &s.Version, (*[]byte)(&s.Result))
	})
	return s, err
}

// Job returns the job's row.
func (c *Client) Job(ctx context.Context, jobID string) (Job, error) {
	return c.job(ctx, "job", []arg{id("job_id", jobID)})
}

// AwaitJob waits inside the server until the job is final or timeout has
// passed (0: no wait), and returns its row as it is then.
func (c *Client) AwaitJob(ctx context.Context, jobID string, timeout time.Duration) (Job, error) {
	return c.job(ctx, "await_job", []arg{id("job_id", jobID), {name: "timeout", value: timeout}})
}

// CancelJob cancels the job (terminal); ErrJobFinished once it succeeded
// or failed.
func (c *Client) CancelJob(ctx context.Context, jobID, reason string) (Job, error) {
	return c.job(ctx, "cancel_job", []arg{id("job_id", jobID), {name: "reason", value: reason}})
}

// ---- attempts

// StartOptions are start_attempt's optional arguments.
type StartOptions struct {
	Provider string        // "": the job's current provider (its route's)
	Timeout  time.Duration // 0: idemjob.attempt_timeout
	Worker   string        // set it to make the call resend-safe: the same worker gets the attempt back
}

// StartAttempt starts an attempt on the job, in flight at once.
func (c *Client) StartAttempt(ctx context.Context, jobID string, o *StartOptions) (Attempt, error) {
	args := []arg{id("job_id", jobID)}
	policy := "start_attempt"
	if o != nil {
		if o.Provider != "" {
			args = append(args, arg{name: "provider", value: o.Provider})
		}
		if o.Timeout != 0 {
			args = append(args, arg{name: "timeout", value: o.Timeout})
		}
		if o.Worker != "" {
			args = append(args, arg{name: "worker", value: o.Worker})
			policy = "start_attempt:worker"
		}
	}
	return c.attempt(ctx, "start_attempt", policy, args)
}

// BeginAttempt confirms a leased attempt immediately before its provider is
// called. ErrLeaseExpired, ErrJobFinished, ErrInvalidTransition: do not call
// it.
func (c *Client) BeginAttempt(ctx context.Context, attemptID string) (Attempt, error) {
	return c.attempt(ctx, "begin_attempt", "begin_attempt", []arg{id("attempt_id", attemptID)})
}

// CompleteAttempt reports the provider's result (marshalled as Submit's
// params are); the server answers won, lost or rejected.
func (c *Client) CompleteAttempt(ctx context.Context, attemptID string, result any) (Completed, error) {
	r, e := js("complete_attempt", "result", result)
	if e != nil {
		return Completed{}, e
	}
	var out Completed
	err := c.call(ctx, "complete_attempt", "complete_attempt", "outcome, job_id, job_version, winner_attempt_id",
		[]arg{id("attempt_id", attemptID), r}, func(rows pgx.Rows) error {
			rw := (&row{}).v((*string)(&out.Outcome), &out.JobID, &out.JobVersion)
			null(rw, &out.WinnerAttemptID)
			return rw.scan(rows)
		})
	return out, err
}

// AttemptResult is one attempt's result for CompleteAttempts; Result is
// marshalled as CompleteAttempt's is.
type AttemptResult struct {
	AttemptID string
	Result    any
}

// BeginAttempts is BeginAttempt for many attempts in one statement (one
// transaction): their rows in the order of attemptIDs, or the first call's
// error and nothing written. Resend-safe as BeginAttempt; none: nil,
// nothing sent.
func (c *Client) BeginAttempts(ctx context.Context, attemptIDs []string) ([]Attempt, error) {
	if len(attemptIDs) == 0 {
		return nil, nil
	}
	var out []Attempt
	sql := "SELECT " + from("b", attemptCols) + " FROM pg_catalog.unnest($1::pg_catalog.text[]::pg_catalog.uuid[])" +
		" WITH ORDINALITY AS a(attempt_id, n), LATERAL idemjob.begin_attempt(attempt_id => a.attempt_id) AS b ORDER BY a.n"
	err := c.run(ctx, "begin_attempts", "begin_attempts", sql, []any{attemptIDs}, func() { out = nil },
		func(rows pgx.Rows) error {
			var a Attempt
			if err := attemptRow(&a).scan(rows); err != nil {
				return err
			}
			out = append(out, a)
			return nil
		})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// CompleteAttempts is CompleteAttempt for many results in one statement
// (one transaction, one compare-and-swap per attempt): the answers in the
// order of results, or the first call's error and nothing written.
// Resend-safe as CompleteAttempt (each call answers as it first did); none:
// nil, nothing sent.
func (c *Client) CompleteAttempts(ctx context.Context, results []AttemptResult) ([]Completed, error) {
	if len(results) == 0 {
		return nil, nil
	}
	ids, values := make([]string, len(results)), make([]string, len(results))
	for i, r := range results {
		a, e := js("complete_attempts", "result", r.Result)
		if e != nil {
			return nil, e
		}
		ids[i], values[i] = r.AttemptID, string(a.value.([]byte))
	}
	var out []Completed
	sql := "SELECT " + from("c", "outcome, job_id, job_version, winner_attempt_id") +
		" FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.text[]::pg_catalog.uuid[])," + // unnest(a, b), qualified
		" pg_catalog.unnest($2::pg_catalog.text[]::pg_catalog.jsonb[])) WITH ORDINALITY AS r(attempt_id, result, n)," +
		" LATERAL idemjob.complete_attempt(attempt_id => r.attempt_id, result => r.result) AS c ORDER BY r.n"
	err := c.run(ctx, "complete_attempts", "complete_attempts", sql, []any{ids, values}, func() { out = nil },
		func(rows pgx.Rows) error {
			var d Completed
			rw := (&row{}).v((*string)(&d.Outcome), &d.JobID, &d.JobVersion)
			null(rw, &d.WinnerAttemptID)
			if err := rw.scan(rows); err != nil {
				return err
			}
			out = append(out, d)
			return nil
		})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// from qualifies cols (as jobCols, attemptCols) with the alias, and their
// casts with pg_catalog.
func from(alias, cols string) string {
	parts := strings.Split(cols, ", ")
	for i, p := range parts {
		parts[i] = alias + "." + strings.Replace(p, "::", "::pg_catalog.", 1)
	}
	return strings.Join(parts, ", ")
}

// FailOptions are fail_attempt's optional arguments.
type FailOptions struct {
	Error     any   // jsonb; nil: {"code": "failed"}
	Retryable *bool // nil: true
}

// FailAttempt records a definite failure of the attempt.
func (c *Client) FailAttempt(ctx context.Context, attemptID string, o *FailOptions) (Attempt, error) {
	args := []arg{id("attempt_id", attemptID)}
	if o != nil {
		if o.Error != nil {
			a, err := js("fail_attempt", "error", o.Error)
			if err != nil {
				return Attempt{}, err
			}
			args = append(args, a)
		}
		if o.Retryable != nil {
			args = append(args, arg{name: "retryable", value: *o.Retryable})
		}
	}
	return c.attempt(ctx, "fail_attempt", "fail_attempt", args)
}

// MarkUnknown: no answer in time, or a lost connection to the provider;
// reason "" is 'timeout'. Never a failure.
func (c *Client) MarkUnknown(ctx context.Context, attemptID, reason string) (Attempt, error) {
	args := []arg{id("attempt_id", attemptID)}
	if reason != "" {
		args = append(args, arg{name: "reason", value: reason})
	}
	return c.attempt(ctx, "mark_unknown", "mark_unknown", args)
}

// CancelAttempt is the operator's resolution of an attempt in doubt; fence
// also makes its result unable to win.
func (c *Client) CancelAttempt(ctx context.Context, attemptID, reason string, fence bool) (Attempt, error) {
	args := []arg{id("attempt_id", attemptID), {name: "reason", value: reason}}
	if fence {
		args = append(args, arg{name: "fence", value: true})
	}
	return c.attempt(ctx, "cancel_attempt", "cancel_attempt", args)
}

// Heartbeat moves a started attempt's deadline to now + extend (0:
// idemjob.attempt_timeout).
func (c *Client) Heartbeat(ctx context.Context, attemptID string, extend time.Duration) (Attempt, error) {
	args := []arg{id("attempt_id", attemptID)}
	if extend != 0 {
		args = append(args, arg{name: "extend", value: extend})
	}
	return c.attempt(ctx, "heartbeat", "heartbeat", args)
}

// ---- workers

// ClaimOptions are claim's optional arguments.
type ClaimOptions struct {
	Intents []string      // nil: any
	MaxJobs int           // 0: 1
	Timeout time.Duration // the attempts' timeout; 0: idemjob.attempt_timeout
	Wait    time.Duration // wait inside the server for a due job (0: none)
	Lease   bool          // leased attempts, confirmed by BeginAttempt; resend-safe
}

// Claim takes due jobs and starts an attempt on each.
func (c *Client) Claim(ctx context.Context, worker string, o *ClaimOptions) ([]Claimed, error) {
	args := []arg{{name: "worker", value: worker}}
	policy := "claim"
	if o != nil {
		if o.Intents != nil {
			args = append(args, arg{name: "intents", value: o.Intents})
		}
		if o.MaxJobs != 0 {
			args = append(args, arg{name: "max_jobs", value: int32(o.MaxJobs)})
		}
		if o.Timeout != 0 {
			args = append(args, arg{name: "timeout", value: o.Timeout})
		}
		if o.Wait != 0 {
			args = append(args, arg{name: "wait", value: o.Wait})
		}
		if o.Lease {
			args = append(args, arg{name: "lease", value: true})
			policy = "claim:lease"
		}
	}
	var out []Claimed
	sql, values := callSQL("claim", "attempt_id, job_id, owner_id, intent, params, provider, attempt_no, "+
		"read_version, deadline", args)
	err := c.run(ctx, "claim", policy, sql, values, func() { out = nil }, func(rows pgx.Rows) error {
		var cl Claimed
		r := (&row{}).v(&cl.AttemptID, &cl.JobID, &cl.OwnerID, &cl.Intent, (*[]byte)(&cl.Params), &cl.Provider,
			&cl.AttemptNo, &cl.ReadVersion)
		null(r, &cl.Deadline)
		if err := r.scan(rows); err != nil {
			return err
		}
		out = append(out, cl)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// AbandonAttempts gives up what the worker left behind under its name (a
// restarted worker calls it first).
func (c *Client) AbandonAttempts(ctx context.Context, worker string) (int, error) {
	return c.count(ctx, "abandon_attempts", []arg{{name: "worker", value: worker}})
}

// ExpireAttempts is the sweeper's tick.
func (c *Client) ExpireAttempts(ctx context.Context) (int, error) {
	return c.count(ctx, "expire_attempts", nil)
}

// ---- admin

// DefineContract sets the intent's output schema (any JSON value, as
// Submit's params); it returns the contract version.
func (c *Client) DefineContract(ctx context.Context, intent string, outputSchema any) (int, error) {
	s, err := js("define_contract", "output_schema", outputSchema)
	if err != nil {
		return 0, err
	}
	return c.count(ctx, "define_contract", []arg{{name: "intent", value: intent}, s})
}

// CertifyProvider records that the provider passed the intent's contract
// tests; evidence nil is NULL.
func (c *Client) CertifyProvider(ctx context.Context, intent, provider string, evidence any) (Certification, error) {
	args := []arg{{name: "intent", value: intent}, {name: "provider", value: provider}}
	if evidence != nil {
		a, err := js("certify_provider", "evidence", evidence)
		if err != nil {
			return Certification{}, err
		}
		args = append(args, a)
	}
	var out Certification
	err := c.call(ctx, "certify_provider", "certify_provider", certCols, args, one(certRow(&out)))
	return out, err
}

// RevokeProvider revokes the provider's certifications for the intent.
func (c *Client) RevokeProvider(ctx context.Context, intent, provider, reason string) (Certification, error) {
	var out Certification
	err := c.call(ctx, "revoke_provider", "revoke_provider", certCols, []arg{{name: "intent", value: intent},
		{name: "provider", value: provider}, {name: "reason", value: reason}}, one(certRow(&out)))
	return out, err
}

// RetryPolicyOptions are set_retry_policy's arguments; the policy is
// written whole, and a nil or zero field falls back to the setting.
type RetryPolicyOptions struct {
	MaxAttempts       int
	RetryBackoff      *time.Duration // Ptr(time.Duration(0)): retry at once
	RetryBackoffMax   *time.Duration
	FenceUnknownAfter time.Duration // 0: doubts are left for an operator
}

// SetRetryPolicy writes the intent's retry policy.
func (c *Client) SetRetryPolicy(ctx context.Context, intent string, o *RetryPolicyOptions) (RetryPolicy, error) {
	args := []arg{{name: "intent", value: intent}}
	if o != nil {
		if o.MaxAttempts != 0 {
			args = append(args, arg{name: "max_attempts", value: int32(o.MaxAttempts)})
		}
		if o.RetryBackoff != nil {
			args = append(args, arg{name: "retry_backoff", value: *o.RetryBackoff})
		}
		if o.RetryBackoffMax != nil {
			args = append(args, arg{name: "retry_backoff_max", value: *o.RetryBackoffMax})
		}
		if o.FenceUnknownAfter != 0 {
			args = append(args, arg{name: "fence_unknown_after", value: o.FenceUnknownAfter})
		}
	}
	var p RetryPolicy
	err := c.call(ctx, "set_retry_policy", "set_retry_policy",
		"intent, max_attempts, retry_backoff, retry_backoff_max, updated_at, fence_unknown_after", args,
		func(rows pgx.Rows) error {
			r := (&row{}).v(&p.Intent)
			null(r, &p.MaxAttempts)
			r.v(&p.RetryBackoff, &p.RetryBackoffMax, &p.UpdatedAt)
			null(r, &p.FenceUnknownAfter)
			return r.scan(rows)
		})
	return p, err
}

// SetRoute writes the intent's failover order (empty: none).
func (c *Client) SetRoute(ctx context.Context, intent string, providers []string) (Route, error) {
	if providers == nil {
		providers = []string{}
	}
	var rt Route
	err := c.call(ctx, "set_route", "set_route", "intent, providers, updated_at",
		[]arg{{name: "intent", value: intent}, {name: "providers", value: providers}}, func(rows pgx.Rows) error {
			return rows.Scan(&rt.Intent, &rt.Providers, &rt.UpdatedAt)
		})
	return rt, err
}

// Purge deletes up to maxJobs (0: 10000) final jobs completed before
// now() - olderThan. Not resend-safe.
func (c *Client) Purge(ctx context.Context, olderThan time.Duration, maxJobs int) (int, error) {
	args := []arg{{name: "older_than", value: olderThan}}
	if maxJobs != 0 {
		args = append(args, arg{name: "max_jobs", value: int32(maxJobs)})
	}
	return c.count(ctx, "purge", args)
}

// PurgeRaceLog deletes race-log rows logged before now() - olderThan. Not
// resend-safe.
func (c *Client) PurgeRaceLog(ctx context.Context, olderThan time.Duration) (int, error) {
	return c.count(ctx, "purge_race_log", []arg{{name: "older_than", value: olderThan}})
}

// ---- views (operator, admin)

// view reads a view, with the same resends.
func (c *Client) view(ctx context.Context, v string, reset func(), cols string, scan func(pgx.Rows) error) error {
	return c.run(ctx, v, v, "SELECT "+cols+" FROM idemjob."+v, nil, reset, scan)
}

// InDoubt lists the attempts in doubt.
func (c *Client) InDoubt(ctx context.Context) ([]InDoubt, error) {
	var out []InDoubt
	err := c.view(ctx, "in_doubt", func() { out = nil }, "job_id, owner_id, intent, attempt_id, attempt_no, provider, worker, state::text, "+
		"started_at, deadline, unknown_at, in_doubt_since, age", func(rows pgx.Rows) error {
		var d InDoubt
		r := (&row{}).v(&d.JobID, &d.OwnerID, &d.Intent, &d.AttemptID, &d.AttemptNo, &d.Provider)
		null(r, &d.Worker)
		r.v((*string)(&d.State), &d.StartedAt)
		null(r, &d.Deadline)
		null(r, &d.UnknownAt)
		null(r, &d.InDoubtSince)
		null(r, &d.Age)
		if err := r.scan(rows); err != nil {
			return err
		}
		out = append(out, d)
		return nil
	})
	return out, err
}

// QueueStats lists the intents with a job not yet final.
func (c *Client) QueueStats(ctx context.Context) ([]QueueStat, error) {
	var out []QueueStat
	err := c.view(ctx, "queue_stats", func() { out = nil }, "intent, due, scheduled, running, in_doubt, oldest_due_age",
		func(rows pgx.Rows) error {
			var q QueueStat
			r := (&row{}).v(&q.Intent, &q.Due, &q.Scheduled, &q.Running, &q.InDoubt)
			null(r, &q.OldestDueAge)
			if err := r.scan(rows); err != nil {
				return err
			}
			out = append(out, q)
			return nil
		})
	return out, err
}

// ProviderStats lists the attempts' counts per intent and provider.
func (c *Client) ProviderStats(ctx context.Context) ([]ProviderStat, error) {
	var out []ProviderStat
	err := c.view(ctx, "provider_stats", func() { out = nil }, "intent, provider, attempts, succeeded, superseded, rejected, failed, "+
		"in_doubt, cancelled, p50_ms, p95_ms, last_started_at, released", func(rows pgx.Rows) error {
		var p ProviderStat
		r := (&row{}).v(&p.Intent, &p.Provider, &p.Attempts, &p.Succeeded, &p.Superseded, &p.Rejected, &p.Failed,
			&p.InDoubt, &p.Cancelled)
		null(r, &p.P50Ms)
		null(r, &p.P95Ms)
		null(r, &p.LastStartedAt)
		r.v(&p.Released)
		if err := r.scan(rows); err != nil {
			return err
		}
		out = append(out, p)
		return nil
	})
	return out, err
}
