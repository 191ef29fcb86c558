package main

import (
	"testing"

	"github.com/locklab/locklab/internal/docgen"
)

// docs/operations.md's table of the lab's flags is what -h prints.
func TestDocs(t *testing.T) {
	docgen.Check(t, "../../docs/operations.md", "lab-flags", docgen.FlagTable(docgen.Help(run), nil))
}
