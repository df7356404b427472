package idemjob

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"
)

// events records a worker's events.
type events struct {
	mu  sync.Mutex
	all []struct {
		name   string
		fields map[string]any
	}
	hook func(name string, fields map[string]any)
}

func (e *events) setHook(h func(name string, fields map[string]any)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.hook = h
}

func (e *events) on(name string, fields map[string]any) {
	e.mu.Lock()
	hook := e.hook
	e.mu.Unlock()
	if hook != nil {
		hook(name, fields)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.all = append(e.all, struct {
		name   string
		fields map[string]any
	}{name, fields})
}

// find returns the fields of the events of that name matching where.
func (e *events) find(name string, where func(map[string]any) bool) []map[string]any {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []map[string]any
	for _, ev := range e.all {
		if ev.name == name && (where == nil || where(ev.fields)) {
			out = append(out, ev.fields)
		}
	}
	return out
}

func forJob(id string) func(map[string]any) bool {
	return func(f map[string]any) bool { return f["job_id"] == id }
}

// run starts the worker; the test stops it (grace 1s) when it ends.
func run(t *testing.T, w *Worker) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- w.Run(bg) }()
	t.Cleanup(func() {
		w.Stop(time.Second)
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
}

type params struct {
	Mode  string `json:"mode"`
	Sleep int    `json:"sleep_ms"`
}

// provider: the fake providers, by mode.
func provider(ctx context.Context, job Claimed, release <-chan struct{}) (any, error) {
	var p params
	if err := json.Unmarshal(job.Params, &p); err != nil {
		return nil, &Failure{Err: err}
	}
	if c, ok := ClaimedFrom(ctx); !ok || c.AttemptID != job.AttemptID {
		return nil, errors.New("the context does not carry the job")
	}
	if job.Provider == "fallback" {
		return map[string]any{"by": "fallback"}, nil
	}
	switch p.Mode {
	case "fail":
		return nil, &Failure{Err: errors.New("card declined"), Retryable: true, Code: "declined",
			Details: map[string]any{"provider_code": 51}}
	case "final":
		return nil, &Failure{Err: errors.New("account closed"), Retryable: false}
	case "boom":
		return nil, errors.New("boom")
	case "panic":
		panic("the handler panicked")
	case "bad":
		return map[string]any{"no_by": true}, nil
	case "hang":
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	case "deaf": // ignores its context
		<-release
	}
	time.Sleep(time.Duration(p.Sleep) * time.Millisecond)
	return map[string]any{"by": job.Provider}, nil
}

// The worker end to end: results, failures (retried on the fallback, or
// final), exceptions, panics, a rejected result, a job ended before its
// begin (skipped), a slow provider kept alive by heartbeats.
func TestWorkerEndToEnd(t *testing.T) {
	t.Parallel()
	in := intent(t, 0)
	c := connect(t, roleClient)
	wc := connect(t, roleWorker)
	jobs := map[string]string{}
	for _, m := range []string{"ok1", "ok2", "ok3", "ok4", "fail", "final", "boom", "panic", "bad", "skip", "slow"} {
		mode := m
		if len(m) == 3 && m[:2] == "ok" {
			mode = ""
		}
		p := map[string]any{"mode": mode}
		if m == "slow" {
			p["sleep_ms"] = 1300
		}
		s, err := c.Submit(bg, "owner-w", uniq(m), in, p, &SubmitOptions{Provider: "primary"})
		if err != nil {
			t.Fatal(err)
		}
		jobs[m] = s.JobID
	}
	ev := &events{}
	ev.setHook(func(name string, f map[string]any) {
		if name == "claimed" && f["job_id"] == jobs["skip"] { // ended between its claim and its begin
			if _, err := admin.Exec(bg, "SELECT idemjob.cancel_job($1, 'changed my mind')", jobs["skip"]); err != nil {
				t.Error(err)
			}
		}
	})
	w := NewWorker(wc, uniq("w"), map[string]Handler{in: func(ctx context.Context, job Claimed) (any, error) {
		return provider(ctx, job, nil)
	}}, WorkerOptions{Concurrency: 3, Timeout: 5 * time.Second, Heartbeat: 200 * time.Millisecond,
		Wait: 200 * time.Millisecond, OnEvent: ev.on})
	run(t, w)
	eventually(t, 15*time.Second, "every job final", func() bool {
		return q(t, "SELECT count(*)::text FROM idemjob.jobs WHERE intent = $1 AND state IN ('succeeded', 'failed', 'cancelled')", in) == "11"
	})
	if got := attempts(t, jobs["skip"]); got != "primary:started" && got != "primary:released" { // a sweeper may release it
		t.Errorf("skip: attempts %s", got)
	}
	want := map[string]string{
		"ok1": "primary:succeeded", "fail": "primary:failed,fallback:succeeded", "final": "primary:failed",
		"boom": "primary:failed,fallback:succeeded", "panic": "primary:failed,fallback:succeeded",
		"bad": "primary:failed,fallback:succeeded", "slow": "primary:succeeded",
	}
	for m, a := range want {
		if got := attempts(t, jobs[m]); got != a {
			t.Errorf("%s: attempts %s, want %s", m, got, a)
		}
	}
	errOf := func(m string) map[string]any {
		return jsonOf(t, []byte(q(t, "SELECT error::text FROM idemjob.attempts WHERE job_id = $1 AND attempt_no = 1", jobs[m])))
	}
	if e := errOf("fail"); e["code"] != "declined" || e["message"] != "card declined" || e["provider_code"] != float64(51) {
		t.Errorf("fail: %v", e)
	}
	if e := errOf("boom"); e["code"] != "exception" || e["message"] != "boom" {
		t.Errorf("boom: %v", e)
	}
	if e := errOf("panic"); e["code"] != "exception" || e["message"] != "panic: the handler panicked" {
		t.Errorf("panic: %v", e)
	}
	if e := errOf("bad"); e["code"] != "contract_violation" {
		t.Errorf("bad: %v", e)
	}
	if s := q(t, "SELECT state || ' ' || (error ->> 'code') FROM idemjob.jobs WHERE id = $1", jobs["final"]); s != "failed provider_error" {
		t.Errorf("final: %s", s)
	}
	if s := q(t, `SELECT (deadline > started_at + interval '1.1 s')::text FROM idemjob.attempts WHERE job_id = $1`, jobs["slow"]); s != "true" {
		t.Errorf("slow: no heartbeat moved the deadline")
	}
	if len(ev.find("heartbeat", forJob(jobs["slow"]))) < 2 {
		t.Errorf("slow: heartbeats %v", ev.find("heartbeat", forJob(jobs["slow"])))
	}
	if sk := ev.find("skipped", forJob(jobs["skip"])); len(sk) != 1 || sk[0]["sqlstate"] != "IJ003" {
		t.Errorf("skip: %v", sk)
	}
	if len(ev.find("begun", forJob(jobs["skip"]))) != 0 {
		t.Errorf("skip: begun")
	}
	st := w.Stats()
	if st.Claimed != 15 || st.Won != 9 || st.Failed != 4 || st.Rejected != 1 || st.Skipped != 1 || st.Lost != 0 ||
		st.InDoubt != 0 || st.Late != 0 || st.Errors != 0 {
		t.Errorf("counters: %+v", st)
	}
	if ab := ev.find("abandoned", nil); len(ab) != 1 || ab[0]["count"] != 0 || ab[0]["at"] != "start" {
		t.Errorf("abandoned at start: %v", ab)
	}
}

// No answer in time: mark_unknown, the slot freed; the intent's
// fence_unknown_after ends the doubt (the sweeper), the job is claimed again
// on the route's fallback and won there; the late answer is still reported,
// and lost, with a race-log row.
func TestWorkerTimeoutLateAnswer(t *testing.T) {
	t.Parallel()
	in := intent(t, 300*time.Millisecond)
	c := connect(t, roleClient)
	wc := connect(t, roleWorker)
	sweeper(t)
	release := make(chan struct{})
	ev := &events{}
	w := NewWorker(wc, uniq("w"), map[string]Handler{in: func(ctx context.Context, job Claimed) (any, error) {
		return provider(ctx, job, release)
	}}, WorkerOptions{Concurrency: 1, Timeout: 400 * time.Millisecond, Wait: 200 * time.Millisecond,
		OnEvent: ev.on})
	run(t, w)
	s, err := c.Submit(bg, "owner-t", uniq("hang"), in, map[string]any{"mode": "deaf"}, &SubmitOptions{Provider: "primary"})
	if err != nil {
		t.Fatal(err)
	}
	j, err := c.AwaitJob(bg, s.JobID, 10*time.Second)
	if err != nil || j.State != JobSucceeded || string(j.Result) != `{"by": "fallback"}` {
		t.Fatalf("the job: %+v %v", j, err)
	}
	close(release)
	eventually(t, 5*time.Second, "the late answer reported", func() bool {
		return len(ev.find("completed", func(f map[string]any) bool { return f["late"] == true })) == 1
	})
	st := w.Stats()
	if st.InDoubt != 1 || st.Lost != 1 || st.Won != 1 || st.Claimed != 2 || st.Errors != 0 {
		t.Fatalf("counters: %+v", st)
	}
	late := ev.find("completed", func(f map[string]any) bool { return f["late"] == true })
	if len(late) != 1 || late[0]["outcome"] != "lost" || late[0]["provider"] != "primary" {
		t.Fatalf("late: %v", late)
	}
	if got := q(t, `SELECT string_agg(a.provider || ':' || a.state || ':' || coalesce(a.error ->> 'reason', '-'), ',' ORDER BY a.attempt_no)
		FROM idemjob.attempts a WHERE a.job_id = $1`, s.JobID); got !=
		"primary:superseded:unknown for longer than its intent's fence_unknown_after,fallback:succeeded:-" {
		t.Fatalf("attempts: %s", got)
	}
	if got := q(t, `SELECT r.reason || ' ' || (r.winner_attempt_id = j.completed_by)::text FROM idemjob.race_log r
		JOIN idemjob.jobs j ON j.id = r.job_id WHERE r.attempt_id = $1`, late[0]["attempt_id"]); got != "slot_taken true" {
		t.Fatalf("race log: %s", got)
	}
}

// Stop: no more claims; a handler that finishes within the grace is
// reported; the others are marked unknown and given up (abandon_attempts):
// cancelled and fenced, their jobs retried on the fallback; an attempt
// claimed but not begun is released, never sent.
func TestWorkerStop(t *testing.T) {
	t.Parallel()
	in := intent(t, 0)
	c := connect(t, roleClient)
	wc := connect(t, roleWorker)
	release := make(chan struct{})
	jobs := map[string]string{}
	for _, m := range []string{"hang", "deaf", "quick"} {
		p := map[string]any{"mode": m}
		if m == "quick" {
			p = map[string]any{"sleep_ms": 300}
		}
		s, err := c.Submit(bg, "owner-s", uniq(m), in, p, &SubmitOptions{Provider: "primary", Priority: 1})
		if err != nil {
			t.Fatal(err)
		}
		jobs[m] = s.JobID
	}
	ev := &events{}
	w := NewWorker(wc, uniq("w"), map[string]Handler{in: func(ctx context.Context, job Claimed) (any, error) {
		return provider(ctx, job, release)
	}}, WorkerOptions{Concurrency: 3, Timeout: 5 * time.Second, Wait: 200 * time.Millisecond, OnEvent: ev.on})
	done := make(chan error, 1)
	go func() { done <- w.Run(bg) }()
	eventually(t, 5*time.Second, "three begun", func() bool { return len(ev.find("begun", nil)) == 3 })
	// a fourth job, claimed as the worker stops: never begun
	ev.setHook(func(name string, f map[string]any) {
		if name == "claimed" {
			go w.Stop(300 * time.Millisecond)
			for !w.stopping() {
				time.Sleep(time.Millisecond)
			}
		}
	})
	s, err := c.Submit(bg, "owner-s", uniq("late"), in, nil, &SubmitOptions{Provider: "primary"})
	if err != nil {
		t.Fatal(err)
	}
	jobs["unsent"] = s.JobID
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	defer close(release)
	want := map[string]string{"hang": "primary:cancelled", "deaf": "primary:cancelled", "quick": "primary:succeeded",
		"unsent": "primary:released"}
	for m, a := range want {
		if got := attempts(t, jobs[m]); got != a {
			t.Errorf("%s: attempts %s, want %s", m, got, a)
		}
	}
	if got := q(t, `SELECT string_agg(DISTINCT a.error ->> 'reason', ',') || ' ' || string_agg(DISTINCT j.state::text || ':' || j.next_provider, ',')
		FROM idemjob.attempts a JOIN idemjob.jobs j ON j.id = a.job_id WHERE a.job_id IN ($1, $2)`, jobs["hang"], jobs["deaf"]); got !=
		"abandoned by its worker pending:fallback" {
		t.Errorf("given up: %s", got)
	}
	st := w.Stats()
	if st.Claimed != 4 || st.Won != 1 || st.InDoubt != 2 || st.Errors != 0 {
		t.Errorf("counters: %+v", st)
	}
	if s := ev.find("abandoned", func(f map[string]any) bool { return f["at"] == "stop" }); len(s) != 1 || s[0]["count"] != 3 {
		t.Errorf("abandoned at stop: %v", s)
	}
	if u := ev.find("unknown", nil); len(u) != 2 || u[0]["reason"] != "shutdown" {
		t.Errorf("unknown: %v", u)
	}
}

// Run's context ends: the worker stops as Stop(Grace) does.
func TestWorkerContext(t *testing.T) {
	t.Parallel()
	in := intent(t, 0)
	wc := connect(t, roleWorker)
	c := connect(t, roleClient)
	ctx, cancel := context.WithCancel(bg)
	ev := &events{}
	w := NewWorker(wc, uniq("w"), map[string]Handler{in: func(ctx context.Context, job Claimed) (any, error) {
		return provider(ctx, job, nil)
	}}, WorkerOptions{Wait: 2 * time.Second, Grace: time.Second, OnEvent: ev.on})
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	s, err := c.Submit(bg, "owner-c", uniq("c"), in, map[string]any{"sleep_ms": 200}, &SubmitOptions{Provider: "primary"})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "begun", func() bool { return len(ev.find("begun", nil)) == 1 })
	t0 := time.Now()
	cancel()
	if err := <-done; err != nil || time.Since(t0) > 900*time.Millisecond {
		t.Fatalf("Run: %v after %v", err, time.Since(t0))
	}
	if got := attempts(t, s.JobID); got != "primary:succeeded" {
		t.Fatalf("finished within the grace: %s", got)
	}
	if err := w.Run(bg); err == nil {
		t.Fatal("a worker runs once")
	}
}
