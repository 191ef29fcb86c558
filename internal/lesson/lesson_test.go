package lesson

import (
	"strings"
	"testing"

	"github.com/locklab/locklab/internal/locks"
	"github.com/locklab/locklab/internal/versions"
)

// Every version has lines marked for its lesson, and every mark is in its
// place and names versions that exist: a version added without marks, or a
// mark left open by an edit, fails here.
func TestEveryVersionIsMarked(t *testing.T) {
	if err := Check(); err != nil {
		t.Fatal(err)
	}
	for _, v := range versions.All {
		l, ok := For(v.Name)
		if !ok || len(l.Regions) == 0 || len(l.Files) == 0 {
			t.Errorf("%s: %d regions, %d files", v.Name, len(l.Regions), len(l.Files))
		}
		if b := v.Lesson.Base; b != "" {
			if _, ok := versions.Lookup(b); !ok {
				t.Errorf("%s: base %q is no version", v.Name, b)
			}
		}
	}
}

// changed is a lesson's diff: the lines removed and added.
func changed(t *testing.T, version string) (removed, added []string) {
	t.Helper()
	l, ok := For(version)
	if !ok {
		t.Fatalf("no lesson for %s", version)
	}
	for _, d := range l.Diff {
		switch d.Op {
		case "-":
			removed = append(removed, strings.TrimSpace(d.Text))
		case "+":
			added = append(added, strings.TrimSpace(d.Text))
		}
	}
	return removed, added
}

// v4 against v3 is the two lines the tutorial changes: SETNX with no
// expiry becomes SET NX with one, its comment with it; the DEL stays.
func TestV4AgainstV3(t *testing.T) {
	removed, added := changed(t, "v4")
	if len(removed) != 2 || len(added) != 2 || !strings.Contains(removed[1], "owner, 0)") || !strings.Contains(added[1], "l.opts.TTL)") {
		t.Errorf("v4 against v3: removed %q, added %q; want the SETNX line and its comment for SET NX PX's", removed, added)
	}
	l, _ := For("v4")
	if l.Base != "v3" || !strings.Contains(l.Files[0].Path, "v3_setnx/setnx.go") {
		t.Errorf("v4: base %q, first file %s", l.Base, l.Files[0].Path)
	}
	// Each line says where it is: the added SET NX is on its line.
	for _, d := range l.Diff {
		if d.Op == "+" && strings.Contains(d.Text, "SetNX") {
			file := strings.Split(l.Files[0].Text, "\n")
			if strings.TrimSpace(file[d.Line-1]) != strings.TrimSpace(d.Text) {
				t.Errorf("v4's %q said to be at %s:%d, which is %q", d.Text, d.Path, d.Line, file[d.Line-1])
			}
		}
	}
}

// v5 only adds its GET and compare; v6 swaps them and the DEL for the
// script; v2 is v1's code, unchanged (the deployment is its lesson).
func TestChainOfVersions(t *testing.T) {
	if removed, added := changed(t, "v5"); len(removed) != 0 || !strings.Contains(strings.Join(added, "\n"), "l.rdb.Get(") {
		t.Errorf("v5 against v4: removed %q, added %q", removed, added)
	}
	removed, added := changed(t, "v6")
	if !strings.Contains(strings.Join(removed, "\n"), "l.rdb.Del(") || !strings.Contains(strings.Join(added, "\n"), "redis.call('GET', KEYS[1]) == ARGV[1]") {
		t.Errorf("v6 against v5: removed %q, added %q", removed, added)
	}
	if removed, added := changed(t, "v2"); len(removed)+len(added) != 0 {
		t.Errorf("v2 against v1: removed %q, added %q; want the same code", removed, added)
	}
	if removed, added := changed(t, "etcd"); len(removed) != 0 || len(added) == 0 {
		t.Errorf("etcd, a family of its own: removed %q, added %d lines; want all added", removed, len(added))
	}
}

// Marks out of place are errors that say where.
func TestMarksOutOfPlace(t *testing.T) {
	for text, want := range map[string]string{
		"a\n// lesson:end\n":                          "f.go:2: lesson:end with no lesson:begin before it",
		"// lesson:begin v1\nx\n// lesson:begin v2\n": "f.go:3: lesson:begin inside the region begun at line 1",
		"// lesson:begin\nx\n// lesson:end\n":         "f.go:1: lesson:begin names no version",
		"-- lesson:begin v6\nx\n":                     "f.go:1: lesson:begin never ended",
		"// lesson:begin v6\n// lesson:end\n":         "f.go:2: an empty region",
	} {
		if _, err := locks.Marked(locks.File{Path: "f.go", Text: text}); err == nil || err.Error() != want {
			t.Errorf("%q: %v, want %q", text, err, want)
		}
	}
	rs, err := locks.Marked(locks.File{Path: "f.lua", Text: "x\n  -- lesson:begin v7 v8\n  if a then\n    b()\n  end\n  -- lesson:end\n"})
	if err != nil || len(rs) != 1 || rs[0].Line != 3 || rs[0].Text != "if a then\n  b()\nend\n" || strings.Join(rs[0].Versions, " ") != "v7 v8" {
		t.Errorf("a Lua region: %+v %v", rs, err)
	}
}
