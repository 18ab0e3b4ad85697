package testkit

import (
	"net"
	"testing"
	"time"
)

// ExpectClosed fails the test unless the peer closes c within two
// seconds.
func ExpectClosed(t testing.TB, c net.Conn) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	buf := make([]byte, 1)
	if n, err := c.Read(buf); err == nil {
		t.Fatalf("read %d bytes from a connection that should be closed", n)
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("connection not closed")
	}
}

// RefusingAddr returns a loopback address where nothing listens: a dial
// to it is refused, as one to a process that died.
func RefusingAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}
