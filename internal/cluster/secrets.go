package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Secrets never go on a command line: every user of the machine reads every
// process's arguments (ps, /proc/PID/cmdline). redis-server rewrites its
// title once it runs, but its arguments are there to read until then, and
// in the state file. So the nodes read the password from a private file in
// the run directory, the replicas get it and the admin token through their
// environment (/proc/PID/environ is their owner's only), and the tools read
// both from the private state file.

// redisAuthConf is the configuration file the Redis node on port starts
// with when the nodes have a password: requirepass, and masterauth for a
// standby. Each node has its own: Sentinel's reconfiguration of a node ends
// in CONFIG REWRITE, which writes the node's whole configuration (its port,
// its replicaof) into the file it started with.
func redisAuthConf(dir string, port int) string {
	return filepath.Join(dir, "redis-auth-"+strconv.Itoa(port)+".conf")
}

// AdminTokenFile is where Up writes the replicas' admin token (the fault
// hooks', PUT /stock's and GET /history's), for a person's curl: the tools
// read State.AdminToken.
func AdminTokenFile(dir string) string { return filepath.Join(dir, "admin-token") }

// writeSecrets writes the files the processes and a person read the secrets
// from, each 0600: a Redis node's for each of ports.
func writeSecrets(dir, redisPassword, adminToken string, ports []int) error {
	var errs []error
	if redisPassword != "" {
		quoted := redisQuote(redisPassword)
		for _, port := range ports {
			errs = append(errs, writePrivate(redisAuthConf(dir, port), []byte("requirepass "+quoted+"\nmasterauth "+quoted+"\n")))
		}
	}
	if adminToken != "" {
		errs = append(errs, writePrivate(AdminTokenFile(dir), []byte(adminToken+"\n")))
	}
	return errors.Join(errs...)
}

// removeSecrets removes those files: they are needed only while the
// cluster runs (a restart reads the Redis one again). The nodes' files go
// by their name's pattern (redis-auth-PORT.conf, and the one file all nodes
// shared before), whatever nodes made them.
func removeSecrets(dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "redis-auth-*.conf"))
	errs := []error{err}
	for _, f := range append(files, filepath.Join(dir, "redis-auth.conf"), AdminTokenFile(dir)) {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// redisQuote is s as one argument of a Redis configuration line: in double
// quotes, every byte that is not printable ASCII, and the quote and the
// backslash, as \xHH (which Redis' parser, sdssplitargs, reads back).
func redisQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := range len(s) {
		c := s[i]
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			fmt.Fprintf(&b, `\x%02x`, c)
			continue
		}
		b.WriteByte(c)
	}
	b.WriteByte('"')
	return b.String()
}
