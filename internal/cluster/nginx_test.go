package cluster

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/redistest"
)

// nginx as the local cluster runs it (deploy/nginx.conf) says 503 not_sent,
// a sale known not to have happened, only when no byte of the request
// reached any replica; when one got it, the reply stays 502, the sale
// unknown. The replicas stand in as addresses nothing listens on (refused)
// or as listeners that read the request and close the connection.
func TestNginxSaysWhenNothingWasSent(t *testing.T) {
	if !executable(lookPath("nginx")) {
		t.Skip("nginx not installed")
	}
	refused := func() string { return "127.0.0.1:" + strconv.Itoa(redistest.FreePort(t)) }
	for _, tc := range []struct {
		name     string
		replicas []string
		requests []string // method and path, in order
		status   int
		code     string
		outcome  string
	}{
		// Both refuse: the POST is passed on once, then both are left out
		// for 5 s (none left); a GET /sale is never passed on.
		{"both refused", []string{refused(), refused()}, []string{"POST /sale", "POST /sale", "GET /sale"},
			http.StatusServiceUnavailable, api.CodeNotSent, api.Failed},
		// The request reached a replica, which closed without a reply: it
		// may have sold, and a POST is not passed on.
		{"closed after reading", []string{closer(t), closer(t)}, []string{"POST /sale", "GET /sale"},
			http.StatusBadGateway, "bad_gateway", api.Unknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := startNginx(t, tc.replicas)
			for _, r := range tc.requests {
				method, path, _ := strings.Cut(r, " ")
				req, err := http.NewRequest(method, url+path, nil)
				if err != nil {
					t.Fatal(err)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				var body api.Sale
				err = json.NewDecoder(resp.Body).Decode(&body)
				resp.Body.Close()
				if err != nil {
					t.Fatalf("%s: a reply that is not JSON: %v", r, err)
				}
				if resp.StatusCode != tc.status || body.Code != tc.code || resp.Header.Get("Retry-After") != "1" {
					t.Fatalf("%s: %d %q (Retry-After %q), want %d %q", r, resp.StatusCode, body.Code, resp.Header.Get("Retry-After"), tc.status, tc.code)
				}
				if got := api.Outcome(resp.StatusCode, body); got != tc.outcome {
					t.Fatalf("%s: outcome %s, want %s", r, got, tc.outcome)
				}
			}
		})
	}
}

// closer listens on a free loopback port and, for each connection, reads
// the request's first line and closes it: a replica that died mid-request.
func closer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = bufio.NewReader(conn).ReadString('\n')
			conn.Close()
		}
	}()
	return ln.Addr().String()
}

// startNginx runs nginx with the local cluster's configuration in front of
// replicas (addresses), on a free port, until the test ends; it returns
// nginx's base URL.
func startNginx(t *testing.T, replicas []string) string {
	cfg := Config{Root: "../..", Dir: t.TempDir(), Port: redistest.FreePort(t), Replicas: len(replicas)}.withDefaults()
	s := Plan(cfg)
	for i := range s.Replicas {
		s.Replicas[i].Addr = replicas[i]
	}
	if err := renderNginx(cfg, s); err != nil {
		t.Fatal(err)
	}
	n := s.Nginx
	if err := n.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := n.stop(5 * time.Second); err != nil {
			t.Error(err)
		}
	})
	if err := waitUntil(context.Background(), 10*time.Second, "nginx", func() bool { return n.alive() && listening(n.Addr) }); err != nil {
		raw, _ := os.ReadFile(n.Log)
		t.Fatalf("%v; its log:\n%s", err, raw)
	}
	return "http://" + n.Addr
}

// nginx started by root runs its workers as nobody, who cannot enter the
// private run directory: a response larger than nginx's buffers, which the
// client does not read yet, still arrives whole (nginx holds back rather
// than write a temp file there). Measured without proxy_max_temp_file_size
// 0: 6 MB of 30 arrived, the error log saying "Permission denied".
func TestNginxLargeResponse(t *testing.T) {
	if !executable(lookPath("nginx")) {
		t.Skip("nginx not installed")
	}
	const size = 30 << 20
	written := make(chan struct{})
	replica := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(written)
		w.Header().Set("Content-Length", strconv.Itoa(size))
		_, _ = io.Copy(w, strings.NewReader(strings.Repeat("x", size)))
	}))
	t.Cleanup(replica.Close)
	base := startNginx(t, []string{replica.Listener.Addr().String(), replica.Listener.Addr().String()})
	res, err := http.Get(base + "/replica/inventory-1/large")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	// Nothing read until the replica has written it all or for a second:
	// nginx must keep what it cannot pass on yet somewhere.
	select {
	case <-written:
	case <-time.After(time.Second):
	}
	if n, err := io.Copy(io.Discard, res.Body); n != size || err != nil {
		t.Fatalf("%d bytes of %d arrived through nginx (%v)", n, size, err)
	}
}
