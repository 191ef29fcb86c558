// Command lab serves the lab: the page at / where a learner runs the load
// test against the stack and watches each lock hold, break and get fixed.
// It runs beside the stack, behind the same nginx (make up starts it; nginx
// routes / and /lab/ to it).
package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/locklab/locklab/internal/cli"
	"github.com/locklab/locklab/internal/cluster"
	"github.com/locklab/locklab/internal/lab"
	"github.com/locklab/locklab/internal/loadtest"
	"github.com/locklab/locklab/internal/origin"
	"github.com/locklab/locklab/internal/redisconn"
	"github.com/locklab/locklab/internal/scenario"
	"github.com/locklab/locklab/internal/scenario/stores"
)

func main() { cli.Main(run) }

// The secrets come from the environment (or a file), never a flag: a
// command line is readable by every user of the machine.
const (
	adminTokenEnv = "LAB_ADMIN_TOKEN" // the service's admin token
	tokenEnv      = "LAB_TOKEN"       // the lab's own, required beyond loopback
)

func run(ctx context.Context, args []string, getenv func(string) string, _, stderr io.Writer) int {
	fs := cli.FlagSet("lab", "lab [flags]: the lab's page and API, in front of the stack behind nginx.\n\n"+
		"Secrets by environment: "+adminTokenEnv+" (the service's admin token: PUT /stock, GET /history, the fault hooks) and "+
		tokenEnv+" (the lab's own: required to start or stop a run when it listens beyond loopback).", stderr)
	listen := fs.String("listen", "127.0.0.1:8070", "address to serve on; beyond loopback it needs "+tokenEnv+" (or "+adminTokenEnv+")")
	published := fs.String("published", "", "the address browsers reach the lab through, when that is not -listen's: the Compose stack's BIND, where nginx publishes port 80 (empty: -listen's)")
	probe := fs.String("probe", "", "GET this URL, exit 0 on a 200 and 1 otherwise, and do nothing else (the container's healthcheck)")
	saleURL := fs.String("url", "http://127.0.0.1/sale", "the stack's /sale through nginx")
	replicas := fs.String("replicas", "inventory-1,inventory-2", "the replicas' names (nginx routes /replica/NAME/ to each), or dns:HOST:PORT: every address HOST has in DNS, each named by its /healthz, looked up as the lab goes (a Compose or Swarm service of any size)")
	redisNodes := fs.String("redis", "", "Redis nodes (host:port, comma-separated) whose health the page shows")
	etcdMembers := fs.String("etcd", "", "etcd members (host:port, comma-separated) whose health the page shows")
	zkMembers := fs.String("zk", "", "ZooKeeper members (host:port, comma-separated) whose health the page shows")
	dbServers := fs.String("db", "", "MariaDB servers (host:port, comma-separated) whose health the page shows")
	hosts := fs.String("hosts", "", "Host names the lab answers to beside localhost, *.localhost and IP addresses (comma-separated): any other is refused (DNS rebinding)")
	adminFile := fs.String("admin-token-file", "", "read the service's admin token from this file instead of "+adminTokenEnv)
	runDir := fs.String("run-dir", "", "the local cluster's run directory (its state file: the processes and nodes the scenario cells fault; needs replicas with -chaos); empty: the page runs no cells")
	if err := cli.Parse(fs, args, 0); err != nil {
		return cli.Status(err)
	}
	if *probe != "" {
		return cli.Probe(ctx, *probe, stderr)
	}
	hostNames, err := origin.ParseNames(*hosts)
	if err != nil {
		return usage(stderr, "-hosts: %v", err)
	}
	log := slog.New(slog.NewJSONHandler(stderr, nil)).With("process", "lab")
	cfg := lab.Config{SaleURL: *saleURL, AdminToken: getenv(adminTokenEnv), Token: getenv(tokenEnv),
		Hosts: hostNames, Log: log}
	if *adminFile != "" {
		raw, err := os.ReadFile(*adminFile)
		if err != nil {
			return usage(stderr, "-admin-token-file: %v", err)
		}
		cfg.AdminToken = strings.TrimSpace(string(raw))
	}
	for _, kind := range []struct {
		list, kind string
	}{{*redisNodes, "redis"}, {*etcdMembers, "etcd"}, {*zkMembers, "zookeeper"}, {*dbServers, "mariadb"}} {
		addrs, err := redisconn.ParseList(kind.list)
		if kind.list != "" && err != nil {
			return usage(stderr, "-%s %q: %v", kind.kind, kind.list, err)
		}
		for i, a := range addrs {
			cfg.Nodes = append(cfg.Nodes, lab.Node{Name: fmt.Sprintf("%s-%d", kind.kind, i+1), Kind: kind.kind, Addr: a})
		}
	}
	if *runDir != "" {
		cfg.Cells = localCells(*runDir, cfg.SaleURL, cfg.AdminToken)
		cfg.FixByHand = localFix(*runDir)
		// The lessons' frozen replica: the local cluster's processes, which
		// the lab may signal (a Compose lab's container may not: no -run-dir).
		cfg.Freezer = func(context.Context) (lab.Freezer, error) { return cluster.Load(*runDir) }
	}
	if from, ok := strings.CutPrefix(*replicas, "dns:"); ok {
		if err := lab.CheckReplicasFrom(from); err != nil {
			return usage(stderr, "-replicas dns:%v", err)
		}
		cfg.ReplicasFrom = from
	} else if cfg.Replicas = split(*replicas); len(cfg.Replicas) == 0 {
		return usage(stderr, "-replicas: want at least one name, or dns:HOST:PORT")
	}
	host, _, err := net.SplitHostPort(*listen)
	if err != nil {
		return usage(stderr, "-listen %q: %v", *listen, err)
	}
	reach := cmp.Or(*published, host)
	if *published != "" && !cli.Address(*published) {
		return usage(stderr, "-published %q: want an IP address (127.0.0.1, 0.0.0.0, ::1) or localhost", *published)
	}
	// Beyond loopback, starting a run is the admin's: the lab's own token,
	// or else the service's admin token, which the page then asks for.
	if !cli.Loopback(reach) {
		cfg.Token = cmp.Or(cfg.Token, cfg.AdminToken)
		if cfg.Token == "" {
			return usage(stderr, "the lab is reached beyond loopback (%s): set %s or %s (ADMIN_TOKEN in the Compose stack), the token the page asks for before it starts or stops a run", reach, tokenEnv, adminTokenEnv)
		}
		name := tokenEnv
		if getenv(tokenEnv) == "" {
			name = adminTokenEnv + " (ADMIN_TOKEN in the Compose stack)"
		}
		if err := cli.ShortToken(name, cfg.Token, reach); err != nil {
			return usage(stderr, "%v", err)
		}
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Error("cannot listen", "addr", *listen, "err", err)
		return 1
	}
	l := lab.New(cfg)
	srv := &http.Server{Handler: l.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		// A run in progress is stopped first: its sales end and release
		// their locks, and nothing it changed is left behind.
		l.Close()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	log.Info("serving the lab", "addr", ln.Addr().String(), "url", cfg.SaleURL, "replicas", cmp.Or(cfg.ReplicasFrom, strings.Join(cfg.Replicas, ",")))
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Error("serving", "err", err)
		return 1
	}
	return 0
}

