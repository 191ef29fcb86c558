// Package locks gives the lab the lock packages' code as it runs: each
// version's guard and its Lua scripts, embedded at build time from the very
// files the service is compiled from, so the page cannot drift from them.
// The mechanisms themselves are the packages below this one.
package locks

import (
	"embed"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"slices"
	"strings"
)

//go:embed v1_mutex/mutex.go v3_setnx/setnx.go v3_setnx/*.lua v6_lua/lua.go v6_lua/*.lua
//go:embed v7_reentrant/reentrant.go v7_reentrant/*.lua v8_watchdog/watchdog.go v8_watchdog/*.lua
//go:embed redislock/redislock.go rueidislock/rueidislock.go
//go:embed redlock/redlock.go redlock/*.lua etcd/etcd.go etcd/watch.go etcd/holder.go zk/zk.go zk/request.go zk/session.go zk/watch.go zk/holder.go db/db.go db/seed.go db/getlock.go db/watch.go db/holder.go db/*.sql
var sources embed.FS

// Packages are each version's package here; none and atomic have none (the
// sale's own code is theirs).
var Packages = map[string]string{"v1": "v1_mutex", "v2": "v1_mutex", "v3": "v3_setnx", "v4": "v3_setnx", "v5": "v3_setnx",
	"v6": "v6_lua", "v7": "v7_reentrant", "v8": "v8_watchdog", "redlock": "redlock", "etcd": "etcd", "zk": "zk", "db-seed": "db", "db": "db", "db-getlock": "db",
	"redislock": "redislock", "rueidislock": "rueidislock", "rueidislock-1": "rueidislock"}

// File is one source file: its path in the repository, and its text.
type File struct {
	Path string `json:"path"`
	Text string `json:"text"`
}

// Code returns the files of version's package: its Go code first, then its
// scripts (Lua, or the database lock's SQL), each by name; nil for a version with no package of its own.
func Code(version string) []File {
	dir, ok := Packages[version]
	if !ok {
		return nil
	}
	entries, _ := fs.ReadDir(sources, dir) // embedded: it exists
	var files []File
	for _, e := range entries {
		raw, _ := sources.ReadFile(dir + "/" + e.Name())
		files = append(files, File{Path: "internal/locks/" + dir + "/" + e.Name(), Text: string(raw)})
	}
	slices.SortStableFunc(files, func(a, b File) int {
		return boolInt(!strings.HasSuffix(a.Path, ".go")) - boolInt(!strings.HasSuffix(b.Path, ".go"))
	})
	return files
}

// Files returns every embedded file of every version's package, by path.
func Files() []File {
	var files []File
	_ = fs.WalkDir(sources, ".", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			raw, _ := sources.ReadFile(path) // embedded: it exists
			files = append(files, File{Path: "internal/locks/" + path, Text: string(raw)})
		}
		return nil
	})
	return files
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// excerpted are the functions of a version's Go code that make its lesson:
// how it takes the lock, how it lets it go, and v8's renewal.
var excerpted = []string{"Acquire", "TryAcquire", "acquire", "release", "watched", "run"}

// Excerpt is version's code for the docs: the functions of its Go code
// that take and release the lock (with their doc comments), in file order,
// then its scripts whole; nil for a version with no package of its own.
func Excerpt(version string) []File {
	var out []File
	for _, f := range Code(version) {
		f.Text = Unmarked(f.Text)
		if !strings.HasSuffix(f.Path, ".go") {
			out = append(out, f)
			continue
		}
		file, err := parser.ParseFile(token.NewFileSet(), f.Path, f.Text, parser.ParseComments)
		if err != nil {
			continue // embedded from a package that compiles: it parses
		}
		var parts []string
		for _, d := range file.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || !slices.Contains(excerpted, fn.Name.Name) {
				continue
			}
			from := fn.Pos()
			if fn.Doc != nil {
				from = fn.Doc.Pos()
			}
			parts = append(parts, f.Text[from-file.FileStart:fn.End()-file.FileStart])
		}
		if parts != nil {
			out = append(out, File{Path: f.Path, Text: strings.Join(parts, "\n\n") + "\n"})
		}
	}
	return out
}

