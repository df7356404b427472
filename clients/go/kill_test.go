package idemjob

// A worker killed (SIGKILL) at each point of its loop, as
// test/t/060_kill_points.pl does with psql, here with the package's Worker
// in a child process (this test binary run again, IDEMJOB_TEST_CHILD set):
//
//	p1  waiting in claim(wait => ...)      nothing is claimed for it
//	p2  after claim, before begin_attempt  its lease (1 s here) ends: released,
//	                                       never sent; claimed again
//	p3  after begin_attempt                deadline: unknown; the intent's
//	                                       fence_unknown_after gives it up
//	p4  in the handler (the provider call) restarted under its name:
//	                                       abandon_attempts() gives it up
//	p5  after the answer, before its       the same
//	    report
//	op  as p3, on an intent without        left in doubt for an operator
//	    fence_unknown_after
//
// Then the restarted p4 and p5 workers and a new worker run, and the
// sweeper's tick (expire_attempts on the admin connection): no operator
// call. Every job of p1-p5 ends succeeded, won once, on the route's
// fallback when its attempt had been sent (p3-p5).

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

const childEnv = "IDEMJOB_TEST_CHILD"

// runChild is the child: a Worker that stops for good at its kill point,
// saying "AT <point>" on stdout.
func runChild() int {
	point := os.Getenv(childEnv)
	c, err := Connect(context.Background(), os.Getenv("IDEMJOB_CHILD_DSN"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	at := func(p string) {
		fmt.Println("AT " + p)
		time.Sleep(time.Hour) // until the SIGKILL
	}
	handler := func(ctx context.Context, job Claimed) (any, error) {
		if point == "p4" {
			at(point)
		}
		return map[string]any{"by": job.Provider}, nil
	}
	w := NewWorker(c, os.Getenv("IDEMJOB_CHILD_NAME"), map[string]Handler{os.Getenv("IDEMJOB_CHILD_INTENT"): handler},
		// Concurrency 1: a child with a free slot would claim again at once,
		// and its waiting claim (10 s) would hold one of the pooler's four
		// server connections, queueing the begin_attempt of another child
		WorkerOptions{Concurrency: 1, Timeout: time.Second, Wait: 10 * time.Second, OnEvent: func(name string, f map[string]any) {
			fmt.Println("EVENT", name, f["attempt_id"])
			switch {
			case point == "p1" && name == "claiming":
				fmt.Println("AT p1") // and on into the claim, which waits
			case point == "p2" && name == "claimed", (point == "p3" || point == "op") && name == "begun",
				point == "p5" && name == "answered":
				at(point)
			}
		}})
	if err := w.Run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

type child struct {
	point, intent, name string
	cmd                 *exec.Cmd
	at                  chan struct{}
}

func startChild(t *testing.T, point, intent string) *child {
	ch := &child{point: point, intent: intent, name: uniq("kill-" + point), at: make(chan struct{})}
	ch.cmd = exec.Command(os.Args[0])
	ch.cmd.Env = append(os.Environ(), childEnv+"="+point,
		"IDEMJOB_CHILD_DSN="+dsnAs(testDSN, roleWorker)+" application_name="+ch.name,
		"IDEMJOB_CHILD_INTENT="+intent, "IDEMJOB_CHILD_NAME="+ch.name)
	ch.cmd.Stderr = os.Stderr
	stdout, err := ch.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if sc.Text() == "AT "+point {
				close(ch.at)
			}
		}
	}()
	return ch
}

// kill waits for the child at its point and kills it (SIGKILL).
func (ch *child) kill(t *testing.T) {
	select {
	case <-ch.at:
	case <-time.After(15 * time.Second):
		_ = ch.cmd.Process.Kill()
		t.Fatalf("%s never reached its point", ch.point)
	}
	if ch.point == "p1" { // inside the claim, waiting
		eventually(t, 5*time.Second, "p1 waiting in claim", func() bool {
			return q(t, `SELECT count(*)::text FROM pg_stat_activity WHERE application_name = $1 AND state = 'active'
				AND query LIKE '%idemjob.claim(%'`, ch.name) == "1"
		})
	}
	if err := ch.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = ch.cmd.Wait()
}

func TestKillPoints(t *testing.T) {
	needServer(t)
	t.Parallel()
	c := connect(t, roleClient)
	wc := connect(t, roleWorker)
	points := []string{"p1", "p2", "p3", "p4", "p5", "op"}
	intents := map[string]string{}
	jobs := map[string]string{}
	children := map[string]*child{}
	submit := func(p string) {
		s, err := c.Submit(bg, "owner-kill", uniq(p), intents[p], nil, &SubmitOptions{Provider: "primary"})
		if err != nil {
			t.Fatal(err)
		}
		jobs[p] = s.JobID
	}
	for _, p := range points {
		fence := 300 * time.Millisecond
		if p == "op" {
			fence = 0
		}
		intents[p] = intent(t, fence)
		if p != "p1" { // p1's job comes once its worker is dead
			submit(p)
		}
		children[p] = startChild(t, p, intents[p])
	}
	for _, p := range points {
		children[p].kill(t)
	}
	submit("p1")

	// the restarted workers, a new one, the sweeper: no operator
	sweeper(t)
	handler := func(ctx context.Context, job Claimed) (any, error) { return map[string]any{"by": job.Provider}, nil }
	restarted := map[string]*events{}
	for _, p := range []string{"p4", "p5"} {
		restarted[p] = &events{}
		run(t, NewWorker(wc, children[p].name, map[string]Handler{intents[p]: handler},
			WorkerOptions{Wait: 200 * time.Millisecond, OnEvent: restarted[p].on}))
	}
	run(t, NewWorker(wc, uniq("new"), map[string]Handler{intents["p1"]: handler, intents["p2"]: handler,
		intents["p3"]: handler, intents["op"]: handler}, WorkerOptions{Concurrency: 4, Wait: 200 * time.Millisecond}))
	end := time.Now().Add(20 * time.Second)
	for !func() bool {
		return q(t, `SELECT count(*)::text FROM idemjob.jobs WHERE id IN ($1, $2, $3, $4, $5) AND state = 'succeeded'`,
			jobs["p1"], jobs["p2"], jobs["p3"], jobs["p4"], jobs["p5"]) == "5" &&
			q(t, `SELECT state::text FROM idemjob.attempts WHERE job_id = $1`, jobs["op"]) == "unknown"
	}() && time.Now().Before(end) {
		time.Sleep(50 * time.Millisecond)
	}
	outcome := func(p string) string {
		return q(t, `SELECT j.state || ' ' || string_agg(a.provider || ':' || a.state ||
			coalesce(':' || (a.error ->> 'reason'), ''), ',' ORDER BY a.attempt_no)
			FROM idemjob.jobs j JOIN idemjob.attempts a ON a.job_id = j.id WHERE j.id = $1 GROUP BY j.state`, jobs[p])
	}
	want := map[string]string{
		"p2": "succeeded primary:released:not confirmed before its claim lease ended,primary:succeeded",
		"p3": "succeeded primary:cancelled:unknown for longer than its intent's fence_unknown_after,fallback:succeeded",
		"p4": "succeeded primary:cancelled:abandoned by its worker,fallback:succeeded",
		"p5": "succeeded primary:cancelled:abandoned by its worker,fallback:succeeded",
		"op": "in_doubt primary:unknown:deadline",
	}
	t.Logf("%-3s  %s", "kill", "job state, attempts (provider:state:reason)")
	for _, p := range points {
		got := outcome(p)
		t.Logf("%-3s  %s", p, got)
		if w, ok := want[p]; ok && got != w {
			t.Errorf("%s: %s, want %s", p, got, w)
		}
	}
	// p1: nothing was claimed for the dead worker, or only leased and released
	if got := outcome("p1"); got != "succeeded primary:succeeded" && !strings.HasPrefix(got, "succeeded primary:released:") {
		t.Errorf("p1: %s", got)
	}
	if n := q(t, `SELECT count(*)::text FROM idemjob.attempts WHERE worker = $1 AND state <> 'released'`, children["p1"].name); n != "0" {
		t.Errorf("p1: %s attempts of the dead worker sent", n)
	}
	for _, p := range []string{"p4", "p5"} {
		if ab := restarted[p].find("abandoned", nil); len(ab) != 1 || ab[0]["count"] != 1 {
			t.Errorf("%s restarted: abandoned %v", p, ab)
		}
	}
	if n := q(t, `SELECT count(*)::text FROM idemjob.attempts a JOIN idemjob.jobs j ON j.id = a.job_id
		WHERE j.id IN ($1, $2, $3, $4, $5) AND a.state = 'succeeded'`, jobs["p1"], jobs["p2"], jobs["p3"], jobs["p4"], jobs["p5"]); n != "5" {
		t.Errorf("%s attempts won, want 5", n)
	}
}
