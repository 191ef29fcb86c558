package cluster

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Listening lists the TCP sockets the cluster's processes listen on, read
// from the kernel's socket table (Linux: /proc), not from the plan: what is
// really open, the check that nothing listens beyond loopback.
func (s State) Listening() (map[string][]netip.AddrPort, error) {
	table, err := listenTable()
	if err != nil {
		return nil, err
	}
	out := map[string][]netip.AddrPort{}
	for _, p := range s.procs() {
		if !p.alive() {
			continue
		}
		fds, err := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", p.Pid))
		if err != nil {
			return nil, err
		}
		for _, fd := range fds {
			link, err := os.Readlink(fd)
			inode, ok := strings.CutPrefix(link, "socket:[")
			if err != nil || !ok {
				continue
			}
			if addr, ok := table[strings.TrimSuffix(inode, "]")]; ok {
				out[p.Name] = append(out[p.Name], addr)
			}
		}
	}
	return out, nil
}

// listenTable maps the inode of every listening TCP socket to its address.
func listenTable() (map[string]netip.AddrPort, error) {
	table := map[string]netip.AddrPort{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		file, err := os.Open(f)
		if err != nil {
			return nil, fmt.Errorf("cluster: the socket table: %w", err)
		}
		sc := bufio.NewScanner(file)
		sc.Scan() // the header
		for sc.Scan() {
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			fields := strings.Fields(sc.Text())
			if len(fields) < 10 || fields[3] != "0A" { // 0A: LISTEN
				continue
			}
			addr, err := procAddr(fields[1])
			if err != nil {
				file.Close()
				return nil, fmt.Errorf("cluster: %s: %w", f, err)
			}
			table[fields[9]] = addr
		}
		file.Close()
		if err := sc.Err(); err != nil {
			return nil, err
		}
	}
	return table, nil
}

// procAddr decodes /proc/net/tcp's "0100007F:1F90": the address as the
// kernel stores it, in 32-bit words of host (little-endian) order, and the
// port in hex.
func procAddr(s string) (netip.AddrPort, error) {
	host, port, ok := strings.Cut(s, ":")
	raw, err := hex.DecodeString(host)
	if !ok || err != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.AddrPort{}, fmt.Errorf("address %q", s)
	}
	for i := 0; i < len(raw); i += 4 {
		raw[i], raw[i+1], raw[i+2], raw[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
	}
	p, err := strconv.ParseUint(port, 16, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("port %q", s)
	}
	ip, _ := netip.AddrFromSlice(raw)
	return netip.AddrPortFrom(ip.Unmap(), uint16(p)), nil
}
