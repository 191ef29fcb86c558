package scenario

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/client"
	"github.com/locklab/locklab/internal/probe"
	"github.com/locklab/locklab/internal/redisconn"
	"github.com/redis/go-redis/v9"
)

// The Compose stack's services, as docker-compose.yml names them: the
// processes the scenarios act on are containers, found by Compose's labels.
// The replicas are the inventory service's containers, however many it
// runs: the scenarios take the first two.
const composeReplicas = "inventory"

var (
	composeRedis = []string{"redis1", "redis2", "redis3"} // the stock's node first
	composeEtcd  = []string{"etcd1", "etcd2", "etcd3"}
	composeZK    = []string{"zk1", "zk2", "zk3"}
)

// composeDB is the db locks' MariaDB service.
const composeDB = "mariadb"

// composeServices are the services of one container the scenarios act on.
var composeServices = slices.Concat(composeRedis, composeEtcd, composeZK, []string{composeDB})

// Compose is the Env of the Compose project whose replicas reported h on
// /healthz, behind nginx at saleURL, started with
// deploy/docker-compose.scenarios.yml: that file turns the fault hooks on
// and publishes each Redis node, etcd and ZooKeeper member and the database
// on a fixed loopback port, which the scenarios reach them by (a container
// that restarts keeps its port). The replicas, any number of one service,
// have no port of their own: each is reached through nginx's route to it,
// /replica/NAME/, NAME its hostname, which a container keeps when it starts
// again (its address it may not). The processes are its containers:
// frozen with `docker pause`, killed with `docker kill`, started again with
// `docker start`. It has no fault proxies, no standby and no clock to move:
// the scenarios that need them are the local cluster's. open opens the lock
// services' clients (stores.Open).
func Compose(ctx context.Context, open Opener, project, saleURL string, h api.Health, adminToken, redisPassword string) (Env, error) {
	if h.Settings["chaos"] != "true" {
		return Env{}, errors.New("scenario: the replicas run without -chaos: start the stack with deploy/docker-compose.scenarios.yml (make scenarios-compose does)")
	}
	e, err := NewEnv(h, adminToken)
	if err != nil {
		return Env{}, err
	}
	p := composeProcs{project: project, ready: map[string]func(context.Context) error{}, replicas: map[string]string{}}
	published := func(service, port string) (string, error) {
		id, err := p.container(ctx, service)
		if err != nil {
			return "", err
		}
		out, err := docker(ctx, "port", id, port+"/tcp")
		addr, _, _ := strings.Cut(out, "\n")
		if err != nil || addr == "" {
			return "", fmt.Errorf("scenario: %s publishes no port for %s (start it with deploy/docker-compose.scenarios.yml): %w", service, port, err)
		}
		return addr, nil
	}
	if redisPassword == "" {
		if redisPassword, err = p.redisPassword(ctx); err != nil {
			return Env{}, err
		}
	}
	e.StockNode, e.SpareNodes, e.Procs = composeRedis[0], composeRedis[1:], p
	replicas, err := p.findReplicas(ctx)
	if err != nil {
		return Env{}, err
	}
	svc, err := client.ForSale(saleURL, adminToken)
	if err != nil {
		return Env{}, err
	}
	for i, name := range replicas[:2] {
		r := svc.Replica(name)
		e.Replicas[i], p.ready[name] = Replica{Name: name, URL: r.URL("sale")}, r.Ready
	}
	var clients []*redis.Client
	for i, s := range composeRedis {
		addr, err := published(s, "6379")
		if err != nil {
			return Env{}, errors.Join(err, closeAll(clients))
		}
		c := redisconn.New(addr, redisPassword)
		clients, p.ready[s] = append(clients, c), func(ctx context.Context) error { return c.Ping(ctx).Err() }
		if i == 0 {
			e.StockAddr = addr
		}
	}
	e.Redis, e.SpareRedis = clients[0], clients[1:]
	services := Services{Redis: e.Redis, LockKey: h.LockKey}
	for _, s := range composeEtcd {
		addr, err := published(s, "2379")
		if err != nil {
			return Env{}, errors.Join(err, e.Close())
		}
		e.EtcdMembers, services.Etcd = append(e.EtcdMembers, Member{Name: s, Addr: addr}), append(services.Etcd, addr)
	}
	for _, s := range composeZK {
		addr, err := published(s, "2181")
		if err != nil {
			return Env{}, errors.Join(err, e.Close())
		}
		e.ZKMembers, services.ZK = append(e.ZKMembers, Member{Name: s, Addr: addr}), append(services.ZK, addr)
		p.ready[s] = func(context.Context) error {
			_, err := probe.ZKMode(addr, time.Second)
			return err
		}
	}
	if services.DBAddr, err = published(composeDB, "3306"); err != nil {
		return Env{}, errors.Join(err, e.Close())
	}
	services.DBPassword = redisPassword // the replicas' account: the Compose file gives it the Redis password
	if e.Stores, err = open(services); err != nil {
		return Env{}, errors.Join(err, e.Close())
	}
	for _, m := range e.EtcdMembers {
		p.ready[m.Name] = func(ctx context.Context) error {
			_, _, err := e.Stores.EtcdStatus(ctx, m.Addr)
			return err
		}
	}
	e.DBNode, p.ready[composeDB] = composeDB, e.Stores.PingDB
	return e, nil
}

