package versions_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The catalogue and the packages that only read it link no lock package and
// no lock service's driver: a lock is built by internal/builder, which only
// the binaries that build locks import, and the scenarios reach the locks'
// stores through internal/scenario/stores, which only the binaries that run
// scenarios import.
func TestReadersLinkNoLock(t *testing.T) {
	const mod = "github.com/locklab/locklab/internal/"
	pkgs := []string{"versions", "server", "loadtest", "checker", "lab", "scenario"}
	for _, p := range pkgs {
		out, err := exec.Command("go", "list", "-deps", mod+p).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", p, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			if forbidden(dep) {
				t.Errorf("internal/%s links %s", p, dep)
			}
		}
	}
}

// forbidden says whether dep is a lock (ours or a library) or a lock
// service's driver. internal/locks itself is none: it holds the locks' source
// texts, embedded for the lab's code view, and imports only the catalogue.
func forbidden(dep string) bool {
	if dep == "github.com/locklab/locklab/internal/locks" {
		return false
	}
	for _, prefix := range []string{
		"github.com/locklab/locklab/internal/locks", "github.com/locklab/locklab/internal/builder",
		"go.etcd.io/", "github.com/go-zookeeper/", "github.com/go-sql-driver/", "github.com/redis/rueidis",
		"github.com/go-redsync/", "github.com/bsm/redislock",
	} {
		if strings.HasPrefix(dep, prefix) {
			return true
		}
	}
	return false
}

// The rooms stay of one size a reader takes in (issue 47): no non-test Go
// file over 500 lines, at most two over 400 (each of one concern: the sale
// and the ZooKeeper lock today).
func TestRoomsStaySmall(t *testing.T) {
	out, err := exec.Command("git", "-C", "../..", "ls-files", "*.go").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err) // a source archive: nothing to list
	}
	var over400 []string
	for _, f := range strings.Fields(string(out)) {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("../..", f))
		if err != nil {
			t.Fatal(err)
		}
		n := strings.Count(string(raw), "\n")
		switch {
		case n > 500:
			t.Errorf("%s has %d lines: over 500, split it by concern", f, n)
		case n > 400:
			over400 = append(over400, fmt.Sprintf("%s (%d)", f, n))
		}
	}
	if len(over400) > 2 {
		t.Errorf("%d files over 400 lines, at most 2: %s", len(over400), strings.Join(over400, ", "))
	}
}
