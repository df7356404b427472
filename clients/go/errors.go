package idemjob

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgconn"
)

// The kinds of error, one per condition of docs/reference.md#errors. An
// *Error matches its kind with errors.Is:
//
//	if errors.Is(err, idemjob.ErrAttemptInDoubt) { ... }
//
// An *Error whose SQLSTATE is none of these has no kind (HTTP 500).
var (
	ErrIdempotencyConflict  = errors.New("idemjob: idempotency conflict")      // IJ001, 409
	ErrAttemptInDoubt       = errors.New("idemjob: attempt in doubt")          // IJ002, 409 + Retry-After
	ErrJobFinished          = errors.New("idemjob: job finished")              // IJ003, 409
	ErrProviderNotCertified = errors.New("idemjob: provider not certified")    // IJ004, 422
	ErrInvalidTransition    = errors.New("idemjob: invalid transition")        // IJ005, 409
	ErrNotFound             = errors.New("idemjob: not found")                 // IJ006, 404
	ErrKeyExpired           = errors.New("idemjob: key expired")               // IJ007, 410
	ErrLeaseExpired         = errors.New("idemjob: lease expired")             // IJ008, 409
	ErrInvalidArgument      = errors.New("idemjob: invalid argument")          // 22xxx, 42602, 42704, 400
	ErrPermissionDenied     = errors.New("idemjob: permission denied")         // 42501, 403
	ErrRetryTransaction     = errors.New("idemjob: retry the transaction")     // 40001, 40P01, 55P03, 503
	ErrUnavailable          = errors.New("idemjob: unavailable")               // 25006, 55000, 53xxx, 57014, no connection, 503
	ErrConnectionLost       = errors.New("idemjob: connection lost, in doubt") // no SQLSTATE, 08xxx, 57P0x, 503
)

var kindStatus = map[error]int{
	ErrIdempotencyConflict: 409, ErrAttemptInDoubt: 409, ErrJobFinished: 409,
	ErrProviderNotCertified: 422, ErrInvalidTransition: 409, ErrNotFound: 404,
	ErrKeyExpired: 410, ErrLeaseExpired: 409, ErrInvalidArgument: 400,
	ErrPermissionDenied: 403, ErrRetryTransaction: 503, ErrUnavailable: 503,
	ErrConnectionLost: 503,
}

// conditionNames: the condition name of each SQLSTATE docs/reference.md
// lists, for the "error" member of Body.
var conditionNames = map[string]string{
	"IJ001": "idempotency_conflict", "IJ002": "attempt_in_doubt", "IJ003": "job_finished",
	"IJ004": "provider_not_certified", "IJ005": "invalid_transition", "IJ006": "not_found",
	"IJ007": "key_expired", "IJ008": "lease_expired",
	"22004": "null_value_not_allowed", "22023": "invalid_parameter_value",
	"22P02": "invalid_text_representation", "22003": "numeric_value_out_of_range",
	"22007": "invalid_datetime_format", "22008": "datetime_field_overflow",
	"22015": "interval_field_overflow", "22021": "character_not_in_repertoire",
	"22P05": "untranslatable_character", "2201B": "invalid_regular_expression",
	"42501": "insufficient_privilege", "42602": "invalid_name", "42704": "undefined_object",
	"42883": "undefined_function", "0A000": "feature_not_supported",
	"25006": "read_only_sql_transaction", "40001": "serialization_failure",
	"40P01": "deadlock_detected", "55P03": "lock_not_available", "57014": "query_canceled",
	"55000": "object_not_in_prerequisite_state", "54000": "program_limit_exceeded",
	"54001": "statement_too_complex", "57P01": "admin_shutdown", "57P02": "crash_shutdown",
	"57P03": "cannot_connect_now", "XX000": "internal_error",
}

var kindNames = map[error]string{
	ErrInvalidArgument: "invalid_argument", ErrPermissionDenied: "permission_denied",
	ErrRetryTransaction: "retry_transaction", ErrUnavailable: "unavailable",
	ErrConnectionLost: "connection_lost",
}

// kindOf maps a SQLSTATE to its kind, as the table of clients/README.md does.
func kindOf(code string) error {
	switch code {
	case "IJ001":
		return ErrIdempotencyConflict
	case "IJ002":
		return ErrAttemptInDoubt
	case "IJ003":
		return ErrJobFinished
	case "IJ004":
		return ErrProviderNotCertified
	case "IJ005":
		return ErrInvalidTransition
	case "IJ006":
		return ErrNotFound
	case "IJ007":
		return ErrKeyExpired
	case "IJ008":
		return ErrLeaseExpired
	case "42602", "42704":
		return ErrInvalidArgument
	case "42501":
		return ErrPermissionDenied
	case "40001", "40P01", "55P03":
		return ErrRetryTransaction
	case "25006", "55000", "57014":
		return ErrUnavailable
	case "":
		return ErrConnectionLost
	}
	switch {
	case strings.HasPrefix(code, "22"):
		return ErrInvalidArgument
	case strings.HasPrefix(code, "53"):
		return ErrUnavailable
	case strings.HasPrefix(code, "08"), strings.HasPrefix(code, "57P0"):
		return ErrConnectionLost
	}
	return nil
}

