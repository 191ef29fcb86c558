package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/versions"
)

func env(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

func TestFlagsAndEnvironment(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		env  map[string]string
		want func(config) bool
	}{
		"defaults": {nil, nil, func(c config) bool {
			return c.Port == api.DefaultPort && c.Lock == "v1" && c.Redis == "localhost:6379" && c.TTL == 20*time.Second &&
				c.Retry == 20*time.Millisecond && c.AcquireTimeout == 10*time.Second && c.Key == api.DefaultStockKey &&
				c.LockKey == api.DefaultLockKey && !c.LockOverride && strings.Join(c.Redlock, ",") == api.DefaultRedlock
		}},
		"env": {nil, map[string]string{"INVENTORY_LOCK": "v6", "INVENTORY_ACQUIRE_TIMEOUT": "2s", "INVENTORY_LOCK_OVERRIDE": "true", "INVENTORY_REDLOCK": "a:1, b:2"},
			func(c config) bool {
				return c.Lock == "v6" && c.AcquireTimeout == 2*time.Second && c.LockOverride && strings.Join(c.Redlock, ",") == "a:1,b:2"
			}},
		"flag wins": {[]string{"-lock", "redlock", "-port", "9000"}, map[string]string{"INVENTORY_LOCK": "v6", "INVENTORY_PORT": "9001"},
			func(c config) bool { return c.Lock == "redlock" && c.Port == 9000 }},
	} {
		t.Run(name, func(t *testing.T) {
			var stderr bytes.Buffer
			c, err := parseConfig(tc.args, env(tc.env), &stderr)
			if err != nil {
				t.Fatalf("%v\n%s", err, stderr.String())
			}
			if !tc.want(c) {
				t.Fatalf("unexpected config %+v", c)
			}
		})
	}
}

// The passwords not given are read from their files (a Docker secret, the
// Compose stack's generated one), their line end dropped; one given wins,
// and a file missing or empty is a usage error that names its flag.
func TestPasswordFiles(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	secret, empty := file("secret", "s3cret:@/x\n"), file("empty", "\n")
	for name, tc := range map[string]struct {
		env           map[string]string
		redis, db     string
		refused, says string
	}{
		"from files": {env: map[string]string{"INVENTORY_REDIS_PASSWORD_FILE": secret, "INVENTORY_DB": "locklab@tcp(mariadb:3306)/locklab", "INVENTORY_DB_PASSWORD_FILE": secret},
			redis: "s3cret:@/x", db: "s3cret:@/x"},
		"given wins": {env: map[string]string{"INVENTORY_REDIS_PASSWORD": "given", "INVENTORY_REDIS_PASSWORD_FILE": secret,
			"INVENTORY_DB": "locklab:given@tcp(mariadb:3306)/locklab", "INVENTORY_DB_PASSWORD_FILE": secret}, redis: "given", db: "given"},
		"no db":         {env: map[string]string{"INVENTORY_DB_PASSWORD_FILE": secret}},
		"missing":       {env: map[string]string{"INVENTORY_REDIS_PASSWORD_FILE": filepath.Join(dir, "none")}, says: "-redis-password-file: open"},
		"empty":         {env: map[string]string{"INVENTORY_REDIS_PASSWORD_FILE": empty}, says: "-redis-password-file: " + empty + " is empty"},
		"db missing":    {env: map[string]string{"INVENTORY_DB": "u@tcp(h:1)/d", "INVENTORY_DB_PASSWORD_FILE": filepath.Join(dir, "none")}, says: "-db-password-file: open"},
		"refused first": {env: map[string]string{"INVENTORY_REDIS_PASSWORD_FILE": filepath.Join(dir, "none"), "INVENTORY_BIND": "0.0.0.0"}, says: "-admin-open"},
	} {
		t.Run(name, func(t *testing.T) {
			var stderr bytes.Buffer
			c, err := parseConfig(nil, env(tc.env), &stderr)
			if tc.says != "" {
				if err == nil || !strings.Contains(stderr.String(), tc.says) {
					t.Fatalf("err %v, stderr %q: want it to say %q", err, stderr.String(), tc.says)
				}
				return
			}
			if err != nil {
				t.Fatalf("%v\n%s", err, stderr.String())
			}
			var db string
			if c.DB != "" {
				dsn, err := mysql.ParseDSN(c.DB)
				if err != nil {
					t.Fatal(err)
				}
				db = dsn.Passwd
			}
			if c.RedisPassword != tc.redis || db != tc.db {
				t.Fatalf("Redis password %q, the database's %q; want %q and %q", c.RedisPassword, db, tc.redis, tc.db)
			}
		})
	}
}

