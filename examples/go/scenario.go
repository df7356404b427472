// Runs the example once: the handler and the worker through every case the
// README promises, printing one JSON line per check (test/examples/run.sh
// reads them and checks the database) and one per worker event. DSNs:
// IJ_CLIENT_DSN, IJ_WORKER_DSN, IJ_ADMIN_DSN. Run, with the package at its
// import path in a GOPATH (test/examples/run.sh links clients/go there):
// GO111MODULE=off GOPATH=<that dir>:/usr/share/gocode go run app.go scenario.go
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"idemjob.dev/idemjob"
)

var out sync.Mutex

func emit(m M) {
	b, err := json.Marshal(m)
	must(err)
	out.Lock()
	defer out.Unlock()
	fmt.Println(string(b))
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func open(v string) *idemjob.Client {
	c, err := idemjob.Connect(ctx, os.Getenv(v))
	must(err)
	return c
}

var hung = make(chan struct{}) // closed: the hanging primary answers at last

func primary(ctx context.Context, params M) (M, error) { // the fake provider: slow, failing, hanging, or fine
	switch params["mode"] {
	case "fail":
		return nil, errors.New("provider said no")
	case "hang":
		<-hung
	case "slow":
		time.Sleep(time.Second)
	}
	time.Sleep(50 * time.Millisecond)
	return M{"by": "primary", "amount": params["amount"]}, nil
}

func fallback(ctx context.Context, params M) (M, error) {
	return M{"by": "fallback", "amount": params["amount"]}, nil
}

// events: the worker's, printed and kept
type events struct {
	sync.Mutex
	all []M
}

func (e *events) on(name string, fields map[string]any) {
	ev := M{"event": name}
	for k, v := range fields {
		ev[k] = v
	}
	emit(ev)
	e.Lock()
	defer e.Unlock()
	e.all = append(e.all, ev)
}

// wait returns the first event of that name matching where, waiting up to 10 s
func (e *events) wait(name string, where func(M) bool) M {
	for i := 0; i < 200; i++ {
		e.Lock()
		for _, ev := range e.all {
			if ev["event"] == name && (where == nil || where(ev)) {
				e.Unlock()
				return ev
			}
		}
		e.Unlock()
		time.Sleep(50 * time.Millisecond)
	}
	must(fmt.Errorf("no %s event", name))
	return nil
}

func main() {
	client, admin, worker := open("IJ_CLIENT_DSN"), open("IJ_ADMIN_DSN"), open("IJ_WORKER_DSN")
	providers := map[string]Provider{"primary": primary, "fallback": fallback}
	ev := &events{}
	owner := "shop-1"
	charge := func(amount int, mode string) M {
		return M{"intent": "ex.charge", "params": M{"amount": amount, "mode": mode}}
	}
	get := func(jobID any, wait time.Duration) (int, M) {
		status, _, body := Handle(client, "GET", fmt.Sprintf("/jobs/%v", jobID), owner, "", nil, wait)
		return status, body
	}

	// a previous run of this worker died after sending a job: at start the worker
	// gives it up (abandon_attempts), and the server routes the job to the fallback
	_, _, body := Handle(client, "POST", "/jobs", owner, "crash", charge(4, ""), 0)
	claimed, err := worker.Claim(ctx, "go-worker", &idemjob.ClaimOptions{Lease: true})
	must(err)
	_, err = worker.BeginAttempt(ctx, claimed[0].AttemptID)
	must(err)
	w := NewWorker(worker, "go-worker", providers, ev.on)
	stopped := make(chan error, 1)
	go func() { stopped <- w.Run(ctx) }()
	abandoned := ev.wait("abandoned", nil)["count"]
	status, done := get(body["job_id"], 3*time.Second)
	emit(M{"check": "restart", "abandoned": abandoned, "job_id": body["job_id"], "status": status, "state": done["state"], "result": done["result"]})

	// double click: two concurrent POSTs with one key (two connections of the pool)
	var wg sync.WaitGroup
	statuses, ids := make([]int, 2), make([]any, 2)
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			s, _, b := Handle(client, "POST", "/jobs", owner, "dbl", M{"intent": "ex.charge", "params": M{"amount": 42}}, 200*time.Millisecond)
			statuses[i], ids[i] = s, b["job_id"]
		}(i)
	}
	wg.Wait()
	emit(M{"check": "double_click", "statuses": statuses, "job_ids": ids})
	status, body = get(ids[0], 3*time.Second)
	body["check"], body["status"] = "double_click_done", status
	emit(body)

	// the same key with another request: 409, the job id from the error fields
	status, _, body = Handle(client, "POST", "/jobs", owner, "dbl", M{"intent": "ex.charge", "params": M{"amount": 43}}, 2*time.Second)
	emit(M{"check": "key_reuse", "status": status, "body": body})

	status, body = get("not-a-uuid", 2*time.Second)
	emit(M{"check": "bad_uuid", "status": status, "body": body})

	// slow provider: heartbeats keep the attempt alive
	_, _, body = Handle(client, "POST", "/jobs", owner, "slow", charge(1, "slow"), 3*time.Second)
	emit(M{"check": "slow", "job_id": body["job_id"], "state": body["state"]})

	// failing provider: fail_attempt; the next claim returns the job on the fallback
	_, _, body = Handle(client, "POST", "/jobs", owner, "fail", charge(2, "fail"), 0)
	status, done = get(body["job_id"], 3*time.Second)
	emit(M{"check": "failover", "job_id": body["job_id"], "status": status, "state": done["state"], "result": done["result"]})

	// the primary hangs: mark_unknown; another worker's start meanwhile is IJ002
	// (409 + Retry-After); after fence_unknown_after the server fences the doubt
	// and the next claim returns the job on the fallback, which wins; the
	// primary's late answer is still reported, and is lost
	_, _, body = Handle(client, "POST", "/jobs", owner, "hang", charge(3, "hang"), 0)
	lateJob := body["job_id"]
	isLate := func(e M) bool { return e["job_id"] == lateJob }
	ev.wait("begun", isLate)
	refused, headers, body := 201, map[string]string{}, M{}
	_, err = worker.StartAttempt(ctx, fmt.Sprint(lateJob), &idemjob.StartOptions{Timeout: time.Second, Worker: "go-other"})
	if e := (*idemjob.Error)(nil); errors.As(err, &e) {
		refused, body = e.HTTPStatus(), e.Body()
		for k := range e.Headers() {
			headers[k] = e.Headers().Get(k)
		}
	}
	emit(M{"check": "in_doubt", "status": refused, "headers": headers, "body": body, "job_id": lateJob})
	// the sweeper's tick, which needs the operator capability (the worker role
	// lacks it), so the admin connection calls it; a no-op where a sweeper runs
	for i := 0; i < 100; i++ {
		_, err := admin.ExpireAttempts(ctx)
		must(err)
		if j, err := client.AwaitJob(ctx, fmt.Sprint(lateJob), 100*time.Millisecond); err == nil && j.State.Final() {
			break
		}
	}
	close(hung)
	late := ev.wait("completed", func(e M) bool { return isLate(e) && e["late"] == true })
	emit(M{"check": "late", "job_id": lateJob, "attempt_id": late["attempt_id"], "outcome": late["outcome"]})
	status, body = get(lateJob, 2*time.Second)
	body["check"], body["status"] = "late_job", status
	emit(body)
	w.Stop(2 * time.Second)
	must(<-stopped)
	st := w.Stats()
	emit(M{"event": "counters", "claimed": st.Claimed, "won": st.Won, "lost": st.Lost, "failed": st.Failed,
		"in_doubt": st.InDoubt, "late": st.Late, "skipped": st.Skipped, "errors": st.Errors})

	// a batch: 20 jobs claimed in one call, confirmed in one statement, run side
	// by side, reported in one statement
	var batchIDs []any
	for i := 0; i < 20; i++ {
		_, _, body = Handle(client, "POST", "/jobs", owner, fmt.Sprintf("batch-%d", i), charge(100+i, ""), 0)
		batchIDs = append(batchIDs, body["job_id"])
	}
	n, _, outcomes, err := BatchStep(worker, "go-batch", providers, 100, nil, nil)
	must(err)
	emit(M{"check": "batch", "claimed": n, "job_ids": batchIDs, "outcomes": outcomes})

	// a batch in which one job was cancelled before its begin (IJ003: not sent)
	// and one attempt failed before the report (IJ005): each statement errors,
	// nothing of it is written, and its calls go one by one
	for i := 0; i < 5; i++ {
		Handle(client, "POST", "/jobs", owner, fmt.Sprintf("batch2-%d", i), charge(200+i, ""), 0)
	}
	var meanwhile []string
	n, sent, outcomes, err := BatchStep(worker, "go-batch", providers, 100, func(jobs []idemjob.Claimed) error {
		meanwhile = append(meanwhile, jobs[0].AttemptID)
		_, err := admin.CancelJob(ctx, jobs[0].JobID, "changed my mind")
		return err
	}, func(jobs []idemjob.Claimed) error {
		meanwhile = append(meanwhile, jobs[0].AttemptID)
		_, err := admin.FailAttempt(ctx, jobs[0].AttemptID, &idemjob.FailOptions{Error: M{"code": "operator"},
			Retryable: idemjob.Ptr(false)})
		return err
	})
	must(err)
	emit(M{"check": "batch_fallback", "claimed": n, "sent": sent, "meanwhile": meanwhile, "outcomes": outcomes})
}