func closeAll(clients []*redis.Client) error {
	var errs []error
	for _, c := range clients {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// composeProcs controls the project's containers with the docker CLI.
type composeProcs struct {
	project string
	// ready says whether a service answers, through its published port:
	// what a restart waits for (Compose's health checks run once a second,
	// too slow for a scenario that restarts a node inside one lease).
	ready map[string]func(context.Context) error
	// replicas are the replicas' containers by the replicas' names.
	replicas map[string]string
}

// container is the id of the replica so named (findReplicas), or of the
// one container of the service so named.
func (p composeProcs) container(ctx context.Context, name string) (string, error) {
	if id, ok := p.replicas[name]; ok {
		return id, nil
	}
	if !slices.Contains(composeServices, name) {
		return "", fmt.Errorf("scenario: %s is neither a replica nor a service of the Compose project %s", name, p.project)
	}
	ids, err := p.containers(ctx, name)
	if err != nil {
		return "", err
	}
	if len(ids) != 1 {
		return "", fmt.Errorf("scenario: Compose project %s has %d containers of %s, want 1", p.project, len(ids), name)
	}
	return ids[0], nil
}

// composePassword is where docker-compose.yml's services read the Redis
// password (its secrets volume): REDIS_PASSWORD, or the one made at the
// first up.
const composePassword = "/run/locklab/redis-password"

// redisPassword is the project's Redis password, read from the stock's
// node's container.
func (p composeProcs) redisPassword(ctx context.Context) (string, error) {
	id, err := p.container(ctx, composeRedis[0])
	if err != nil {
		return "", err
	}
	out, err := docker(ctx, "exec", id, "cat", composePassword)
	pw := strings.TrimRight(out, "\r\n")
	if err == nil && pw == "" {
		err = errors.New("empty")
	}
	if err != nil {
		return "", fmt.Errorf("scenario: the Redis password of Compose project %s (%s in %s; or set INVENTORY_REDIS_PASSWORD): %w", p.project, composePassword, composeRedis[0], err)
	}
	return pw, nil
}

// containers are the ids of service's containers, running or not, but the
// one-off ones (docker compose run).
func (p composeProcs) containers(ctx context.Context, service string) ([]string, error) {
	out, err := docker(ctx, "ps", "-aq", "--filter", "label=com.docker.compose.project="+p.project,
		"--filter", "label=com.docker.compose.service="+service, "--filter", "label=com.docker.compose.oneoff=False")
	return strings.Fields(out), err
}

// findReplicas names the replicas, at least two: the inventory service's
// containers' hostnames (the name each gives in its replies), in the order
// Compose numbered them, and notes each one's container.
func (p composeProcs) findReplicas(ctx context.Context) ([]string, error) {
	ids, err := p.containers(ctx, composeReplicas)
	if err != nil {
		return nil, err
	}
	type replica struct {
		n        int
		name, id string
	}
	var found []replica
	for _, id := range ids {
		got, err := docker(ctx, "inspect", "-f", `{{index .Config.Labels "com.docker.compose.container-number"}} {{.Config.Hostname}}`, id)
		if err != nil {
			return nil, err
		}
		n, name, _ := strings.Cut(strings.TrimSpace(got), " ")
		num, err := strconv.Atoi(n)
		if err != nil || name == "" {
			return nil, fmt.Errorf("scenario: container %s: no number or hostname (%q)", id, got)
		}
		found = append(found, replica{num, name, id})
	}
	if len(found) < 2 {
		return nil, fmt.Errorf("scenario: Compose project %s runs %d replicas (service %s): the scenarios want two or more", p.project, len(found), composeReplicas)
	}
	slices.SortFunc(found, func(a, b replica) int { return a.n - b.n })
	names := make([]string, len(found))
	for i, r := range found {
		names[i], p.replicas[r.name] = r.name, r.id
	}
	return names, nil
}

// Freeze pauses the container (docker pause: every process in it frozen)
// or, with frozen false, resumes it: unpauses a paused container, or sends
// SIGCONT to one whose service stopped itself (the stop_before_write hook;
// the replicas run under Compose's init, which passes the signal on).
func (p composeProcs) Freeze(name string, frozen bool) error {
	ctx := context.Background()
	id, err := p.container(ctx, name)
	if err != nil {
		return err
	}
	if frozen {
		_, err = docker(ctx, "pause", id)
		return err
	}
	paused, err := docker(ctx, "inspect", "-f", "{{.State.Paused}}", id)
	if err != nil {
		return err
	}
	if strings.TrimSpace(paused) == "true" {
		_, err = docker(ctx, "unpause", id)
		return err
	}
	_, err = docker(ctx, "kill", "--signal", "CONT", id)
	return err
}

// Stopped reports whether the container is paused, or its service's process
// stopped itself (state T in `docker top`).
func (p composeProcs) Stopped(name string) (bool, error) {
	ctx := context.Background()
	id, err := p.container(ctx, name)
	if err != nil {
		return false, err
	}
	paused, err := docker(ctx, "inspect", "-f", "{{.State.Paused}}", id)
	if err != nil || strings.TrimSpace(paused) == "true" {
		return err == nil, err
	}
	top, err := docker(ctx, "top", id, "-o", "pid,stat,comm") // docker top wants the pid
	if err != nil {
		return false, err
	}
	for _, line := range strings.Split(top, "\n")[1:] {
		if f := strings.Fields(line); len(f) == 3 && f[2] != "docker-init" && strings.HasPrefix(f[1], "T") {
			return true, nil
		}
	}
	return false, nil
}

// Kill kills the container (docker kill: SIGKILL, as a crash would) and
// returns what starts it again (docker start: a Redis node comes back empty,
// an etcd member with its data) and waits until it answers.
func (p composeProcs) Kill(name string) (restart func(context.Context) error, err error) {
	id, err := p.container(context.Background(), name)
	if err != nil {
		return nil, err
	}
	if p.ready[name] == nil {
		return nil, fmt.Errorf("scenario: no way to tell when %s answers again", name)
	}
	if _, err := docker(context.Background(), "kill", id); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		if _, err := docker(ctx, "start", id); err != nil {
			return err
		}
		var last error
		err := waitEvery(ctx, 30*time.Second, 10*time.Millisecond, func() (bool, error) {
			rctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			last = p.ready[name](rctx)
			return last == nil, nil // observable state: it answers
		})
		if err != nil && ctx.Err() == nil {
			return fmt.Errorf("scenario: %s not answering 30 s after docker start: %w", name, last)
		}
		return err
	}, nil
}

// KillWith needs the restart's arguments, which a container's command fixes.
func (p composeProcs) KillWith(name string, extra ...string) (func(context.Context) error, error) {
	if len(extra) > 0 {
		return nil, fmt.Errorf("scenario: on Compose a container restarts with its own command, not with %v", extra)
	}
	return p.Kill(name)
}

// JumpClock needs the local cluster's clock shim.
func (composeProcs) JumpClock(name string, _ time.Duration) error {
	return fmt.Errorf("scenario: %s's clock cannot move on Compose (the clock shim is the local cluster's)", name)
}

// docker runs the docker CLI and returns its output.
func docker(ctx context.Context, args ...string) (string, error) {
	var out, errb bytes.Buffer
	cmd := exec.CommandContext(ctx, "docker", args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("scenario: docker %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}
