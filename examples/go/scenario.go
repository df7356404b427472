// Runs the example once: the handler and the worker through every case the
// README promises, printing one JSON line per check (test/examples/run.sh
// reads them and checks the database). DSNs: IJ_CLIENT_DSN, IJ_WORKER_DSN,
// IJ_ADMIN_DSN. Run: GO111MODULE=off GOPATH=/usr/share/gocode go run app.go scenario.go
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgconn"
	"github.com/jackc/pgx/v4"
)

func emit(m M) {
	b, _ := json.Marshal(m)
	fmt.Println(string(b))
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func open(v string) *pgx.Conn {
	c, err := Connect(os.Getenv(v))
	must(err)
	return c
}

var hung = make(chan struct{}) // closed: the hanging primary answers at last

func primary(params M) (M, error) { // the fake provider: slow, failing, hanging, or fine
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

func fallback(params M) (M, error) { return M{"by": "fallback", "amount": params["amount"]}, nil }

// until runs tick every 100 ms until cond holds, at most 5 s
func until(cond func() bool, tick func() error) {
	for i := 0; i < 50; i++ {
		must(tick())
		if cond() {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func find(events []M, name string) M {
	for _, e := range events {
		if e["event"] == name {
			return e
		}
	}
	return M{}
}

func main() {
	client, admin := open("IJ_CLIENT_DSN"), open("IJ_ADMIN_DSN")
	var events []M
	owner := "shop-1"
	charge := func(amount int, mode string) M {
		return M{"intent": "ex.charge", "params": M{"amount": amount, "mode": mode}}
	}

	// a previous run of this worker died after sending a job: at start the worker
	// gives it up (abandon_attempts), and the server routes the job to the fallback
	_, _, body := Handle(client, "POST", "/jobs", owner, "crash", charge(4, ""), "0s")
	crashed := open("IJ_WORKER_DSN")
	_, err := crashed.Exec(ctx, "SELECT idemjob.begin_attempt(attempt_id) FROM idemjob.claim('go-worker', lease => true)")
	must(err)
	must(crashed.Close(ctx))
	w := &Worker{DB: open("IJ_WORKER_DSN"), Name: "go-worker",
		Providers: map[string]Provider{"primary": primary, "fallback": fallback},
		GiveUp:    1500 * time.Millisecond, Beat: 400 * time.Millisecond,
		Emit: func(e M) { events = append(events, e); emit(e) }}
	abandoned, err := w.Start()
	must(err)
	must(w.Step("1s"))
	status, _, done := Handle(client, "GET", fmt.Sprintf("/jobs/%v", body["job_id"]), owner, "", nil, "2s")
	emit(M{"check": "restart", "abandoned": abandoned, "job_id": body["job_id"], "status": status, "state": done["state"], "result": done["result"]})

	// double click: two concurrent POSTs with one key, each on its own connection
	var wg sync.WaitGroup
	statuses, ids := make([]int, 2), make([]any, 2)
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func(i int, c *pgx.Conn) {
			defer wg.Done()
			s, _, b := Handle(c, "POST", "/jobs", owner, "dbl", M{"intent": "ex.charge", "params": M{"amount": 42}}, "0.2s")
			statuses[i], ids[i] = s, b["job_id"]
		}(i, open("IJ_CLIENT_DSN"))
	}
	wg.Wait()
	emit(M{"check": "double_click", "statuses": statuses, "job_ids": ids})
	must(w.Step("1s"))
	status, _, body = Handle(client, "GET", fmt.Sprintf("/jobs/%v", ids[0]), owner, "", nil, "2s")
	body["check"], body["status"] = "double_click_done", status
	emit(body)

	// the same key with another request: 409, the job id from the error fields
	status, _, body = Handle(client, "POST", "/jobs", owner, "dbl", M{"intent": "ex.charge", "params": M{"amount": 43}}, "2s")
	emit(M{"check": "key_reuse", "status": status, "body": body})

	status, _, body = Handle(client, "GET", "/jobs/not-a-uuid", owner, "", nil, "2s")
	emit(M{"check": "bad_uuid", "status": status, "body": body})

	// slow provider: heartbeats keep the attempt alive
	_, _, body = Handle(client, "POST", "/jobs", owner, "slow", charge(1, "slow"), "0s")
	must(w.Step("1s"))
	emit(M{"check": "slow", "job_id": body["job_id"]})

	// failing provider: fail_attempt; the next claim returns the job on the fallback
	_, _, body = Handle(client, "POST", "/jobs", owner, "fail", charge(2, "fail"), "0s")
	must(w.Step("1s"))
	must(w.Step("1s"))
	status, _, done = Handle(client, "GET", fmt.Sprintf("/jobs/%v", body["job_id"]), owner, "", nil, "2s")
	emit(M{"check": "failover", "job_id": body["job_id"], "status": status, "state": done["state"], "result": done["result"]})

	// the primary hangs: mark_unknown; another worker's start meanwhile is IJ002
	// (409 + Retry-After); after fence_unknown_after the server fences the doubt
	// and the next claim returns the job on the fallback, which wins; the
	// primary's late answer is still reported, and is lost
	_, _, body = Handle(client, "POST", "/jobs", owner, "hang", charge(3, "hang"), "0s")
	lateJob := body["job_id"]
	must(w.Step("1s"))
	refused, headers, body := 201, H{}, M{}
	var pe *pgconn.PgError
	if _, err := w.DB.Exec(ctx, "SELECT idemjob.start_attempt($1, NULL, '1s', 'go-other')", lateJob); errors.As(err, &pe) {
		refused, headers, body = HTTPError(pe)
	}
	emit(M{"check": "in_doubt", "status": refused, "headers": headers, "body": body, "job_id": lateJob})
	// the sweeper's tick, which needs the operator capability (the worker role
	// lacks it), so the admin connection calls it; a no-op where a sweeper runs
	until(func() bool { return last(events, "completed")["job_id"] == lateJob }, func() error {
		if _, err := admin.Exec(ctx, "SELECT idemjob.expire_attempts()"); err != nil {
			return err
		}
		return w.Step("0s")
	})
	close(hung)
	until(func() bool { return find(events, "late_result")["outcome"] != nil }, func() error { return w.Step("0s") })
	late := find(events, "late_result")
	emit(M{"check": "late", "job_id": lateJob, "attempt_id": late["attempt_id"], "outcome": late["outcome"]})
	status, _, body = Handle(client, "GET", fmt.Sprintf("/jobs/%v", lateJob), owner, "", nil, "2s")
	body["check"], body["status"] = "late_job", status
	emit(body)

	// a batch: 20 jobs claimed in one call, confirmed in one statement, run side
	// by side, reported in one statement
	var batchIDs []any
	for i := 0; i < 20; i++ {
		_, _, body = Handle(client, "POST", "/jobs", owner, fmt.Sprintf("batch-%d", i), charge(100+i, ""), "0s")
		batchIDs = append(batchIDs, body["job_id"])
	}
	claimed, err := w.BatchStep(100, "0s", nil, nil)
	must(err)
	emit(M{"check": "batch", "claimed": claimed, "job_ids": batchIDs, "outcomes": last(events, "batch")["outcomes"]})

	// a batch in which one job was cancelled before its begin (IJ003: not sent)
	// and one attempt failed before the report (IJ005): each statement errors,
	// nothing of it is written, and its calls go one by one
	for i := 0; i < 5; i++ {
		Handle(client, "POST", "/jobs", owner, fmt.Sprintf("batch2-%d", i), charge(200+i, ""), "0s")
	}
	var meanwhile []string
	claimed, err = w.BatchStep(100, "0s", func(ids []string) error {
		meanwhile = append(meanwhile, ids[0])
		_, err := admin.Exec(ctx, "SELECT idemjob.cancel_job(job_id, 'changed my mind') FROM idemjob.attempts WHERE id = $1", ids[0])
		return err
	}, func(ids []string) error {
		meanwhile = append(meanwhile, ids[0])
		_, err := admin.Exec(ctx, `SELECT idemjob.fail_attempt($1, '{"code": "operator"}', false)`, ids[0])
		return err
	})
	must(err)
	batch := last(events, "batch")
	emit(M{"check": "batch_fallback", "claimed": claimed, "sent": batch["sent"], "meanwhile": meanwhile, "outcomes": batch["outcomes"]})
}

// last returns the last event of that name
func last(events []M, name string) M {
	for i := len(events) - 1; i >= 0; i-- {
		if events[i]["event"] == name {
			return events[i]
		}
	}
	return M{}
}
