package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/cli"
	"github.com/locklab/locklab/internal/locks/handoff"
	"github.com/locklab/locklab/internal/origin"
	"github.com/locklab/locklab/internal/redisconn"
	"github.com/locklab/locklab/internal/server"
	"github.com/locklab/locklab/internal/versions"
)

// config is everything the flags set.
type config struct {
	Port           int
	Bind           string
	Published      string
	AdminOpen      bool
	MaxInFlight    int
	Name           string
	Lock           string
	Redis          string
	Sentinel       []string
	SentinelMaster string
	RedisPassword  string
	RedisPassFile  string
	DBPassFile     string
	Redlock        []string
	Etcd           []string
	DB             string
	ZK             []string
	Key            string
	LockKey        string
	TTL            time.Duration
	Retry          time.Duration
	Claim          time.Duration
	RedlockRetry   time.Duration
	Wait           string
	Work           time.Duration
	AcquireTimeout time.Duration
	Grace          time.Duration
	LockOverride   bool
	AdminToken     string
	LogLevel       slog.Level
	Probe          string
	ProbeStay      bool
	Fence          bool
	ReplicaAck     int
	Chaos          bool
	Pprof          string
	History        int
	// Hosts are the Host names the replica answers to beside localhost, IP
	// addresses, -name and host, its machine's name.
	Hosts []string
	host  string
}

// envPrefix prefixes the environment variable of every flag: -acquire-timeout
// is also INVENTORY_ACQUIRE_TIMEOUT. A flag on the command line wins.
const envPrefix = "INVENTORY_"

