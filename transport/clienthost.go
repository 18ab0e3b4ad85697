package transport

import (
	"fmt"
	"net"
)

// kafkaClientHost formats addr's IP as Kafka reports a client host (Java's
// InetAddress.toString with no host name): "/" then the address, IPv6 as
// eight uncompressed lowercase hex groups.
func kafkaClientHost(addr net.Addr) string {
	var ip net.IP
	var zone string
	switch a := addr.(type) {
	case *net.TCPAddr:
		ip, zone = a.IP, a.Zone
	default:
		host, _, err := net.SplitHostPort(addr.String())
		if err != nil {
			return "/" + addr.String()
		}
		ip = net.ParseIP(host)
		if ip == nil {
			return "/" + host
		}
	}
	if v4 := ip.To4(); v4 != nil {
		return "/" + v4.String()
	}
	if len(ip) != net.IPv6len {
		return "/" + ip.String()
	}
	s := "/"
	for i := 0; i < net.IPv6len; i += 2 {
		if i > 0 {
			s += ":"
		}
		s += fmt.Sprintf("%x", uint16(ip[i])<<8|uint16(ip[i+1]))
	}
	if zone != "" {
		s += "%" + zone
	}
	return s
}
