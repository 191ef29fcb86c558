package lab

import (
	"encoding/json"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/locklab/locklab/internal/scenario"
)

// The page's catalogues (static/i18n): every key in every language, the same
// placeholders in each, Chinese that is not English left as it was, and every
// key the page names in a catalogue. A key in one language only would show
// the other's words, or the key itself, to a reader of this one.

// catalogues reads static/i18n/LANG.json, by language.
func catalogues(t *testing.T) map[string]map[string]string {
	t.Helper()
	files, err := fs.Glob(static, "static/i18n/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no catalogue in static/i18n: %v", err)
	}
	out := map[string]map[string]string{}
	for _, f := range files {
		raw, err := fs.ReadFile(static, f)
		if err != nil {
			t.Fatal(err)
		}
		words := map[string]string{}
		if err := json.Unmarshal(raw, &words); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[strings.TrimSuffix(strings.TrimPrefix(f, "static/i18n/"), ".json")] = words
	}
	if out["en"] == nil || out["zh"] == nil {
		t.Fatalf("want en.json and zh.json, have %v", slices.Sorted(maps.Keys(out)))
	}
	return out
}

var placeholder = regexp.MustCompile(`\{\w+\}`)

func TestCatalogueKeysInEveryLanguage(t *testing.T) {
	cats := catalogues(t)
	en := cats["en"]
	for lang, words := range cats {
		for _, k := range slices.Sorted(maps.Keys(en)) {
			if _, ok := words[k]; !ok {
				t.Errorf("%s is in en.json, not in %s.json", k, lang)
			}
		}
		for _, k := range slices.Sorted(maps.Keys(words)) {
			if _, ok := en[k]; !ok {
				t.Errorf("%s is in %s.json, not in en.json", k, lang)
				continue
			}
			want := slices.Sorted(slices.Values(placeholder.FindAllString(en[k], -1)))
			got := slices.Sorted(slices.Values(placeholder.FindAllString(words[k], -1)))
			if !slices.Equal(slices.Compact(want), slices.Compact(got)) {
				t.Errorf("%s: %s.json puts in %v, en.json %v", k, lang, got, want)
			}
		}
	}
}

// englishRun is three English words in a row (a sentence left untranslated),
// as the browser test finds them on the page; a command in capitals (SET NX
// EX) is not one.
var englishRun = regexp.MustCompile(`\b[A-Za-z][a-z']*(?:[ ,]+[A-Za-z][a-z']*){2,}\b`)

func TestChineseCatalogueIsChinese(t *testing.T) {
	code := regexp.MustCompile(`<code>[^<]*</code>|\{\w+\}|"[^"]*"`)
	for k, v := range catalogues(t)["zh"] {
		if m := englishRun.FindString(code.ReplaceAllString(v, " ")); m != "" {
			t.Errorf("zh.json's %s says %q in English: %q", k, m, v)
		}
	}
}

// TestCatalogueHasEveryKeyThePageUses finds the keys index.html, lab.js,
// steps.js and queue.js name: data-i18n attributes, string literals of a
// catalogue's sections ("steps.theEnd"; a prefix the code completes,
// "word.", is not one), and a story's title, intro and captions, which
// must be keys.
func TestCatalogueHasEveryKeyThePageUses(t *testing.T) {
	en := catalogues(t)["en"]
	sections := map[string]bool{}
	for k := range en {
		sections[strings.SplitN(k, ".", 2)[0]] = true
	}
	read := func(name string) string {
		raw, err := fs.ReadFile(static, "static/"+name)
		if err != nil {
			t.Fatal(err)
		}
		return string(raw)
	}
	used := map[string]string{} // key: where
	for _, m := range regexp.MustCompile(`data-i18n(?:-html|-title|-label)?="([^"]+)"`).FindAllStringSubmatch(read("index.html"), -1) {
		used[m[1]] = "index.html"
	}
	literal := regexp.MustCompile(`"([a-z][A-Za-z]*)\.([\w.-]*[\w])"`)
	for _, f := range []string{"lab.js", "steps.js", "queue.js", "frozen.js", "redlock.js"} {
		for _, m := range literal.FindAllStringSubmatch(read(f), -1) {
			if sections[m[1]] {
				used[m[1]+"."+m[2]] = f
			}
		}
	}
	// A story's words: each is a key, never the English itself.
	story := regexp.MustCompile(`\b(?:caption|title|intro): "([^"]*)"`)
	for _, f := range []string{"steps.js", "frozen.js", "redlock.js"} {
		for _, m := range story.FindAllStringSubmatch(read(f), -1) {
			used[m[1]] = f + " (a story's title, intro or caption)"
		}
	}
	if len(used) < 100 {
		t.Fatalf("found only %d keys the page uses: the search is broken", len(used))
	}
	for _, k := range slices.Sorted(maps.Keys(used)) {
		if _, ok := en[k]; !ok {
			t.Errorf("%s uses %q, which no catalogue has", used[k], k)
		}
	}
}

// The server's words the page says in the reader's language: each outcome
// the lab names (outcomeCodes), each scenario's requirement and what it
// injects (the faults view's row titles) have their keys.
func TestCatalogueHasEveryOutcomeAndRequirement(t *testing.T) {
	en := catalogues(t)["en"]
	for text, code := range outcomeCodes {
		if en["outcome."+code] != text {
			t.Errorf("outcome.%s is %q in en.json, the scenarios say %q", code, en["outcome."+code], text)
		}
	}
	for _, s := range scenario.All {
		if s.Requirement != "" && en["requirement."+s.Name] != s.Requirement {
			t.Errorf("requirement.%s is %q in en.json, the scenario says %q", s.Name, en["requirement."+s.Name], s.Requirement)
		}
		if en["injected."+s.Name] != s.Injected {
			t.Errorf("injected.%s is %q in en.json, the scenario says %q", s.Name, en["injected."+s.Name], s.Injected)
		}
	}
}

// Every reason the server gives (reason.New's code and English form, in
// the code of the packages whose replies the lab passes on: the checker,
// the load test, the scenarios, the lab) is a key of the catalogues,
// server.CODE, with the same English: the page says the reason in its
// reader's language by its code alone. A code with two forms is one the
// page would say wrongly for one of them.
func TestCatalogueHasEveryReason(t *testing.T) {
	en := catalogues(t)["en"]
	made := regexp.MustCompile(`reason\.New\("(\w+)",\s*"((?:[^"\\]|\\.)*)"`)
	forms := map[string]string{}
	for _, dir := range []string{"../checker", "../loadtest", "../scenario", "../history", "."} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no Go files (%v)", dir, err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range made.FindAllStringSubmatch(string(raw), -1) {
				form, err := strconv.Unquote(`"` + m[2] + `"`)
				if err != nil {
					t.Fatalf("%s: %s: %v", f, m[0], err)
				}
				if was, ok := forms[m[1]]; ok && was != form {
					t.Errorf("reason %s has two forms: %q and %q (%s)", m[1], was, form, f)
				}
				forms[m[1]] = form
			}
		}
	}
	if len(forms) < 40 {
		t.Fatalf("found only %d reasons: the search is broken", len(forms))
	}
	for code, form := range forms {
		if got, ok := en["server."+code]; !ok {
			t.Errorf("reason %s (%q) has no key server.%s", code, form, code)
		} else if got != form {
			t.Errorf("server.%s is %q in en.json, the code says %q", code, got, form)
		}
	}
}
