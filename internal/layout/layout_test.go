package layout

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// moduleRoot is the directory holding go.mod, found upward from the test's
// working directory (the package's own).
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// packageDirs lists every directory of the module that holds a Go package,
// leaving out testdata, hidden directories and build output, as the go
// command does.
func packageDirs(t *testing.T, root string) []string {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "bin") {
			return filepath.SkipDir
		}
		if len(sourceFiles(t, path)) > 0 {
			dirs = append(dirs, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

// sourceFiles lists a directory's non-test Go files by base name.
func sourceFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() && strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go") {
			files = append(files, name)
		}
	}
	return files
}

// packageDoc returns the package doc comment of the package in dir, and
// the file it is in.
func packageDoc(t *testing.T, dir string) (doc, file string) {
	t.Helper()
	fset := token.NewFileSet()
	for _, name := range sourceFiles(t, dir) {
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		if f.Doc != nil {
			return f.Doc.Text(), name
		}
	}
	return "", ""
}

// fileName matches a Go file's name standing on its own in prose: not a
// path's last element (groups/hold.go names another package's file).
var fileName = regexp.MustCompile(`(^|[^/\w.])([A-Za-z0-9]\w*\.go)\b`)

// namedFiles lists the files a package doc names without a directory.
func namedFiles(doc string) []string {
	var names []string
	for _, m := range fileName.FindAllStringSubmatch(doc, -1) {
		names = append(names, m[2])
	}
	return names
}

// Every package's doc comment, in its doc.go, names each of the package's
// files: the doc is the map a reader opens first, and a file it leaves out
// is a room nobody is told about.
func TestEveryPackageDocNamesItsFiles(t *testing.T) {
	root := moduleRoot(t)
	dirs := packageDirs(t, root)
	if len(dirs) < 10 {
		t.Fatalf("found only %d packages under %s", len(dirs), root)
	}
	for _, dir := range dirs {
		rel, _ := filepath.Rel(root, dir)
		t.Run(filepath.ToSlash(rel), func(t *testing.T) {
			doc, file := packageDoc(t, dir)
			switch {
			case doc == "":
				t.Fatalf("%s has no package doc comment; write one in %s", rel, filepath.Join(rel, "doc.go"))
			case file != "doc.go":
				t.Errorf("%s keeps its package doc in %s; move it to doc.go", rel, file)
			}
			var missing []string
			for _, name := range sourceFiles(t, dir) {
				if name != "doc.go" && !strings.Contains(doc, name) {
					missing = append(missing, name)
				}
			}
			if len(missing) > 0 {
				slices.Sort(missing)
				t.Errorf("the package doc of %s does not name %s: say in %s what each holds",
					rel, strings.Join(missing, ", "), filepath.Join(rel, "doc.go"))
			}
			for _, name := range namedFiles(doc) {
				if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
					t.Errorf("the package doc of %s names %s, which is not in the package (write another package's file with its directory, as groups/hold.go)", rel, name)
				}
			}
		})
	}
}