// Bad input exits 2 with a message saying what is wrong; -h exits 0.
func TestExitStatus(t *testing.T) {
	for name, tc := range map[string]struct {
		args   []string
		env    map[string]string
		status int
		says   string
	}{
		"unknown lock":   {[]string{"-lock", "v9"}, nil, 2, strings.Join(versions.Names(), " ")},
		"bad env":        {nil, map[string]string{"INVENTORY_TTL": "soon"}, 2, "INVENTORY_TTL"},
		"bad ttl":        {[]string{"-ttl", "0s"}, nil, 2, "-ttl"},
		"bad db":         {nil, map[string]string{"INVENTORY_DB": "nonsense"}, 2, "-db: invalid DSN"},
		"bad port":       {[]string{"-port", "70000"}, nil, 2, "-port"},
		"empty redlock":  {[]string{"-redlock", ","}, nil, 2, "-redlock"},
		"stray arg":      {[]string{"v6"}, nil, 2, "unexpected arguments"},
		"help":           {[]string{"-h"}, nil, 0, "INVENTORY_ACQUIRE_TIMEOUT"},
		"chaos no token": {[]string{"-chaos"}, nil, 2, "-chaos needs -admin-token"},
		"open to all":    {[]string{"-bind", "0.0.0.0"}, nil, 2, "-admin-open"},
		"published, no token": {nil, map[string]string{"INVENTORY_BIND": "0.0.0.0", "INVENTORY_PUBLISHED": "0.0.0.0"}, 2,
			"the stack publishes its port on 0.0.0.0 (BIND), beyond this machine, and no admin token is set: set ADMIN_TOKEN"},
		"bad published": {[]string{"-published", "example.org"}, nil, 2, "-published"},
		"bad bind":      {[]string{"-bind", "example.org"}, nil, 2, "-bind"},
		"bad in-flight": {[]string{"-max-in-flight", "0"}, nil, 2, "-max-in-flight"},
		"probe refused": {[]string{"-probe", "http://127.0.0.1:1/readyz"}, nil, 1, "probe:"},
		"short token beyond": {nil, map[string]string{"INVENTORY_BIND": "0.0.0.0", "INVENTORY_PUBLISHED": "0.0.0.0", "INVENTORY_ADMIN_TOKEN": "fifteen-bytes!!"}, 2,
			"the admin token (-admin-token, ADMIN_TOKEN) is 15 bytes, and clients reach 0.0.0.0 beyond loopback: want at least 16"},
	} {
		t.Run(name, func(t *testing.T) {
			var stderr bytes.Buffer
			if got := run(context.Background(), tc.args, env(tc.env), nil, &stderr); got != tc.status {
				t.Fatalf("exit %d, want %d; stderr:\n%s", got, tc.status, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.says) {
				t.Fatalf("stderr does not mention %q:\n%s", tc.says, stderr.String())
			}
		})
	}
}

// Closed by default: loopback, and an empty admin token only there unless
// opted in.
func TestClosedByDefault(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		ok   bool
	}{
		"default":             {nil, true},
		"every interface":     {[]string{"-bind", "0.0.0.0"}, false},
		"with a token":        {[]string{"-bind", "0.0.0.0", "-admin-token", "sixteen-bytes-ok"}, true},
		"with a short token":  {[]string{"-bind", "0.0.0.0", "-admin-token", "fifteen-bytes!!"}, false},
		"short, on loopback":  {[]string{"-admin-token", "t"}, true},
		"opted in":            {[]string{"-bind", "0.0.0.0", "-admin-open"}, true},
		"ipv6 loopback":       {[]string{"-bind", "::1"}, true},
		"localhost":           {[]string{"-bind", "localhost"}, true},
		"another address":     {[]string{"-bind", "10.1.2.3"}, false},
		"another, with token": {[]string{"-bind", "10.1.2.3", "-admin-token", "sixteen-bytes-ok"}, true},
		// In a container, behind nginx: what counts is where nginx publishes.
		"published on loopback":        {[]string{"-bind", "0.0.0.0", "-published", "127.0.0.1"}, true},
		"published on ipv6 loopback":   {[]string{"-bind", "0.0.0.0", "-published", "[::1]"}, true},
		"published everywhere":         {[]string{"-bind", "0.0.0.0", "-published", "0.0.0.0"}, false},
		"published beyond, token":      {[]string{"-bind", "0.0.0.0", "-published", "192.168.1.5", "-admin-token", "sixteen-bytes-ok"}, true},
		"published on loopback, short": {[]string{"-bind", "0.0.0.0", "-published", "127.0.0.1", "-admin-token", "t"}, true},
		"loopback bind, published on":  {[]string{"-published", "0.0.0.0"}, false},
	} {
		t.Run(name, func(t *testing.T) {
			var stderr bytes.Buffer
			c, err := parseConfig(tc.args, env(nil), &stderr)
			if (err == nil) != tc.ok {
				t.Fatalf("err %v, want ok %t\n%s", err, tc.ok, stderr.String())
			}
			if name == "default" && c.Bind != "127.0.0.1" {
				t.Fatalf("default -bind %q, want 127.0.0.1", c.Bind)
			}
		})
	}
}

