package idemjob

import (
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"
)

// sends records how many times each call was sent.
type sends struct {
	mu sync.Mutex
	n  map[string]int
}

func (s *sends) count(call string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n[call]
}

// losing is a client (superuser, may call everything) whose every call
// commits and then loses its first answer.
func losing(t *testing.T) (*Client, *sends) {
	s := &sends{n: map[string]int{}}
	c := connect(t, userOf(testDSN), WithBackoff(time.Millisecond), WithLostAnswers(func(call string, try int) bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.n[call]++
		return try == 0
	}))
	return c, s
}

// A lost answer on every resend-safe call: the client sends it again and
// the answer is the first one's (I7); nothing happened twice.
func TestLostAnswerResendSafe(t *testing.T) {
	t.Parallel()
	c, sent := losing(t)
	in := intent(t, 0)
	key := uniq("lost")
	var err error
	check := func(call string) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", call, err)
		}
		if n := sent.count(call); n != 2 {
			t.Fatalf("%s sent %d times, want 2", call, n)
		}
	}

	sub, err := c.Submit(bg, "owner-l", key, in, map[string]any{"a": 1}, nil)
	check("submit")
	if sub.Created || q(t, "SELECT count(*)::text FROM idemjob.jobs WHERE idempotency_key = $1", key) != "1" {
		t.Fatalf("submit resent: %+v", sub) // created by the lost send, found by the second
	}
	j, err := c.Job(bg, sub.JobID)
	check("job")
	if j.ID != sub.JobID {
		t.Fatal(j)
	}
	j, err = c.AwaitJob(bg, sub.JobID, 0)
	check("await_job")
	a, err := c.StartAttempt(bg, sub.JobID, &StartOptions{Worker: "lost-w", Timeout: time.Minute})
	check("start_attempt")
	if attempts(t, sub.JobID) != "default:started" {
		t.Fatalf("start_attempt resent: %s", attempts(t, sub.JobID))
	}
	h, err := c.Heartbeat(bg, a.ID, 2*time.Minute)
	check("heartbeat")
	if !h.Deadline.After(a.Deadline) {
		t.Fatal(h)
	}
	a, err = c.MarkUnknown(bg, a.ID, "lost")
	check("mark_unknown")
	a, err = c.CancelAttempt(bg, a.ID, "resolved", true)
	check("cancel_attempt")
	if a.State != AttemptCancelled {
		t.Fatal(a)
	}
	// a lost claim with a lease: its attempts are never begun, and released
	cl, err := c.Claim(bg, "lost-w2", &ClaimOptions{Intents: []string{in}, Lease: true})
	check("claim")
	if len(cl) != 0 || q(t, `SELECT count(*)::text FROM idemjob.attempts WHERE job_id = $1 AND worker = 'lost-w2'
		AND state = 'started' AND lease_until IS NOT NULL`, sub.JobID) != "1" {
		t.Fatalf("claim resent: %v, %s", cl, attempts(t, sub.JobID))
	}
	n, err := c.AbandonAttempts(bg, "lost-w2")
	check("abandon_attempts")
	if n != 0 || attempts(t, sub.JobID) != "default:cancelled,fallback:released" { // fenced: on to the route
		t.Fatalf("abandon resent: %d %s", n, attempts(t, sub.JobID)) // the lost send released it
	}
	plain := connect(t, userOf(testDSN))
	cl, err = plain.Claim(bg, "lost-w3", &ClaimOptions{Intents: []string{in}, Lease: true, MaxJobs: 5})
	if err != nil || len(cl) != 1 {
		t.Fatalf("claim: %v %v", cl, err)
	}
	b, err := c.BeginAttempt(bg, cl[0].AttemptID)
	if sent.count("begin_attempt") != 2 || err != nil || b.LeaseUntil != (time.Time{}) {
		t.Fatalf("begin resent: %+v %v", b, err)
	}
	out, err := c.CompleteAttempt(bg, cl[0].AttemptID, map[string]any{"by": "default"})
	check("complete_attempt")
	if out.Outcome != Won || out.WinnerAttemptID != cl[0].AttemptID || cl[0].Provider != "fallback" {
		t.Fatalf("complete resent: %+v", out)
	}
	_, err = c.ExpireAttempts(bg)
	check("expire_attempts")

	// fail_attempt and cancel_job on a second job
	sub2, err := c.Submit(bg, "owner-l", uniq("lost"), in, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	a2, err := c.StartAttempt(bg, sub2.JobID, &StartOptions{Worker: "lost-w"})
	if err != nil {
		t.Fatal(err)
	}
	f, err := c.FailAttempt(bg, a2.ID, &FailOptions{Error: map[string]any{"code": "declined"}, Retryable: Ptr(true)})
	check("fail_attempt")
	if f.State != AttemptFailed || jsonOf(t, f.Error)["code"] != "declined" {
		t.Fatal(f)
	}
	cj, err := c.CancelJob(bg, sub2.JobID, "lost")
	check("cancel_job")
	if cj.State != JobCancelled || cj.Version != 1 {
		t.Fatalf("cancel_job resent: %+v", cj)
	}

	// admin
	v, err := c.DefineContract(bg, in, json.RawMessage(`{"type": "object", "required": ["by", "x"]}`))
	check("define_contract")
	if v != 2 {
		t.Fatalf("define_contract resent: version %d", v)
	}
	_, err = c.CertifyProvider(bg, in, "fallback", nil)
	check("certify_provider")
	_, err = c.RevokeProvider(bg, in, "fallback", "lost")
	check("revoke_provider")
	_, err = c.SetRetryPolicy(bg, in, &RetryPolicyOptions{MaxAttempts: 3})
	check("set_retry_policy")
	rt, err := c.SetRoute(bg, in, []string{"a", "b"})
	check("set_route")
	if len(rt.Providers) != 2 {
		t.Fatal(rt)
	}
	// the views: no row twice
	_, err = c.InDoubt(bg)
	check("in_doubt")
	qs, err := c.QueueStats(bg)
	check("queue_stats")
	seen := map[string]bool{}
	for _, s := range qs {
		if seen[s.Intent] {
			t.Fatalf("queue_stats: %s twice", s.Intent)
		}
		seen[s.Intent] = true
	}
	ps, err := c.ProviderStats(bg)
	check("provider_stats")
	seen = map[string]bool{}
	for _, p := range ps {
		if seen[p.Intent+"/"+p.Provider] {
			t.Fatalf("provider_stats: %s/%s twice", p.Intent, p.Provider)
		}
		seen[p.Intent+"/"+p.Provider] = true
	}
}

