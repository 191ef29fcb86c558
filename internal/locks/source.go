// Package locks gives the lab the lock packages' code as it runs: each
// version's guard and its Lua scripts, embedded at build time from the very
// files the service is compiled from, so the page cannot drift from them.
// The mechanisms themselves are the packages below this one.
package locks

import (
	"embed"
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
//go:embed redlock/redlock.go redlock/*.lua etcd/etcd.go zk/zk.go zk/session.go zk/watch.go db/db.go db/seed.go db/getlock.go db/watch.go db/*.sql
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
