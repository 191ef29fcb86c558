package cluster

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
)

// ensureTools installs redis-server, etcd, nginx, curl, MariaDB and ZooKeeper (and with the fault
// proxies, a C compiler for the clock shim) with apt-get on Debian/Ubuntu
// when they are missing; elsewhere it says how to.
func ensureTools(log io.Writer, faults bool) error {
	missing, pkgs := missingTools(faults)
	if len(missing) == 0 {
		return nil
	}
	if _, err := os.Stat("/etc/debian_version"); err != nil || !executable(lookPath("apt-get")) {
		if runtime.GOOS == "darwin" {
			return fmt.Errorf("cluster: missing %s; install them: brew install redis etcd nginx curl mariadb zookeeper", strings.Join(missing, ", "))
		}
		return fmt.Errorf("cluster: missing %s; install them with your package manager, e.g. dnf install redis etcd nginx curl mariadb-server zookeeper", strings.Join(missing, ", "))
	}
	fmt.Fprintf(log, "cluster: %s not found: installing %s with apt-get\n", strings.Join(missing, ", "), strings.Join(pkgs, " "))
	sudo := []string{}
	if os.Geteuid() != 0 {
		sudo = []string{"sudo"}
	}
	run := func(args ...string) error {
		argv := append(sudo[:len(sudo):len(sudo)], args...)
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		cmd.Stdout, cmd.Stderr = io.Discard, log
		return cmd.Run()
	}
	if err := errors.Join(run("apt-get", "update", "-qq"),
		run(append([]string{"apt-get", "install", "-y", "-qq", "--no-install-recommends"}, pkgs...)...)); err != nil {
		return fmt.Errorf("cluster: installing %s: %w", strings.Join(pkgs, " "), err)
	}
	// On a systemd host the package may also start the system nginx on
	// port 80. It is the host's service now, and stays as it is: a taken
	// port is an error naming it, and PORT=8000 make up moves the cluster.
	return nil
}

// missingTools lists the programs Up needs that are not installed, and the
// Debian packages that have them.
func missingTools(faults bool) (missing, pkgs []string) {
	tools := []struct{ bin, pkg string }{{"redis-server", "redis-server"}, {"etcd", "etcd-server"}, {"nginx", "nginx-light"}, {"curl", "curl"},
		{"mariadbd", "mariadb-server"}, {"java", "zookeeper"}}
	if faults {
		tools = append(tools, struct{ bin, pkg string }{"cc", "gcc"})
	}
	for _, t := range tools {
		if !executable(lookPath(t.bin)) {
			missing, pkgs = append(missing, t.bin), append(pkgs, t.pkg)
		}
	}
	if _, err := os.Stat(ZooKeeperJar); err != nil && !slices.Contains(pkgs, "zookeeper") {
		missing, pkgs = append(missing, ZooKeeperJar), append(pkgs, "zookeeper")
	}
	return missing, pkgs
}
