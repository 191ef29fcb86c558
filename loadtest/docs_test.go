package main

import (
	"testing"

	"github.com/locklab/locklab/internal/docgen"
)

// docs/evidence.md's table of the load test's flags is what -h prints.
func TestDocs(t *testing.T) {
	docgen.Check(t, "../docs/evidence.md", "loadtest-flags", docgen.FlagTable(docgen.Help(run), nil))
}