func envName(flagName string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// parseConfig reads args and, for flags not given there, getenv. Errors are
// usage errors (exit status 2); the usage text has already gone to stderr.
func parseConfig(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	host, _ := os.Hostname()
	cfg := config{host: host}
	cfg.Redlock, _ = redisconn.ParseList(api.DefaultRedlock)
	cfg.Etcd, _ = redisconn.ParseList(api.DefaultEtcd)
	fs := cli.FlagSet("inventory", "Usage: inventory [flags]\n\nSells one unit of stock per POST /sale under the chosen lock version.\n"+
		"Every flag can also be set by its environment variable (-acquire-timeout: "+envName("acquire-timeout")+"); a flag wins.", stderr)
	fs.IntVar(&cfg.Port, "port", api.DefaultPort, "HTTP port")
	fs.StringVar(&cfg.Bind, "bind", "127.0.0.1", "address to listen on: loopback by default; 0.0.0.0 (every interface) for a container, or a host behind a firewall")
	fs.StringVar(&cfg.Published, "published", "", "the address clients reach this replica through, when that is not -bind: the Compose stack's BIND, where nginx publishes port 80 (empty: -bind). Beyond loopback, ?lock=, ?wait=, PUT /stock, GET /history and the fault hooks need -admin-token")
	fs.BoolVar(&cfg.AdminOpen, "admin-open", false, "allow an empty -admin-token where clients reach the replica beyond loopback: ?lock=, PUT /stock and GET /history open to whoever reaches it")
	fs.IntVar(&cfg.MaxInFlight, "max-in-flight", server.DefaultMaxInFlight, "most sales this replica runs at once; one more is answered 503 busy with Retry-After")
	fs.StringVar(&cfg.Name, "name", host, "replica name, reported in every reply")
	fs.StringVar(&cfg.Lock, "lock", "v1", "lock version: one of "+strings.Join(versions.Names(), " "))
	fs.StringVar(&cfg.Redis, "redis", "localhost:6379", "Redis for the stock and the single-node locks (host:port)")
	fs.Func("sentinel", "comma-separated Redis Sentinels (host:port): the stock and the single-node locks go to the primary they name (-sentinel-master), and follow a failover; -redis is then not used (empty: -redis)", func(s string) error {
		sentinels, err := redisconn.ParseList(s)
		cfg.Sentinel = sentinels
		return err
	})
	fs.StringVar(&cfg.SentinelMaster, "sentinel-master", "locklab", "with -sentinel: the name the sentinels monitor the primary by")
	fs.StringVar(&cfg.RedisPassword, "redis-password", "", "password for every Redis node; prefer "+envName("redis-password")+": a flag's value is on the command line, which every user of the machine reads")
	fs.StringVar(&cfg.RedisPassFile, "redis-password-file", "", "read the Redis password from this file when -redis-password is empty: a Docker secret, the Compose stack's generated password")
	fs.Func("redlock", "comma-separated independent Redis nodes for redlock (default "+api.DefaultRedlock+")", func(s string) error {
		nodes, err := redisconn.ParseList(s)
		cfg.Redlock = nodes
		return err
	})
	fs.Func("etcd", "comma-separated members of the etcd cluster for -lock etcd (default "+api.DefaultEtcd+")", func(s string) error {
		members, err := redisconn.ParseList(s)
		cfg.Etcd = members
		return err
	})
	fs.Func("zk", "comma-separated members of the ZooKeeper ensemble for -lock zk, e.g. "+api.DefaultZK+" (empty: -lock zk answers 503); the session's timeout is -ttl, at most 60 s", func(s string) error {
		members, err := redisconn.ParseList(s)
		cfg.ZK = members
		return err
	})
	fs.StringVar(&cfg.DB, "db", "", "MariaDB (or MySQL) for -lock db, as a data source name: user:password@tcp(host:port)/database (empty: -lock db answers 503); prefer "+envName("db")+": the password is in it")
	fs.StringVar(&cfg.DBPassFile, "db-password-file", "", "read the password of -db's user from this file when -db has none: a Docker secret, the Compose stack's generated password")
	fs.StringVar(&cfg.Key, "key", api.DefaultStockKey, "stock key")
	fs.StringVar(&cfg.LockKey, "lock-key", api.DefaultLockKey, "lock key")
	fs.DurationVar(&cfg.TTL, "ttl", 20*time.Second, "lock lease (v4 and later); etcd's session lease in whole seconds (rounded up, at least 1 s); zk's session timeout (at most 60 s, the ensemble's bound)")
	fs.DurationVar(&cfg.Retry, "retry", 20*time.Millisecond, "mean wait between lock attempts (jittered to 0.5-1.5x)")
	fs.DurationVar(&cfg.RedlockRetry, "redlock-retry", 100*time.Millisecond,
		"mean wait between redlock attempts: each one costs a round trip to every node, so it polls less often (redsync's default is 50-250ms)")
	fs.StringVar(&cfg.Wait, "wait", "poll", "how a waiter waits for a taken lock (v3-v8): poll (try every -retry, the tutorial's way), notify (queue; the release wakes the first waiter, who tries, as Redisson's fair lock does) or handoff (queue; the release hands the lock to the first waiter, as Go's sync.Mutex does when starving)")
	fs.DurationVar(&cfg.Claim, "claim", handoff.DefaultClaim, "with -wait notify or handoff: how long a waiter woken for the lock, or handed it, has to take it; past that it is taken for dead (its replica killed, its client gone) and the next waiter is served")
	fs.DurationVar(&cfg.Work, "work", 0, "simulated business time between reading and writing the stock")
	fs.DurationVar(&cfg.AcquireTimeout, "acquire-timeout", 10*time.Second, "longest wait for the lock before answering 503")
	fs.DurationVar(&cfg.Grace, "grace", 0, "on SIGTERM, how long the sales holding the lock get to finish and answer (0: the longest hold, -work or a chaos hold, plus 8s for Redis and the release); past it their connections close, but each still writes or not and releases its lock before Redis is closed. Set it below an orchestrator's kill timeout (Compose's stop_grace_period)")
	fs.BoolVar(&cfg.LockOverride, "lock-override", false, "let /sale?lock=NAME choose the version per request")
	fs.StringVar(&cfg.AdminToken, "admin-token", "", "bearer token required by PUT /stock, GET /history and the fault hooks (empty: open, allowed only on a loopback -bind or with -admin-open)")
	fs.BoolVar(&cfg.Fence, "fence", false, "fencing tokens: v3-v8, redlock and etcd hand out a token per acquisition, and the stock refuses a write with an older token than the last it accepted")
	fs.IntVar(&cfg.ReplicaAck, "replica-ack", 0, "the single-node locks (v3-v8) wait after each acquisition, and every sale after its stock write, until this many replicas of -redis acknowledge it (Redis WAIT, 500 ms at most): a lock not acknowledged is given up, a write not acknowledged answers 503 indeterminate, never sold, so a failover can lose neither a granted lock nor a confirmed sale; 0: no wait (Redis's asynchronous replication)")
	fs.BoolVar(&cfg.Chaos, "chaos", false, "enable the fault hooks on /sale (hold, release_pause, nested, fence, stop_before_write, replica_ack, lease, off) for the admin token; needs -admin-token")
	fs.StringVar(&cfg.Pprof, "pprof", "", "serve Go's profiler (net/http/pprof) on this address, e.g. localhost:6060 (empty: off); a separate listener, never behind nginx")
	fs.IntVar(&cfg.History, "history", 5000, "sales each replica remembers for GET /history (admin), the checker's raw material; 0: none")
	fs.StringVar(&cfg.Probe, "probe", "", "GET this URL, exit 0 on a 200 and 1 otherwise, and do nothing else (a container healthcheck with no curl)")
	fs.BoolVar(&cfg.ProbeStay, "probe-stay", false, "with -probe: after a 200, stay up, idle, until stopped (a Compose service that up -d --wait finds running)")
	fs.Func("hosts", "comma-separated Host names the replica answers to beside localhost, IP addresses, -name and the machine's name (Compose: nginx, whose name the load test's container sends): any other Host is refused, 421 (DNS rebinding)", func(s string) error {
		names, err := origin.ParseNames(s)
		cfg.Hosts = names
		return err
	})
	fs.TextVar(&cfg.LogLevel, "log-level", slog.LevelInfo, "log level: debug, info, warn or error")

	// Environment first, so the command line overrides it.
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		if v := getenv(envName(f.Name)); v != "" && envErr == nil {
			if err := fs.Set(f.Name, v); err != nil {
				envErr = fmt.Errorf("%s=%q: %w", envName(f.Name), v, err)
			}
		}
	})
	if envErr != nil {
		fmt.Fprintln(stderr, envErr)
		return cfg, envErr
	}
	if err := cli.Parse(fs, args, 0); err != nil {
		return cfg, err
	}
	if err := cfg.validate(); err != nil {
		return cfg, cli.UsageError(stderr, "inventory", "%s", err)
	}
	if err := cfg.readPasswords(); err != nil {
		return cfg, cli.UsageError(stderr, "inventory", "%s", err)
	}
	return cfg, nil
}