// localCells makes the scenario cells' Env of the local cluster in dir,
// whose nginx serves saleURL.
func localCells(dir, saleURL, adminToken string) func(context.Context) (scenario.Env, error) {
	return func(ctx context.Context) (scenario.Env, error) {
		c, err := cluster.Load(dir)
		if err != nil {
			return scenario.Env{}, fmt.Errorf("the scenario cells need the local cluster's state: %w", err)
		}
		h, err := loadtest.Config{URL: saleURL}.Health(ctx)
		if err != nil {
			return scenario.Env{}, fmt.Errorf("cannot read the replicas' settings: %w", err)
		}
		env, err := stores.Local(c, h, cmp.Or(adminToken, c.State.AdminToken))
		env.URL = saleURL
		return env, err
	}
}

// localFix says how to put right by hand, on the local cluster in dir, a
// fault a cell or the nemesis could not undo. A fresh cluster always does;
// a frozen process and the fault proxies have a lighter fix.
func localFix(dir string) func(*scenario.NotUndone) string {
	const fresh = "make down, then make lab: a fresh cluster (the logs stay in the run directory)"
	return func(n *scenario.NotUndone) string {
		switch n.Left {
		case scenario.LeftFrozen:
			return "make status shows " + n.Node + "'s pid: kill -CONT <pid> resumes it; if it shows it down, " + fresh
		case scenario.LeftCutOff, scenario.LeftDelayed, scenario.LeftDisconnected:
			api := "127.0.0.1:8474"
			if c, err := cluster.Load(dir); err == nil && c.State.Toxiproxy != nil {
				api = c.State.Toxiproxy.Addr
			}
			return "curl -X POST http://" + api + "/reset enables every fault proxy and removes every toxic; or " + fresh
		}
		return fresh
	}
}

func split(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func usage(stderr io.Writer, format string, args ...any) int {
	return cli.Status(cli.UsageError(stderr, "lab", format, args...))
}
