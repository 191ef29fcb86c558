package main

import (
	"os"
	"strings"
	"testing"

	"github.com/locklab/locklab/internal/docgen"
)

// docs/operations.md's table of make up's settings is what -h prints (the
// run directory's default relative to where make runs).
func TestDocs(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	help := strings.ReplaceAll(docgen.Help(run), wd+"/", "")
	docgen.Check(t, "../../docs/operations.md", "cluster-flags", docgen.FlagTable(help, nil))
}
