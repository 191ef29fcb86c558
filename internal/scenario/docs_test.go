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
	mutationDocs(t)
}

// docs/evidence.md lists each held cell's mutation: the fix it proves and
// how it is switched off, as Mutations has them.
func mutationDocs(t *testing.T) {
	var b strings.Builder
	b.WriteString("| cell | lock | expected | fix switched off | runs | must show |\n|---|---|---|---|---|---|\n")
	for _, s := range All {
		for _, m := range Mutations(s, versions.Names()) {
			fix, runs := m.Fix, m.Runs+" `"+m.As+"`"
			if m.Off != "" {
				runs += " `off=" + m.Off + "`"
			}
			if m.Missing != "" {
				fix, runs = "none: "+m.Missing, "-"
			}
			must := m.Flaw
			if must == "" && m.Missing == "" {
				must = "any flaw"
			}
			b.WriteString("| " + s.Name + " | `" + m.Lock + "` | " + s.Expect[m.Lock] + " | " + fix + " | " + runs + " | " + must + " |\n")
		}
	}
	docgen.Check(t, "../../docs/evidence.md", "mutations-plan", b.String())
}
