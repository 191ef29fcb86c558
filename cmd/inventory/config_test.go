package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/api"
)

func env(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

func TestFlagsAndEnvironment(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		env  map[string]string
		want func(config) bool
	}{
		"defaults": {nil, nil, func(c config) bool {
			return c.Port == api.DefaultPort && c.Lock == "v1" && c.Redis == "localhost:6379" && c.TTL == 20*time.Second &&
				c.Retry == 20*time.Millisecond && c.AcquireTimeout == 10*time.Second && c.Key == api.DefaultStockKey &&
				c.LockKey == api.DefaultLockKey && !c.LockOverride && strings.Join(c.Redlock, ",") == api.DefaultRedlock
		}},
		"env": {nil, map[string]string{"INVENTORY_LOCK": "v6", "INVENTORY_ACQUIRE_TIMEOUT": "2s", "INVENTORY_LOCK_OVERRIDE": "true", "INVENTORY_REDLOCK": "a:1, b:2"},
			func(c config) bool {
				return c.Lock == "v6" && c.AcquireTimeout == 2*time.Second && c.LockOverride && strings.Join(c.Redlock, ",") == "a:1,b:2"
			}},
		"flag wins": {[]string{"-lock", "redlock", "-port", "9000"}, map[string]string{"INVENTORY_LOCK": "v6", "INVENTORY_PORT": "9001"},
			func(c config) bool { return c.Lock == "redlock" && c.Port == 9000 }},
	} {
		t.Run(name, func(t *testing.T) {
			var stderr bytes.Buffer
			c, err := parseConfig(tc.args, env(tc.env), &stderr)
			if err != nil {
				t.Fatalf("%v\n%s", err, stderr.String())
			}
			if !tc.want(c) {
				t.Fatalf("unexpected config %+v", c)
			}
		})
	}
}

// Bad input exits 2 with a message saying what is wrong; -h exits 0.
func TestExitStatus(t *testing.T) {
	for name, tc := range map[string]struct {
		args   []string
		env    map[string]string
		status int
		says   string
	}{
		"unknown lock":   {[]string{"-lock", "v9"}, nil, 2, "none v1 v2 v3 v4 v5 v6 v7 v8 redlock atomic"},
		"bad env":        {nil, map[string]string{"INVENTORY_TTL": "soon"}, 2, "INVENTORY_TTL"},
		"bad ttl":        {[]string{"-ttl", "0s"}, nil, 2, "-ttl"},
		"bad port":       {[]string{"-port", "70000"}, nil, 2, "-port"},
		"empty redlock":  {[]string{"-redlock", ","}, nil, 2, "-redlock"},
		"stray arg":      {[]string{"v6"}, nil, 2, "unexpected arguments"},
		"help":           {[]string{"-h"}, nil, 0, "INVENTORY_ACQUIRE_TIMEOUT"},
		"chaos no token": {[]string{"-chaos"}, nil, 2, "-chaos needs -admin-token"},
		"probe refused":  {[]string{"-probe", "http://127.0.0.1:1/readyz"}, nil, 1, "probe:"},
	} {
		t.Run(name, func(t *testing.T) {
			var stderr bytes.Buffer
			if got := run(context.Background(), tc.args, env(tc.env), nil, &stderr); got != tc.status {
				t.Fatalf("exit %d, want %d; stderr:\n%s", got, tc.status, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.says) {
				t.Fatalf("stderr does not mention %q:\n%s", tc.says, stderr.String())
			}
		})
	}
}
