package idemjob

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Handler runs one claimed job: it calls the provider job.Provider names
// (the server chose it, after failover by its route) with job.Params, and
// returns the provider's result (marshalled as CompleteAttempt's result)
// or an error: a *Failure for a definite failure, anything else is
// reported as an exception (retryable).
//
// ctx is cancelled when the worker shuts down (Stop's grace has passed),
// never at job.Deadline: a handler still running then has its attempt
// marked unknown, and its late answer is still reported (the server decides
// whether it wins). ctx also carries job (ClaimedFrom).
type Handler func(ctx context.Context, job Claimed) (result any, err error)

// Failure is a definite failure of the provider: the attempt is failed
// (fail_attempt) with the error {"code": Code, "message": Err.Error()} plus
// Details, and the job is retried (on the next provider of its route) when
// Retryable, else it ends failed.
type Failure struct {
	Err       error
	Retryable bool
	Code      string         // "": "provider_error"
	Details   map[string]any // more members of the attempt's error
}

func (f *Failure) Error() string {
	if f.Err == nil {
		return "provider failure"
	}
	return f.Err.Error()
}

func (f *Failure) Unwrap() error { return f.Err }

func (f *Failure) payload() map[string]any {
	p := map[string]any{}
	for k, v := range f.Details {
		p[k] = v
	}
	p["code"] = "provider_error"
	if f.Code != "" {
		p["code"] = f.Code
	}
	p["message"] = f.Error()
	return p
}

type claimedKey struct{}

// ClaimedFrom returns the job a handler's context was made for.
func ClaimedFrom(ctx context.Context) (Claimed, bool) {
	c, ok := ctx.Value(claimedKey{}).(Claimed)
	return c, ok
}

// WorkerOptions tune a Worker; zero values are the defaults.
type WorkerOptions struct {
	// Concurrency is how many handlers run at once; each claim asks for the
	// free slots. Default 4.
	Concurrency int
	// Intents claimed; default: those of the handlers.
	Intents []string
	// Timeout is how long a handler may run (job.Deadline, from its
	// begin_attempt); past it the attempt is marked unknown ('timeout')
	// and the handler keeps running: its late answer is still reported.
	// Default 60s.
	Timeout time.Duration
	// Heartbeat is the interval between heartbeats; default Timeout/3. The
	// attempt's deadline in the server is kept three heartbeats ahead
	// (claim's timeout, each heartbeat's extend): a worker that dies leaves
	// its attempt in doubt within that.
	Heartbeat time.Duration
	// Wait is how long each claim waits inside the server for a due job;
	// default 5s (at most idemjob.max_wait).
	Wait time.Duration
	// Grace is Stop's grace when Run's context ends.
	Grace time.Duration
	// OnEvent, if set, is called (from the worker's goroutines, so it must
	// be safe for concurrent use) with each event: abandoned, claiming,
	// claimed, skipped, begun, heartbeat, unknown, answered, completed,
	// failed, error, stopping, stopped. fields has the worker, attempt_id,
	// job_id and what applies.
	OnEvent func(name string, fields map[string]any)
}

// Counters are a Worker's counts since it was made.
type Counters struct {
	Claimed  int64 // attempts claimed
	Skipped  int64 // not sent: lease over (IJ008), job ended (IJ003), attempt ended (IJ005)
	Won      int64
	Lost     int64
	Rejected int64
	Failed   int64 // fail_attempt sent
	InDoubt  int64 // marked unknown
	Late     int64 // answers after the attempt was marked unknown
	Errors   int64 // calls that failed
}

// Worker runs handlers for claimed jobs, as clients/README.md says: at
// start abandon_attempts(name); then claim with a lease up to its free
// slots, begin_attempt right before each handler, heartbeats, and the
// report (complete_attempt, fail_attempt, or mark_unknown and the late
// answer).
type Worker struct {
	client   *Client
	name     string
	handlers map[string]Handler
	opts     WorkerOptions

	claimed, skipped, won, lost, rejected, failed, inDoubt, late, errs atomic.Int64

	mu      sync.Mutex
	started bool
	grace   time.Duration
	stop    chan struct{} // closed: no more claims
	kill    chan struct{} // closed: the grace has passed
	done    chan struct{} // closed: Run has returned
	once    sync.Once
	sem     chan struct{} // one per handler running
	freed   chan struct{}
	wg      sync.WaitGroup
	hctx    context.Context // the handlers' contexts' parent
	hcancel context.CancelFunc
}

