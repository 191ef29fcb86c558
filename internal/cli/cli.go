// Package cli holds what the project's commands share on their command line:
// how they start, parse their flags and report usage errors, and the probe
// their images use as a healthcheck.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// Main runs a command. run gets a context that SIGINT and SIGTERM cancel, the
// arguments, the environment and the standard streams; what it returns is the
// exit status.
func Main(run func(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	status := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(status)
}

// FlagSet returns command's flag set: its errors and its usage (synopsis,
// then every flag) go to stderr.
func FlagSet(command, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(command, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "%s\n\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// Parse parses args with fs, and refuses more than maxArgs positional
// arguments.
func Parse(fs *flag.FlagSet, args []string, maxArgs int) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > maxArgs {
		return UsageError(fs.Output(), fs.Name(), "unexpected arguments: %s", strings.Join(fs.Args()[maxArgs:], " "))
	}
	return nil
}

// Status is the exit status of a command whose command line was refused: 0
// when it asked for the usage (-h), 2 otherwise.
func Status(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return 2
}

// UsageError formats a usage error, prints it to stderr after the command's
// name (flag's own messages go there too), and returns it: the command then
// exits 2.
func UsageError(stderr io.Writer, command, format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	fmt.Fprintln(stderr, command+":", err)
	return err
}

// Address reports whether addr names a host the commands can listen on or
// be reached at: an IP address (IPv6 with or without brackets, as Compose's
// BIND may write it) or localhost.
func Address(addr string) bool { return addr == "localhost" || parseIP(addr) != nil }

// Loopback reports whether addr is localhost or a loopback address: only
// this machine reaches it.
func Loopback(addr string) bool {
	ip := parseIP(addr)
	return addr == "localhost" || ip != nil && ip.IsLoopback()
}

// MinToken is the shortest token a service reached beyond loopback takes:
// 16 bytes, which the docs' command (16 random bytes, as 32 hex digits)
// exceeds. A short token is a guessable one, and the network may guess.
const MinToken = 16

// ShortToken is why token, set by name, is too short for a service reached
// beyond loopback (reach), or nil: on loopback only this machine guesses.
func ShortToken(name, token, reach string) error {
	if token == "" || len(token) >= MinToken || Loopback(reach) {
		return nil
	}
	return fmt.Errorf("%s is %d bytes, and clients reach %s beyond loopback: want at least %d "+
		"(a random one: head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \\n')", name, len(token), reach, MinToken)
}

func parseIP(addr string) net.IP {
	return net.ParseIP(strings.TrimSuffix(strings.TrimPrefix(addr, "["), "]"))
}

// Probe is the healthcheck of an image that has no curl: one GET of url,
// within 3 s; it returns the exit status, 0 for a 200 and 1 otherwise, and
// says why on stderr.
func Probe(ctx context.Context, url string, stderr io.Writer) int {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		fmt.Fprintln(stderr, "probe:", err)
		return 1
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintln(stderr, "probe:", err)
		return 1
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		fmt.Fprintln(stderr, "probe:", url, res.Status)
		return 1
	}
	return 0
}
