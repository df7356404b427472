package idemjob

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Two submits of one key at once, on two connections: one job, created
// once, the same answer to both.
func TestSubmitTwice(t *testing.T) {
	t.Parallel()
	c := connect(t, roleClient)
	in := intent(t, 0)
	key := uniq("dbl")
	var wg sync.WaitGroup
	got := make([]Submitted, 2)
	errs := make([]error, 2)
	for i := range got {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			got[i], errs[i] = c.Submit(bg, "owner-1", key, in, map[string]any{"amount": 42}, nil)
		}(i)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got[0].JobID != got[1].JobID || got[0].Created == got[1].Created {
		t.Fatalf("two submits: %+v", got)
	}
	if got[0].State != JobPending || got[0].Version != 0 || string(got[0].Result) != "" {
		t.Fatalf("a new job: %+v", got[0])
	}
	if n := q(t, "SELECT count(*)::text FROM idemjob.jobs WHERE idempotency_key = $1", key); n != "1" {
		t.Fatalf("%s jobs", n)
	}
	j, err := c.Job(bg, got[0].JobID)
	if err != nil {
		t.Fatal(err)
	}
	if j.ID != got[0].JobID || j.OwnerID != "owner-1" || j.IdempotencyKey != key || j.Intent != in ||
		j.Provider != "default" || j.State != JobPending || j.CompletedBy != "" || !j.CompletedAt.IsZero() ||
		jsonOf(t, j.Params)["amount"] != float64(42) || j.MaxAttempts != 0 || j.NextProvider != "" {
		t.Fatalf("job: %+v", j)
	}
}