// NewWorker makes a worker named name (one name per running process: what
// a worker of that name left behind is given up when the next one starts)
// with a handler per intent.
func NewWorker(client *Client, name string, handlers map[string]Handler, opts WorkerOptions) *Worker {
	if opts.Concurrency <= 0 {
		opts.Concurrency = 4
	}
	if opts.Timeout <= 0 {
		opts.Timeout = time.Minute
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = opts.Timeout / 3
	}
	if opts.Wait == 0 {
		opts.Wait = 5 * time.Second
	}
	if opts.Intents == nil {
		for intent := range handlers {
			opts.Intents = append(opts.Intents, intent)
		}
	}
	w := &Worker{client: client, name: name, handlers: handlers, opts: opts,
		stop: make(chan struct{}), kill: make(chan struct{}), done: make(chan struct{}),
		sem: make(chan struct{}, opts.Concurrency), freed: make(chan struct{}, 1)}
	w.hctx, w.hcancel = context.WithCancel(context.Background())
	return w
}

// Name is the worker's name.
func (w *Worker) Name() string { return w.name }

// Stats returns the counters.
func (w *Worker) Stats() Counters {
	return Counters{Claimed: w.claimed.Load(), Skipped: w.skipped.Load(), Won: w.won.Load(), Lost: w.lost.Load(),
		Rejected: w.rejected.Load(), Failed: w.failed.Load(), InDoubt: w.inDoubt.Load(), Late: w.late.Load(),
		Errors: w.errs.Load()}
}

func (w *Worker) event(name string, fields map[string]any) {
	if w.opts.OnEvent == nil {
		return
	}
	if fields == nil {
		fields = map[string]any{}
	}
	fields["worker"] = w.name
	w.opts.OnEvent(name, fields)
}

func (w *Worker) fail(call string, c *Claimed, err error) {
	w.errs.Add(1)
	f := map[string]any{"call": call, "error": err.Error()}
	var e *Error
	if errors.As(err, &e) {
		f["sqlstate"] = e.SQLState
	}
	if c != nil {
		f["attempt_id"], f["job_id"] = c.AttemptID, c.JobID
	}
	w.event("error", f)
}

func (w *Worker) requestStop(grace time.Duration) {
	w.once.Do(func() {
		w.mu.Lock()
		w.grace = grace
		w.mu.Unlock()
		close(w.stop)
	})
}

func (w *Worker) stopping() bool {
	select {
	case <-w.stop:
		return true
	default:
		return false
	}
}

// Stop stops claiming, lets the running handlers finish within grace, then
// marks the attempts of the rest unknown, gives up (abandon_attempts) what
// the worker holds, and returns when Run has returned. Attempts claimed but
// not yet begun are never sent, and are released.
func (w *Worker) Stop(grace time.Duration) {
	w.requestStop(grace)
	w.mu.Lock()
	started := w.started
	w.mu.Unlock()
	if started {
		<-w.done
	}
}

