package transport

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func nopHandler(context.Context, *RequestContext, kmsg.Request) (kmsg.Response, error) {
	return nil, errors.New("unused")
}

func TestMuxHandlePanics(t *testing.T) {
	cases := []struct {
		name     string
		key      int16
		min, max int16
		fn       HandlerFunc
	}{
		{"duplicate", 12, 0, 4, nopHandler},
		{"ApiVersions", 18, 0, 3, nopHandler},
		{"unknown key", 9999, 0, 0, nopHandler},
		{"above kmsg max", 12, 0, 5, nopHandler},
		{"negative min", 3, -1, 4, nopHandler},
		{"empty range", 3, 5, 4, nopHandler},
		{"nil handler", 3, 0, 4, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMux()
			m.Handle(12, 0, 4, nopHandler)
			defer func() {
				if recover() == nil {
					t.Fatal("Handle did not panic")
				}
			}()
			m.Handle(tc.key, tc.min, tc.max, tc.fn)
		})
	}
}

func TestMuxVersionsEmpty(t *testing.T) {
	v := NewMux().Versions()
	if len(v) != 1 || v[0].ApiKey != 18 || v[0].MinVersion != 0 || v[0].MaxVersion != 3 {
		t.Fatalf("Versions() = %+v", v)
	}
}

func TestConfigValidate(t *testing.T) {
	good := DefaultConfig()
	if err := good.Validate(); err != nil {
		t.Fatalf("DefaultConfig: %v", err)
	}
	if good.MaxRequestBytes != 104857600 || good.MaxInFlightRequests != 16 || good.QueuedMaxRequestBytes != 209715200 ||
		good.MaxConnections != 2147483647 || good.MaxConnectionsPerIP != 2147483647 {
		t.Fatalf("defaults %+v", good)
	}
	for name, mod := range map[string]func(*Config){
		"unbounded pool":               func(c *Config) { c.QueuedMaxRequestBytes = -1 },
		"pool of one max request":      func(c *Config) { c.QueuedMaxRequestBytes = int64(c.MaxRequestBytes) },
		"zero means default":           func(c *Config) { c.QueuedMaxRequestBytes, c.MaxConnections, c.MaxConnectionsPerIP = 0, 0, 0 },
		"unbounded pool, huge request": func(c *Config) { c.QueuedMaxRequestBytes, c.MaxRequestBytes = -1, 1<<30 },
	} {
		c := DefaultConfig()
		mod(&c)
		if err := c.Validate(); err != nil {
			t.Errorf("%s: Validate() = %v", name, err)
		}
	}
	for name, mod := range map[string]func(*Config){
		"empty addr":      func(c *Config) { c.Addr = "" },
		"addr no port":    func(c *Config) { c.Addr = "localhost" },
		"tiny max bytes":  func(c *Config) { c.MaxRequestBytes = 4 },
		"negative max":    func(c *Config) { c.MaxRequestBytes = -1 },
		"negative flight": func(c *Config) { c.MaxInFlightRequests = -1 },
		"negative conns":  func(c *Config) { c.MaxConnections = -1 },
		"negative per ip": func(c *Config) { c.MaxConnectionsPerIP = -1 },
		"pool below max":  func(c *Config) { c.QueuedMaxRequestBytes = int64(c.MaxRequestBytes) - 1 },
		"pool of -2":      func(c *Config) { c.QueuedMaxRequestBytes = -2 },
		"default pool below a larger max request": func(c *Config) {
			c.QueuedMaxRequestBytes, c.MaxRequestBytes = 0, 300<<20
		},
	} {
		c := DefaultConfig()
		mod(&c)
		if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: Validate() = %v", name, err)
		}
		if _, err := NewServer(c, NewMux()); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: NewServer() = %v", name, err)
		}
	}
	if _, err := NewServer(DefaultConfig(), nil); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("nil mux: %v", err)
	}
}

func TestKafkaClientHost(t *testing.T) {
	for _, tc := range []struct {
		addr net.Addr
		want string
	}{
		{&net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 1}, "/127.0.0.1"},
		{&net.TCPAddr{IP: net.ParseIP("::ffff:10.0.0.7"), Port: 1}, "/10.0.0.7"},
		{&net.TCPAddr{IP: net.ParseIP("::1"), Port: 1}, "/0:0:0:0:0:0:0:1"},
		{&net.TCPAddr{IP: net.ParseIP("fe80::1:AB"), Port: 1, Zone: "eth0"}, "/fe80:0:0:0:0:0:1:ab%eth0"},
		{&net.UnixAddr{Name: "@sock", Net: "unix"}, "/@sock"},
	} {
		if got := kafkaClientHost(tc.addr); got != tc.want {
			t.Errorf("kafkaClientHost(%v) = %q, want %q", tc.addr, got, tc.want)
		}
	}
}
