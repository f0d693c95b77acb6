// Package freeport finds TCP ports on 127.0.0.1 for the test helpers that start servers (etcd, Kafka) which must
// get the same port back after a stop. It holds no state and is safe for concurrent use; a port it returns is free
// when it returns, and another process may still take it before the caller binds it, so callers retry.
package freeport

import (
	"fmt"
	mrand "math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// Get returns a free TCP port on 127.0.0.1, outside the kernel's ephemeral range when it can: a port the kernel
// hands out for bind(0) and outgoing connections could be given to another process while a server is stopped, and
// a restart needs it back.
func Get() (int, error) {
	lo := ephemeralStart()
	for range 50 {
		// Registered ports below the ephemeral range, above the well-known ones most services use.
		port := 10000 + mrand.IntN(lo-10000)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err == nil {
			l.Close()
			return port, nil
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// ephemeralStart is the first port of the kernel's range for bind(0) and outgoing connections (Linux's default
// if unknown), above 10000.
func ephemeralStart() int {
	const linuxDefault = 32768
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return linuxDefault
	}
	f := strings.Fields(string(data))
	if len(f) != 2 {
		return linuxDefault
	}
	lo, err := strconv.Atoi(f[0])
	if err != nil || lo <= 10000 {
		return linuxDefault
	}
	return lo
}