// Run works until ctx is done (then as Stop(opts.Grace)) or Stop is
// called. It returns an error only when the start (abandon_attempts)
// fails; errors of later calls are counted and reported as events.
func (w *Worker) Run(ctx context.Context) error {
	w.mu.Lock()
	if w.started {
		w.mu.Unlock()
		return errors.New("idemjob: a Worker runs once")
	}
	w.started = true
	w.mu.Unlock()
	defer close(w.done)
	go func() {
		select {
		case <-ctx.Done():
			w.requestStop(w.opts.Grace)
		case <-w.stop:
		}
	}()
	bg := context.Background()
	n, err := w.client.AbandonAttempts(bg, w.name)
	if err != nil {
		w.fail("abandon_attempts", nil, err)
		w.requestStop(0)
		w.hcancel()
		return err
	}
	w.event("abandoned", map[string]any{"count": n, "at": "start"})

	// a stop cancels a waiting claim in the server, and the claim returns only
	// once the server has ended it: what it took is then released by the
	// abandon at stop, and nothing is taken after it
	claimCtx := context.WithValue(bg, stopKey{}, (<-chan struct{})(w.stop))
	pause := 50 * time.Millisecond
	for {
		free := w.waitFree()
		if free == 0 {
			break
		}
		w.event("claiming", map[string]any{"max_jobs": free})
		rows, err := w.client.Claim(claimCtx, w.name, &ClaimOptions{Intents: w.opts.Intents, MaxJobs: free,
			Timeout: w.window(), Wait: w.opts.Wait, Lease: true})
		if w.stopping() {
			break // what it claimed is released by the abandon at stop: never sent
		}
		if err != nil {
			w.fail("claim", nil, err)
			select { // the server may be away: do not spin
			case <-w.stop:
			case <-time.After(pause):
			}
			if pause < 2*time.Second {
				pause *= 2
			}
			continue
		}
		pause = 50 * time.Millisecond
		for _, c := range rows {
			w.claimed.Add(1)
			w.event("claimed", map[string]any{"attempt_id": c.AttemptID, "job_id": c.JobID, "intent": c.Intent,
				"provider": c.Provider, "attempt_no": c.AttemptNo})
			w.sem <- struct{}{}
			w.wg.Add(1)
			go w.process(c)
		}
	}
	w.shutdown()
	return nil
}

// window is the attempt's timeout in the server: three heartbeats.
func (w *Worker) window() time.Duration { return 3 * w.opts.Heartbeat }

// waitFree waits for a free slot; 0: stopping.
func (w *Worker) waitFree() int {
	for {
		if w.stopping() {
			return 0
		}
		if free := cap(w.sem) - len(w.sem); free > 0 {
			return free
		}
		select {
		case <-w.freed:
		case <-w.stop:
		}
	}
}

func (w *Worker) release() {
	<-w.sem
	select {
	case w.freed <- struct{}{}:
	default:
	}
}

func (w *Worker) shutdown() {
	w.mu.Lock()
	grace := w.grace
	w.mu.Unlock()
	w.event("stopping", map[string]any{"grace": grace.String()})
	finished := make(chan struct{})
	go func() { w.wg.Wait(); close(finished) }()
	t := time.NewTimer(grace)
	select {
	case <-finished:
		t.Stop()
	case <-t.C:
		close(w.kill)
		<-finished
	}
	w.hcancel()
	if n, err := w.client.AbandonAttempts(context.Background(), w.name); err != nil {
		w.fail("abandon_attempts", nil, err)
	} else {
		w.event("abandoned", map[string]any{"count": n, "at": "stop"})
	}
	w.event("stopped", map[string]any{"counters": w.Stats()})
}

type answer struct {
	result any
	err    error
}

