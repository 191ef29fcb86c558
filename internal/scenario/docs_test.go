package scenario

import (
	"strings"
	"testing"

	"github.com/locklab/locklab/internal/docgen"
	"github.com/locklab/locklab/internal/versions"
)

// docs/faults.md lists every scenario, what it injects and what each
// version is expected to do, as the code has them.
func TestDocs(t *testing.T) {
	var b strings.Builder
	b.WriteString("| scenario | what it does | expected |\n|---|---|---|\n")
	for _, s := range All {
		var expect []string
		for _, v := range versions.Names() {
			if e, ok := s.Expect[v]; ok {
				expect = append(expect, "`"+v+"`: "+e)
			}
		}
		b.WriteString("| `" + s.Name + "` | " + strings.ReplaceAll(s.Injected, "|", `\|`) + " | " + strings.Join(expect, "; ") + " |\n")
	}
	docgen.Check(t, "../../docs/faults.md", "scenario-list", b.String())
}
