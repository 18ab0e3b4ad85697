// Package testkit holds the helpers that the tests of several kcoord
// packages share (cluster and cluster/raftnet): loggers that write to the
// test's log, a log capture for tests that check log lines, polling for a
// condition, and a certificate authority made for one test. It imports no
// kcoord package, so any package's internal tests can use it.
//
//   - log.go: Logger, Capture and LogCapture.
//   - eventually.go: Eventually.
//   - conn.go: ExpectClosed and RefusingAddr.
//   - ca.go: CA, TLSFiles and WriteTLSFiles.
package testkit
