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
	// Each block's local text; the lab's routes are kept as they are when
	// there is a lab, dropped when there is none.
	each := func(f func(r Proc) string) func() string {
		return func() string {
			var b strings.Builder
			for _, r := range s.Replicas {
				b.WriteString(f(r))
			}
			return b.String()
		}
	}
	blocks := map[string]func() string{
		// The local replicas are fixed addresses: an upstream block, its
		// connections kept open, which $inventory names (Compose's names a
		// DNS name).
		"replicas": func() string {
			return "    upstream inventory {\n" +
				"        # Round-robin, as in the tutorial (weight 1 each). The zone shares\n" +
				"        # each replica's failures among nginx's workers: after one failure\n" +
				"        # (refused, timed out) a replica is left out for fail_timeout, then\n" +
				"        # one request tries it again.\n" +
				"        zone inventory 64k;\n" +
				each(func(r Proc) string { return fmt.Sprintf("        server %s max_fails=1 fail_timeout=5s;\n", r.Addr) })() +
				"        keepalive 64;\n" +
				"        # Shorter than the service's idle timeout (75s): nginx, not the\n" +
				"        # service, closes an idle connection, so it never sends a request on\n" +
				"        # one the service is closing.\n" +
				"        keepalive_timeout 30s;\n" +
				"    }\n" +
				"    map $host $inventory {\n        default inventory;\n    }\n"
		},
		"replica-upstreams": each(func(r Proc) string {
			return fmt.Sprintf("    upstream replica-%s {\n        server %s;\n    }\n", r.Name, r.Addr)
		}),
		"replica-routes": each(func(r Proc) string {
			return fmt.Sprintf("            location /replica/%s/ {\n                proxy_pass http://replica-%s/;\n            }\n", r.Name, r.Name)
		}),
		"lab-upstream": func() string {
			if s.Lab == nil {
				return ""
			}
			return fmt.Sprintf("    upstream lab {\n        server %s;\n    }\n    map $host $lab {\n        default lab;\n    }\n", s.Lab.Addr)
		},
		"lab-routes": nil, // kept as they are, when there is a lab
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
				block = name
				kept.Reset()
				continue
			}
		}
		switch {
		case block != "" && strings.HasPrefix(trimmed, "# ") && strings.HasSuffix(trimmed, ":end"):
			if render := blocks[block]; render != nil {
				b.WriteString(render())
			} else if s.Lab != nil {
				b.WriteString(kept.String())
			}
			block, rendered = "", rendered+1
		case block != "":
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
