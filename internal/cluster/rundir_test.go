package cluster

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/redistest"
)

// upAt runs Up on dir with nginx's port taken: Up must refuse at the port,
// having started nothing, and it deals with the run directory before that.
func upAt(t *testing.T, dir string) error {
	t.Helper()
	if missing, _ := missingTools(false); len(missing) > 0 {
		t.Skipf("Up would install %v first", missing)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, err = Up(context.Background(), Config{Root: "../..", Dir: dir, Port: ln.Addr().(*net.TCPAddr).Port, Log: io.Discard})
	if err == nil {
		t.Fatal("Up started a cluster with nginx's port taken")
	}
	return err
}

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// The run directory is made 0700 (its missing parents too), and one of the
// caller's own that others could read is made 0700.
func TestRunDirMadePrivate(t *testing.T) {
	fresh := filepath.Join(t.TempDir(), "a", "run")
	if err := upAt(t, fresh); !strings.Contains(err.Error(), "already in use") {
		t.Fatalf("Up: %v, want the taken port", err)
	}
	for _, d := range []string{fresh, filepath.Dir(fresh)} {
		if m := mode(t, d); m != 0o700 {
			t.Errorf("%s made with mode %04o, want 0700", d, m)
		}
	}
	old := t.TempDir()
	if err := os.Chmod(old, 0o755); err != nil {
		t.Fatal(err)
	}
	upAt(t, old)
	if m := mode(t, old); m != 0o700 {
		t.Errorf("an existing run directory left with mode %04o, want 0700", m)
	}
}

// A run directory that is a symbolic link, another user's, writable by
// others, or not a directory is refused by Up (before anything starts) and
// by Load (whose state file's pids Down would signal), with an error that
// names it and says why.
func TestRunDirRefused(t *testing.T) {
	stateIn := func(dir string) string { // a state file Load would read
		if err := os.WriteFile(stateFile(dir), []byte(`{"port": 80}`), 0o600); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	for name, tc := range map[string]struct {
		make func(t *testing.T) string
		why  string
	}{
		"symlink": {func(t *testing.T) string {
			link := filepath.Join(t.TempDir(), "run")
			if err := os.Symlink(stateIn(t.TempDir()), link); err != nil {
				t.Fatal(err)
			}
			return link
		}, "is a symbolic link"},
		"another user's": {func(t *testing.T) string {
			if os.Geteuid() != 0 {
				t.Skip("chown to another user needs root")
			}
			dir := stateIn(t.TempDir())
			if err := os.Chown(dir, 65534, 65534); err != nil { // nobody
				t.Fatal(err)
			}
			return dir
		}, "is owned by uid 65534"},
		"world-writable": {func(t *testing.T) string { return chmod(t, stateIn(t.TempDir()), 0o777) }, "is writable by other users (mode 0777)"},
		"group-writable": {func(t *testing.T) string { return chmod(t, stateIn(t.TempDir()), 0o770) }, "is writable by other users (mode 0770)"},
		"a file": {func(t *testing.T) string {
			f := filepath.Join(t.TempDir(), "run")
			if err := os.WriteFile(f, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			return f
		}, "is not a directory"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := tc.make(t)
			want := "run directory " + dir + " " + tc.why
			if err := upAt(t, dir); !strings.Contains(err.Error(), want) {
				t.Errorf("Up: %v\nwant it to say %q", err, want)
			}
			if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("Load: %v\nwant it to say %q", err, want)
			}
		})
	}
}

func chmod(t *testing.T, path string, m os.FileMode) string {
	t.Helper()
	if err := os.Chmod(path, m); err != nil {
		t.Fatal(err)
	}
	return path
}

// Every file the cluster writes in the run directory is its owner's only,
// a file left there readable by an older version too: the logs, the state,
// the secrets, the configurations, the clock files, and what the processes
// write themselves (nginx's pid file, tested and started here for real, as
// Up does: nginx -t creates it, and the run keeps its mode).
func TestRunDirFilesPrivate(t *testing.T) {
	cfg := Config{Root: "../..", Dir: t.TempDir(), Port: redistest.FreePort(t)}.withDefaults()
	s := Plan(cfg)
	c := &Cluster{dir: cfg.Dir, State: s}
	var files []string
	for _, f := range []string{s.Redis[0].Log, stateFile(cfg.Dir), redisAuthConf(cfg.Dir, 6381), clockFile(cfg.Dir, "redis-6381")} {
		if err := os.WriteFile(f, []byte("from before\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p := sleeper(t) // a new log
	files = append(files, p.Log)
	old := Proc{Name: "old", Args: p.Args, Log: s.Redis[0].Log} // a log from before
	if err := old.start(); err != nil {
		t.Fatal(err)
	}
	defer old.stop(time.Second)
	files = append(files, old.Log)
	check := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	check("save", c.save())
	check("writeSecrets", writeSecrets(cfg.Dir, "pw", "token", []int{6381}))
	check("writeFaultConfig", writeFaultConfig(cfg.Dir, nil))
	check("writeOffset", writeOffset(clockFile(cfg.Dir, "redis-6381"), time.Second))
	check("renderNginx", renderNginx(cfg, s))
	files = append(files, stateFile(cfg.Dir), redisAuthConf(cfg.Dir, 6381), AdminTokenFile(cfg.Dir), faultConfig(cfg.Dir),
		clockFile(cfg.Dir, "redis-6381"), filepath.Join(nginxDir(cfg.Dir), "nginx.conf"))

	if executable(s.Nginx.Args[0]) {
		n := s.Nginx
		check("nginx -t", checkNginx(context.Background(), n)) // as Up does: it makes the pid file
		check("start nginx", n.start())
		defer n.stop(5 * time.Second)
		pid := filepath.Join(nginxDir(cfg.Dir), "nginx.pid")
		waitFor(t, "nginx's pid file", func() bool { _, err := os.Stat(pid); return err == nil })
		files = append(files, pid, n.Log)
	} else {
		t.Log("no nginx: its own files are not checked")
	}
	for _, f := range files {
		if m := mode(t, f); m != 0o600 {
			t.Errorf("%s has mode %04o, want 0600", f, m)
		}
	}
}
