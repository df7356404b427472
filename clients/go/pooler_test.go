package idemjob

import (
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgconn"
	"github.com/jackc/pgx/v4"
	"github.com/jackc/pgx/v4/pgxpool"
)

// One pooled connection, every kind of call many times: through pgbouncer
// in transaction pooling (server_round_robin: consecutive transactions on
// other backends) nothing depends on session state; directly, no named
// prepared statement is left on the connection. And the pooler really is
// in transaction mode: pgx's default statement cache fails through it.
func TestPoolerSafety(t *testing.T) {
	t.Parallel()
	dsn := dsnAs(testDSN, roleAdmin)
	needServer(t)
	c, err := Connect(bg, dsn, WithPoolConfig(func(cfg *pgxpool.Config) { cfg.MaxConns = 1 }))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	in := intent(t, 0)
	if testVia == "pgbouncer" { // several server connections in the pool of this role
		var wg sync.WaitGroup
		for i := 0; i < 4; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				conn, err := pgx.Connect(bg, dsn+" statement_cache_mode=describe")
				if err == nil {
					_, _ = conn.Exec(bg, "SELECT pg_sleep(0.2)")
					_ = conn.Close(bg)
				}
			}()
		}
		wg.Wait()
	}
	pids := map[uint32]bool{}
	for i := 0; i < 12; i++ {
		s, err := c.Submit(bg, "owner-pool", uniq("pool"), in, map[string]any{"i": i}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.AwaitJob(bg, s.JobID, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := c.StartAttempt(bg, s.JobID, &StartOptions{Timeout: time.Minute, Worker: "pool"}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.SetRoute(bg, in, []string{"primary", "fallback"}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Job(bg, "not-a-uuid"); !errors.Is(err, ErrInvalidArgument) { // an error keeps the connection
			t.Fatal(err)
		}
		var pid uint32
		if err := c.Pool().QueryRow(bg, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
			t.Fatal(err)
		}
		pids[pid] = true
	}
	if st := c.Pool().Stat(); st.TotalConns() != 1 {
		t.Fatalf("connections: %d", st.TotalConns())
	}
	if testVia != "pgbouncer" {
		var n int
		if err := c.Pool().QueryRow(bg, "SELECT count(*) FROM pg_prepared_statements").Scan(&n); err != nil || n != 0 {
			t.Fatalf("named prepared statements: %d %v", n, err)
		}
		return
	}
	if len(pids) < 2 {
		t.Fatalf("through pgbouncer every call ran on one backend: the pooler runs prove nothing")
	}
	conn, err := pgx.Connect(bg, dsn) // pgx's default: prepared statements (lrupsc_*)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(bg)
	var pe *pgconn.PgError
	for i := 0; i < 12 && pe == nil; i++ {
		var s string
		err = conn.QueryRow(bg, "SELECT $1::text", "x").Scan(&s)
		errors.As(err, &pe)
	}
	if pe == nil || (pe.Code != "26000" && pe.Code != "42P05") {
		t.Fatalf("pgx's default statement cache worked through the pooler: %v", err)
	}
	t.Logf("through pgbouncer: %d backends; pgx's default fails: %s", len(pids), pe.Message)
}

// A postgres:// URL works as well as a key=value DSN.
func TestConnectURL(t *testing.T) {
	t.Parallel()
	url := os.Getenv("IDEMJOB_TEST_URL")
	if url == "" {
		t.Skip("IDEMJOB_TEST_URL is not set")
	}
	c, err := Connect(bg, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.QueueStats(bg); err != nil {
		t.Fatal(err)
	}
	var e *Error
	if _, err := Connect(bg, "host=/nonexistent port=1 connect_timeout=1"); !errors.As(err, &e) || e.Kind != ErrUnavailable || e.InDoubt() {
		t.Fatalf("no server: %v", err)
	}
}
