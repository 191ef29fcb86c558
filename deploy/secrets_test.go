package deploy_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// secretFlag is a flag that puts a secret on a command line, which every
// user of the machine reads (ps, /proc/PID/cmdline; a container's too, from
// the host): ours (-admin-token, -redis-password), redis-server's
// (--requirepass, --masterauth) and redis-cli's (-a, --pass).
var secretFlag = regexp.MustCompile(`(^|[\s"'\[,])(-admin-token|-redis-password|--requirepass|--masterauth)\b|redis-cli\b[^\n#]*\s(-a|--pass)\b`)

// The repository's own tooling (the Makefile, the scripts, the Compose and
// Docker files, the CI script, the end-to-end suite) gives no secret as a
// flag: the load test and the service read them from their environment, the
// local cluster's tools from its private state file, Redis from a private
// configuration file. The flags stay for users; the README says why to
// prefer the environment.
func TestNoSecretFlags(t *testing.T) {
	files := repoFiles(t, func(path string) bool {
		rel, _ := filepath.Rel(root, path)
		return rel == "Makefile" || strings.HasPrefix(rel, ".ci"+string(filepath.Separator)) || strings.HasSuffix(rel, ".sh") ||
			isYAML(rel) || isDockerfile(rel) || strings.HasPrefix(rel, "e2e"+string(filepath.Separator))
	})
	if len(files) < 8 {
		t.Fatalf("found only %v", files)
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for n, line := range strings.Split(string(raw), "\n") {
			if m := secretFlag.FindString(line); m != "" {
				t.Errorf("%s:%d gives a secret as a flag (%s): %s", f, n+1, strings.TrimSpace(m), strings.TrimSpace(line))
			}
		}
	}
}

// fixedPassword is a Redis password default written into a file: the same
// word on every install, and MariaDB's too.
var fixedPassword = regexp.MustCompile(`\$\{REDIS_PASSWORD:?-[^}]`)

// No Compose file, stack or script defaults REDIS_PASSWORD to a fixed word:
// Compose makes a random one at the first up (its secrets service), Swarm
// reads a Docker secret, the scripts make theirs.
func TestNoFixedPassword(t *testing.T) {
	files := repoFiles(t, func(path string) bool { return isYAML(path) || strings.HasSuffix(path, ".sh") })
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for n, line := range strings.Split(string(raw), "\n") {
			if fixedPassword.MatchString(line) {
				t.Errorf("%s:%d defaults the Redis password to a fixed word: %s", f, n+1, strings.TrimSpace(line))
			}
		}
	}
}

// compose is the part of a Compose or stack file these tests read.
type compose struct {
	Services map[string]struct {
		Command     any            `yaml:"command"`
		Environment map[string]any `yaml:"environment"`
		Volumes     []string       `yaml:"volumes"`
		Secrets     []any          `yaml:"secrets"`
		Healthcheck struct {
			Test []string `yaml:"test"`
		} `yaml:"healthcheck"`
	} `yaml:"services"`
	Networks map[string]struct {
		Driver     string            `yaml:"driver"`
		DriverOpts map[string]string `yaml:"driver_opts"`
	} `yaml:"networks"`
}

func readCompose(t *testing.T, path string) compose {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		t.Fatal(err)
	}
	var c compose
	if err := yaml.Unmarshal(raw, &c); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return c
}

// The Swarm stack's overlay networks are encrypted: Redis AUTH and the
// admin token cross them between hosts.
func TestSwarmNetworkEncrypted(t *testing.T) {
	c := readCompose(t, "deploy/stack.yml")
	if len(c.Networks) == 0 {
		t.Fatal("deploy/stack.yml: no networks")
	}
	for name, n := range c.Networks {
		if n.Driver == "overlay" && n.DriverOpts["encrypted"] != "true" {
			t.Errorf("deploy/stack.yml: network %s is an overlay in clear: want driver_opts encrypted: \"true\"", name)
		}
	}
}

// Every service that reads the Redis password's file has it: the Compose
// files' services mount the secrets volume, the stack's are given the
// secret. And MariaDB's healthcheck logs in (a bare TCP connection closed
// unauthenticated is an "Aborted connection" line in its log each time).
func TestPasswordFileGiven(t *testing.T) {
	mounted := func(v []string, _ []any) bool {
		return slices.ContainsFunc(v, func(m string) bool { return strings.HasPrefix(m, "secrets:/run/locklab") })
	}
	for file, has := range map[string]func(volumes []string, secrets []any) bool{
		"docker-compose.yml":                 mounted,
		"deploy/docker-compose.sentinel.yml": mounted,
		"deploy/stack.yml":                   func(_ []string, s []any) bool { return len(s) > 0 },
	} {
		c := readCompose(t, file)
		readers := 0
		for name, s := range c.Services {
			raw, _ := yaml.Marshal(map[string]any{"c": s.Command, "e": s.Environment, "h": s.Healthcheck.Test})
			if !strings.Contains(string(raw), "/run/locklab/") && !strings.Contains(string(raw), "/run/secrets/") {
				continue
			}
			readers++
			if !has(s.Volumes, s.Secrets) {
				t.Errorf("%s: service %s reads the Redis password's file, but is not given it", file, name)
			}
		}
		if readers < 3 {
			t.Errorf("%s: %d services read the Redis password's file: fewer than it has", file, readers)
		}
	}
	probe := strings.Join(readCompose(t, "docker-compose.yml").Services["mariadb"].Healthcheck.Test, " ")
	if strings.Contains(probe, "/dev/tcp") || !strings.Contains(probe, "--defaults-file=") {
		t.Errorf("docker-compose.yml: MariaDB's healthcheck %q does not log in (each bare connection is an Aborted connection in its log)", probe)
	}
}
