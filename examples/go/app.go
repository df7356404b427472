// idemjob from Go (pgx v4): an HTTP-style handler and a worker.
// Pooler-safe: the simple protocol and no statement cache (or
// statement_cache_mode=describe), so it works through pgbouncer in
// transaction pooling. Types: bigint -> int64, uuid -> string, jsonb ->
// map via encoding/json (sent as JSON text), timestamptz -> time.Time,
// interval -> pgtype.Interval.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgconn"
	"github.com/jackc/pgtype"
	"github.com/jackc/pgx/v4"
)

type M = map[string]any
type H = map[string]string

var ctx = context.Background()

func js(v any) string { b, _ := json.Marshal(v); return string(b) } // jsonb arguments go as JSON text

func Connect(dsn string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	cfg.PreferSimpleProtocol, cfg.BuildStatementCache = true, nil
	return pgx.ConnectConfig(ctx, cfg)
}

// ---- errors: SQLSTATE -> HTTP; ids from the error fields, never from DETAIL
var httpOf = map[string]struct {
	status int
	name   string
}{"IJ001": {409, "idempotency_conflict"}, "IJ002": {409, "attempt_in_doubt"},
	"IJ003": {409, "job_finished"}, "IJ004": {422, "provider_not_certified"},
	"IJ005": {409, "invalid_transition"}, "IJ006": {404, "not_found"}, "IJ007": {410, "key_expired"},
	"IJ008": {409, "lease_expired"},
	"22004": {400, "null_value_not_allowed"}, "22023": {400, "invalid_parameter_value"},
	"22P02": {400, "invalid_text_representation"}, "42501": {403, "insufficient_privilege"},
	"57014": {503, "query_canceled"}, "0A000": {500, "feature_not_supported"}}

func HTTPError(e *pgconn.PgError) (int, H, M) {
	h, ok := httpOf[e.Code]
	if !ok {
		h.status, h.name = 500, "internal_error"
	}
	body, headers := M{"error": h.name, "sqlstate": e.Code, "message": e.Message}, H{}
	for _, p := range strings.Fields(e.ConstraintName) { // idemjob's key=value list
		if k, v, ok := strings.Cut(p, "="); ok && e.SchemaName == "idemjob" && k == "retry_after" {
			headers["Retry-After"] = v
		} else if ok && e.SchemaName == "idemjob" {
			body[k] = v
		}
	}
	return h.status, headers, body
}

// Handle serves POST /jobs (Idempotency-Key: key) and GET /jobs/<id>.
func Handle(db *pgx.Conn, method, path, owner, key string, req M, wait string) (int, H, M) {
	var jobID, state string
	var version int64
	var result M
	var err error
	if method == "POST" {
		err = db.QueryRow(ctx, "SELECT job_id FROM idemjob.submit($1, $2, $3, $4)",
			owner, key, req["intent"], js(req["params"])).Scan(&jobID)
	} else {
		jobID = path[strings.LastIndex(path, "/")+1:] // a malformed id is 22P02 -> 400
	}
	if err == nil {
		err = db.QueryRow(ctx, "SELECT id, state, version, result FROM idemjob.await_job($1, $2)",
			jobID, wait).Scan(&jobID, &state, &version, &result)
	}
	if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) {
		return HTTPError(pe)
	} else if err != nil { // connection lost: in doubt, retry the same call
		return 503, H{}, M{"error": "in_doubt", "message": err.Error()}
	}
	status := 202
	if state == "succeeded" || state == "failed" || state == "cancelled" {
		status = 200
	}
	return status, H{}, M{"job_id": jobID, "state": state, "version": version, "result": result}
}

// ---- worker: claim with a lease, begin right before calling the provider the
// claim row names, heartbeats, report. Failover is the server's: after a failure
// or a fenced doubt, claim returns the job on the next provider of its route.
type Provider func(params M) (M, error)
type answer struct {
	result M
	err    error
}
type job struct { // a claimed job, or a late answer still to report
	attemptID, jobID, provider string
	params                     M
	ch                         chan answer
}
type Worker struct {
	DB           *pgx.Conn
	Name         string
	Providers    map[string]Provider
	GiveUp, Beat time.Duration
	Emit         func(M)
	late         []job // answers that came after mark_unknown
}

