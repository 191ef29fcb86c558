package cluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// nginxTemps are nginx's temp directories, kept inside the run directory.
var nginxTemps = []string{"client_body", "proxy", "fastcgi", "uwsgi", "scgi"}

// nginxDir is where nginx's configuration, pid, log and temp files live.
func nginxDir(runDir string) string { return filepath.Join(runDir, "nginx") }

// renderNginx writes the local nginx.conf: deploy/nginx.conf, the Compose
// configuration, with what stands between each pair of markers (the
// replicas, one upstream and one route per replica, the lab's upstream)
// made for the local replicas and lab (the lab's routes kept, or dropped
// when the cluster runs no lab), listening on 127.0.0.1:PORT, and with every path (pid, logs,
// temp files) inside the run directory, which it makes. Every other rule is
// kept. nginx started by root runs its workers as nobody, who cannot enter
// the private run directory: so no response and no request body (up to
// nginx's 1m limit) is ever buffered to a temp file there (a response larger
// than the buffers goes to the client as it comes, measured: a 30 MB one was
// cut at 6 MB with "Permission denied" without this).
func renderNginx(cfg Config, s State) error {
	src, err := os.ReadFile(filepath.Join(cfg.Root, "deploy", "nginx.conf"))
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	dir := nginxDir(cfg.Dir)
	if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o700); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	// params are the first server line's parameters in the block
	// (max_fails=...), kept for each local replica.
	var params string
	blocks := map[string]func(r Proc) string{
		"replicas": func(r Proc) string { return fmt.Sprintf("        server %s%s;\n", r.Addr, params) },
		"replica-upstreams": func(r Proc) string {
			return fmt.Sprintf("    upstream replica-%s {\n        server %s;\n    }\n", r.Name, r.Addr)
		},
		"replica-routes": func(r Proc) string {
			return fmt.Sprintf("            location /replica/%s/ {\n                proxy_pass http://replica-%s/;\n            }\n", r.Name, r.Name)
		},
		"lab-upstream": func(l Proc) string { return fmt.Sprintf("    upstream lab {\n        server %s;\n    }\n", l.Addr) },
		"lab-routes":   nil, // kept as they are, when there is a lab
	}
	var b strings.Builder
	fmt.Fprintf(&b, "pid %s;\nerror_log %s warn;\n", filepath.Join(dir, "nginx.pid"), filepath.Join(dir, "error.log"))
	block, listens, rendered := "", 0, 0
	var kept strings.Builder // the block's own lines
	for line := range strings.SplitSeq(strings.TrimSuffix(string(src), "\n"), "\n") {
		trimmed := strings.TrimSpace(line)
		if name, ok := strings.CutSuffix(strings.TrimPrefix(trimmed, "# "), ":begin"); ok {
			if _, known := blocks[name]; known {
				b.WriteString(line + "\n")
				block, params = name, ""
				kept.Reset()
				continue
			}
		}
		switch {
		case block != "" && strings.HasPrefix(trimmed, "# ") && strings.HasSuffix(trimmed, ":end"):
			switch block {
			case "lab-routes":
				if s.Lab != nil {
					b.WriteString(kept.String())
				}
			case "lab-upstream":
				if s.Lab != nil {
					b.WriteString(blocks[block](*s.Lab))
				}
			default:
				for _, r := range s.Replicas {
					b.WriteString(blocks[block](r))
				}
			}
			block, rendered = "", rendered+1
		case block != "":
			if f := strings.Fields(strings.TrimSuffix(trimmed, ";")); params == "" && len(f) > 2 && f[0] == "server" {
				params = " " + strings.Join(f[2:], " ")
			}
			kept.WriteString(line + "\n")
			continue
		case trimmed == "listen 80;":
			line = strings.Replace(line, "listen 80;", fmt.Sprintf("listen %s;", s.Nginx.Addr), 1)
			listens++
		}
		b.WriteString(line + "\n")
		if trimmed == "http {" {
			for _, t := range nginxTemps {
				fmt.Fprintf(&b, "    %s_temp_path %s;\n", t, filepath.Join(dir, "tmp", t))
			}
			b.WriteString("    proxy_max_temp_file_size 0;\n    client_body_buffer_size 1m;\n")
		}
	}
	if listens != 1 || rendered != len(blocks) {
		return fmt.Errorf("cluster: deploy/nginx.conf: want one 'listen 80;' line and the markers of %d blocks, found %d and %d", len(blocks), listens, rendered)
	}
	return writePrivate(filepath.Join(dir, "nginx.conf"), []byte(b.String()))
}

// checkNginx has nginx test the configuration n runs with (nginx -t), with
// the umask its run will have: the test creates the pid file (to see that it
// can), and nginx's run keeps that file's mode.
func checkNginx(ctx context.Context, n Proc) error {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, n.Args[0], "-t", "-q", "-p", n.Args[2], "-c", n.Args[4], "-e", n.Log)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := startPrivate(cmd)
	if err == nil {
		err = cmd.Wait()
	}
	if err != nil {
		return fmt.Errorf("cluster: nginx -t: %w: %s", err, out.Bytes())
	}
	return nil
}
