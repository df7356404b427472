package idemjob

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgconn"
)

// Every SQLSTATE of the table in clients/README.md: its kind and HTTP
// status; the fields from the constraint name only under schema idemjob.
func TestErrorTable(t *testing.T) {
	for _, c := range []struct {
		code   string
		kind   error
		status int
	}{
		{"IJ001", ErrIdempotencyConflict, 409}, {"IJ002", ErrAttemptInDoubt, 409}, {"IJ003", ErrJobFinished, 409},
		{"IJ004", ErrProviderNotCertified, 422}, {"IJ005", ErrInvalidTransition, 409}, {"IJ006", ErrNotFound, 404},
		{"IJ007", ErrKeyExpired, 410}, {"IJ008", ErrLeaseExpired, 409},
		{"22004", ErrInvalidArgument, 400}, {"22023", ErrInvalidArgument, 400}, {"22P02", ErrInvalidArgument, 400},
		{"22003", ErrInvalidArgument, 400}, {"22P05", ErrInvalidArgument, 400}, {"42602", ErrInvalidArgument, 400},
		{"42704", ErrInvalidArgument, 400}, {"2201B", ErrInvalidArgument, 500},
		{"42501", ErrPermissionDenied, 403},
		{"40001", ErrRetryTransaction, 503}, {"40P01", ErrRetryTransaction, 503}, {"55P03", ErrRetryTransaction, 503},
		{"25006", ErrUnavailable, 503}, {"55000", ErrUnavailable, 503}, {"53000", ErrUnavailable, 503},
		{"53200", ErrUnavailable, 503}, {"53300", ErrUnavailable, 503}, {"57014", ErrUnavailable, 503},
		{"08000", ErrConnectionLost, 503}, {"08006", ErrConnectionLost, 503}, {"08P01", ErrConnectionLost, 503},
		{"57P01", ErrConnectionLost, 503}, {"57P02", ErrConnectionLost, 503}, {"57P03", ErrConnectionLost, 503},
		{"XX000", nil, 500}, {"0A000", nil, 500}, {"42883", nil, 500}, {"54000", nil, 500}, {"54001", nil, 400},
	} {
		pe := &pgconn.PgError{Code: c.code, Message: "m", SchemaName: "idemjob", TableName: "attempts",
			ConstraintName: "job_id=j attempt_id=a state=started deadline=2026-12-03T04:33:16.343372Z retry_after=7 future=x"}
		var err error = classify("submit", fmt.Errorf("wrapped: %w", pe), false)
		var e *Error
		if !errors.As(err, &e) || e.Kind != c.kind || e.HTTPStatus() != c.status || e.SQLState != c.code {
			t.Errorf("%s: kind %v status %d", c.code, e.Kind, e.HTTPStatus())
		}
		if c.kind != nil && !errors.Is(err, c.kind) {
			t.Errorf("%s: errors.Is", c.code)
		}
		var back *pgconn.PgError
		if !errors.As(err, &back) || back != pe {
			t.Errorf("%s: the PgError underneath", c.code)
		}
		if (c.code == "IJ002") != (e.Headers().Get("Retry-After") == "7") {
			t.Errorf("%s: headers %v", c.code, e.Headers())
		}
		if e.InDoubt() != (c.kind == ErrConnectionLost) {
			t.Errorf("%s: in doubt %v", c.code, e.InDoubt())
		}
	}
	for _, k := range []error{ErrIdempotencyConflict, ErrNotFound, ErrConnectionLost} {
		if errors.Is(classify("x", &pgconn.PgError{Code: "XX000"}, false), k) {
			t.Errorf("no kind matches %v", k)
		}
	}
	f := parseFields("idemjob", "job_id=j attempt_id=a state=started deadline=2026-12-03T04:33:16.343372Z retry_after=7 future=x")
	want := time.Date(2026, 12, 3, 4, 33, 16, 343372000, time.UTC)
	if f.JobID != "j" || f.AttemptID != "a" || f.State != "started" || !f.Deadline.Equal(want) ||
		f.RetryAfter != 7*time.Second || f.Raw["future"] != "x" {
		t.Fatalf("fields: %+v", f)
	}
	if f := parseFields("public", "job_id=j"); f.JobID != "" || f.Raw != nil {
		t.Fatalf("a constraint of another schema is not idemjob's: %+v", f)
	}
	// no SQLSTATE: the connection, whatever broke it
	var ne net.Error = &net.OpError{Op: "read", Err: errors.New("connection reset by peer")}
	for _, err := range []error{io.ErrUnexpectedEOF, io.EOF, ne, fmt.Errorf("x: %w", context.Canceled)} {
		if e := classify("job", err, false); e.Kind != ErrConnectionLost || e.SQLState != "" || e.HTTPStatus() != 503 ||
			!errors.Is(e, err) || e.Body()["error"] != "connection_lost" {
			t.Errorf("%v: %+v", err, e)
		}
	}
	if e := classify("job", errors.New("odd"), true); e.Kind != ErrConnectionLost {
		t.Errorf("a closed connection: %+v", e)
	}
	if e := classify("job", errors.New("odd"), false); e.Kind != nil || e.HTTPStatus() != 500 {
		t.Errorf("anything else: %+v", e)
	}
}

