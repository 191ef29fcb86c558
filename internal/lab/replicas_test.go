package lab

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/client"
)

// The replicas of a service found through DNS are named by their own
// /healthz; one that stops answering keeps its name while its address
// stays in DNS (the page shows it down), and the fixed list is used as
// given.
func TestReplicaFinder(t *testing.T) {
	var frozen atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if frozen.Load() {
			http.Error(w, "frozen", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte(`{"status":"ok","replica":"3fa2b1c0d9e8"}`))
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())

	fixed := newReplicaFinder(Config{Replicas: []string{"inventory-1", "inventory-2"}}, client.New("", ""))
	if got := fixed.find(context.Background()); !slices.Equal(got, []string{"inventory-1", "inventory-2"}) {
		t.Errorf("fixed: %v", got)
	}

	f := newReplicaFinder(Config{ReplicasFrom: "localhost:" + port}, client.New("", ""))
	if got := f.find(context.Background()); !slices.Equal(got, []string{"3fa2b1c0d9e8"}) {
		t.Fatalf("found %v, want the one replica by its name", got)
	}
	frozen.Store(true)
	f.at = time.Time{} // the kept answer is old
	if got := f.find(context.Background()); !slices.Equal(got, []string{"3fa2b1c0d9e8"}) {
		t.Errorf("a replica that stopped answering: found %v, want its name kept", got)
	}
	gone := newReplicaFinder(Config{ReplicasFrom: "no-such-replica.invalid:8080"}, client.New("", ""))
	if got := gone.find(context.Background()); len(got) != 0 {
		t.Errorf("a name DNS does not know: found %v, want none", got)
	}
	for _, bad := range []string{"inventory", ":8080", "inventory:"} {
		if CheckReplicasFrom(bad) == nil {
			t.Errorf("CheckReplicasFrom(%q): accepted", bad)
		}
	}
}
