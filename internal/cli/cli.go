// Package cli holds what the project's commands share on their command line.
package cli

import (
	"fmt"
	"io"
)

// UsageError formats a usage error, prints it to stderr after the command's
// name (flag's own messages go there too), and returns it: the command then
// exits 2.
func UsageError(stderr io.Writer, command, format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	fmt.Fprintln(stderr, command+":", err)
	return err
}