func TestResendSafe(t *testing.T) {
	for name, want := range map[string]bool{
		"submit": true, "Submit": true, "AwaitJob": true, "await_job": true, "CancelJob": true, "BeginAttempt": true,
		"CompleteAttempt": true, "FailAttempt": true, "MarkUnknown": true, "CancelAttempt": true, "Heartbeat": true,
		"AbandonAttempts": true, "ExpireAttempts": true, "DefineContract": true, "CertifyProvider": true,
		"RevokeProvider": true, "SetRetryPolicy": true, "SetRoute": true, "InDoubt": true, "QueueStats": true,
		"ProviderStats": true, "Job": true, "claim:lease": true, "start_attempt:worker": true,
		"Claim": false, "claim": false, "StartAttempt": false, "Purge": false, "purge_race_log": false,
		"PurgeRaceLog": false, "nonsense": false, "BeginAttempts": true, "begin_attempts": true,
		"CompleteAttempts": true, "complete_attempts": true,
	} {
		if ResendSafe(name) != want {
			t.Errorf("ResendSafe(%q) = %v", name, !want)
		}
	}
}

// Every kind the server can be made to raise, live.
func TestErrorKindsLive(t *testing.T) {
	t.Parallel()
	c := connect(t, roleClient)
	w := connect(t, roleWorker)
	op := connect(t, roleOperator)
	in := intent(t, 0)
	kind := func(what string, err, k error, code string, status int) *Error {
		t.Helper()
		var e *Error
		if !errors.As(err, &e) || !errors.Is(err, k) || (code != "" && e.SQLState != code) || e.HTTPStatus() != status {
			t.Fatalf("%s: want %v %s %d, got %#v", what, k, code, status, err)
		}
		return e
	}
	s, err := c.Submit(bg, "owner-e", uniq("e"), in, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	// IJ004: a failover to a provider without a certification
	_, err = w.StartAttempt(bg, s.JobID, &StartOptions{Provider: "nobody", Worker: "e"})
	if e := kind("IJ004", err, ErrProviderNotCertified, "IJ004", 422); e.Fields.JobID != s.JobID {
		t.Fatalf("IJ004 fields %+v", e.Fields)
	}
	// IJ008: a leased attempt released (abandoned) before its begin
	cl, err := w.Claim(bg, "e-lease", &ClaimOptions{Intents: []string{in}, Lease: true})
	if err != nil || len(cl) != 1 {
		t.Fatalf("claim: %v %v", cl, err)
	}
	if n, err := w.AbandonAttempts(bg, "e-lease"); err != nil || n != 1 {
		t.Fatalf("abandon: %d %v", n, err)
	}
	_, err = w.BeginAttempt(bg, cl[0].AttemptID)
	if e := kind("IJ008", err, ErrLeaseExpired, "IJ008", 409); e.Fields.AttemptID != cl[0].AttemptID || e.Fields.State != "released" {
		t.Fatalf("IJ008 fields %+v", e.Fields)
	}
	// IJ003: a job that ended
	cl, err = w.Claim(bg, "e-2", &ClaimOptions{Intents: []string{in}, Lease: true})
	if err != nil || len(cl) != 1 {
		t.Fatalf("claim: %v %v", cl, err)
	}
	if _, err := w.FailAttempt(bg, cl[0].AttemptID, &FailOptions{Retryable: Ptr(false)}); err != nil {
		t.Fatal(err)
	}
	// IJ005: a heartbeat for a failed attempt
	_, err = w.Heartbeat(bg, cl[0].AttemptID, 0)
	if e := kind("IJ005", err, ErrInvalidTransition, "IJ005", 409); e.Fields.State != "failed" {
		t.Fatalf("IJ005 fields %+v", e.Fields)
	}
	_, err = c.CancelJob(bg, s.JobID, "too late")
	if e := kind("IJ003", err, ErrJobFinished, "IJ003", 409); e.Fields.State != "failed" {
		t.Fatalf("IJ003 fields %+v", e.Fields)
	}
	j, err := c.Job(bg, s.JobID)
	if err != nil || j.State != JobFailed || jsonOf(t, j.Error)["code"] != "failed" {
		t.Fatalf("failed job: %+v %v", j, err)
	}
	// IJ006, 22P02, 22023, 22004-like, 42501
	_, err = c.Job(bg, "00000000-0000-7000-8000-000000000000")
	if e := kind("IJ006", err, ErrNotFound, "IJ006", 404); e.Fields.JobID != "00000000-0000-7000-8000-000000000000" {
		t.Fatalf("IJ006 fields %+v", e.Fields)
	}
	_, err = c.AwaitJob(bg, "not-a-uuid", 0)
	if e := kind("22P02", err, ErrInvalidArgument, "22P02", 400); e.Body()["error"] != "invalid_text_representation" {
		t.Fatalf("body %v", e.Body())
	}
	_, err = c.Submit(bg, "", "k", in, nil, nil)
	kind("22023", err, ErrInvalidArgument, "22023", 400)
	_, err = c.Submit(bg, "o", uniq("k"), in, json.RawMessage(`{"broken"`), nil)
	kind("22P02 jsonb", err, ErrInvalidArgument, "22P02", 400)
	_, err = c.Submit(bg, "o", uniq("k"), in, func() {}, nil)
	if e := kind("unencodable", err, ErrInvalidArgument, "", 400); e.SQLState != "" {
		t.Fatalf("client side: %+v", e)
	}
	_, err = w.Claim(bg, "e", &ClaimOptions{Wait: -time.Second})
	kind("negative wait", err, ErrInvalidArgument, "22023", 400)
	_, err = c.SetRoute(bg, in, []string{"x"})
	kind("42501", err, ErrPermissionDenied, "42501", 403)
	_, err = op.SetRoute(bg, in, []string{"x"})
	kind("42501", err, ErrPermissionDenied, "42501", 403)
	// 57014: the statement cancelled (a cancel or a statement_timeout): not
	// resent, and the connection stays in the pool
	s2, err := c.Submit(bg, "owner-e", uniq("e"), in, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	app := uniq("cancel")
	ca := connectApp(t, roleClient, app)
	go signalBackend(t, "pg_cancel_backend", app, true)
	_, err = ca.AwaitJob(bg, s2.JobID, 10*time.Second)
	kind("57014", err, ErrUnavailable, "57014", 503)
	if _, err := ca.Job(bg, s2.JobID); err != nil {
		t.Fatal(err)
	}
}

// signalBackend cancels (pg_cancel_backend) or ends (pg_terminate_backend)
// the backend of application_name app once it is in an idemjob call (inWait:
// waiting inside it, as await_job and claim(wait) do; a cancel that lands
// while the driver's describe of the call runs is lost).
func signalBackend(t testing.TB, fn, app string, inWait bool) {
	end := time.Now().Add(5 * time.Second)
	for time.Now().Before(end) {
		var ok bool
		_ = admin.QueryRow(bg, "SELECT coalesce(bool_or("+fn+"(pid)), false) FROM pg_stat_activity "+
			"WHERE application_name = $1 AND state = 'active' AND query LIKE '%idemjob.%' "+
			"AND (NOT $2 OR wait_event_type = 'Extension')", app, inWait).Scan(&ok)
		if ok {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Errorf("no backend of %s in a call", app)
}

// 55P03 (the operator's lock_timeout is 100 ms): rolled back, so resent
// whatever the call; given up after the retries.
func TestRetryTransaction(t *testing.T) {
	t.Parallel()
	c := connect(t, roleClient)
	in := intent(t, 0)
	s, err := c.Submit(bg, "owner-r", uniq("r"), in, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	lock := func(hold time.Duration) {
		tx, err := admin.Begin(bg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(bg, "SELECT 1 FROM idemjob.jobs WHERE id = $1 FOR UPDATE", s.JobID); err != nil {
			t.Fatal(err)
		}
		go func() { time.Sleep(hold); _ = tx.Rollback(bg) }()
	}
	once := connect(t, roleOperator, WithRetries(0))
	lock(400 * time.Millisecond)
	_, err = once.CancelJob(bg, s.JobID, "locked")
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, ErrRetryTransaction) || e.SQLState != "55P03" || e.HTTPStatus() != 503 {
		t.Fatalf("55P03: %v", err)
	}
	time.Sleep(450 * time.Millisecond)
	op := connect(t, roleOperator, WithBackoff(100*time.Millisecond)) // resends after 100, 200, 400 ms
	lock(250 * time.Millisecond)
	j, err := op.CancelJob(bg, s.JobID, "resent")
	if err != nil || j.State != JobCancelled {
		t.Fatalf("resent after 55P03: %+v %v", j, err)
	}
}
