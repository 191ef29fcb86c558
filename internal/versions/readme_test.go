package versions_test

import (
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/locklab/locklab/internal/versions"
)

var update = flag.Bool("update", false, "rewrite the README's versions table from the catalogue")

const (
	readme = "../../README.md"
	begin  = "<!-- versions:begin (generated: go test ./internal/versions -update) -->\n"
	end    = "<!-- versions:end -->"
)

// The README's versions table is the catalogue's, so the two cannot drift.
func TestReadmeTable(t *testing.T) {
	raw, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	i, j := strings.Index(text, begin), strings.Index(text, end)
	if i < 0 || j < i {
		t.Fatalf("README.md lacks the markers %q ... %q", begin, end)
	}
	got, want := text[i+len(begin):j], versions.Markdown()
	if got == want {
		return
	}
	if !*update {
		t.Fatal("README.md's versions table is out of date: run go test ./internal/versions -update")
	}
	if err := os.WriteFile(readme, []byte(text[:i+len(begin)]+want+text[j:]), 0o644); err != nil {
		t.Fatal(err)
	}
}