// The same key with another request: IJ001, the job id from the error
// fields, 409.
func TestKeyReuse(t *testing.T) {
	t.Parallel()
	c := connect(t, roleClient)
	in := intent(t, 0)
	key := uniq("reuse")
	s, err := c.Submit(bg, "owner-1", key, in, map[string]any{"amount": 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Submit(bg, "owner-1", key, in, map[string]any{"amount": 2}, nil)
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, ErrIdempotencyConflict) || e.SQLState != "IJ001" ||
		e.Fields.JobID != s.JobID || e.HTTPStatus() != 409 || e.Table != "jobs" || e.Detail == "" {
		t.Fatalf("key reuse: %#v", err)
	}
	if b := e.Body(); b["job_id"] != s.JobID || b["error"] != "idempotency_conflict" || b["sqlstate"] != "IJ001" {
		t.Fatalf("body: %v", b)
	}
	if len(e.Headers()) != 0 {
		t.Fatalf("headers: %v", e.Headers())
	}
}

// Another worker's start while an attempt is in doubt: IJ002 with the
// attempt, its deadline (µs) and Retry-After, 409.
func TestAttemptInDoubt(t *testing.T) {
	t.Parallel()
	c := connect(t, roleClient)
	w := connect(t, roleWorker)
	in := intent(t, 0)
	s, err := c.Submit(bg, "owner-1", uniq("doubt"), in, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, err := w.StartAttempt(bg, s.JobID, &StartOptions{Timeout: 3 * time.Second, Worker: "w-1"})
	if err != nil {
		t.Fatal(err)
	}
	again, err := w.StartAttempt(bg, s.JobID, &StartOptions{Timeout: 3 * time.Second, Worker: "w-1"})
	if err != nil || again.ID != a.ID {
		t.Fatalf("the same worker gets its attempt back: %v %v", again.ID, err)
	}
	_, err = w.StartAttempt(bg, s.JobID, &StartOptions{Timeout: time.Second, Worker: "w-2"})
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, ErrAttemptInDoubt) {
		t.Fatalf("IJ002: %v", err)
	}
	f := e.Fields
	if f.JobID != s.JobID || f.AttemptID != a.ID || f.State != "started" || !f.Deadline.Equal(a.Deadline) ||
		f.RetryAfter < time.Second || f.RetryAfter > 3*time.Second {
		t.Fatalf("fields: %+v, attempt deadline %v", f, a.Deadline)
	}
	if e.HTTPStatus() != 409 || e.Headers().Get("Retry-After") != strconv.Itoa(int(f.RetryAfter/time.Second)) {
		t.Fatalf("HTTP: %d %v", e.HTTPStatus(), e.Headers())
	}
	if b := e.Body(); b["attempt_id"] != a.ID || b["deadline"] != f.Raw["deadline"] || b["state"] != "started" {
		t.Fatalf("body: %v", b)
	}
}

// Types: bigint past 2^53, jsonb numbers with every digit, timestamptz
// and interval to the microsecond.
func TestTypes(t *testing.T) {
	t.Parallel()
	c := connect(t, roleClient)
	w := connect(t, roleWorker)
	in := intent(t, 0)
	runAt := time.Date(2031, 5, 6, 7, 8, 9, 123456000, time.UTC)
	params := json.RawMessage(`{"big": 9007199254740993, "small": -9223372036854775808, "by": "x"}`)
	s, err := c.Submit(bg, "owner-1", uniq("types"), in, params, &SubmitOptions{RunAt: runAt.Add(789 * time.Nanosecond),
		Priority: -3, MaxAttempts: 7, Provider: "primary"})
	if err != nil {
		t.Fatal(err)
	}
	j, err := c.Job(bg, s.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if !j.RunAt.Equal(runAt) || j.Priority != -3 || j.MaxAttempts != 7 || j.Provider != "primary" {
		t.Fatalf("run_at %v (want %v), %+v", j.RunAt, runAt, j)
	}
	var p struct {
		Big   json.Number
		Small json.Number
	}
	d := json.NewDecoder(bytes.NewReader(j.Params))
	d.UseNumber()
	if err := d.Decode(&p); err != nil || p.Big != "9007199254740993" || p.Small != "-9223372036854775808" {
		t.Fatalf("params %s: %+v %v", j.Params, p, err)
	}
	// a version past 2^53 (set with the guards off, as no call gets there soon)
	const big = int64(1)<<53 + 1
	tx, err := admin.Begin(bg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(bg, "SET LOCAL session_replication_role = replica"); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(bg, "UPDATE idemjob.jobs SET version = $2, run_at = now() WHERE id = $1", s.JobID, big); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(bg); err != nil {
		t.Fatal(err)
	}
	if j, err = c.Job(bg, s.JobID); err != nil || j.Version != big {
		t.Fatalf("version %d (want %d): %v", j.Version, big, err)
	}
	a, err := w.StartAttempt(bg, s.JobID, &StartOptions{Timeout: 1500 * time.Millisecond, Worker: "types"})
	if err != nil || a.ReadVersion != big || a.Deadline.Sub(a.StartedAt) != 1500*time.Millisecond {
		t.Fatalf("attempt: %+v %v", a, err)
	}
	h, err := w.Heartbeat(bg, a.ID, 90*time.Minute+time.Microsecond)
	if err != nil {
		t.Fatal(err)
	}
	if d := h.Deadline.Sub(h.StartedAt); d < 90*time.Minute || d > 91*time.Minute ||
		h.Deadline.Nanosecond()%1000 != 0 {
		t.Fatalf("heartbeat deadline %v", h.Deadline)
	}
	// the in-doubt deadline in the error fields is the row's, to the µs
	_, err = w.StartAttempt(bg, s.JobID, &StartOptions{Worker: "other"})
	var e *Error
	if !errors.As(err, &e) || !e.Fields.Deadline.Equal(h.Deadline) {
		t.Fatalf("IJ002 deadline %v, want %v (%v)", e.Fields.Deadline, h.Deadline, err)
	}
	out, err := w.CompleteAttempt(bg, a.ID, json.RawMessage(`{"by": "primary", "n": 18446744073709551617}`))
	if err != nil || out.Outcome != Won || out.JobVersion != big+1 || out.WinnerAttemptID != a.ID || out.JobID != s.JobID {
		t.Fatalf("complete: %+v %v", out, err)
	}
	if j, err = c.Job(bg, s.JobID); err != nil || string(j.Result) != `{"n": 18446744073709551617, "by": "primary"}` ||
		j.CompletedBy != a.ID || j.State != JobSucceeded || j.CompletedAt.IsZero() {
		t.Fatalf("result %s: %+v %v", j.Result, j, err)
	}
	// the policy's intervals, 0 apart from NULL
	ad := connect(t, roleAdmin)
	pol, err := ad.SetRetryPolicy(bg, in, &RetryPolicyOptions{MaxAttempts: 4, RetryBackoff: Ptr(time.Duration(0)),
		FenceUnknownAfter: 1500 * time.Microsecond})
	if err != nil || pol.MaxAttempts != 4 || pol.RetryBackoff == nil || *pol.RetryBackoff != 0 ||
		pol.RetryBackoffMax != nil || pol.FenceUnknownAfter != 1500*time.Microsecond || pol.Intent != in {
		t.Fatalf("policy %+v %v", pol, err)
	}
}

// batch submits n jobs of the intent and claims them with a lease, in
// the order claim gives them.
func batch(t *testing.T, c, w *Client, in string, n int) []Claimed {
	t.Helper()
	for i := 0; i < n; i++ {
		if _, err := c.Submit(bg, "owner-b", uniq("batch"), in, map[string]any{"i": i}, nil); err != nil {
			t.Fatal(err)
		}
	}
	cl, err := w.Claim(bg, uniq("batch-w"), &ClaimOptions{Intents: []string{in}, MaxJobs: n, Lease: true})
	if err != nil || len(cl) != n {
		t.Fatalf("claim: %d of %d, %v", len(cl), n, err)
	}
	return cl
}

// A batch begun in one statement and completed in one: the rows and the
// answers in the order given; none: nothing sent.
func TestBatch(t *testing.T) {
	t.Parallel()
	c := connect(t, roleClient)
	w := connect(t, roleWorker)
	in := intent(t, 0)
	if b, err := w.BeginAttempts(bg, nil); b != nil || err != nil {
		t.Fatalf("no ids: %v %v", b, err)
	}
	if d, err := w.CompleteAttempts(bg, []AttemptResult{}); d != nil || err != nil {
		t.Fatalf("no results: %v %v", d, err)
	}
	cl := batch(t, c, w, in, 4)
	ids := []string{cl[2].AttemptID, cl[0].AttemptID, cl[3].AttemptID, cl[1].AttemptID}
	begun, err := w.BeginAttempts(bg, ids)
	if err != nil || len(begun) != 4 {
		t.Fatalf("begin_attempts: %+v %v", begun, err)
	}
	for i, a := range begun {
		if a.ID != ids[i] || a.State != AttemptStarted || !a.LeaseUntil.IsZero() || a.Deadline.IsZero() ||
			a.Provider != "default" || a.AttemptNo != 1 {
			t.Fatalf("begun %d: %+v", i, a)
		}
	}
	results := make([]AttemptResult, len(begun))
	for i, a := range begun {
		results[i] = AttemptResult{AttemptID: a.ID, Result: map[string]any{"by": "default", "n": i}}
	}
	results[3].Result = json.RawMessage(`{"by": "default", "n": 18446744073709551617}`)
	done, err := w.CompleteAttempts(bg, results)
	if err != nil || len(done) != 4 {
		t.Fatalf("complete_attempts: %+v %v", done, err)
	}
	for i, d := range done {
		if d.Outcome != Won || d.WinnerAttemptID != ids[i] || d.JobID != begun[i].JobID || d.JobVersion != 1 {
			t.Fatalf("completed %d: %+v", i, d)
		}
	}
	j, err := c.Job(bg, begun[3].JobID)
	if err != nil || j.State != JobSucceeded || j.CompletedBy != ids[3] ||
		string(j.Result) != `{"n": 18446744073709551617, "by": "default"}` {
		t.Fatalf("job: %+v %v", j, err)
	}
	// again: the first answers (I7); another result for one: IJ001
	if again, err := w.CompleteAttempts(bg, results); err != nil || len(again) != 4 || again[2] != done[2] {
		t.Fatalf("again: %+v %v", again, err)
	}
	results[1].Result = map[string]any{"by": "other"}
	if _, err := w.CompleteAttempts(bg, results); !errors.Is(err, ErrIdempotencyConflict) {
		t.Fatalf("another result: %v", err)
	}
}

// A batch in which one call errors: that call's typed error, and nothing
// of the statement written.
func TestBatchAllOrNothing(t *testing.T) {
	t.Parallel()
	c := connect(t, roleClient)
	w := connect(t, roleWorker)
	in := intent(t, 0)
	cl := batch(t, c, w, in, 3)
	ids := []string{cl[0].AttemptID, cl[1].AttemptID, cl[2].AttemptID}
	leased := func() string {
		return q(t, `SELECT string_agg(a.state || ':' || (a.lease_until IS NOT NULL) || ':' || j.state, ',' ORDER BY m.n)
			FROM unnest($1::text[]::uuid[]) WITH ORDINALITY m(id, n) JOIN idemjob.attempts a ON a.id = m.id
			JOIN idemjob.jobs j ON j.id = a.job_id`, ids)
	}
	// the second job cancelled before its begin: IJ003, no lease ended
	if _, err := c.CancelJob(bg, cl[1].JobID, "changed my mind"); err != nil {
		t.Fatal(err)
	}
	b, err := w.BeginAttempts(bg, ids)
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, ErrJobFinished) || e.SQLState != "IJ003" || e.Call != "begin_attempts" ||
		e.Fields.JobID != cl[1].JobID || e.HTTPStatus() != 409 || b != nil {
		t.Fatalf("begin_attempts with a job cancelled: %+v %#v", b, err)
	}
	if got := leased(); got != "started:true:running,started:true:cancelled,started:true:running" {
		t.Fatalf("after the failed begin: %s", got)
	}
	_, err = w.BeginAttempts(bg, []string{ids[0], "not-a-uuid"})
	if !errors.Is(err, ErrInvalidArgument) || !errors.As(err, &e) || e.SQLState != "22P02" {
		t.Fatalf("a malformed id: %v", err)
	}
	ids = []string{ids[0], ids[2]}
	if b, err = w.BeginAttempts(bg, ids); err != nil || len(b) != 2 {
		t.Fatalf("begin_attempts: %+v %v", b, err)
	}
	// the second attempt failed before the report: IJ005, the first not won
	if _, err := w.FailAttempt(bg, ids[1], &FailOptions{Retryable: Ptr(false)}); err != nil {
		t.Fatal(err)
	}
	results := []AttemptResult{{ids[0], map[string]any{"by": "default"}}, {ids[1], map[string]any{"by": "default"}}}
	d, err := w.CompleteAttempts(bg, results)
	if !errors.As(err, &e) || !errors.Is(err, ErrInvalidTransition) || e.SQLState != "IJ005" ||
		e.Call != "complete_attempts" || d != nil {
		t.Fatalf("complete_attempts with an attempt failed: %+v %#v", d, err)
	}
	if j, err := c.Job(bg, cl[0].JobID); err != nil || j.State != JobRunning || string(j.Result) != "" || j.Version != 0 {
		t.Fatalf("the first job after the failed report: %+v %v", j, err)
	}
	// a result that is not JSON: 22P02, nothing written either
	_, err = w.CompleteAttempts(bg, []AttemptResult{results[0], {ids[1], json.RawMessage(`{`)}})
	if !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("a result that is not JSON: %v", err)
	}
	if d, err = w.CompleteAttempts(bg, results[:1]); err != nil || len(d) != 1 || d[0].Outcome != Won {
		t.Fatalf("the first alone: %+v %v", d, err)
	}
}

// The admin calls and the views.
func TestAdminAndViews(t *testing.T) {
	t.Parallel()
	ad := connect(t, roleAdmin)
	op := connect(t, roleOperator)
	c := connect(t, roleClient)
	w := connect(t, roleWorker)
	in := intent(t, 0)
	v, err := ad.DefineContract(bg, in, map[string]any{"type": "object", "required": []string{"by"}})
	if err != nil || v != 1 {
		t.Fatalf("the same schema: version %d %v", v, err)
	}
	if v, err = ad.DefineContract(bg, in, map[string]any{"type": "object", "required": []string{"by", "amount"}}); err != nil || v != 2 {
		t.Fatalf("a new schema: version %d %v", v, err)
	}
	cert, err := ad.CertifyProvider(bg, in, "fallback", nil)
	if err != nil || cert.ContractVersion != 2 || cert.Evidence != nil || !cert.RevokedAt.IsZero() {
		t.Fatalf("certify: %+v %v", cert, err)
	}
	rev, err := ad.RevokeProvider(bg, in, "fallback", "flaky")
	if err != nil || rev.RevokeReason != "flaky" || rev.RevokedAt.IsZero() {
		t.Fatalf("revoke: %+v %v", rev, err)
	}
	rt, err := ad.SetRoute(bg, in, nil)
	if err != nil || len(rt.Providers) != 0 || rt.Intent != in {
		t.Fatalf("route: %+v %v", rt, err)
	}
	// a job in doubt, one due, for the views
	s, err := c.Submit(bg, "owner-v", uniq("v"), in, nil, &SubmitOptions{Provider: "p1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Submit(bg, "owner-v", uniq("v"), in, nil, nil); err != nil {
		t.Fatal(err)
	}
	a, err := w.StartAttempt(bg, s.JobID, &StartOptions{Timeout: time.Minute, Worker: "views"})
	if err != nil {
		t.Fatal(err)
	}
	if a, err = w.MarkUnknown(bg, a.ID, ""); err != nil || a.State != AttemptUnknown || a.UnknownAt.IsZero() {
		t.Fatalf("mark_unknown: %+v %v", a, err)
	}
	if jsonOf(t, a.Error)["reason"] != "timeout" {
		t.Fatalf("default reason: %s", a.Error)
	}
	ds, err := op.InDoubt(bg)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, d := range ds {
		if d.AttemptID == a.ID {
			found = d.JobID == s.JobID && d.State == AttemptUnknown && d.Worker == "views" && d.Provider == "p1" &&
				d.Age >= 0 && d.Age < time.Minute && d.InDoubtSince.Equal(a.UnknownAt) && d.Intent == in
		}
	}
	if !found {
		t.Fatalf("in_doubt: %+v", ds)
	}
	qs, err := op.QueueStats(bg)
	if err != nil {
		t.Fatal(err)
	}
	found = false
	for _, s := range qs {
		if s.Intent == in {
			found = s.Due == 1 && s.InDoubt == 1 && s.Running == 0 && s.OldestDueAge >= 0
		}
	}
	if !found {
		t.Fatalf("queue_stats: %+v", qs)
	}
	ps, err := op.ProviderStats(bg)
	if err != nil {
		t.Fatal(err)
	}
	found = false
	for _, p := range ps {
		if p.Intent == in && p.Provider == "p1" {
			found = p.Attempts == 1 && p.InDoubt == 1 && p.P50Ms == 0 && !p.LastStartedAt.IsZero()
		}
	}
	if !found {
		t.Fatalf("provider_stats: %+v", ps)
	}
	if a, err = op.CancelAttempt(bg, a.ID, "resolved by hand", true); err != nil || a.State != AttemptCancelled {
		t.Fatalf("cancel_attempt: %+v %v", a, err)
	}
	j, err := c.CancelJob(bg, s.JobID, "no longer wanted")
	if err != nil || j.State != JobCancelled || j.CancelReason != "no longer wanted" {
		t.Fatalf("cancel_job: %+v %v", j, err)
	}
}

// purge, then the key: IJ007 for the same request, IJ001 for another;
// purge_race_log. Not parallel: it purges every final job.
func TestPurge(t *testing.T) {
	c := connect(t, roleClient)
	op := connect(t, roleOperator)
	in := intent(t, 0)
	key := uniq("purge")
	s, err := c.Submit(bg, "owner-p", key, in, map[string]any{"a": 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CancelJob(bg, s.JobID, "to purge"); err != nil {
		t.Fatal(err)
	}
	if _, err := op.Purge(bg, 0, 0); err != nil {
		t.Fatal(err)
	}
	_, err = c.Submit(bg, "owner-p", key, in, map[string]any{"a": 1}, nil)
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, ErrKeyExpired) || e.HTTPStatus() != 410 || e.Fields.JobID != s.JobID ||
		e.Fields.State != "cancelled" {
		t.Fatalf("IJ007: %v", err)
	}
	if _, err = c.Submit(bg, "owner-p", key, in, map[string]any{"a": 2}, nil); !errors.Is(err, ErrIdempotencyConflict) {
		t.Fatalf("IJ001 after purge: %v", err)
	}
	if _, err := op.PurgeRaceLog(bg, 24*time.Hour); err != nil {
		t.Fatal(err)
	}
}
