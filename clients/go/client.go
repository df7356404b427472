package idemjob

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"time"
	"unicode"

	"github.com/jackc/pgconn"
	"github.com/jackc/pgconn/stmtcache"
	"github.com/jackc/pgx/v4"
	"github.com/jackc/pgx/v4/pgxpool"
)

// Client calls idemjob's SQL functions over a pgxpool pool. It is safe for
// concurrent use.
//
// The pool is safe through pgbouncer in transaction pooling: pgx's
// statement cache runs in describe mode (statement_cache_mode=describe),
// so every statement is the unnamed one, parsed again in each round trip,
// and no named prepared statement is ever left on a server connection; the
// extended protocol still carries every argument and result in binary with
// the server's own types (uuid, jsonb, interval, timestamptz with
// microseconds, bigint). Every call is one autocommit statement. A
// connection is kept in the pool after an SQL error (pgxpool does); only a
// broken one is discarded.
type Client struct {
	pool    *pgxpool.Pool
	retries int
	backoff time.Duration
	lose    func(call string, try int) bool
}

type settings struct {
	retries    int
	backoff    time.Duration
	poolConfig []func(*pgxpool.Config)
	lose       func(call string, try int) bool
}

// Option configures Connect.
type Option func(*settings)

// WithRetries sets how many times a call is sent again after a lost
// connection (resend-safe calls only) or a rolled-back transaction
// (40001, 40P01, 55P03). Default 3; 0 sends every call once.
func WithRetries(n int) Option { return func(s *settings) { s.retries = n } }

// WithBackoff sets the pause before the first resend, doubled for each
// next one (default 50ms).
func WithBackoff(d time.Duration) Option { return func(s *settings) { s.backoff = d } }

// WithPoolConfig adjusts the pgxpool configuration after the package's own
// settings (MaxConns, timeouts, AfterConnect ...). Keep the statement
// cache as it is if a pooler in transaction mode may be in front.
func WithPoolConfig(f func(*pgxpool.Config)) Option {
	return func(s *settings) { s.poolConfig = append(s.poolConfig, f) }
}

// WithLostAnswers is for tests (yours and the package's): before each
// answer is returned, lose(call, try) is asked (call is the SQL function's
// name, try counts the sends of this call from 0); when it says true, the
// call has committed but the client behaves as if the connection broke
// before the answer arrived: the connection is closed and discarded, and the
// in-doubt rule applies (a resend-safe call is sent again, any other call
// returns ErrConnectionLost).
func WithLostAnswers(lose func(call string, try int) bool) Option {
	return func(s *settings) { s.lose = lose }
}

// Connect opens a pool on dsn (a libpq key=value string or a postgres://
// URL, as pgxpool.ParseConfig takes: pool_max_conns etc. included).
func Connect(ctx context.Context, dsn string, opts ...Option) (*Client, error) {
	s := settings{retries: 3, backoff: 50 * time.Millisecond}
	for _, o := range opts {
		o(&s)
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, &Error{Call: "connect", Message: err.Error(), Kind: ErrInvalidArgument, Err: err}
	}
	// pooler-safe: unnamed statements only, described once per connection
	cfg.ConnConfig.PreferSimpleProtocol = false
	cfg.ConnConfig.BuildStatementCache = func(conn *pgconn.PgConn) stmtcache.Cache {
		return stmtcache.New(conn, stmtcache.ModeDescribe, 512)
	}
	for _, f := range s.poolConfig {
		f(cfg)
	}
	pool, err := pgxpool.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, connectError("connect", err)
	}
	return &Client{pool: pool, retries: s.retries, backoff: s.backoff, lose: s.lose}, nil
}

// Close closes the pool, waiting for the connections in use.
func (c *Client) Close() { c.pool.Close() }

// Pool is the pgxpool underneath, for statements of your own.
func (c *Client) Pool() *pgxpool.Pool { return c.pool }

// resendSafe: every call answers the same when sent again with the same
// arguments (I7), but these: claim without a lease, start_attempt without a
// worker, purge and purge_race_log.
var resendSafe = map[string]bool{
	"submit": true, "job": true, "await_job": true, "cancel_job": true,
	"start_attempt": false, "start_attempt:worker": true, "begin_attempt": true,
	"complete_attempt": true, "fail_attempt": true, "mark_unknown": true,
	"cancel_attempt": true, "heartbeat": true, "begin_attempts": true, "complete_attempts": true,
	"claim": false, "claim:lease": true, "abandon_attempts": true, "expire_attempts": true,
	"define_contract": true, "certify_provider": true, "revoke_provider": true,
	"set_retry_policy": true, "set_route": true, "purge": false, "purge_race_log": false,
	"in_doubt": true, "queue_stats": true, "provider_stats": true,
}

// ResendSafe reports whether a call may be sent again after its answer was
// lost: the SQL function's name ("submit") or the method's ("Submit").
// "claim" and "start_attempt" report false, as they are without a lease or
// a worker; "claim:lease" and "start_attempt:worker" report true. The
// client resends these itself (WithRetries). abandon_attempts and
// expire_attempts change nothing more when sent again, but count only
// what they changed this time.
func ResendSafe(name string) bool {
	return resendSafe[snake(name)]
}

