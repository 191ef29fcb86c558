package main

import (
	"bytes"
	"context"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/locklab/locklab/internal/loadtest"
)

func TestExitStatus(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://127.0.0.1:" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port) + "/sale"
	ln.Close()
	for name, tc := range map[string]struct {
		args   []string
		status int
		says   string
	}{
		"unknown lock": {[]string{"-lock", "v9"}, 2, "none v1 v2"},
		"bad n":        {[]string{"-n", "0"}, 2, "-n"},
		"help":         {[]string{"-h"}, 0, "-expect-safe"},
		"unreachable":  {[]string{"-url", closed, "-lock", "v6", "-n", "1"}, 1, "v6"},
	} {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if got := run(context.Background(), tc.args, nil, &stdout, &stderr); got != tc.status {
				t.Fatalf("exit %d, want %d\n%s", got, tc.status, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.says) {
				t.Fatalf("stderr lacks %q:\n%s", tc.says, stderr.String())
			}
		})
	}
}

func TestParseLocksKeepsTutorialOrder(t *testing.T) {
	got, err := parseLocks("redlock, v1,none")
	if err != nil || strings.Join(got, ",") != "none,v1,redlock" {
		t.Fatalf("got %v, %v", got, err)
	}
}

// -expect-safe fails only for versions expected to be safe.
func TestOversoldSafe(t *testing.T) {
	got := oversoldSafe([]loadtest.Result{{Lock: "none", Oversold: 9}, {Lock: "v2", Oversold: 3}, {Lock: "v6", Oversold: 0}, {Lock: "v4", Oversold: 2}})
	if len(got) != 1 || !strings.HasPrefix(got[0], "v4") {
		t.Fatalf("got %v, want only v4", got)
	}
}
