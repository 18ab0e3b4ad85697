// Package testkit holds the helpers that the tests of several kcoord
// packages share (cluster, cluster/raftnet, bench, e2e): loggers that
// write to the test's log, a log capture for tests that check log lines,
// polling for a condition, a certificate authority made for one test, and
// the kcoord binary built once per test run. It imports no kcoord
// package, so any package's internal tests can use it.
//
//   - log.go: Logger, Capture and LogCapture.
//   - eventually.go: Eventually.
//   - conn.go: ExpectClosed and RefusingAddr.
//   - ca.go: CA, TLSFiles and WriteTLSFiles.
//   - binary.go: KcoordBinary and RemoveBinary.
package testkit