func snake(name string) string {
	var b strings.Builder
	for i, r := range name {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// arg is one named argument of a call.
type arg struct {
	name  string
	value any
	cast  string // "::text::uuid": the server parses it (a malformed uuid is 22P02)
}

// callSQL builds SELECT cols FROM idemjob.fn(name => $1, ...) with the given
// arguments only, the others left to their SQL defaults.
func callSQL(fn, cols string, args []arg) (string, []any) {
	var b strings.Builder
	values := make([]any, len(args))
	fmt.Fprintf(&b, "SELECT %s FROM idemjob.%s(", cols, fn)
	for i, a := range args {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s => $%d%s", a.name, i+1, a.cast)
		values[i] = a.value
	}
	b.WriteString(")")
	return b.String(), values
}

// connectError: no connection could be made, so nothing was sent (not in
// doubt): ErrUnavailable, unless the server said why (28P01: no kind).
func connectError(call string, err error) *Error {
	e := classify(call, err, false)
	if e.Kind == nil && e.SQLState == "" || e.Kind == ErrConnectionLost {
		e.Kind = ErrUnavailable
	}
	return e
}

// errLostAnswer is what WithLostAnswers makes a call end with.
var errLostAnswer = errors.New("the answer was lost (fault injected after the commit)")

// call sends SELECT cols FROM idemjob.fn(args), see run.
func (c *Client) call(ctx context.Context, fn, policy, cols string, args []arg, scan func(pgx.Rows) error) error {
	sql, values := callSQL(fn, cols, args)
	return c.run(ctx, fn, policy, sql, values, nil, scan)
}

// run sends one statement, scanning each row with scan, and resends it as
// the in-doubt rule allows. policy is the name ResendSafe knows the call by;
// reset (if any) forgets what an earlier send scanned.
func (c *Client) run(ctx context.Context, fn, policy, sql string, values []any, reset func(), scan func(pgx.Rows) error) error {
	safe := resendSafe[policy]
	for try := 0; ; try++ {
		if reset != nil {
			reset()
		}
		e := c.once(ctx, fn, try, sql, values, scan)
		if e == nil {
			return nil
		}
		if try >= c.retries || ctx.Err() != nil || !(e.notSent || e.err.Kind == ErrRetryTransaction ||
			(safe && e.err.Kind == ErrConnectionLost)) {
			return e.err
		}
		d := c.backoff << try
		d += time.Duration(rand.Int63n(int64(d)/2 + 1))
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return e.err
		case <-t.C:
		}
	}
}

// stopKey carries a stop channel in a call's context: when it closes, the
// server is asked to cancel the statement on the same connection (a cancel
// request) instead of the connection being dropped, so the call returns only
// once the server has ended the statement: with its rows (committed) or with
// 57014 (rolled back). A dropped connection would leave the statement running
// on the server, where a waiting claim could still take jobs no one receives.
type stopKey struct{}

// cancelOnStop watches stop while a statement runs on pg; it returns the
// function that ends the watch, which returns only when no cancel request is
// in flight, so none can reach the connection's next statement.
func cancelOnStop(pg *pgconn.PgConn, stop <-chan struct{}) func() {
	done, watched := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-stop:
		case <-done:
			return
		}
		// a request that arrives before the statement does is ignored by the
		// server: repeat it until the statement has ended
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = pg.CancelRequest(ctx)
			cancel()
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() { close(done); <-watched }
}

type callError struct {
	err     *Error
	notSent bool // the statement never reached the server: resending is safe
}

func (c *Client) once(ctx context.Context, fn string, try int, sql string, values []any, scan func(pgx.Rows) error) *callError {
	conn, err := c.pool.Acquire(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return &callError{&Error{Call: fn, Message: ctx.Err().Error(), Kind: ErrUnavailable, Err: ctx.Err()}, false}
		}
		return &callError{connectError(fn, err), true}
	}
	defer conn.Release()
	if stop, _ := ctx.Value(stopKey{}).(<-chan struct{}); stop != nil {
		defer cancelOnStop(conn.Conn().PgConn(), stop)()
	}
	rows, err := conn.Query(ctx, sql, values...)
	if err == nil {
		for rows.Next() {
			if serr := scan(rows); serr != nil {
				rows.Close()
				return &callError{&Error{Call: fn, Message: "decoding the answer: " + serr.Error(), Err: serr}, false}
			}
		}
		rows.Close()
		err = rows.Err()
	}
	if err == nil && c.lose != nil && c.lose(fn, try) {
		_ = conn.Conn().Close(context.Background())
		err = errLostAnswer
	}
	if err == nil {
		return nil
	}
	e := classify(fn, err, conn.Conn().IsClosed())
	return &callError{e, e.Kind == ErrConnectionLost && pgconn.SafeToRetry(err)}
}