// process runs one claimed attempt: begin, the handler, heartbeats, the
// report. It holds a slot until the handler answers or the attempt is
// marked unknown.
func (w *Worker) process(c Claimed) {
	defer w.wg.Done()
	held := true
	free := func() {
		if held {
			held = false
			w.release()
		}
	}
	defer free()
	if w.stopping() {
		return // never sent: the abandon at stop releases it
	}
	bg := context.Background()
	_, err := w.client.BeginAttempt(bg, c.AttemptID)
	if err != nil {
		var e *Error
		if errors.Is(err, ErrLeaseExpired) || errors.Is(err, ErrJobFinished) || errors.Is(err, ErrInvalidTransition) {
			errors.As(err, &e)
			w.skipped.Add(1)
			w.event("skipped", map[string]any{"attempt_id": c.AttemptID, "job_id": c.JobID, "sqlstate": e.SQLState})
		} else {
			w.fail("begin_attempt", &c, err)
		}
		return
	}
	giveUp := time.Now().Add(w.opts.Timeout)
	job := c
	job.Deadline = giveUp
	w.event("begun", map[string]any{"attempt_id": c.AttemptID, "job_id": c.JobID, "provider": c.Provider,
		"deadline": giveUp})

	ch := make(chan answer, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				ch <- answer{err: fmt.Errorf("panic: %v", r)}
			}
		}()
		h := w.handlers[c.Intent]
		if h == nil {
			ch <- answer{err: fmt.Errorf("no handler for the intent %q", c.Intent)}
			return
		}
		r, err := h(context.WithValue(w.hctx, claimedKey{}, job), job)
		ch <- answer{r, err}
	}()
	beat := time.NewTicker(w.opts.Heartbeat)
	defer beat.Stop()
	tick := beat.C
	expire := time.NewTimer(time.Until(giveUp))
	defer expire.Stop()
	for {
		select {
		case ans := <-ch:
			w.report(job, ans, false)
			return
		case <-tick:
			h, err := w.client.Heartbeat(bg, c.AttemptID, w.window())
			if errors.Is(err, ErrInvalidTransition) || errors.Is(err, ErrLeaseExpired) {
				tick = nil // ended meanwhile (cancelled, fenced): the answer will tell
				w.event("heartbeat", map[string]any{"attempt_id": c.AttemptID, "job_id": c.JobID, "refused": err.Error()})
			} else if err != nil {
				w.fail("heartbeat", &c, err)
			} else {
				w.event("heartbeat", map[string]any{"attempt_id": c.AttemptID, "job_id": c.JobID, "deadline": h.Deadline})
			}
		case <-expire.C:
			w.unknown(c, "timeout")
			free() // the answer is awaited aside
			select {
			case ans := <-ch:
				w.report(job, ans, true)
			case <-w.kill: // given up by the abandon at stop
			}
			return
		case <-w.kill:
			w.unknown(c, "shutdown")
			return
		}
	}
}

func (w *Worker) unknown(c Claimed, reason string) {
	if _, err := w.client.MarkUnknown(context.Background(), c.AttemptID, reason); err != nil {
		w.fail("mark_unknown", &c, err)
		return
	}
	w.inDoubt.Add(1)
	w.event("unknown", map[string]any{"attempt_id": c.AttemptID, "job_id": c.JobID, "reason": reason})
}

// report sends the handler's answer.
func (w *Worker) report(c Claimed, ans answer, late bool) {
	bg := context.Background()
	ev := map[string]any{"attempt_id": c.AttemptID, "job_id": c.JobID, "provider": c.Provider, "late": late}
	answered := map[string]any{"attempt_id": c.AttemptID, "job_id": c.JobID, "late": late}
	if ans.err != nil {
		answered["error"] = ans.err.Error()
	}
	w.event("answered", answered)
	if late {
		w.late.Add(1)
	}
	var result []byte
	if ans.err == nil {
		var err error
		if result, err = json.Marshal(ans.result); err != nil {
			ans.err = fmt.Errorf("the result cannot be marshalled: %w", err)
		}
	}
	if ans.err == nil {
		out, err := w.client.CompleteAttempt(bg, c.AttemptID, json.RawMessage(result))
		if err != nil {
			w.fail("complete_attempt", &c, err)
			return
		}
		switch out.Outcome {
		case Won:
			w.won.Add(1)
		case Lost:
			w.lost.Add(1)
		case Rejected:
			w.rejected.Add(1)
		}
		ev["outcome"] = string(out.Outcome)
		w.event("completed", ev)
		return
	}
	var payload map[string]any
	retryable := true
	var f *Failure
	if errors.As(ans.err, &f) {
		payload, retryable = f.payload(), f.Retryable
	} else if w.hctx.Err() != nil && errors.Is(ans.err, context.Canceled) {
		w.unknown(c, "shutdown") // cancelled by the shutdown: no answer
		return
	} else {
		payload = map[string]any{"code": "exception", "message": ans.err.Error(), "type": fmt.Sprintf("%T", ans.err)}
	}
	if _, err := w.client.FailAttempt(bg, c.AttemptID, &FailOptions{Error: payload, Retryable: &retryable}); err != nil {
		w.fail("fail_attempt", &c, err)
		return
	}
	w.failed.Add(1)
	ev["error"], ev["retryable"] = payload, retryable
	w.event("failed", ev)
}