// A lost answer on the batch calls: the statement is sent again and each
// call in it answers as it first did (I7); nothing happened twice.
func TestLostAnswerBatch(t *testing.T) {
	t.Parallel()
	c, sent := losing(t)
	plain := connect(t, userOf(testDSN))
	in := intent(t, 0)
	var jobs []string
	for i := 0; i < 3; i++ {
		s, err := plain.Submit(bg, "owner-lb", uniq("lostb"), in, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, s.JobID)
	}
	cl, err := plain.Claim(bg, "lost-batch", &ClaimOptions{Intents: []string{in}, Lease: true, MaxJobs: 3})
	if err != nil || len(cl) != 3 {
		t.Fatalf("claim: %v %v", cl, err)
	}
	ids := []string{cl[0].AttemptID, cl[1].AttemptID, cl[2].AttemptID}
	begun, err := c.BeginAttempts(bg, ids)
	if n := sent.count("begin_attempts"); err != nil || n != 2 || len(begun) != 3 {
		t.Fatalf("begin_attempts resent: %+v %v, sent %d times", begun, err, n)
	}
	for i, a := range begun {
		if a.ID != ids[i] || a.State != AttemptStarted || !a.LeaseUntil.IsZero() {
			t.Fatalf("begun %d: %+v", i, a)
		}
	}
	results := []AttemptResult{{ids[0], map[string]any{"by": "a"}}, {ids[1], json.RawMessage(`{"by": "b"}`)},
		{ids[2], map[string]any{"by": "c"}}}
	done, err := c.CompleteAttempts(bg, results)
	if n := sent.count("complete_attempts"); err != nil || n != 2 || len(done) != 3 {
		t.Fatalf("complete_attempts resent: %+v %v, sent %d times", done, err, n)
	}
	again, err := plain.CompleteAttempts(bg, results)
	if err != nil || len(again) != 3 {
		t.Fatalf("complete_attempts again: %+v %v", again, err)
	}
	for i, d := range done {
		if d.Outcome != Won || d.WinnerAttemptID != ids[i] || d.JobVersion != 1 || again[i] != d {
			t.Fatalf("completed %d: %+v, again %+v", i, d, again[i])
		}
		if got := attempts(t, d.JobID); got != "default:succeeded" {
			t.Fatalf("job %d: %s", i, got)
		}
	}
	if n := q(t, "SELECT count(*)::text FROM idemjob.race_log WHERE job_id = ANY($1::text[]::uuid[])", jobs); n != "0" {
		t.Fatalf("%s race-log rows", n)
	}
}

