package layout

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// goPath matches a Go file named with its directory in prose
// ("cluster/raftnet/mux.go", "groups/hold.go").
var goPath = regexp.MustCompile("[A-Za-z0-9_]+(?:/[A-Za-z0-9_]+)*/[A-Za-z0-9_]+\\.go\\b")

// The docs and the package docs point readers at files by path (from the
// module's root); a path to a file that moved or went is a dead end, so
// every one must exist.
func TestTheDocsNameFilesThatExist(t *testing.T) {
	root := moduleRoot(t)
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	docs = append(docs, filepath.Join(root, "README.md"))
	for _, dir := range packageDirs(t, root) {
		doc, file := packageDoc(t, dir)
		rel, _ := filepath.Rel(root, filepath.Join(dir, file))
		for _, p := range goPath.FindAllString(doc, -1) {
			if _, err := os.Stat(filepath.Join(root, p)); err != nil {
				t.Errorf("the package doc in %s names %s, which does not exist", rel, p)
			}
		}
	}
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, doc)
		for _, p := range goPath.FindAllString(string(b), -1) {
			if _, err := os.Stat(filepath.Join(root, p)); err != nil {
				t.Errorf("%s names %s, which does not exist", rel, p)
			}
		}
	}
}