// Fields are the error fields idemjob sets on its IJ00x errors, parsed from
// PG_DIAG_CONSTRAINT_NAME's key=value pairs (never from the message text),
// and only when PG_DIAG_SCHEMA_NAME is "idemjob". A key that is absent
// leaves the zero value.
type Fields struct {
	JobID      string
	AttemptID  string
	State      string    // the job's or the attempt's state
	Deadline   time.Time // IJ002: the in-doubt attempt's deadline (µs)
	RetryAfter time.Duration
	// Raw holds every pair, including keys added by later versions.
	Raw map[string]string
}

func parseFields(schema, constraint string) Fields {
	var f Fields
	if schema != "idemjob" || constraint == "" {
		return f
	}
	f.Raw = map[string]string{}
	for _, p := range strings.Fields(constraint) {
		k, v, ok := strings.Cut(p, "=")
		if !ok {
			continue
		}
		f.Raw[k] = v
		switch k {
		case "job_id":
			f.JobID = v
		case "attempt_id":
			f.AttemptID = v
		case "state":
			f.State = v
		case "deadline":
			if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
				f.Deadline = t
			}
		case "retry_after":
			if n, err := strconv.Atoi(v); err == nil {
				f.RetryAfter = time.Duration(n) * time.Second
			}
		}
	}
	return f
}

// Error is every error a Client method returns: from the server (SQLState
// set), a lost connection (Kind ErrConnectionLost: the call is in doubt),
// or an argument the client could not encode (ErrInvalidArgument).
type Error struct {
	Call     string // the SQL function, e.g. "submit"
	SQLState string // "" when there is none (a lost connection)
	Message  string
	Detail   string
	Hint     string
	Schema   string // PG_DIAG_SCHEMA_NAME
	Table    string // PG_DIAG_TABLE_NAME: the table the ids refer to
	Fields   Fields
	// Kind is one of the Err* sentinels, or nil ("anything else": 500).
	Kind error
	// Err is the underlying error: a *pgconn.PgError, a network or
	// context error.
	Err error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("idemjob")
	if e.Call != "" {
		b.WriteString(" " + e.Call)
	}
	b.WriteString(": ")
	b.WriteString(e.Message)
	if e.SQLState != "" {
		b.WriteString(" (SQLSTATE " + e.SQLState + ")")
	}
	return b.String()
}

// Unwrap returns the underlying error (*pgconn.PgError, net.Error,
// context.Canceled ...).
func (e *Error) Unwrap() error { return e.Err }

// Is matches the error's kind: errors.Is(err, idemjob.ErrNotFound).
func (e *Error) Is(target error) bool { return e.Kind != nil && target == e.Kind }

// InDoubt reports whether the call may have committed: its answer was lost.
func (e *Error) InDoubt() bool { return e.Kind == ErrConnectionLost }

// HTTPStatus maps the error as docs/reference.md#errors does, for an API in
// front of idemjob.
func (e *Error) HTTPStatus() int {
	switch e.SQLState { // where reference.md says otherwise than the kind
	case "2201B":
		return 500
	case "54001":
		return 400
	}
	if s, ok := kindStatus[e.Kind]; ok {
		return s
	}
	return 500
}

// Headers are the HTTP headers to answer with: Retry-After (seconds) for
// IJ002.
func (e *Error) Headers() http.Header {
	h := http.Header{}
	if v := e.Fields.Raw["retry_after"]; e.SQLState == "IJ002" && v != "" {
		h.Set("Retry-After", v)
	}
	return h
}

// Name is the condition name ("idempotency_conflict", "connection_lost",
// ...).
func (e *Error) Name() string {
	if n, ok := conditionNames[e.SQLState]; ok {
		return n
	}
	if n, ok := kindNames[e.Kind]; ok {
		return n
	}
	return "internal_error"
}

// Body is a JSON error body for an API in front: error (the condition
// name), sqlstate, message, and the fields job_id, attempt_id, state and
// deadline where the error has them.
func (e *Error) Body() map[string]any {
	b := map[string]any{"error": e.Name(), "sqlstate": e.SQLState, "message": e.Message}
	for k, v := range map[string]string{"job_id": e.Fields.JobID, "attempt_id": e.Fields.AttemptID,
		"state": e.Fields.State, "deadline": e.Fields.Raw["deadline"]} {
		if v != "" {
			b[k] = v
		}
	}
	return b
}

// fromPgError converts a server error.
func fromPgError(call string, pe *pgconn.PgError) *Error {
	return &Error{Call: call, SQLState: pe.Code, Message: pe.Message, Detail: pe.Detail, Hint: pe.Hint,
		Schema: pe.SchemaName, Table: pe.TableName, Fields: parseFields(pe.SchemaName, pe.ConstraintName),
		Kind: kindOf(pe.Code), Err: pe}
}

// classify turns whatever a call ended with into an *Error. broken: the
// connection was closed by the failure.
func classify(call string, err error, broken bool) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return fromPgError(call, pe)
	}
	if broken || lostConnection(err) {
		return &Error{Call: call, Message: err.Error(), Kind: ErrConnectionLost, Err: err}
	}
	return &Error{Call: call, Message: err.Error(), Err: err}
}

// lostConnection: a network failure, a timeout or cancellation that closed
// the connection, or an EOF: the answer did not arrive.
func lostConnection(err error) bool {
	var ne net.Error
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &ne) ||
		pgconn.Timeout(err) || pgconn.SafeToRetry(err) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
