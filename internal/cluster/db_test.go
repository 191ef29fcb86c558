package cluster

import (
	"os"
	"regexp"
	"strconv"
	"testing"

	dblock "github.com/locklab/locklab/internal/locks/db"
)

// The Compose and Swarm MariaDB (deploy/mariadb.sh) allows the connections
// the local cluster's does (dblock.MaxConnections): db-getlock holds one a
// hold, and the default load needs more than MariaDB's default 151.
func TestComposeMariaDBConnections(t *testing.T) {
	raw, err := os.ReadFile("../../deploy/mariadb.sh")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`--max-connections=(\d+)`).FindAllSubmatch(raw, -1)
	if len(m) != 1 {
		t.Fatalf("deploy/mariadb.sh: %d --max-connections flags, want 1", len(m))
	}
	if n, _ := strconv.Atoi(string(m[0][1])); n != dblock.MaxConnections {
		t.Errorf("deploy/mariadb.sh allows %d connections, the local cluster %d (dblock.MaxConnections)", n, dblock.MaxConnections)
	}
}