// The lesson marks: the lines that make a version what it is are marked in
// its source between a begin line naming the versions they belong to and
// an end line, as comments of the file's language: "// lesson:begin v4 v5"
// in Go, "-- lesson:begin v6" in Lua and SQL, then "// lesson:end". The lab
// shows those regions as each version's lesson; being in the file the
// service is built from, they cannot drift from it.
const (
	markBegin = "lesson:begin"
	markEnd   = "lesson:end"
)

// mark says whether line is a lesson mark, which one ("begin" or "end"),
// and the versions a begin names.
func mark(line string) (kind string, names []string, ok bool) {
	t := strings.TrimSpace(line)
	t, ok = strings.CutPrefix(t, "//")
	if !ok {
		if t, ok = strings.CutPrefix(t, "--"); !ok {
			return "", nil, false
		}
	}
	fields := strings.Fields(t)
	switch {
	case len(fields) > 0 && fields[0] == markBegin:
		return "begin", fields[1:], true
	case len(fields) == 1 && fields[0] == markEnd:
		return "end", nil, true
	}
	return "", nil, false
}

// Region is one marked region of a file: the versions it belongs to, where
// it starts (the line after its begin mark, from 1), and its lines with
// their common indentation removed.
type Region struct {
	Versions []string `json:"-"`
	Path     string   `json:"path"`
	Line     int      `json:"line"`
	Text     string   `json:"text"`
}

// Marked returns the regions marked in f, in file order, or an error naming
// the line of a mark out of place: an end with no begin, a begin inside a
// region, a begin that names no version, a region never ended or empty.
func Marked(f File) ([]Region, error) {
	var out []Region
	var open *Region
	var body []string
	lines := strings.Split(strings.TrimSuffix(f.Text, "\n"), "\n")
	for i, line := range lines {
		kind, names, ok := mark(line)
		switch {
		case !ok:
			if open != nil {
				body = append(body, line)
			}
		case kind == "begin" && open != nil:
			return nil, fmt.Errorf("%s:%d: %s inside the region begun at line %d", f.Path, i+1, markBegin, open.Line-1)
		case kind == "begin" && len(names) == 0:
			return nil, fmt.Errorf("%s:%d: %s names no version", f.Path, i+1, markBegin)
		case kind == "begin":
			open, body = &Region{Versions: names, Path: f.Path, Line: i + 2}, nil
		case open == nil:
			return nil, fmt.Errorf("%s:%d: %s with no %s before it", f.Path, i+1, markEnd, markBegin)
		case len(body) == 0:
			return nil, fmt.Errorf("%s:%d: an empty region", f.Path, i+1)
		default:
			open.Text = dedent(body)
			out = append(out, *open)
			open = nil
		}
	}
	if open != nil {
		return nil, fmt.Errorf("%s:%d: %s never ended", f.Path, open.Line-1, markBegin)
	}
	return out, nil
}

// Unmarked is text without its lesson marks: the docs' excerpts.
func Unmarked(text string) string {
	lines := strings.SplitAfter(text, "\n")
	out := lines[:0]
	for _, l := range lines {
		if _, _, ok := mark(l); !ok {
			out = append(out, l)
		}
	}
	return strings.Join(out, "")
}

// dedent joins lines, their common leading whitespace removed, each ending
// in a newline.
func dedent(lines []string) string {
	prefix := ""
	first := true
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		lead := l[:len(l)-len(strings.TrimLeft(l, " \t"))]
		if first {
			prefix, first = lead, false
			continue
		}
		for !strings.HasPrefix(lead, prefix) {
			prefix = prefix[:len(prefix)-1]
		}
	}
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(strings.TrimPrefix(l, prefix))
		b.WriteByte('\n')
	}
	return b.String()
}
