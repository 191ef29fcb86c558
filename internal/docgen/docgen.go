// Package docgen keeps the generated parts of the Markdown docs true: each
// lies between <!-- NAME:begin (generated: HOW) --> and <!-- NAME:end -->,
// and a test of the package that knows the truth (the flag set, the routes,
// the scenarios) compares it with what the code produces now. make docs
// rewrites them (LOCKLAB_DOCS=update).
package docgen

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
)

// UpdateEnv, set to "update", makes Check rewrite a stale section instead
// of failing.
const UpdateEnv = "LOCKLAB_DOCS"

// T is the part of a test Check uses (a testing.TB): declared here so that
// the binaries that rewrite sections (the load test, the bench) do not link
// the testing package.
type T interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
}

// Check fails t when file's section name differs from body, saying how to
// regenerate it; with LOCKLAB_DOCS=update it rewrites the section.
func Check(t T, file, name, body string) {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Section(string(raw), name)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if got == body {
		return
	}
	if os.Getenv(UpdateEnv) != "update" {
		t.Fatalf("%s: the generated section %q is out of date with the code: run make docs", file, name)
	}
	if err := Replace(file, name, body); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: section %q rewritten", file, name)
}

// markers finds section name's begin marker (the whole line) and its end.
func markers(text, name string) (from, to int, err error) {
	begin := regexp.MustCompile(`(?m)^<!-- ` + regexp.QuoteMeta(name) + `:begin[^>]*-->\n`)
	loc := begin.FindStringIndex(text)
	end := strings.Index(text, "<!-- "+name+":end -->")
	if loc == nil || end < loc[1] {
		return 0, 0, fmt.Errorf("no section %q (the markers <!-- %[1]s:begin (generated: ...) --> and <!-- %[1]s:end -->)", name)
	}
	return loc[1], end, nil
}

// Section is the text of section name in text.
func Section(text, name string) (string, error) {
	from, to, err := markers(text, name)
	if err != nil {
		return "", err
	}
	return text[from:to], nil
}

// Replace writes body into file's section name: how the commands that
// measure (make bench-readme, make scenarios-readme) put their tables in.
func Replace(file, name, body string) error {
	raw, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	text := string(raw)
	from, to, err := markers(text, name)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	return os.WriteFile(file, []byte(text[:from]+body+text[to:]), 0o644)
}

// FlagTable renders a command's -h output (the flag package's
// PrintDefaults) as a Markdown table: flag, default, meaning, and with env
// set the environment variable that also sets it. What the binary prints is
// what the docs say.
func FlagTable(help string, env func(flag string) string) string {
	type row struct{ name, typ, usage, def string }
	var rows []row
	for _, line := range strings.Split(help, "\n") {
		switch {
		case strings.HasPrefix(line, "  -"):
			name, typ, _ := strings.Cut(strings.TrimPrefix(line, "  -"), " ")
			rows = append(rows, row{name: name, typ: typ})
		case strings.HasPrefix(line, "    \t") && len(rows) > 0:
			r := &rows[len(rows)-1]
			r.usage = strings.TrimSpace(r.usage + " " + strings.TrimPrefix(line, "    \t"))
		}
	}
	var b strings.Builder
	if env != nil {
		b.WriteString("| flag | environment | default | meaning |\n|---|---|---|---|\n")
	} else {
		b.WriteString("| flag | default | meaning |\n|---|---|---|\n")
	}
	dflt := regexp.MustCompile(` \(default (.*)\)$`)
	for _, r := range rows {
		if m := dflt.FindStringSubmatchIndex(r.usage); m != nil {
			r.def = strings.Trim(r.usage[m[2]:m[3]], `"`)
			r.usage = r.usage[:m[0]]
		}
		flag := "`-" + r.name + "`"
		if r.typ != "" {
			flag = "`-" + r.name + " " + r.typ + "`"
		}
		def := "`" + r.def + "`"
		if r.def == "" {
			def = ""
		}
		cells := []string{flag, def, cell(r.usage)}
		if env != nil {
			cells = []string{flag, "`" + env(r.name) + "`", def, cell(r.usage)}
		}
		b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
	}
	return b.String()
}

// cell escapes what would end a table cell.
func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// Help is what a command's run prints for -h, with an empty environment.
func Help(run func(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int) string {
	var out bytes.Buffer
	run(context.Background(), []string{"-h"}, func(string) string { return "" }, &out, &out)
	return out.String()
}
