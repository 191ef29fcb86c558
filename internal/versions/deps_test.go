package versions_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The catalogue and the packages that only read it link no lock package and
// no lock service's driver: a lock is built by internal/builder, which only
// the binaries that build locks import. (internal/lab still links them,
// through internal/scenario's local environment: issue 47, open.)
func TestReadersLinkNoLock(t *testing.T) {
	const mod = "github.com/locklab/locklab/internal/"
	pkgs := []string{"versions", "server", "loadtest", "checker"}
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
// service's driver.
func forbidden(dep string) bool {
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
