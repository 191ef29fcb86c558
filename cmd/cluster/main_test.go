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
