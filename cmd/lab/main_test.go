package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// The command line is checked before anything listens: beyond loopback
// without the lab's token, no replica, an address that is no address.
func TestRefusedCommandLines(t *testing.T) {
	env := func(vars map[string]string) func(string) string { return func(k string) string { return vars[k] } }
	for _, c := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"-listen", "0.0.0.0:8070"}, nil, "beyond loopback (0.0.0.0): set LAB_TOKEN or LAB_ADMIN_TOKEN"},
		{[]string{"-published", "0.0.0.0"}, nil, "beyond loopback (0.0.0.0): set LAB_TOKEN or LAB_ADMIN_TOKEN (ADMIN_TOKEN in the Compose stack)"},
		{[]string{"-published", "lab.example"}, nil, "-published"},
		{[]string{"-listen", "192.0.2.1:8070"}, nil, "beyond loopback"},
		{[]string{"-replicas", " , "}, nil, "at least one name"},
		{[]string{"-replicas", "dns:inventory"}, nil, "want a DNS name and the replicas' port"},
		{[]string{"-replicas", "dns::8080"}, nil, "want a DNS name and the replicas' port"},
		{[]string{"-listen", "nohost"}, nil, "-listen"},
		{[]string{"-admin-token-file", "/nonexistent/token"}, nil, "-admin-token-file"},
		{[]string{"stray"}, nil, "unexpected arguments"},
		{[]string{"-published", "0.0.0.0"}, map[string]string{"LAB_ADMIN_TOKEN": "admin"}, "LAB_ADMIN_TOKEN (ADMIN_TOKEN in the Compose stack) is 5 bytes"},
		{[]string{"-listen", "0.0.0.0:0"}, map[string]string{"LAB_ADMIN_TOKEN": strings.Repeat("a", 32), "LAB_TOKEN": "fifteen-bytes!!"}, "LAB_TOKEN is 15 bytes"},
	} {
		// Cancelled: a command line wrongly accepted serves and stops at once.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		var stderr bytes.Buffer
		if status := run(ctx, c.args, env(c.env), &stderr, &stderr); status != 2 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%v: exit %d, %q; want 2 and %q", c.args, status, stderr.String(), c.want)
		}
	}
}

// Published beyond loopback with only the service's admin token (16 bytes
// or more), the lab starts, and that token is the one a run needs; on
// loopback a short one will do.
func TestAdminTokenGuardsBeyondLoopback(t *testing.T) {
	for _, c := range []struct{ token, published string }{{"sixteen-bytes-ok", "0.0.0.0"}, {"admin", "127.0.0.1"}} {
		env := func(k string) string { return map[string]string{"LAB_ADMIN_TOKEN": c.token}[k] }
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // serve, then stop at once: the command line was accepted
		var stderr bytes.Buffer
		if status := run(ctx, []string{"-listen", "127.0.0.1:0", "-published", c.published}, env, &stderr, &stderr); status != 0 {
			t.Fatalf("%s on %s: exit %d: %s", c.token, c.published, status, stderr.String())
		}
	}
}
