// Package layout holds no code, only tests of the repository's shape: the
// rules a reader relies on to find their way that the compiler does not
// check.
//
// The package doc comment of every package (kept in its doc.go) is the map
// of that package: it names each of its non-test files with the file's
// role, so a newcomer opens doc.go first and knows where to read next.
// TestEveryPackageDocNamesItsFiles fails when a file is added without a
// line in its package's map. The docs (docs/*.md, README.md) point at
// files by path, and TestTheDocsNameFilesThatExist fails when such a path
// leads nowhere (a file moved or went). This file, doc.go, is this
// package's whole code.
package layout
