package lab_test

import (
	"os"
	"regexp"
	"testing"

	"github.com/locklab/locklab/internal/scenario"
	"github.com/locklab/locklab/internal/versions"
)

// The page's code names no version and no scenario: what it shows of them
// comes from the catalogues (the first run, the rows and columns of "what
// to use", the lessons), so a version or a scenario added there shows
// without an edit here.
func TestPageNamesNoVersion(t *testing.T) {
	raw, err := os.ReadFile("static/lab.js")
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, v := range versions.All {
		names[v.Name] = true
	}
	for _, s := range scenario.All {
		names[s.Name] = true
	}
	for _, m := range regexp.MustCompile("[\"'`]([a-z0-9+-]+)[\"'`]").FindAllSubmatch(raw, -1) {
		if names[string(m[1])] {
			t.Errorf("lab.js writes %s: take it from the catalogue", m[0])
		}
	}
}
