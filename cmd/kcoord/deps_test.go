package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The kcoord binary's own packages link no test code: harnesses shipped
// with a package (server/harness.go) take their own TB interface, not
// package testing's. (hashicorp/raft v1.8.0 ships a testing.go that
// imports package testing, so the binary links it through raft all the
// same; that is upstream's.)
func TestTheBinaryLinksNoTestingOfItsOwn(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool to list the binary's packages")
	}
	out, err := exec.Command(gobin, "list", "-deps", "-f", "{{.ImportPath}} {{join .Imports \",\"}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	var checked int
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, " ")
		if !strings.HasPrefix(pkg, "github.com/kcoord/kcoord") {
			continue
		}
		checked++
		if slices.Contains(strings.Split(imports, ","), "testing") {
			t.Errorf("%s, linked into the kcoord binary, imports package testing", pkg)
		}
	}
	if checked < 10 {
		t.Fatalf("only %d of kcoord's packages listed: %s", checked, out)
	}
}
