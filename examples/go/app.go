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

// ---- worker: claim, run the provider with heartbeats, report, fail over
type Provider func(params M) (M, error)
type answer struct {
	result M
	err    error
}
type job struct { // a claimed job, a late answer still to report, a failover to retry
	attemptID, jobID, provider string
	params                     M
	ch                         chan answer
}
type Worker struct {
	DB             *pgx.Conn
	Name           string
	Providers      map[string]Provider
	GiveUp, Beat   time.Duration
	Emit           func(M)
	late, failover []job // answers still to report; jobs to fail over once out of doubt
}

func (w *Worker) exec(sql string, args ...any) error {
	_, err := w.DB.Exec(ctx, sql, args...)
	return err
}

func (w *Worker) complete(attemptID string, result M) (outcome string, err error) {
	err = w.DB.QueryRow(ctx, "SELECT outcome FROM idemjob.complete_attempt($1, $2)", attemptID, js(result)).Scan(&outcome)
	return
}

// a definite provider error: the attempt failed, the job may retry
func (w *Worker) fail(attemptID string, cause error) error {
	return w.exec("SELECT idemjob.fail_attempt($1, $2, true)", attemptID,
		js(M{"code": "provider_error", "message": cause.Error()}))
}

func (w *Worker) run(j job) (string, error) {
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
			return "unknown", w.exec("SELECT idemjob.mark_unknown($1)", j.attemptID)
		case <-time.After(w.Beat):
			if err := w.exec("SELECT idemjob.heartbeat($1, '1s')", j.attemptID); err != nil {
				return "", err
			}
		}
	}
	if a.err != nil { // a definite failure
		return "failed", w.fail(j.attemptID, a.err)
	}
	outcome, err := w.complete(j.attemptID, a.result)
	w.Emit(M{"event": "completed", "attempt_id": j.attemptID, "job_id": j.jobID, "provider": j.provider, "outcome": outcome})
	return outcome, err
}

func (w *Worker) tryFailover(j job) (done bool, err error) {
	err = w.DB.QueryRow(ctx, "SELECT id, provider FROM idemjob.start_attempt($1, 'fallback', '1s', $2)",
		j.jobID, w.Name).Scan(&j.attemptID, &j.provider)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "IJ002" { // still in doubt: try again later
		status, headers, body := HTTPError(pe)
		w.Emit(M{"event": "failover_refused", "status": status, "headers": headers, "body": body})
		return false, nil
	} else if errors.As(err, &pe) && (pe.Code == "IJ003" || pe.Code == "IJ006") {
		return true, nil // finished or gone
	} else if err == nil {
		_, err = w.run(j)
	}
	return err == nil, err
}

func (w *Worker) failoverAll(jobs []job) (err error) {
	for _, j := range jobs {
		if done, e := w.tryFailover(j); !done {
			w.failover = append(w.failover, j)
			if err == nil {
				err = e
			}
		}
	}
	return err
}

func (w *Worker) Step(wait string) error {
	late, failover := w.late, w.failover
	w.late, w.failover = nil, nil
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
	if err := w.failoverAll(failover); err != nil { // jobs we gave up on, before new ones
		return err
	}
	rows, err := w.DB.Query(ctx, "SELECT attempt_id, job_id, provider, params FROM idemjob.claim($1, wait => $2, timeout => '1s')", w.Name, wait)
	var claimed, failed []job
	for err == nil && rows.Next() {
		var j job
		err = rows.Scan(&j.attemptID, &j.jobID, &j.provider, &j.params)
		claimed = append(claimed, j)
	}
	if err == nil {
		err = rows.Err()
	}
	if err != nil {
		return err
	}
	for _, j := range claimed {
		if st, e := w.run(j); e != nil {
			return e
		} else if st == "failed" || st == "unknown" {
			failed = append(failed, j)
		}
	}
	return w.failoverAll(failed)
}

// BatchStep claims up to maxJobs jobs, runs them side by side, and reports
// the results together: one statement over two arrays, one complete_attempt
// per job (each its own compare-and-swap and answer), one transaction. If
// one call errors (IJ005: someone failed that attempt meanwhile), nothing
// of the batch is written and the results go one by one; if the connection
// drops, resending the same batch gives the same answers. beforeReport
// (attempt ids) runs between the provider calls and the report.
func (w *Worker) BatchStep(maxJobs int, wait string, beforeReport func([]string) error) (int, error) {
	rows, err := w.DB.Query(ctx, "SELECT attempt_id, provider, params FROM idemjob.claim($1, max_jobs => $2, wait => $3, timeout => '30s')",
		w.Name, maxJobs, wait)
	var claimed []job
	for err == nil && rows.Next() {
		var j job
		err = rows.Scan(&j.attemptID, &j.provider, &j.params)
		claimed = append(claimed, j)
	}
	if err == nil {
		err = rows.Err()
	}
	rows.Close()
	if err != nil {
		return 0, err
	}
	for i := range claimed { // side by side
		j := &claimed[i]
		j.ch = make(chan answer, 1)
		go func() { r, e := w.Providers[j.provider](j.params); j.ch <- answer{r, e} }()
	}
	var ids, results []string
	var values []M
	for _, j := range claimed {
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
		var idArr, resArr pgtype.TextArray // the simple protocol sends them as array literals
		if err := idArr.Set(ids); err != nil {
			return 0, err
		}
		if err := resArr.Set(results); err != nil {
			return 0, err
		}
		rows, err = w.DB.Query(ctx, "SELECT r.attempt_id::text, c.outcome"+
			" FROM unnest($1::text[]::uuid[], $2::text[]::jsonb[]) AS r(attempt_id, result),"+
			" LATERAL idemjob.complete_attempt(r.attempt_id, r.result) c", &idArr, &resArr)
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
	w.Emit(M{"event": "batch", "claimed": len(claimed), "outcomes": out})
	return len(claimed), nil
}