// The calls that are not resend-safe: sent once, ErrConnectionLost, in
// doubt; they did commit.
func TestLostAnswerNotResent(t *testing.T) {
	t.Parallel()
	c, sent := losing(t)
	in := intent(t, 0)
	sub, err := c.Submit(bg, "owner-l", uniq("lost"), in, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	lost := func(call string, err error) {
		t.Helper()
		var e *Error
		if !errors.As(err, &e) || !errors.Is(err, ErrConnectionLost) || !e.InDoubt() || e.HTTPStatus() != 503 ||
			e.SQLState != "" || sent.count(call) != 1 {
			t.Fatalf("%s: %v, sent %d times", call, err, sent.count(call))
		}
	}
	_, err = c.StartAttempt(bg, sub.JobID, &StartOptions{Timeout: time.Minute})
	lost("start_attempt", err)
	if attempts(t, sub.JobID) != "default:started" {
		t.Fatalf("the lost start committed: %s", attempts(t, sub.JobID))
	}
	sub2, err := c.Submit(bg, "owner-l", uniq("lost"), in, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Claim(bg, "lost-nolease", &ClaimOptions{Intents: []string{in}})
	lost("claim", err)
	if attempts(t, sub2.JobID) != "default:started" {
		t.Fatalf("the lost claim committed: %s", attempts(t, sub2.JobID))
	}
	_, err = c.Purge(bg, 1000*time.Hour, 1)
	lost("purge", err)
	_, err = c.PurgeRaceLog(bg, 1000*time.Hour)
	lost("purge_race_log", err)
}

// A real broken connection: the backend waiting in await_job is
// terminated (through pgbouncer, the pooler loses its server connection);
// the client sends the call again and gets the answer.
func TestConnectionKilled(t *testing.T) {
	t.Parallel()
	in := intent(t, 0)
	app := uniq("kill")
	c := connectApp(t, roleClient, app)
	w := connect(t, roleWorker)
	sub, err := c.Submit(bg, "owner-k", uniq("k"), in, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		signalBackend(t, "pg_terminate_backend", app, true)
		time.Sleep(100 * time.Millisecond) // the resent await_job waits again
		cl, err := w.Claim(bg, "kill-w", &ClaimOptions{Intents: []string{in}})
		if err == nil && len(cl) == 1 {
			_, err = w.CompleteAttempt(bg, cl[0].AttemptID, map[string]any{"by": "default"})
		}
		if err != nil {
			t.Error(err)
		}
	}()
	t0 := time.Now()
	j, err := c.AwaitJob(bg, sub.JobID, 10*time.Second)
	if err != nil || j.State != JobSucceeded || time.Since(t0) > 5*time.Second {
		t.Fatalf("await_job across a broken connection: %+v %v", j, err)
	}
	// not resent: a claim without a lease, killed while it waits
	app2 := uniq("kill")
	c2 := connectApp(t, roleWorker, app2)
	go signalBackend(t, "pg_terminate_backend", app2, true)
	_, err = c2.Claim(bg, "kill-w2", &ClaimOptions{Intents: []string{uniq("nothing")}, Wait: 10 * time.Second})
	var e *Error
	if !errors.As(err, &e) || !e.InDoubt() {
		t.Fatalf("claim without a lease, connection lost: %v", err)
	}
	// the pool replaced the broken connection
	if _, err := c2.AbandonAttempts(bg, "kill-w2"); err != nil {
		t.Fatal(err)
	}
}
