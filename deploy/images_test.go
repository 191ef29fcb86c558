// Package deploy_test checks the repository's deployment files as a whole:
// what images they pull, and what their commands put on command lines.
package deploy_test

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// root is the checkout: this package is its deploy/ folder.
const root = ".."

// repoFiles lists the checkout's files that keep holds true for, skipping
// what is not the repository's own: .git, and what its tools make (the run
// directory, binaries, reports).
func repoFiles(t *testing.T, keep func(path string) bool) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && slices.Contains([]string{".git", ".run", "bin", "reports", "rootfs"}, d.Name()) {
			return filepath.SkipDir
		}
		if !d.IsDir() && keep(path) {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func isDockerfile(path string) bool {
	base := filepath.Base(path)
	return base == "Dockerfile" || strings.HasPrefix(base, "Dockerfile.") || strings.HasSuffix(base, ".Dockerfile") || base == "Containerfile"
}

func isYAML(path string) bool {
	return strings.HasSuffix(path, ".yml") || strings.HasSuffix(path, ".yaml")
}

// pinned is an image reference that names its content: NAME:TAG@sha256:DIGEST
// (the digest is what is pulled, the tag says what it is).
var pinned = regexp.MustCompile(`^[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._-][a-z0-9]+)*)*:[A-Za-z0-9_][A-Za-z0-9_.-]*@sha256:[0-9a-f]{64}$`)

// ref is one image reference and where it is.
type ref struct{ image, at string }

// Every image the repository's Dockerfiles and Compose files (FROM lines,
// image: keys, x-*-image anchors) would pull from a registry is pinned by
// digest, the Go build image too: a tag alone is whatever its publisher (or
// whoever took over the name) pushes next. Not pulled, so not pinned: scratch,
// an earlier stage of the same Dockerfile, and the images this repository
// builds itself, which have no registry digest (docker import of a debootstrap
// tree, docker build): a locklab/ name that a Compose service builds, or that
// deploy/offline/build-images.sh makes (locklab/base:offline, and
// locklab/TARGET:offline for each target of deploy/offline/Dockerfile its loop
// builds). A locklab/ name nothing here builds is an error like any other.
func TestImagesPinned(t *testing.T) {
	dockerfiles, composes := repoFiles(t, isDockerfile), repoFiles(t, isYAML)
	if len(dockerfiles) < 2 || len(composes) < 3 {
		t.Fatalf("found Dockerfiles %v and YAML files %v: fewer than the repository has", dockerfiles, composes)
	}
	built := offlineImages(t)
	var refs []ref
	for _, f := range dockerfiles {
		r, _ := fromLines(t, f)
		refs = append(refs, r...)
	}
	for _, f := range composes {
		r, b := composeImages(t, f)
		refs, built = append(refs, r...), append(built, b...)
	}
	if len(refs) < 10 {
		t.Fatalf("found only %d image references: %v", len(refs), refs)
	}
	t.Logf("%d references; built here: %v", len(refs), built)
	for _, r := range refs {
		t.Logf("%s: %s", r.at, r.image)
		switch {
		case strings.HasPrefix(r.image, "locklab/"):
			if !slices.Contains(built, r.image) {
				t.Errorf("%s: %s is in this repository's namespace, but nothing here builds it (built: %v)", r.at, r.image, built)
			}
		case strings.Contains(r.image, "$"):
			t.Errorf("%s: %s names its image through a variable: it cannot be checked; pin it in place", r.at, r.image)
		case !pinned.MatchString(r.image):
			t.Errorf("%s: %s is not pinned: want NAME:TAG@sha256:<digest> (the digest is what is pulled)", r.at, r.image)
		}
	}
}

// fromLines is what a Dockerfile's FROM lines pull (neither scratch nor an
// earlier stage), and its stages' names.
func fromLines(t *testing.T, path string) (refs []ref, stages []string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		words := strings.Fields(sc.Text())
		if len(words) < 2 || !strings.EqualFold(words[0], "FROM") {
			continue
		}
		words = slices.DeleteFunc(words[1:], func(w string) bool { return strings.HasPrefix(w, "--") }) // --platform=...
		if image := strings.ToLower(words[0]); image != "scratch" && !slices.Contains(stages, image) {
			refs = append(refs, ref{words[0], path + ":" + strconv.Itoa(n)})
		}
		if len(words) >= 3 && strings.EqualFold(words[1], "AS") {
			stages = append(stages, strings.ToLower(words[2]))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return refs, stages
}

// composeImages is what a Compose file names under image: keys and
// x-*-image anchors (aliases resolved), and the images its services build
// (a mapping with both build: and image:).
func composeImages(t *testing.T, path string) (refs []ref, built []string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Kind == yaml.MappingNode {
			builds := false
			var image string
			for i := 0; i+1 < len(n.Content); i += 2 {
				key, value := n.Content[i], n.Content[i+1]
				for value.Kind == yaml.AliasNode {
					value = value.Alias
				}
				switch {
				case key.Value == "build":
					builds = true
				case (key.Value == "image" || strings.HasSuffix(key.Value, "-image")) && value.Kind == yaml.ScalarNode:
					image = value.Value
					refs = append(refs, ref{image, path + ":" + strconv.Itoa(value.Line)})
				}
			}
			if builds && image != "" {
				built = append(built, image)
			}
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(&doc)
	return refs, built
}

// offlineImages are the images deploy/offline/build-images.sh makes: the
// base it imports, and locklab/TARGET:offline for each target of its loop,
// each one a stage of deploy/offline/Dockerfile.
func offlineImages(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, "deploy", "offline", "build-images.sh"))
	if err != nil {
		t.Fatal(err)
	}
	script := string(raw)
	var images []string
	for _, m := range regexp.MustCompile(`docker import - (\S+)`).FindAllStringSubmatch(script, -1) {
		images = append(images, m[1])
	}
	loop := regexp.MustCompile(`for target in ([a-z0-9 ]+); do`).FindStringSubmatch(script)
	if loop == nil || !strings.Contains(script, `-t "locklab/$target:offline"`) || len(images) == 0 {
		t.Fatal("deploy/offline/build-images.sh: its docker import, or its loop of docker build -t locklab/$target:offline, is not where this test looks")
	}
	_, stages := fromLines(t, filepath.Join(root, "deploy", "offline", "Dockerfile"))
	for _, target := range strings.Fields(loop[1]) {
		if !slices.Contains(stages, target) {
			t.Errorf("build-images.sh builds target %s, which deploy/offline/Dockerfile does not have", target)
		}
		images = append(images, "locklab/"+target+":offline")
	}
	return images
}