func (w *Worker) exec(sql string, args ...any) error {
	_, err := w.DB.Exec(ctx, sql, args...)
	return err
}

// Start runs once, at start: it gives up what an earlier run of this worker left behind.
func (w *Worker) Start() (n int32, err error) {
	err = w.DB.QueryRow(ctx, "SELECT idemjob.abandon_attempts($1)", w.Name).Scan(&n)
	return
}

// begin confirms the attempt immediately before the provider is called; false: do not call it
func (w *Worker) begin(attemptID string) (bool, error) {
	err := w.exec("SELECT idemjob.begin_attempt($1)", attemptID)
	var pe *pgconn.PgError // job ended, attempt ended, lease over: not sent
	if errors.As(err, &pe) && (pe.Code == "IJ003" || pe.Code == "IJ005" || pe.Code == "IJ008") {
		w.Emit(M{"event": "not_sent", "attempt_id": attemptID, "sqlstate": pe.Code})
		return false, nil
	}
	return err == nil, err
}

func (w *Worker) complete(attemptID string, result M) (outcome string, err error) {
	err = w.DB.QueryRow(ctx, "SELECT outcome FROM idemjob.complete_attempt($1, $2)", attemptID, js(result)).Scan(&outcome)
	return
}

// a definite provider error: the attempt failed; the server retries the job
// on the next provider of its route
func (w *Worker) fail(attemptID string, cause error) error {
	return w.exec("SELECT idemjob.fail_attempt($1, $2, true)", attemptID,
		js(M{"code": "provider_error", "message": cause.Error()}))
}

func (w *Worker) run(j job) error {
	j.ch = make(chan answer, 1)
	go func() { r, err := w.Providers[j.provider](j.params); j.ch <- answer{r, err} }()
	giveUp := time.After(w.GiveUp)
	var a answer
	for wait := true; wait; {
		select {
		case a = <-j.ch:
			wait = false
		case <-giveUp: // no answer: unknown, never failed
			w.late = append(w.late, j)
			w.Emit(M{"event": "unknown", "attempt_id": j.attemptID})
			return w.exec("SELECT idemjob.mark_unknown($1)", j.attemptID)
		case <-time.After(w.Beat):
			if err := w.exec("SELECT idemjob.heartbeat($1, '1s')", j.attemptID); err != nil {
				return err
			}
		}
	}
	if a.err != nil { // a definite failure
		return w.fail(j.attemptID, a.err)
	}
	outcome, err := w.complete(j.attemptID, a.result)
	w.Emit(M{"event": "completed", "attempt_id": j.attemptID, "job_id": j.jobID, "provider": j.provider, "outcome": outcome})
	return err
}

func (w *Worker) Step(wait string) error {
	late := w.late
	w.late = nil
	for _, l := range late {
		select {
		case a := <-l.ch: // report an answer: the database decides
			if a.err == nil {
				outcome, err := w.complete(l.attemptID, a.result)
				if err != nil {
					return err
				}
				w.Emit(M{"event": "late_result", "attempt_id": l.attemptID, "outcome": outcome})
			}
		default:
			w.late = append(w.late, l)
		}
	}
	claimed, err := w.claim("SELECT attempt_id, job_id, provider, params FROM idemjob.claim($1, wait => $2,"+
		" timeout => '1s', lease => true)", w.Name, wait)
	for i := 0; err == nil && i < len(claimed); i++ {
		var send bool
		if send, err = w.begin(claimed[i].attemptID); send {
			err = w.run(claimed[i])
		}
	}
	return err
}

// textArray: the simple protocol sends a text[] as an array literal (Set cannot fail for a []string)
func textArray(ss []string) *pgtype.TextArray {
	var a pgtype.TextArray
	_ = a.Set(ss)
	return &a
}

