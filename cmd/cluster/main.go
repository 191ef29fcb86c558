// Command cluster runs the local cluster (make up, make down, make status):
// three Redis nodes, the inventory replicas and nginx on this machine, with no
// Docker. Settings come from flags or, as the Makefile passes them, from the
// environment: LOCK, PORT, REPLICAS, WORK, RUN_DIR, PPROF, FAULTS, SENTINEL, STOCK,
// INVENTORY_REDIS_PASSWORD and INVENTORY_ADMIN_TOKEN. The replicas also read
// any other INVENTORY_* variable, as the service does. With the fault hooks on
// (INVENTORY_CHAOS) and no INVENTORY_ADMIN_TOKEN, up makes a random admin
// token, which the state file and RUN_DIR/admin-token (both 0600) keep.
//
//	go run ./cmd/cluster up|down|status
package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/locklab/locklab/internal/cli"
	"github.com/locklab/locklab/internal/cluster"
)

// verbs are what the command does.
var verbs = []string{"up", "down", "status", "clean"}

func main() { cli.Main(run) }

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	cfg, verb, err := parse(args, getenv, stderr)
	if err != nil {
		return cli.Status(err)
	}
	if verb == "clean" {
		if err := cluster.Clean(cfg); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		fmt.Fprintf(stderr, "cluster: removed what make up created in %s\n", cfg.Dir)
		return 0
	}
	if verb == "up" {
		c, err := cluster.Up(ctx, cfg)
		switch {
		case errors.Is(err, cluster.ErrAlreadyUp):
			fmt.Fprintf(stderr, "cluster: already up (run dir %s); 'make down' stops it\n", cfg.Dir)
			c.Status(stdout)
		case err != nil:
			fmt.Fprintln(stderr, err)
			return 1
		}
		return 0
	}
	c, err := cluster.Load(cfg.Dir)
	switch {
	case errors.Is(err, cluster.ErrNotUp):
		fmt.Fprintln(stderr, map[string]string{"down": "cluster: not up: nothing to stop", "status": "cluster: not up"}[verb])
		return 0
	case err != nil:
		fmt.Fprintln(stderr, err)
		return 1
	case verb == "status":
		c.Status(stdout)
		return 0
	}
	n, err := c.Down()
	fmt.Fprintf(stderr, "cluster: down: stopped %d processes (logs kept in %s)\n", n, cfg.Dir)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

func parse(args []string, getenv func(string) string, stderr io.Writer) (cluster.Config, string, error) {
	env := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	atoi := func(name, def string) int {
		n, _ := strconv.Atoi(env(name, def)) // a bad value fails the range checks below
		return n
	}
	root, err := os.Getwd()
	if err != nil {
		return cluster.Config{}, "", err
	}
	cfg := cluster.Config{Root: root, RedisPassword: getenv("INVENTORY_REDIS_PASSWORD"), AdminToken: getenv("INVENTORY_ADMIN_TOKEN"), Log: stderr}
	fs := cli.FlagSet("cluster", "Usage: go run ./cmd/cluster [flags] up|down|status|clean\n\nThe local cluster: three Redis nodes, the replicas, nginx. clean removes what up created (logs, state, binary), nothing else.", stderr)
	fs.StringVar(&cfg.Dir, "run-dir", env("RUN_DIR", root+"/.run"), "logs, binary and state file (env RUN_DIR)")
	fs.IntVar(&cfg.Port, "port", atoi("PORT", "80"), "nginx's port (env PORT)")
	fs.IntVar(&cfg.Replicas, "replicas", atoi("REPLICAS", "2"), "inventory replicas (env REPLICAS)")
	fs.StringVar(&cfg.Lock, "lock", env("LOCK", "v1"), "the replicas' -lock (env LOCK)")
	fs.StringVar(&cfg.Work, "work", env("WORK", "1ms"), "the replicas' -work: business time between reading and writing the stock (env WORK)")
	fs.Int64Var(&cfg.Stock, "stock", int64(atoi("STOCK", "100")), "stock seeded once, when the key is not set (env STOCK)")
	fs.BoolVar(&cfg.Pprof, "pprof", env("PPROF", "") != "", "each replica serves Go's profiler on 127.0.0.1:6060, :6061, ... (env PPROF=1)")
	fs.BoolVar(&cfg.Faults, "faults", env("FAULTS", "") != "", "a toxiproxy between each replica and each Redis node, for the scenarios' network faults (env FAULTS=1; make scenarios sets it)")
	fs.BoolVar(&cfg.Sentinel, "sentinel", env("SENTINEL", "") != "", "two standbys of the stock's Redis node and three Redis Sentinels watching it; the replicas follow the primary they name (-sentinel), and Sentinel fails it over (env SENTINEL=1; make scenarios' second pass sets it)")
	if err := cli.Parse(fs, args, 1); err != nil {
		return cfg, "", err
	}
	if !slices.Contains(verbs, fs.Arg(0)) {
		return cfg, "", cli.UsageError(stderr, "cluster", "want one of %s; got %q", strings.Join(verbs, ", "), fs.Args())
	}
	if cfg.Replicas < 1 || cfg.Port < 1 || cfg.Port > 65535 || cfg.Stock < 0 {
		return cfg, "", cli.UsageError(stderr, "cluster", "want REPLICAS >= 1, PORT 1-65535 and STOCK >= 0 (got %d, %d, %d)", cfg.Replicas, cfg.Port, cfg.Stock)
	}
	// The fault hooks need a token; a fixed one would be everyone's who
	// reads the Makefile: a new one each up (128 random bits).
	if chaos, _ := strconv.ParseBool(getenv("INVENTORY_CHAOS")); chaos && cfg.AdminToken == "" && fs.Arg(0) == "up" {
		cfg.AdminToken = rand.Text()
	}
	return cfg, fs.Arg(0), nil
}