// readPasswords fills the passwords not given from their files. After
// validate: a command line refused for what it says is refused for that,
// whether its files are there or not.
func (c *config) readPasswords() error {
	if c.RedisPassword == "" && c.RedisPassFile != "" {
		pw, err := readPassword(c.RedisPassFile)
		if err != nil {
			return fmt.Errorf("-redis-password-file: %w", err)
		}
		c.RedisPassword = pw
	}
	if c.DB == "" || c.DBPassFile == "" {
		return nil
	}
	dsn, err := mysql.ParseDSN(c.DB)
	if err != nil || dsn.Passwd != "" {
		return err
	}
	if dsn.Passwd, err = readPassword(c.DBPassFile); err != nil {
		return fmt.Errorf("-db-password-file: %w", err)
	}
	c.DB = dsn.FormatDSN()
	return nil
}

// readPassword is the password in the file at path, its line end dropped.
func readPassword(path string) (string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	pw := strings.TrimRight(string(raw), "\r\n")
	if pw == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return pw, nil
}

// redis is the stock's node as the logs and errors name it: -redis, or the
// primary the sentinels name.
func (c config) redis() string {
	if len(c.Sentinel) > 0 {
		return "sentinel " + c.SentinelMaster + "@" + strings.Join(c.Sentinel, ",")
	}
	return c.Redis
}

