package cluster

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/go-sql-driver/mysql"

	dblock "github.com/locklab/locklab/internal/locks/db"
)

// The database lock's MariaDB in the local cluster: one server on
// 127.0.0.1:13306 (3306 moved off, where a host's own server listens), its
// data in the run directory (made fresh by each up, removed by down, as
// etcd's). Only the cluster's own account reaches it as its administrator,
// through the socket in the private run directory; the replicas use the
// "locklab" account over TCP, with the Redis password when one is set.
const (
	DBPort = 13306
	DBName = "locklab"
	DBUser = "locklab"
)

// planDB lays out the MariaDB server.
func planDB(dir string) *Proc {
	return &Proc{Name: "mariadb", Addr: "127.0.0.1:" + strconv.Itoa(DBPort), Log: filepath.Join(dir, "mariadb.log"), Env: dbUmask,
		Args: append([]string{lookPath("mariadbd")}, MariaDBArgs(dbData(dir), dir, DBPort)...)}
}

// MariaDBArgs are mariadbd's arguments (after its path) for a server with
// its data in data, its socket, pid file, log and temporary files in dir
// (mariadbd deletes every "#sql" file in its tmpdir as it starts: with
// /tmp, the default, one server starting removed another's temporary
// tables, and a test's mariadb-install-db failed so), listening on
// 127.0.0.1:port only, running as OSUser, small: a lock table needs no big
// buffer pool. It allows dblock.MaxConnections connections (db-getlock
// holds one for each holder and waiter). The tests' servers (package
// dbtest) are started the same.
func MariaDBArgs(data, dir string, port int) []string {
	return []string{"--no-defaults", "--datadir=" + data, "--socket=" + dbSocket(dir),
		"--pid-file=" + filepath.Join(dir, "mariadb.pid"), "--tmpdir=" + dir, "--port=" + strconv.Itoa(port), "--bind-address=127.0.0.1",
		"--user=" + OSUser(), "--skip-name-resolve", "--innodb-buffer-pool-size=16M",
		"--max-connections=" + strconv.Itoa(dblock.MaxConnections), "--log-error=" + filepath.Join(dir, "mariadb.log")}
}

// dbUmask makes MariaDB's files its owner's only: it sets its own umask
// from these (its default lets the group read its pid file and log).
var dbUmask = []string{"UMASK=0600", "UMASK_DIR=0700"}

func dbData(dir string) string   { return filepath.Join(dir, "mariadb.data") }
func dbSocket(dir string) string { return filepath.Join(dir, "mariadb.sock") }

// OSUser is the account mariadbd runs as and its administrator's name: the
// install makes that account, reached by the socket as this OS user only.
func OSUser() string {
	if os.Geteuid() == 0 {
		return "root"
	}
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return strconv.Itoa(os.Geteuid())
}

// DSN is the replicas' data source name for the database lock.
func (s *State) DSN() string {
	c := mysql.NewConfig()
	c.User, c.Passwd, c.Net, c.Addr, c.DBName = DBUser, s.RedisPassword, "tcp", s.DB.Addr, DBName
	return c.FormatDSN()
}

// installDB makes a fresh data directory (a crash may have left one).
func installDB(ctx context.Context, dir string) error {
	if err := removeDBData(dbData(dir)); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, lookPath("mariadb-install-db"), "--no-defaults", "--datadir="+dbData(dir),
		"--auth-root-authentication-method=socket", "--skip-test-db", "--user="+OSUser(), "--tmpdir="+dir) // its own (MariaDBArgs)
	cmd.Env = append(os.Environ(), dbUmask...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("cluster: mariadb-install-db: %w\n%s", err, out)
	}
	return nil
}

// admin is a connection to the database as its administrator, by the socket.
func admin(dir string) (*sql.DB, error) {
	c := mysql.NewConfig()
	c.User, c.Net, c.Addr, c.Timeout = OSUser(), "unix", dbSocket(dir), 2*time.Second
	conn, err := mysql.NewConnector(c)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(conn), nil
}

// setupDB makes the lock's database and the replicas' account.
func setupDB(ctx context.Context, dir, password string) error {
	db, err := admin(dir)
	if err != nil {
		return err
	}
	defer db.Close()
	for _, stmt := range []string{
		"CREATE DATABASE IF NOT EXISTS " + DBName,
		"CREATE USER IF NOT EXISTS '" + DBUser + "'@'127.0.0.1' IDENTIFIED BY " + quote(password),
		"GRANT ALL ON " + DBName + ".* TO '" + DBUser + "'@'127.0.0.1'",
	} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("cluster: mariadb: %w", err)
		}
	}
	return nil
}

// quote is s as an SQL string literal (the password; CREATE USER takes no
// placeholder).
func quote(s string) string {
	out := []byte{'\''}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\'', '\\':
			out = append(out, '\\', c)
		default:
			out = append(out, c)
		}
	}
	return string(append(out, '\''))
}

// dbReady reports whether the server answers its administrator.
func dbReady(ctx context.Context, dir string) bool {
	db, err := admin(dir)
	if err != nil {
		return false
	}
	defer db.Close()
	return db.PingContext(ctx) == nil
}

// removeDBData removes the data directory, only if it is MariaDB's (it
// holds its "mysql" schema) or empty; a folder of the user's is left alone.
func removeDBData(path string) error {
	return removeDataDir(path, "a MariaDB", func(entries []os.DirEntry) bool {
		return slices.ContainsFunc(entries, func(e os.DirEntry) bool { return e.Name() == "mysql" && e.IsDir() })
	})
}
