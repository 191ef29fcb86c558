package main

import (
	"testing"

	"github.com/locklab/locklab/internal/docgen"
)

// docs/performance.md's table of the bench's flags is what -h prints.
func TestDocs(t *testing.T) {
	docgen.Check(t, "../docs/performance.md", "bench-flags", docgen.FlagTable(docgen.Help(run), nil))
}
