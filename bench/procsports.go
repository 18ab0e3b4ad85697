package bench

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// Ports of the kcoord processes (Procs) come from below the kernel's
// ephemeral range: a node binds its ports only some time after they are
// picked, and meanwhile the clients of this and other programs on the
// machine take ephemeral ports for their connections, so a port that
// bind(0) handed out could be gone by then. A port is handed out once per
// process, and only when it was free a moment ago (TCP, and UDP too for
// gossip). StartProcs starts the cluster again on other ports if a node
// still finds one taken.
const (
	portsLow = 20000
	// portsHigh is used when the ephemeral range cannot be read, or
	// starts too low to leave room below it.
	portsHigh = 32768
)

var (
	portsMu   sync.Mutex
	portsUsed = map[int]bool{}
)

// ErrNoFreePort means no loopback port was found free.
var ErrNoFreePort = errors.New("bench: no free loopback port below the ephemeral range")

// FreeLoopbackAddr returns a 127.0.0.1 address whose port was free a
// moment ago, for TCP and, with udp, for UDP too (memberlist uses both).
// Safe from any goroutine.
func FreeLoopbackAddr(udp bool) (string, error) {
	hi := ephemeralLow()
	if hi < portsLow+1000 {
		hi = portsHigh
	}
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 1000 {
		port := portsLow + rand.IntN(hi-portsLow)
		if portsUsed[port] {
			continue
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		if udp {
			pc, err := net.ListenPacket("udp", addr)
			if err != nil {
				l.Close()
				continue
			}
			pc.Close()
		}
		l.Close()
		portsUsed[port] = true
		return addr, nil
	}
	return "", fmt.Errorf("%w (%d to %d)", ErrNoFreePort, portsLow, hi)
}

// ephemeralLow is the first port of the kernel's ephemeral range, or
// portsHigh when it cannot be read.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return portsHigh
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return portsHigh
	}
	low, err := strconv.Atoi(f[0])
	if err != nil {
		return portsHigh
	}
	return low
}
