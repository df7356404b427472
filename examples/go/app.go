// idemjob from Go, on the client package idemjob.dev/idemjob (clients/go,
// pgx v4): an HTTP-style handler, a worker and a batch step, with no SQL of
// their own. The package's pool is pooler-safe (statement_cache_mode=
// describe: unnamed statements only), so all of it works through pgbouncer
// in transaction pooling; every error is an *idemjob.Error that knows its
// HTTP status; calls whose answer was lost are sent again by the package
// when that is safe.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"idemjob.dev/idemjob"
)

type M = map[string]any

var ctx = context.Background()

// ---- the handler

// Handle serves POST /jobs (Idempotency-Key: key, body req: intent,
// params) and GET /jobs/<id>: 200 with the job when final, 202 while it
// runs; an error with its status, headers (Retry-After for IJ002) and a
// body whose ids come from the error fields.
func Handle(c *idemjob.Client, method, path, owner, key string, req M, wait time.Duration) (int, http.Header, M) {
	jobID := path[strings.LastIndex(path, "/")+1:] // GET /jobs/<id>: a malformed id is 22P02 -> 400
	var s idemjob.Submitted
	var err error
	if method == "POST" { // the same key again: the same job (a double click), or 409 with its id
		intent, _ := req["intent"].(string)
		s, err = c.Submit(ctx, owner, key, intent, req["params"], nil)
		jobID = s.JobID
	}
	var job idemjob.Job
	if err == nil { // waits inside the server for the outcome (no LISTEN)
		job, err = c.AwaitJob(ctx, jobID, wait)
	}
	if e := (*idemjob.Error)(nil); errors.As(err, &e) { // every error of a call is one
		return e.HTTPStatus(), e.Headers(), e.Body()
	}
	status := map[bool]int{false: 202, true: 200}[job.State.Final()]
	return status, http.Header{}, M{"job_id": job.ID, "state": job.State, "version": job.Version, "result": job.Result}
}

// ---- the worker

// Provider calls one provider; an error is its definite answer "no".
type Provider func(ctx context.Context, params M) (M, error)

// NewWorker runs ex.charge jobs (Run, Stop): at start it gives up what an
// earlier run of the same name left (abandon_attempts); it claims with a
// lease, begins each attempt right before the provider the claim names
// (failover is the server's: after a failure or a fenced doubt the job
// comes back on the next provider of its route), heartbeats (the attempt's
// deadline in the server kept three heartbeats ahead), and reports:
// complete_attempt, fail_attempt, or past Timeout mark_unknown, and the
// late answer still (the server decides whether it wins).
func NewWorker(c *idemjob.Client, name string, providers map[string]Provider, onEvent func(string, map[string]any)) *idemjob.Worker {
	charge := func(ctx context.Context, job idemjob.Claimed) (any, error) {
		var params M
		if err := json.Unmarshal(job.Params, &params); err != nil {
			return nil, &idemjob.Failure{Err: err} // not retryable: the same params fail again
		}
		result, err := providers[job.Provider](ctx, params)
		if err != nil { // retried by the server, on the next provider of the route
			return nil, &idemjob.Failure{Err: err, Retryable: true}
		}
		return result, nil
	}
	return idemjob.NewWorker(c, name, map[string]idemjob.Handler{"ex.charge": charge}, idemjob.WorkerOptions{
		Concurrency: 4, Timeout: 1500 * time.Millisecond, Heartbeat: time.Second / 3, Wait: time.Second, OnEvent: onEvent})
}

// ---- the batch step

// BatchStep claims up to maxJobs jobs, begins them in one statement
// (BeginAttempts), runs them side by side, and reports the results in one
// statement (CompleteAttempts: one complete_attempt per job, its own
// compare-and-swap and answer, one transaction). If a call of either
// statement errors, nothing of it is written and the calls go one by one
// (the begins then skip what must not be sent). beforeBegin /
// beforeReport: the scenario's hooks.
func BatchStep(c *idemjob.Client, name string, providers map[string]Provider, maxJobs int,
	beforeBegin, beforeReport func([]idemjob.Claimed) error) (claimed, sent int, outcomes []string, err error) {
	jobs, err := c.Claim(ctx, name, &idemjob.ClaimOptions{MaxJobs: maxJobs, Timeout: 30 * time.Second, Lease: true})
	if err != nil || len(jobs) == 0 {
		return 0, 0, nil, err
	}
	if beforeBegin != nil {
		if err := beforeBegin(jobs); err != nil {
			return 0, 0, nil, err
		}
	}
	toSend := jobs
	if _, err := c.BeginAttempts(ctx, attemptIDs(jobs)); err != nil { // nothing was written: one by one
		toSend = nil
		for _, j := range jobs {
			if _, err := c.BeginAttempt(ctx, j.AttemptID); err == nil {
				toSend = append(toSend, j)
			} else if !errors.Is(err, idemjob.ErrJobFinished) && !errors.Is(err, idemjob.ErrInvalidTransition) &&
				!errors.Is(err, idemjob.ErrLeaseExpired) {
				return 0, 0, nil, err
			}
		}
	}
	type answer struct {
		result M
		err    error
	}
	answers := make([]chan answer, len(toSend))
	for i, j := range toSend { // side by side
		answers[i] = make(chan answer, 1)
		go func(j idemjob.Claimed, ch chan answer) {
			var params M
			_ = json.Unmarshal(j.Params, &params)
			r, err := providers[j.Provider](ctx, params)
			ch <- answer{r, err}
		}(j, answers[i])
	}
	var done []idemjob.Claimed
	var results []idemjob.AttemptResult
	for i, j := range toSend {
		if a := <-answers[i]; a.err != nil { // a definite failure
			if _, err := c.FailAttempt(ctx, j.AttemptID, &idemjob.FailOptions{Error: M{"code": "provider_error",
				"message": a.err.Error()}}); err != nil {
				return 0, 0, nil, err
			}
		} else {
			done, results = append(done, j), append(results, idemjob.AttemptResult{AttemptID: j.AttemptID, Result: a.result})
		}
	}
	if beforeReport != nil {
		if err := beforeReport(done); err != nil {
			return 0, 0, nil, err
		}
	}
	completed, err := c.CompleteAttempts(ctx, results)
	for _, d := range completed {
		outcomes = append(outcomes, string(d.Outcome))
	}
	if err != nil { // one call failed, nothing was written: each again, alone; the first answers stand (I7)
		for _, r := range results {
			out, err := c.CompleteAttempt(ctx, r.AttemptID, r.Result)
			if e := (*idemjob.Error)(nil); errors.As(err, &e) && e.SQLState != "" {
				out.Outcome = idemjob.Outcome(e.SQLState)
			} else if err != nil {
				return 0, 0, nil, err
			}
			outcomes = append(outcomes, string(out.Outcome))
		}
	}
	return len(jobs), len(toSend), outcomes, nil
}

func attemptIDs(jobs []idemjob.Claimed) []string {
	ids := make([]string, len(jobs))
	for i, j := range jobs {
		ids[i] = j.AttemptID
	}
	return ids
}
