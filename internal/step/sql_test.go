package step_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"regexp"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/locklab/locklab/internal/dbtest"
	"github.com/locklab/locklab/internal/lease"
	dblock "github.com/locklab/locklab/internal/locks/db"
	"github.com/locklab/locklab/internal/step"
	"github.com/locklab/locklab/internal/step/steptest"
)

// owner is the lock row's owner, read without the gate ("" when free).
func owner(t *testing.T, db *sql.DB, key string) string {
	t.Helper()
	var o string
	err := db.QueryRowContext(context.Background(), "SELECT owner FROM locklab_locks WHERE name = ? AND expires_at >= UTC_TIMESTAMP(6)", key).Scan(&o)
	if err == sql.ErrNoRows {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// The db lock's sale stops before its INSERT (the row not yet written)
// and before its release's UPDATE, each recorded with its statement and
// the rows it affected.
func TestSQLStopsBeforeEachStatement(t *testing.T) {
	srv := dbtest.Start(t)
	db, err := dblock.Open(srv.DSN()) // the replica's pool, with the gate
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	plain := srv.DB()
	if err := dblock.Setup(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	l := dblock.New(db, dblock.Options{Key: "lock", TTL: 10 * time.Second})
	g := step.New(step.Options{})
	defer g.Close()

	a := steptest.Hold(t, g, "A", l.TryAcquire)
	st := a.State()
	steptest.Match(t, "A's first statement", st.Next.Command,
		regexp.QuoteMeta("INSERT INTO locklab_locks (name, owner, expires_at, token) VALUES ('lock', 'A', UTC_TIMESTAMP(6) + INTERVAL 10000000 MICROSECOND, LAST_INSERT_ID(1)) ON DUPLICATE KEY UPDATE")+".*")
	if o := owner(t, plain, "lock"); o != "" {
		t.Fatalf("A stopped before its INSERT, yet the row's owner is %q", o)
	}
	st = next(t, a)
	if st.Done[0].Reply != "1 row affected, last insert id 1" {
		t.Fatalf("A's INSERT answered %q", st.Done[0].Reply)
	}
	if o := owner(t, plain, "lock"); o != "A" {
		t.Fatalf("A's INSERT let go, the row's owner is %q, want A", o)
	}
	want := "UPDATE locklab_locks SET owner = '', expires_at = '1970-01-01 00:00:01' WHERE name = 'lock' AND owner = 'A' AND expires_at >= UTC_TIMESTAMP(6)"
	if st.Next.Command != want || st.Next.Phase != step.Release {
		t.Fatalf("A's release is %+v, want %q", st.Next, want)
	}
	st = next(t, a)
	if st.State != "done" || st.Done[1].Reply != "1 row affected" || len(st.Done) != 2 {
		t.Fatalf("A's steps are %+v, want its release's 1 row affected last", st)
	}
	if r := st.Result.(steptest.Held); r.Acquire != nil || r.Release != nil {
		t.Fatalf("A: %+v", r)
	}
	if o := owner(t, plain, "lock"); o != "" {
		t.Fatalf("released, the row's owner is %q", o)
	}
}

// db-getlock's sale shows its connection's id, GET_LOCK (the server's
// lock not taken until it is let go) and RELEASE_LOCK, with their values.
func TestSQLGetLockSteps(t *testing.T) {
	srv := dbtest.Start(t)
	holds := srv.Holds() // the replica's pool, with the gate
	plain := srv.DB()
	l := dblock.NewGetLock(holds, dblock.GetLockOptions{Key: "lock"})
	g := step.New(step.Options{})
	defer g.Close()
	used := func() bool {
		var id sql.NullInt64
		if err := plain.QueryRow("SELECT IS_USED_LOCK(?)", dblock.GetLockName("lock")).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id.Valid
	}

	a := steptest.Hold(t, g, "A", func(ctx context.Context, owner string) (lease.Lease, error) {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return l.Acquire(ctx, owner)
	})
	if st := a.State(); st.Next.Command != "SELECT CONNECTION_ID()" {
		t.Fatalf("A's first statement is %q", st.Next.Command)
	}
	st := next(t, a)
	steptest.Match(t, "the connection's id", st.Done[0].Reply, `\d+`)
	steptest.Match(t, "A's second statement", st.Next.Command, `SELECT GET_LOCK\('locklab:lock', 4\.\d+\)`)
	if used() {
		t.Fatal("A stopped before GET_LOCK, yet the lock is taken")
	}
	st = next(t, a)
	if st.Done[1].Reply != "1" || !used() {
		t.Fatalf("A's GET_LOCK answered %q (want 1), the lock used: %v", st.Done[1].Reply, used())
	}
	if st.Next.Command != "SELECT RELEASE_LOCK('locklab:lock')" || st.Next.Phase != step.Release {
		t.Fatalf("A's release is %+v", st.Next)
	}
	st = next(t, a)
	if st.State != "done" || st.Done[2].Reply != "1" || used() {
		t.Fatalf("A's release: %+v, the lock used: %v", st, used())
	}
}

// A sale that is not armed sends its statements through the gate without
// stopping.
func TestSQLUnarmedNeverStops(t *testing.T) {
	srv := dbtest.Start(t)
	db, err := dblock.Open(srv.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	l := dblock.New(db, dblock.Options{Key: "lock", TTL: 10 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for range 3 {
		ls, err := l.TryAcquire(ctx, "plain")
		if err != nil {
			t.Fatal(err)
		}
		if o := owner(t, srv.DB(), "lock"); o != "plain" {
			t.Fatalf("held, the row's owner is %q", o)
		}
		if err := ls.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// DescribeSQL puts the arguments in place, quoted, without the comments.
func TestDescribeSQL(t *testing.T) {
	q := "-- a comment\nSELECT GET_LOCK(?, ?)\n  -- another\n"
	got := step.DescribeSQL(q, []driver.NamedValue{{Ordinal: 1, Value: "it's"}, {Ordinal: 2, Value: int64(5)}})
	if got != "SELECT GET_LOCK('it''s', 5)" {
		t.Fatalf("got %q", got)
	}
}

// BenchmarkSQLUnarmed is one db lock's attempt and release on a real
// MariaDB through a pool without the gate and one with it, unarmed, both
// of the same connector: the difference must be within noise (issue 45).
func BenchmarkSQLUnarmed(b *testing.B) {
	srv := dbtest.Start(b)
	cfg, err := mysql.ParseDSN(srv.DSN())
	if err != nil {
		b.Fatal(err)
	}
	for _, gated := range []bool{false, true} {
		c, err := mysql.NewConnector(cfg)
		if err != nil {
			b.Fatal(err)
		}
		name := "no-gate"
		if gated {
			name, c = "gate-unarmed", step.Connector(c)
		}
		db := sql.OpenDB(c)
		defer db.Close()
		if err := dblock.Setup(context.Background(), db); err != nil {
			b.Fatal(err)
		}
		l := dblock.New(db, dblock.Options{Key: "bench-" + name, TTL: 10 * time.Second})
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			for b.Loop() {
				ls, err := l.TryAcquire(ctx, "bench")
				if err != nil {
					b.Fatal(err)
				}
				if err := ls.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkConnectorUnarmed is the gate's own cost per statement for an
// unarmed request, without I/O: the context lookup in a request-sized
// context, and the wrapper's call. The connection answers at once: what is
// measured is the wrapper, not a database.
func BenchmarkConnectorUnarmed(b *testing.B) {
	ctx := context.Background()
	for range 8 {
		ctx = context.WithValue(ctx, new(int), 1)
	}
	args := []driver.NamedValue{{Ordinal: 1, Value: "lock"}}
	for _, gated := range []bool{false, true} {
		name, c := "no-gate", driver.Connector(instant{})
		if gated {
			name, c = "gate-unarmed", step.Connector(c)
		}
		conn, err := c.Connect(ctx)
		if err != nil {
			b.Fatal(err)
		}
		ex := conn.(driver.ExecerContext)
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				_, _ = ex.ExecContext(ctx, "SELECT RELEASE_LOCK(?)", args)
			}
		})
	}
}

// instant is a connection that answers every statement at once, sending
// nothing: the benchmark's baseline.
type instant struct{}

func (instant) Connect(context.Context) (driver.Conn, error) { return instant{}, nil }
func (instant) Driver() driver.Driver                        { return nil }
func (instant) Prepare(string) (driver.Stmt, error)          { return nil, driver.ErrSkip }
func (instant) Close() error                                 { return nil }
func (instant) Begin() (driver.Tx, error)                    { return nil, driver.ErrSkip }
func (instant) ExecContext(context.Context, string, []driver.NamedValue) (driver.Result, error) {
	return driver.RowsAffected(1), nil
}
