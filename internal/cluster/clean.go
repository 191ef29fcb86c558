package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// removeAOF removes the append-only files a Redis node writes in dir when a
// scenario switches its persistence on (redlock-restart+fsync; the nodes
// share the run directory, and only that node ever writes one): Redis's
// appendonlydir, its appendonly.aof.* files, and nothing else.
func removeAOF(dir string) error {
	aof := filepath.Join(dir, "appendonlydir")
	files, err := filepath.Glob(filepath.Join(aof, "appendonly.aof.*"))
	if err != nil {
		return err
	}
	var errs []error
	for _, f := range files {
		errs = append(errs, os.Remove(f))
	}
	_ = os.Remove(aof) // only if empty: anything else in it is not ours
	return errors.Join(errs...)
}

// Clean removes what Up creates in cfg's run directory, and nothing else: the
// logs, the state file, the binary, nginx's files and temp directories; each
// directory only once it is empty, so a run directory a user pointed at a
// folder of their own keeps their files. It refuses while the cluster runs.
func Clean(cfg Config) error {
	cfg = cfg.withDefaults()
	switch err := checkRunDir(cfg.Dir); {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return err
	}
	if c, err := Load(cfg.Dir); err == nil {
		if running, _ := c.Running(); running > 0 {
			return fmt.Errorf("cluster: %d processes still run in %s: make down first", running, cfg.Dir)
		}
	}
	cfg.Faults, cfg.Sentinel = true, true // made with or without them: their files go either way
	s := Plan(cfg)
	nginx := nginxDir(cfg.Dir)
	files := []string{stateFile(cfg.Dir), s.Replicas[0].Args[0], s.Lab.Args[0], filepath.Join(nginx, "nginx.conf"), filepath.Join(nginx, "nginx.pid"),
		s.Toxiproxy.Args[0], faultConfig(cfg.Dir), filepath.Join(cfg.Dir, "mariadb.pid")}
	for _, p := range s.procs() {
		files = append(files, p.Log)
	}
	// A larger REPLICAS at up left more replica logs than this plan has.
	if more, err := filepath.Glob(filepath.Join(cfg.Dir, "inventory-*.log")); err == nil {
		files = append(files, more...)
	}
	nodes := append(ptrs(s.Redis), ptrs(s.Standbys)...)
	errs := []error{removeAOF(cfg.Dir), removeRDB(cfg.Dir, nodes), removeDBData(dbData(cfg.Dir)), removeSecrets(cfg.Dir), removeSentinelConfs(cfg.Dir, s.Sentinels)}
	for _, m := range s.Etcd {
		errs = append(errs, removeEtcdData(etcdData(cfg.Dir, m.Name)))
	}
	for _, m := range s.ZK {
		errs = append(errs, removeZKData(zkData(cfg.Dir, m.Name)), removeFile(zkConfig(cfg.Dir, m.Name)))
	}
	var dirs []string
	for _, t := range nginxTemps {
		dirs = append(dirs, filepath.Join(nginx, "tmp", t))
	}
	dirs = append(dirs, filepath.Join(nginx, "tmp"), nginx, filepath.Dir(s.Replicas[0].Args[0]), cfg.Dir)
	for _, f := range files {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	for _, d := range dirs {
		_ = os.Remove(d) // only if empty: anything else in it is not ours
	}
	return errors.Join(errs...)
}