// claim scans the claimed rows: attempt_id, job_id, provider, params
func (w *Worker) claim(sql string, args ...any) (claimed []job, err error) {
	rows, err := w.DB.Query(ctx, sql, args...)
	for err == nil && rows.Next() {
		var j job
		err = rows.Scan(&j.attemptID, &j.jobID, &j.provider, &j.params)
		claimed = append(claimed, j)
	}
	if err == nil {
		err = rows.Err()
	}
	rows.Close()
	return claimed, err
}

// BatchStep claims up to maxJobs jobs, confirms them in one statement, runs
// them side by side, and reports the results in one statement: one
// complete_attempt per job (its own compare-and-swap and answer), one
// transaction. If a call of either statement errors, nothing of it is
// written and the calls go one by one (the begins then skip what must not
// be sent); if the connection drops, resend the same statement.
// beforeBegin / beforeReport (attempt ids): the scenario's hooks.
func (w *Worker) BatchStep(maxJobs int, wait string, beforeBegin, beforeReport func([]string) error) (int, error) {
	claimed, err := w.claim("SELECT attempt_id, job_id, provider, params FROM idemjob.claim($1, max_jobs => $2,"+
		" wait => $3, timeout => '30s', lease => true)", w.Name, maxJobs, wait)
	if err != nil {
		return 0, err
	}
	all := make([]string, len(claimed))
	for i, j := range claimed {
		all[i] = j.attemptID
	}
	if beforeBegin != nil {
		if err := beforeBegin(all); err != nil {
			return 0, err
		}
	}
	sent := claimed
	if len(all) > 0 {
		var pgErr *pgconn.PgError
		err = w.exec("SELECT b.id FROM unnest($1::text[]::uuid[]) a, LATERAL idemjob.begin_attempt(a) b", textArray(all))
		if errors.As(err, &pgErr) { // one begin refused: nothing was written, one by one
			sent = nil
			for _, j := range claimed {
				if send, err := w.begin(j.attemptID); err != nil {
					return 0, err
				} else if send {
					sent = append(sent, j)
				}
			}
		} else if err != nil { // in doubt: resend the same batch
			return 0, err
		}
	}
	for i := range sent { // side by side
		j := &sent[i]
		j.ch = make(chan answer, 1)
		go func() { r, e := w.Providers[j.provider](j.params); j.ch <- answer{r, e} }()
	}
	var ids, results []string
	var values []M
	for _, j := range sent {
		if a := <-j.ch; a.err != nil { // a definite failure
			if err := w.fail(j.attemptID, a.err); err != nil {
				return 0, err
			}
		} else {
			ids, results, values = append(ids, j.attemptID), append(results, js(a.result)), append(values, a.result)
		}
	}
	if beforeReport != nil {
		if err := beforeReport(ids); err != nil {
			return 0, err
		}
	}
	outcomes := map[string]string{}
	if len(ids) > 0 {
		rows, err := w.DB.Query(ctx, "SELECT r.attempt_id::text, c.outcome"+
			" FROM unnest($1::text[]::uuid[], $2::text[]::jsonb[]) AS r(attempt_id, result),"+
			" LATERAL idemjob.complete_attempt(r.attempt_id, r.result) c", textArray(ids), textArray(results))
		for err == nil && rows.Next() {
			var a, o string
			err = rows.Scan(&a, &o)
			outcomes[a] = o
		}
		if err == nil {
			err = rows.Err()
		}
		rows.Close()
		var pgErr *pgconn.PgError
		if err != nil && !errors.As(err, &pgErr) { // in doubt: resend the same batch
			return 0, err
		}
		if err != nil { // one call failed: nothing of the batch was written
			for i, a := range ids {
				o, e := w.complete(a, values[i])
				if errors.As(e, &pgErr) {
					o = pgErr.Code
				} else if e != nil {
					return 0, e
				}
				outcomes[a] = o
			}
		}
	}
	out := make([]string, len(ids))
	for i, a := range ids {
		out[i] = outcomes[a]
	}
	w.Emit(M{"event": "batch", "claimed": len(claimed), "sent": len(sent), "outcomes": out})
	return len(claimed), nil
}
