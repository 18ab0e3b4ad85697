// Package testlog sends a kcoord logger's lines to the test that made
// them (t.Log), for every package's tests and for the harnesses that ship
// inside packages (server/harness.go, transport's RawClient): it imports
// no testing, so a harness linked into the binary can use it.
//
//   - testlog.go: T, the part of testing.TB it needs; Writer, an
//     io.Writer to t.Log that goes quiet once the test ends, waiting for
//     a line being written; and Logger, an hclog.Logger over it at the
//     level KCOORD_TEST_LOG names (info by default).
package testlog
