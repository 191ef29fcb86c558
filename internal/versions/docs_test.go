package versions_test

import (
	"fmt"
	"os"
	"path"
	"strings"
	"testing"
	"unicode"

	"github.com/locklab/locklab/internal/docgen"
	"github.com/locklab/locklab/internal/locks"
	"github.com/locklab/locklab/internal/sale"
	"github.com/locklab/locklab/internal/versions"
)

// The README's table, the catalogue in docs/versions.md and each version's
// section there (its code included) are the catalogue's and the source's,
// so none can drift.
func TestDocs(t *testing.T) {
	docgen.Check(t, "../../README.md", "versions", versions.Summary("docs/versions.md"))
	docgen.Check(t, "../../docs/versions.md", "catalogue", versions.Markdown())
	docgen.Check(t, "../../docs/versions.md", "each-version", eachVersion())
	docgen.Check(t, "../../README.zh-CN.md", "versions", versions.SummaryZh("docs/versions.md"))
}

// Every version is told in 简体中文 too (README.zh-CN.md's table), and the
// README points Chinese readers there in its first lines.
func TestChinese(t *testing.T) {
	for _, v := range versions.All {
		fields := map[string]string{"guard": v.Zh.Guard, "fixes": v.Zh.Fixes, "flaw": v.Zh.Flaw}
		if v.NotCopied != "" || v.Zh.NotCopied != "" { // the lab's lesson shows it in either language
			fields["not_copied"] = v.Zh.NotCopied
		}
		for field, text := range fields {
			if !strings.ContainsFunc(text, func(r rune) bool { return unicode.Is(unicode.Han, r) }) {
				t.Errorf("%s: zh.%s is %q, want a sentence in Chinese", v.Name, field, text)
			}
		}
	}
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if head := strings.Join(strings.SplitN(string(raw), "\n", 5)[:4], "\n"); !strings.Contains(head, "(README.zh-CN.md)") {
		t.Errorf("README.md's first lines do not link README.zh-CN.md:\n%s", head)
	}
}

// pictures are the lab's screenshots that show a version's lesson (make
// lab-screenshot takes them again).
var pictures = map[string][]string{
	"v2": {"![A run of v2 in the lab: two holders at once, drawn in red](lab.png)"},
	"v6": {"![v6's slow holder in the lab: the second holder's sale, and the oversell](lab-slow-holder.png)",
		"![The same with fencing: the stale write refused](lab-slow-holder-fence.png)"},
}

func eachVersion() string {
	var b strings.Builder
	shown := map[string]string{} // a package's code once: v2 is v1's, v4 and v5 are v3's
	all := versions.All
	for i, v := range all {
		fmt.Fprintf(&b, "## %s\n\n- **Guard**: %s.\n- **Adds**: %s.\n- **Still wrong**: %s.\n", v.Name, v.Guard, v.Fixes, v.Flaw)
		if v.NotCopied != "" {
			fmt.Fprintf(&b, "- **Not copied from the tutorial**: %s.\n", v.NotCopied)
		}
		switch l := v.Lesson; {
		case l.Scenario != "":
			fmt.Fprintf(&b, "- **Shown by** the scenario `%s`: its cell in the lab's matrix, or `make scenarios SCENARIO=%[1]s` for every version it has a cell for", l.Scenario)
			if l.Fix != "" {
				fmt.Fprintf(&b, "; fixed in `%s`", l.Fix)
			}
			b.WriteString(".\n")
		default:
			fmt.Fprintf(&b, "- **Shown by** a run of %s: the lesson's button in the lab, or `go run ./loadtest -lock %s` on `make up`'s cluster.\n",
				strings.Join(l.Run, " and "), strings.Join(l.Run, ","))
		}
		if i+1 < len(all) {
			fmt.Fprintf(&b, "- **Next**: [`%s`](#%[1]s) adds %s.\n", all[i+1].Name, all[i+1].Fixes)
		}
		b.WriteString("\n")
		for _, p := range pictures[v.Name] {
			b.WriteString(p + "\n\n")
		}
		pkg := v.Package
		switch {
		case v.Name == "atomic":
			fmt.Fprintf(&b, "No lock: the sale is one script, `internal/sale/decrement.lua`:\n\n```lua\n%s```\n\n", locks.Unmarked(sale.Script("decrement.lua")))
		case pkg == "":
			b.WriteString("No lock package: the sale's own read-check-write (`internal/sale`).\n\n")
		case shown[pkg] != "":
			fmt.Fprintf(&b, "Its code is [`%s`'s](#%[1]s) (`internal/locks/%s`), with its own options.\n\n", shown[pkg], pkg)
		default:
			shown[pkg] = v.Name
			for _, f := range locks.Excerpt(v.Name) {
				fmt.Fprintf(&b, "`%s`:\n\n```%s\n%s```\n\n", f.Path, strings.TrimPrefix(path.Ext(f.Path), "."), f.Text)
			}
		}
	}
	return b.String()
}