// reach is the address clients reach the replica through: -published, or
// else -bind.
func (c config) reach() string { return cmp.Or(c.Published, c.Bind) }

// loopback reports whether only this machine reaches the service.
func (c config) loopback() bool { return cli.Loopback(c.reach()) }

func (c config) validate() error {
	switch {
	case !slices.Contains(versions.Names(), c.Lock):
		return fmt.Errorf("-lock %q: want one of %s", c.Lock, strings.Join(versions.Names(), " "))
	case !slices.Contains(versions.Waits, c.Wait):
		return fmt.Errorf("-wait %q: want one of %s", c.Wait, strings.Join(versions.Waits, " "))
	case c.Port < 1 || c.Port > 65535:
		return fmt.Errorf("-port %d: want 1-65535", c.Port)
	case c.TTL <= 0:
		return fmt.Errorf("-ttl %s: want > 0", c.TTL)
	case c.Retry <= 0:
		return fmt.Errorf("-retry %s: want > 0", c.Retry)
	case c.Claim <= 0 || c.Claim >= c.TTL:
		return fmt.Errorf("-claim %s: want > 0 and shorter than -ttl %s", c.Claim, c.TTL)
	case c.RedlockRetry <= 0:
		return fmt.Errorf("-redlock-retry %s: want > 0", c.RedlockRetry)
	case c.Work < 0:
		return fmt.Errorf("-work %s: want >= 0", c.Work)
	case c.AcquireTimeout <= 0:
		return fmt.Errorf("-acquire-timeout %s: want > 0", c.AcquireTimeout)
	case c.Grace < 0:
		return fmt.Errorf("-grace %s: want >= 0 (0: the longest hold)", c.Grace)
	case c.Chaos && c.AdminToken == "":
		return errors.New("-chaos needs -admin-token: the fault hooks must not be open to every client")
	case c.ReplicaAck < 0 || c.ReplicaAck > 5:
		return fmt.Errorf("-replica-ack %d: want 0-5", c.ReplicaAck)
	case c.History < 0:
		return fmt.Errorf("-history %d: want >= 0", c.History)
	case c.Name == "":
		return errors.New("-name: want a replica name")
	case c.DB != "" && dsnErr(c.DB) != nil:
		return fmt.Errorf("-db: %w (want user:password@tcp(host:port)/database)", dsnErr(c.DB))
	case net.ParseIP(c.Bind) == nil && c.Bind != "localhost":
		return fmt.Errorf("-bind %q: want an IP address (127.0.0.1, ::1, 0.0.0.0) or localhost", c.Bind)
	case c.Published != "" && !cli.Address(c.Published):
		return fmt.Errorf("-published %q: want an IP address (127.0.0.1, 0.0.0.0, ::1) or localhost", c.Published)
	case c.AdminToken == "" && c.Published != "" && !c.loopback() && !c.AdminOpen:
		return fmt.Errorf("the stack publishes its port on %s (BIND), beyond this machine, and no admin token is set: "+
			"set ADMIN_TOKEN (-admin-token), which ?lock=, PUT /stock and GET /history then need, or publish on 127.0.0.1", c.Published)
	case c.AdminToken == "" && !c.loopback() && !c.AdminOpen:
		return fmt.Errorf("-bind %s with no -admin-token would open ?lock=, PUT /stock and GET /history to the network: set -admin-token, or -admin-open to accept that", c.Bind)
	case len(c.Sentinel) > 0 && c.SentinelMaster == "":
		return errors.New("-sentinel-master: want the name the sentinels monitor the primary by")
	case c.MaxInFlight < 1:
		return fmt.Errorf("-max-in-flight %d: want >= 1", c.MaxInFlight)
	}
	return cli.ShortToken("the admin token (-admin-token, ADMIN_TOKEN)", c.AdminToken, c.reach())
}

// dsnErr is why dsn is not a MariaDB data source name, or nil.
func dsnErr(dsn string) error {
	_, err := mysql.ParseDSN(dsn)
	return err
}
