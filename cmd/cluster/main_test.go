package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestCommandLine(t *testing.T) {
	dir := t.TempDir()
	for name, tc := range map[string]struct {
		args   []string
		env    map[string]string
		status int
		says   string
	}{
		"help":          {[]string{"-h"}, nil, 0, "up|down|status|clean"},
		"no verb":       {nil, nil, 2, "want one of up, down, status, clean"},
		"unknown verb":  {[]string{"start"}, nil, 2, "want one of up, down, status, clean"},
		"two verbs":     {[]string{"up", "down"}, nil, 2, "unexpected arguments: down"},
		"bad replicas":  {[]string{"status"}, map[string]string{"REPLICAS": "0"}, 2, "REPLICAS >= 1"},
		"bad port":      {[]string{"-port", "70000", "status"}, nil, 2, "PORT 1-65535"},
		"status, none":  {[]string{"status"}, nil, 0, "not up"},
		"down, nothing": {[]string{"down"}, nil, 0, "nothing to stop"},
	} {
		t.Run(name, func(t *testing.T) {
			getenv := func(k string) string {
				if k == "RUN_DIR" {
					return dir
				}
				return tc.env[k]
			}
			var stdout, stderr bytes.Buffer
			if got := run(context.Background(), tc.args, getenv, &stdout, &stderr); got != tc.status {
				t.Fatalf("exit %d, want %d\n%s", got, tc.status, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.says) {
				t.Fatalf("stderr lacks %q:\n%s", tc.says, stderr.String())
			}
		})
	}
}

// With the fault hooks on and no token given, each up makes a new random
// admin token (the Makefile's scenarios pass none); a given one is kept, and
// without the hooks there is none.
func TestAdminToken(t *testing.T) {
	token := func(verb string, env map[string]string) string {
		t.Helper()
		cfg, _, err := parse([]string{verb}, func(k string) string { return env[k] }, new(bytes.Buffer))
		if err != nil {
			t.Fatal(err)
		}
		return cfg.AdminToken
	}
	chaos := map[string]string{"INVENTORY_CHAOS": "true"}
	a, b := token("up", chaos), token("up", chaos)
	if len(a) < 26 || a == b {
		t.Errorf("two ups with the fault hooks made tokens %q and %q: want two random ones, 128 bits each", a, b)
	}
	if got := token("up", map[string]string{"INVENTORY_CHAOS": "1", "INVENTORY_ADMIN_TOKEN": "mine"}); got != "mine" {
		t.Errorf("a given token became %q", got)
	}
	if got := token("up", nil); got != "" {
		t.Errorf("no fault hooks, yet a token %q", got)
	}
	if got := token("down", chaos); got != "" {
		t.Errorf("down made a token %q", got)
	}
}
