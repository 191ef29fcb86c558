package docgen

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// root is the repository, from this package's directory.
const root = "../.."

// docs are the Markdown files a reader follows: the README and docs/.
func docs(t *testing.T) []string {
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{filepath.Join(root, "README.md")}, files...)
}

// page is a Markdown file split into prose (with its inline code spans)
// and code (fenced blocks).
type page struct {
	path, prose, code string
	anchors           map[string]bool
}

var (
	fence   = regexp.MustCompile("(?ms)^```.*?^```")
	heading = regexp.MustCompile(`(?m)^#{1,6} +(.+?) *#*$`)
	htmlID  = regexp.MustCompile(`<a (?:id|name)="([^"]+)"`)
	link    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	span    = regexp.MustCompile("`([^`\n]+)`")
	target  = regexp.MustCompile(`(?m)^([a-z][a-z0-9-]*):`)
	makeCmd = regexp.MustCompile(`\bmake +((?:[A-Z_]+=\S* +)*)([a-z][a-z0-9-]*)`)
	flagTok = regexp.MustCompile(`^-([a-z][a-z0-9-]*)(?:[ =].*)?$`)
	envTok  = regexp.MustCompile(`^([A-Z][A-Z0-9]*_[A-Z0-9_]*[A-Z0-9])(?:=.*)?$|^([A-Z][A-Z0-9_]*)=`)
)

func read(t *testing.T, path string) page {
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	p := page{path: path, prose: fence.ReplaceAllString(text, ""), anchors: map[string]bool{}}
	for _, block := range fence.FindAllString(text, -1) {
		// Commands are in shell blocks (or unmarked ones); a Go, Lua or SQL
		// excerpt's comments are prose.
		info, _, _ := strings.Cut(strings.TrimPrefix(block, "```"), "\n")
		if slices.Contains([]string{"", "sh", "bash", "shell", "console"}, strings.TrimSpace(info)) {
			p.code += block + "\n"
		}
	}
	seen := map[string]int{}
	for _, m := range heading.FindAllStringSubmatch(p.prose, -1) {
		s := slug(m[1])
		if n := seen[s]; n > 0 {
			p.anchors[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			p.anchors[s] = true
		}
		seen[s]++
	}
	for _, m := range htmlID.FindAllStringSubmatch(text, -1) {
		p.anchors[m[1]] = true
	}
	return p
}

// slug is GitHub's anchor for a heading: lower case, letters, digits,
// spaces, '-' and '_' kept, spaces made '-'.
func slug(h string) string {
	h = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`).ReplaceAllString(h, "$1") // a link's text
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Every relative link of the README and docs/ leads to a file that exists
// and, with #anchor, to a heading (or id) in it.
func TestLinks(t *testing.T) {
	pages := map[string]page{}
	for _, f := range docs(t) {
		pages[filepath.Clean(f)] = read(t, f)
	}
	for _, p := range pages {
		for _, m := range link.FindAllStringSubmatch(p.prose, -1) {
			ref := m[1]
			if strings.Contains(ref, "://") || strings.HasPrefix(ref, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(ref, "#")
			dest := p.path
			if file != "" {
				dest = filepath.Clean(filepath.Join(filepath.Dir(p.path), file))
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s: link %q: no such file", p.path, ref)
					continue
				}
			}
			if anchor == "" {
				continue
			}
			q, ok := pages[dest]
			if !ok {
				if !strings.HasSuffix(dest, ".md") {
					t.Errorf("%s: link %q: an anchor in a file that is not Markdown", p.path, ref)
					continue
				}
				q = read(t, dest)
			}
			if !q.anchors[anchor] {
				t.Errorf("%s: link %q: %s has no heading for #%s", p.path, ref, dest, anchor)
			}
		}
	}
}

// Every make target, flag and environment variable the docs name exists:
// the targets in the Makefile, the flags in the commands' own flag tables
// (generated from their -h), the variables somewhere in the code, the
// Makefile, the Compose files or the scripts.
func TestNames(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	targets := map[string]bool{}
	for _, m := range target.FindAllStringSubmatch(string(raw), -1) {
		targets[m[1]] = true
	}
	flags := map[string]bool{}
	for _, f := range docs(t) {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"inventory-flags", "lab-flags", "cluster-flags", "loadtest-flags", "bench-flags"} {
			if s, err := Section(string(raw), name); err == nil {
				for _, m := range regexp.MustCompile("(?m)^\\| `-([a-z][a-z0-9-]*)").FindAllStringSubmatch(s, -1) {
					flags[m[1]] = true
				}
			}
		}
	}
	if len(flags) < 40 {
		t.Fatalf("found %d flags in the docs' generated flag tables: are the tables there?", len(flags))
	}
	// Flags of other tools the docs name (go test, docker, curl, redis-cli).
	for _, f := range []string{"run", "count", "tags", "bench", "benchtime", "fuzz", "fuzztime", "fuzzminimizetime", "timeout", "v", "race", "cpuprofile", "d", "h", "X", "update"} {
		flags[f] = true
	}
	source := sources(t)
	for _, f := range docs(t) {
		p := read(t, f)
		var spans []string
		for _, m := range span.FindAllStringSubmatch(p.prose, -1) {
			spans = append(spans, strings.TrimSpace(m[1]))
		}
		for _, text := range append(spans, p.code) {
			for _, m := range makeCmd.FindAllStringSubmatch(text, -1) {
				if !targets[m[2]] {
					t.Errorf("%s: make %s: the Makefile has no such target", f, m[2])
				}
			}
		}
		for _, s := range spans {
			if m := flagTok.FindStringSubmatch(s); m != nil && !flags[m[1]] {
				t.Errorf("%s: `%s`: no command has the flag -%s", f, s, m[1])
			}
			if m := envTok.FindStringSubmatch(s); m != nil {
				name := m[1] + m[2]
				if !strings.Contains(source, name) && !(strings.HasPrefix(name, "INVENTORY_") && flags[strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(name, "INVENTORY_"), "_", "-"))]) {
					t.Errorf("%s: `%s`: nothing reads the variable %s", f, s, name)
				}
			}
		}
	}
}

// sources is the text of what can read a variable: the Go code, the
// Makefile, the scripts, the Compose files, the nginx configuration and CI.
func sources(t *testing.T) string {
	var b strings.Builder
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != root && d.Name() != ".ci" || d.Name() == "docs" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		name := d.Name()
		if !d.IsDir() && (slices.Contains([]string{".go", ".sh", ".yml", ".yaml", ".conf", ".lua"}, filepath.Ext(name)) ||
			slices.Contains([]string{"Makefile", "Dockerfile", "run"}, name)) && !strings.HasSuffix(name, "_test.go") {
			raw, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			b.Write(raw)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// The binaries that rewrite generated sections (the load test, the bench)
// link this package: it must not bring the testing package into them.
func TestLinksNoTesting(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/locklab/locklab/internal/docgen").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	if slices.Contains(strings.Fields(string(out)), "testing") {
		t.Error("internal/docgen links the testing package")
	}
}
