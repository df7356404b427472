package idemjob

// The suite runs against the cluster test/clients/run.sh gives:
//
//	IDEMJOB_TEST_DSN        libpq key=value DSN, superuser, direct or through pgbouncer
//	IDEMJOB_TEST_ADMIN_DSN  always direct, superuser: set-up, inspection, the sweeper's tick
//	IDEMJOB_TEST_VIA        direct | pgbouncer
//
// with the roles ij_cl_client, ij_cl_worker, ij_cl_operator and ij_cl_admin
// holding those capabilities (a role's DSN: user= replaced). Without
// IDEMJOB_TEST_DSN only the tests that need no server run.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v4/pgxpool"
)

var (
	testDSN  = os.Getenv("IDEMJOB_TEST_DSN")
	adminDSN = os.Getenv("IDEMJOB_TEST_ADMIN_DSN")
	testVia  = os.Getenv("IDEMJOB_TEST_VIA")
	admin    *pgxpool.Pool // direct, superuser
	bg       = context.Background()
	seq      atomic.Int64
)

const (
	roleClient   = "ij_cl_client"
	roleWorker   = "ij_cl_worker"
	roleOperator = "ij_cl_operator"
	roleAdmin    = "ij_cl_admin"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(runChild())
	}
	if testDSN != "" {
		var err error
		if admin, err = pgxpool.Connect(bg, adminDSN); err != nil {
			fmt.Fprintln(os.Stderr, "admin connection:", err)
			os.Exit(1)
		}
		// Role defaults for this database, before any server connection of
		// those roles exists (pgbouncer 1.18 refuses the options startup
		// parameter, so a DSN's options=-c... cannot carry them): a short
		// claim lease for the worker (the kill points), a short lock_timeout
		// for the operator (55P03).
		var db string
		must(admin.QueryRow(bg, "SELECT current_database()").Scan(&db))
		for _, s := range []string{
			fmt.Sprintf("ALTER ROLE %s IN DATABASE %s SET idemjob.claim_lease = '1s'", roleWorker, db),
			fmt.Sprintf("ALTER ROLE %s IN DATABASE %s SET lock_timeout = '100ms'", roleOperator, db),
		} {
			_, err := admin.Exec(bg, s)
			must(err)
		}
	}
	code := m.Run()
	if admin != nil {
		admin.Close()
	}
	os.Exit(code)
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

var userRE = regexp.MustCompile(`user=\S+`)

// userOf is the DSN's user.
func userOf(dsn string) string { return strings.TrimPrefix(userRE.FindString(dsn), "user=") }

// dsnAs is the test DSN with another user.
func dsnAs(dsn, role string) string { return userRE.ReplaceAllString(dsn, "user="+role) }

func needServer(t testing.TB) {
	t.Helper()
	if testDSN == "" {
		t.Skip("IDEMJOB_TEST_DSN is not set")
	}
}

// connect opens a Client as the role, closed when the test ends.
func connect(t testing.TB, role string, opts ...Option) *Client {
	t.Helper()
	needServer(t)
	c, err := Connect(bg, dsnAs(testDSN, role), opts...)
	if err != nil {
		t.Fatalf("connect as %s: %v", role, err)
	}
	t.Cleanup(c.Close)
	return c
}

// connectApp opens a Client as the role with that application_name.
func connectApp(t testing.TB, role, app string, opts ...Option) *Client {
	t.Helper()
	needServer(t)
	c, err := Connect(bg, dsnAs(testDSN, role)+" application_name="+app, opts...)
	if err != nil {
		t.Fatalf("connect as %s: %v", role, err)
	}
	t.Cleanup(c.Close)
	return c
}

// uniq is a name no other test uses.
func uniq(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano()%1e9, seq.Add(1))
}

// intent sets up an intent with a contract, the fallback certified, the
// route {primary,fallback}, and a retry policy (backoff 0, fence after
// fence; 0: none), as test/examples/setup.sql does.
func intent(t testing.TB, fence time.Duration) string {
	t.Helper()
	name := uniq("t." + strings.ToLower(strings.ReplaceAll(t.Name(), "/", ".")))
	a := connect(t, roleAdmin)
	if _, err := a.DefineContract(bg, name, json.RawMessage(`{"type": "object", "required": ["by"]}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := a.CertifyProvider(bg, name, "fallback", map[string]any{"suite": "go"}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.SetRoute(bg, name, []string{"primary", "fallback"}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.SetRetryPolicy(bg, name, &RetryPolicyOptions{RetryBackoff: Ptr(time.Duration(0)),
		FenceUnknownAfter: fence}); err != nil {
		t.Fatal(err)
	}
	return name
}

// q runs an inspection query on the admin connection and returns the one
// value as text.
func q(t testing.TB, sql string, args ...any) string {
	t.Helper()
	var s *string
	if err := admin.QueryRow(bg, sql, args...).Scan(&s); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	if s == nil {
		return "<null>"
	}
	return *s
}

// attempts lists the job's attempts as provider:state, in order.
func attempts(t testing.TB, jobID string) string {
	return q(t, `SELECT coalesce(string_agg(provider || ':' || state, ',' ORDER BY attempt_no), '')
		FROM idemjob.attempts WHERE job_id = $1`, jobID)
}

// eventually polls cond every 50 ms for up to d.
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(d)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// sweeper calls ExpireAttempts on the admin connection every 100 ms until
// the test ends, as the sweeper would.
func sweeper(t testing.TB) {
	t.Helper()
	a, err := Connect(bg, adminDSN)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
				_, _ = a.ExpireAttempts(bg)
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done; a.Close() })
}

// jsonOf decodes a JSON value.
func jsonOf(t testing.TB, raw []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return m
}
