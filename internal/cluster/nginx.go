package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// renderNginx writes the local nginx.conf: deploy/nginx.conf, the Compose
// configuration, with its replicas block pointing at the local replicas,
// listening on 127.0.0.1:PORT, and with every path (pid, logs, temp files)
// inside the run directory. Every other rule is kept.
func renderNginx(cfg Config, s State) error {
	src, err := os.ReadFile(filepath.Join(cfg.Root, "deploy", "nginx.conf"))
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	dir := filepath.Join(cfg.Dir, "nginx")
	var b strings.Builder
	fmt.Fprintf(&b, "pid %s;\nerror_log %s warn;\n", filepath.Join(dir, "nginx.pid"), filepath.Join(dir, "error.log"))
	skip, listens := false, 0
	for line := range strings.SplitSeq(strings.TrimSuffix(string(src), "\n"), "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(trimmed, "# replicas:begin"):
			b.WriteString(line + "\n")
			for _, r := range s.Replicas {
				fmt.Fprintf(&b, "        server %s;\n", r.Addr)
			}
			skip = true
			continue
		case strings.HasPrefix(trimmed, "# replicas:end"):
			skip = false
		case skip:
			continue
		case trimmed == "listen 80;":
			line = strings.Replace(line, "listen 80;", fmt.Sprintf("listen %s;", s.Nginx.Addr), 1)
			listens++
		}
		b.WriteString(line + "\n")
		if trimmed == "http {" {
			for _, t := range []string{"client_body", "proxy", "fastcgi", "uwsgi", "scgi"} {
				fmt.Fprintf(&b, "    %s_temp_path %s;\n", t, filepath.Join(dir, "tmp", t))
			}
		}
	}
	if listens != 1 {
		return fmt.Errorf("cluster: deploy/nginx.conf: want one 'listen 80;' line, found %d", listens)
	}
	return os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(b.String()), 0o644)
}