// FuzzConfig: any command line and any value of an INVENTORY_ variable
// either fails as a usage error (status 2, a message) or gives a config
// that keeps every rule: never a panic, never a service open to the network
// by accident.
func FuzzConfig(f *testing.F) {
	f.Add("-lock v6 -ttl 1s", "INVENTORY_BIND", "0.0.0.0")
	f.Add("-port 0", "INVENTORY_TTL", "-1s")
	f.Add("-bind ::1 -admin-open=false", "INVENTORY_ADMIN_TOKEN", "")
	f.Add("-redlock a:1,,b", "INVENTORY_MAX_IN_FLIGHT", "9999999999999")
	f.Add("-chaos -admin-token x -history -5", "INVENTORY_LOG_LEVEL", "loud")
	f.Fuzz(func(t *testing.T, args, name, value string) {
		var stderr bytes.Buffer
		c, err := parseConfig(strings.Fields(args), env(map[string]string{name: value}), &stderr)
		if err != nil {
			if stderr.Len() == 0 {
				t.Fatalf("%q %s=%q: %v, and nothing said on stderr", args, name, value, err)
			}
			return
		}
		if err := c.validate(); err != nil {
			t.Fatalf("%q %s=%q: accepted, but %v", args, name, value, err)
		}
		switch {
		case c.AdminToken == "" && !c.loopback() && !c.AdminOpen:
			t.Fatalf("%q %s=%q: admin endpoints open on %s", args, name, value, c.Bind)
		case c.AdminToken != "" && !c.loopback() && len(c.AdminToken) < 16:
			t.Fatalf("%q %s=%q: a %d-byte admin token beyond loopback", args, name, value, len(c.AdminToken))
		case c.Chaos && c.AdminToken == "":
			t.Fatalf("%q %s=%q: fault hooks with no token", args, name, value)
		case c.limits().Grace <= 0 || c.limits().Longest <= c.AcquireTimeout:
			t.Fatalf("%q %s=%q: limits %+v", args, name, value, c.limits())
		}
	})
}

// -probe-stay waits for a 200, then stays up until stopped, and exits 0.
func TestProbeStay(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	stderr, staying := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"-probe", srv.URL, "-probe-stay"}, env(nil), nil, staying)
		staying.Close()
	}()
	line, err := bufio.NewReader(stderr).ReadString('\n') // it says so once it has its 200
	if err != nil || !strings.Contains(line, "staying up") {
		t.Fatalf("stderr %q, %v: want it staying up", line, err)
	}
	go func() { _, _ = io.Copy(io.Discard, stderr) }()
	cancel()
	if status := <-done; status != 0 {
		t.Fatalf("exit %d after SIGTERM, want 0", status)
	}
}
