// Package lesson is each version's code as the lab's lesson shows it: the
// lines that make the version what it is (its acquire and its release as
// the service runs them), marked in the very files the service is built
// from (locks.Marked), shown as a diff against the lines of the version it
// follows (versions.Lesson.Base): v4 against v3 is the two lines the
// tutorial changes. The whole files stay one click away.
package lesson

import (
	"cmp"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/locklab/locklab/internal/locks"
	"github.com/locklab/locklab/internal/sale"
	"github.com/locklab/locklab/internal/versions"
	"github.com/sergi/go-diff/diffmatchpatch"
)

// Line is one line of a lesson's diff: Op "=" in both versions, "+" only in
// this one, "-" only in its base; where it is (Path, Line from 1: the base's
// file for a "-").
type Line struct {
	Op   string `json:"op"`
	Text string `json:"text"`
	Path string `json:"path"`
	Line int    `json:"line"`
}

// Lesson is a version's marked code: its regions, their diff against its
// base's (every line "+" when it has none), and the whole files they are
// in, the version's own package first.
type Lesson struct {
	Version string         `json:"version"`
	Base    string         `json:"base,omitempty"`
	Regions []locks.Region `json:"regions"`
	Diff    []Line         `json:"diff"`
	Files   []locks.File   `json:"files"`
}

// sources are every file a version's code is in: the lock packages', and
// the sale's own (none's read-check-write, atomic's script), ordered by
// directory, Go first, then by name: a lesson's regions follow that order,
// so its acquire (in the package it builds on) comes before its release.
func sources() []locks.File {
	files := append(locks.Files(),
		locks.File{Path: "internal/sale/sale.go", Text: sale.Source()},
		locks.File{Path: "internal/sale/decrement.lua", Text: sale.Script("decrement.lua")})
	slices.SortFunc(files, func(a, b locks.File) int {
		return cmp.Or(strings.Compare(path.Dir(a.Path), path.Dir(b.Path)),
			boolInt(path.Ext(a.Path) != ".go")-boolInt(path.Ext(b.Path) != ".go"),
			strings.Compare(a.Path, b.Path))
	})
	return files
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

type marked struct {
	regions map[string][]locks.Region // by version
	files   map[string]locks.File     // by path
	err     error
}

// marks reads every source's marks once: the sources are embedded.
var marks = sync.OnceValue(func() marked {
	m := marked{regions: map[string][]locks.Region{}, files: map[string]locks.File{}}
	var errs []string
	for _, f := range sources() {
		m.files[f.Path] = f
		rs, err := locks.Marked(f)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		for _, r := range rs {
			for _, v := range r.Versions {
				if _, ok := versions.Lookup(v); !ok {
					errs = append(errs, fmt.Sprintf("%s:%d: marked for %q, which is no version", r.Path, r.Line-1, v))
				}
				m.regions[v] = append(m.regions[v], r)
			}
		}
	}
	if errs != nil {
		m.err = fmt.Errorf("lesson marks: %s", strings.Join(errs, "; "))
	}
	return m
})

// Check says what is wrong with the marks, if anything: a mark out of
// place, a region for no version, a version with no region.
func Check() error {
	m := marks()
	var missing []string
	for _, v := range versions.All {
		if len(m.regions[v.Name]) == 0 {
			missing = append(missing, v.Name)
		}
	}
	switch {
	case m.err != nil:
		return m.err
	case missing != nil:
		return fmt.Errorf("lesson marks: no region marked for %s", strings.Join(missing, ", "))
	}
	return nil
}

// For returns version's lesson; false for a version that does not exist.
func For(version string) (Lesson, bool) {
	v, ok := versions.Lookup(version)
	if !ok {
		return Lesson{}, false
	}
	m := marks()
	l := Lesson{Version: v.Name, Base: v.Lesson.Base, Regions: m.regions[v.Name]}
	l.Diff = diff(m.regions[l.Base], l.Regions)
	own := locks.Code(v.Name) // the package's files, Go first
	l.Files = append(l.Files, own...)
	for _, r := range l.Regions {
		if !slices.ContainsFunc(l.Files, func(f locks.File) bool { return f.Path == r.Path }) {
			l.Files = append(l.Files, m.files[r.Path])
		}
	}
	if l.Regions == nil {
		l.Regions = []locks.Region{}
	}
	return l, true
}

// numbered are regions' lines, each with where it is.
func numbered(rs []locks.Region) []Line {
	var out []Line
	for _, r := range rs {
		for i, t := range strings.Split(strings.TrimSuffix(r.Text, "\n"), "\n") {
			out = append(out, Line{Text: t, Path: r.Path, Line: r.Line + i})
		}
	}
	return out
}

// diff is the line diff of from's regions to to's (diffmatchpatch's line
// mode: each line compared whole).
func diff(from, to []locks.Region) []Line {
	a, b := numbered(from), numbered(to)
	text := func(ls []Line) string {
		var s strings.Builder
		for _, l := range ls {
			s.WriteString(l.Text + "\n")
		}
		return s.String()
	}
	dmp := diffmatchpatch.New()
	ra, rb, lines := dmp.DiffLinesToRunes(text(a), text(b))
	// Cleaned up semantically: a lone shared "}" between two changes does
	// not split them.
	diffs := dmp.DiffCharsToLines(dmp.DiffCleanupSemantic(dmp.DiffMainRunes(ra, rb, false)), lines)
	out := []Line{}
	i, j := 0, 0
	for _, d := range diffs {
		for range strings.Count(d.Text, "\n") {
			switch d.Type {
			case diffmatchpatch.DiffEqual:
				l := b[j]
				l.Op = "="
				out, i, j = append(out, l), i+1, j+1
			case diffmatchpatch.DiffDelete:
				l := a[i]
				l.Op = "-"
				out, i = append(out, l), i+1
			case diffmatchpatch.DiffInsert:
				l := b[j]
				l.Op = "+"
				out, j = append(out, l), j+1
			}
		}
	}
	return out
}
