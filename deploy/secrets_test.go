package deploy_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
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
