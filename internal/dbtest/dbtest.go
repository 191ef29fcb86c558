// Package dbtest starts a real MariaDB server for tests (Debian's
// mariadb-server) on a free loopback port, with its own data directory,
// stopped when the test ends. No mock database: the lock's behaviour is
// InnoDB's, row locks and clock included.
package dbtest

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/locklab/locklab/internal/cluster"
	dblock "github.com/locklab/locklab/internal/locks/db"
	"github.com/locklab/locklab/internal/procstate"
	"github.com/locklab/locklab/internal/redistest"
)

// Server is a running MariaDB.
type Server struct {
	Addr string // 127.0.0.1:port
	tb   testing.TB
	args []string
	proc procstate.Held
}

// Database is the database the tests' tables live in.
const Database = "locklab"

// Start makes a data directory, starts the server and waits until it
// answers. It fails the test, saying how to install MariaDB, when the
// binaries are missing.
func Start(tb testing.TB) *Server {
	tb.Helper()
	for _, bin := range []string{"mariadbd", "mariadb-install-db"} {
		if _, err := look(bin); err != nil {
			tb.Fatalf("%s not found; the tests need a real MariaDB: apt-get install mariadb-server (Debian/Ubuntu)", bin)
		}
	}
	dir := tb.TempDir()
	data := filepath.Join(dir, "data")
	install, _ := look("mariadb-install-db")
	out, err := exec.Command(install, "--no-defaults", "--datadir="+data, "--auth-root-authentication-method=normal",
		"--skip-test-db", "--user="+cluster.OSUser(), "--tmpdir="+dir).CombinedOutput() // its own (cluster.MariaDBArgs)
	if err != nil {
		tb.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	port := redistest.FreePort(tb)
	s := &Server{Addr: "127.0.0.1:" + strconv.Itoa(port), tb: tb, args: cluster.MariaDBArgs(data, dir, port)}
	if err := s.start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Stop)
	db := s.open("")
	defer db.Close()
	if _, err := db.Exec("CREATE DATABASE IF NOT EXISTS " + Database); err != nil {
		tb.Fatal(err)
	}
	return s
}

// look finds a MariaDB binary: Debian puts mariadbd in /usr/sbin, which a
// non-root PATH may lack.
func look(bin string) (string, error) {
	if p, err := exec.LookPath(bin); err == nil {
		return p, nil
	}
	for _, d := range []string{"/usr/sbin", "/usr/bin"} {
		if p := filepath.Join(d, bin); isExec(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: not found", bin)
}

func isExec(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode()&0o111 != 0
}

func (s *Server) start() error {
	bin, err := look("mariadbd")
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, s.args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // killed with what it starts
	return s.proc.Start(cmd, "mariadbd", s.answers)
}

// answers waits until the server proc started answers a ping.
func (s *Server) answers(proc *procstate.Proc) error {
	db := s.open("")
	defer db.Close()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		select {
		case <-proc.Exited():
			return fmt.Errorf("mariadbd exited at start (its log: %s)", strings.TrimPrefix(s.args[len(s.args)-1], "--log-error="))
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := db.PingContext(ctx)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("mariadbd on %s did not answer within 20 s: %w", s.Addr, err)
		}
	}
}

// DSN is the data source name of the tests' database.
func (s *Server) DSN() string { return s.dsn(Database) }

func (s *Server) dsn(database string) string {
	c := mysql.NewConfig()
	c.User, c.Net, c.Addr, c.DBName = "root", "tcp", s.Addr, database
	c.Timeout, c.ReadTimeout, c.WriteTimeout = time.Second, 3*time.Second, 3*time.Second
	return c.FormatDSN()
}

// DB opens the tests' database, closed when the test ends.
func (s *Server) DB() *sql.DB {
	db := s.open(Database)
	s.tb.Cleanup(func() { db.Close() })
	return db
}

// Holds opens the tests' database as db-getlock's pool, as a replica does
// (dblock.OpenHolds), closed when the test ends.
func (s *Server) Holds() *sql.DB {
	db, err := dblock.OpenHolds(s.DSN())
	if err != nil {
		s.tb.Fatal(err)
	}
	s.tb.Cleanup(func() { db.Close() })
	return db
}

func (s *Server) open(database string) *sql.DB {
	db, err := sql.Open("mysql", s.dsn(database))
	if err != nil {
		s.tb.Fatal(err)
	}
	return db
}

// Stop kills the server (SIGKILL: a crash) and waits until it is gone.
func (s *Server) Stop() { s.proc.Stop() }

// Restart starts a stopped server again, with its data.
func (s *Server) Restart() {
	s.tb.Helper()
	if err := s.start(); err != nil {
		s.tb.Fatal(err)
	}
}
