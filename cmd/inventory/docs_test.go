package main

import (
	"os"
	"strings"
	"testing"

	"github.com/locklab/locklab/internal/docgen"
)

// docs/operations.md's table of the service's flags is what -h prints.
func TestDocs(t *testing.T) {
	host, _ := os.Hostname()
	help := strings.Replace(docgen.Help(run), `(default "`+host+`")`, "(default $(hostname))", 1)
	docgen.Check(t, "../../docs/operations.md", "inventory-flags", docgen.FlagTable(help, envName))
}
