package locks

import (
	"os"
	"strings"
	"testing"

	"github.com/locklab/locklab/internal/versions"
)

// Every file of a version's package that the service is built from (its
// Go files but the tests, its Lua or SQL scripts) is embedded, text for text;
// and the package the catalogue names is there: a version whose entry names
// none, or a package that does not exist, fails here.
func TestCodeIsTheSource(t *testing.T) {
	for _, v := range versions.All {
		version, dir := v.Name, v.Package
		if dir == "" {
			if version != "none" && version != "atomic" {
				t.Errorf("%s: its catalogue entry names no package (internal/versions/versions.json, \"package\")", version)
			}
			continue
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatalf("%s: the catalogue's package: %v", version, err)
		}
		var want []string
		for _, e := range entries {
			name := e.Name()
			if (strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go")) || strings.HasSuffix(name, ".lua") || strings.HasSuffix(name, ".sql") {
				want = append(want, name)
			}
		}
		got := map[string]string{}
		for _, f := range Code(version) {
			got[f.Path[strings.LastIndex(f.Path, "/")+1:]] = f.Text
		}
		for _, name := range want {
			raw, err := os.ReadFile(dir + "/" + name)
			if err != nil {
				t.Fatal(err)
			}
			if got[name] != string(raw) {
				t.Errorf("%s: %s/%s is not embedded as it is on disk", version, dir, name)
			}
		}
		if len(got) != len(want) {
			t.Errorf("%s: %d files embedded, %d in %s", version, len(got), len(want), dir)
		}
		if code := Code(version); !strings.HasSuffix(code[0].Path, ".go") {
			t.Errorf("%s: the Go code is not first: %s", version, code[0].Path)
		}
	}
	if Code("none") != nil || Code("atomic") != nil {
		t.Error("none and atomic have no package of their own")
	}
}
