package kubeconfig

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// allowList is Options.AllowedServers parsed. Its zero value allows any host.
type allowList struct {
	hosts    []allowedHost
	prefixes []netip.Prefix
}

// allowedHost is a host entry: a name (lower case) or an address, and a port ("": any).
type allowedHost struct {
	name string
	addr netip.Addr
	port string
}

// Validate checks o at startup: every entry of AllowedServers parses, so a mistyped
// --target-server-allowlist fails the process instead of every Cluster's first read.
func (o Options) Validate() error {
	_, err := parseAllowList(o.AllowedServers)
	return err
}

// parseAllowList parses the entries of --target-server-allowlist: host, host:port or
// CIDR (see Options.AllowedServers).
func parseAllowList(entries []string) (allowList, error) {
	var a allowList
	for _, e := range entries {
		entry := strings.TrimSpace(e)
		bad := func() error {
			return fmt.Errorf("%s entry %s is neither a host, a host:port nor a CIDR", allowedFlag, quote(e))
		}
		if strings.Contains(entry, "/") {
			p, err := netip.ParsePrefix(entry)
			if err != nil {
				return allowList{}, bad()
			}
			a.prefixes = append(a.prefixes, p.Masked())
			continue
		}
		h := allowedHost{}
		host := entry
		if hp, port, err := net.SplitHostPort(entry); err == nil {
			if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
				return allowList{}, bad()
			}
			host, h.port = hp, port
		} else if strings.HasPrefix(entry, "[") && strings.HasSuffix(entry, "]") {
			host = entry[1 : len(entry)-1]
		}
		if addr, err := netip.ParseAddr(host); err == nil {
			h.addr = addr.Unmap()
		} else if host == "" || strings.ContainsAny(host, ":[]@ ") || asciiLower(host) == "" {
			return allowList{}, bad()
		} else {
			h.name = asciiLower(host)
		}
		a.hosts = append(a.hosts, h)
	}
	return a, nil
}

// allows says whether host (as url.URL.Hostname gives it) and port are on the list.
func (a allowList) allows(host, port string) bool {
	if len(a.hosts) == 0 && len(a.prefixes) == 0 {
		return true
	}
	addr, err := netip.ParseAddr(host)
	isAddr := err == nil
	for _, h := range a.hosts {
		if h.port != "" && h.port != port {
			continue
		}
		if isAddr && h.addr.IsValid() && addr.Unmap() == h.addr || !isAddr && h.name != "" && asciiLower(host) == h.name {
			return true
		}
	}
	if isAddr {
		for _, p := range a.prefixes {
			if p.Contains(addr) || p.Contains(addr.Unmap()) {
				return true
			}
		}
	}
	return false
}

// defaultPorts are the ports of the URL schemes that a server or a proxy may have.
var defaultPorts = map[string]string{"https": "443", "http": "80", "socks5": "1080"}

// checkServer refuses a server that is not an https:// URL (http:// with
// AllowInsecureHTTP), that has user information or no host, or whose host servers does
// not allow. Its messages quote the scheme and the host, never the whole URL.
func checkServer(owner, server string, o Options, servers allowList) error {
	if server == "" {
		return fmt.Errorf("%s has no server", owner)
	}
	u, err := url.Parse(server)
	if err != nil {
		return fmt.Errorf("%s has a server that is not a URL: give https://host[:port]", owner)
	}
	if u.User != nil {
		return fmt.Errorf("%s has a server with user information (user@host): refused, put credentials in the user", owner)
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && o.AllowInsecureHTTP:
	case u.Scheme == "http":
		return fmt.Errorf("%s has a plain http:// server: refused unless %s is set", owner, httpFlag)
	default:
		return fmt.Errorf("%s has a server that is not an https:// URL (scheme %s): give https://host[:port]", owner, quote(u.Scheme))
	}
	return checkHost(owner, "server", u, servers)
}

// checkProxy refuses a proxy that is not an http://, https:// or socks5:// URL (the
// schemes of clientcmd) or whose host servers does not allow. A plain http:// proxy
// does not need AllowInsecureHTTP: the connection to an https server goes through it
// in a tunnel, encrypted; the user information of a proxy URL is the proxy's own
// credentials.
func checkProxy(owner string, u *url.URL, servers allowList) error {
	if _, ok := defaultPorts[u.Scheme]; !ok {
		return fmt.Errorf("%s has a proxy whose scheme %s is not http, https nor socks5", owner, quote(u.Scheme))
	}
	return checkHost(owner, "proxy", u, servers)
}

// checkHost refuses a URL without a host, or whose host and port servers does not allow.
func checkHost(owner, what string, u *url.URL, servers allowList) error {
	host := u.Hostname()
	if host == "" {
		return fmt.Errorf("%s has a %s without a host", owner, what)
	}
	port := u.Port()
	if port == "" {
		port = defaultPorts[u.Scheme]
	}
	if servers.allows(host, port) {
		return nil
	}
	hint := ""
	if _, err := netip.ParseAddr(host); err != nil && len(servers.prefixes) > 0 {
		hint = " (a CIDR entry matches only an IP address written in the URL: names are not resolved)"
	}
	return fmt.Errorf("%s has a %s whose host %s is not in %s%s", owner, what, quote(net.JoinHostPort(host, port)), allowedFlag, hint)
}

// asciiLower is s with A-Z in lower case, or "" if s has a byte outside ASCII: a name
// on the list matches only the same ASCII name, not one that Unicode case folding or
// IDNA would map to it.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		switch {
		case c >= 0x80:
			return ""
		case 'A' <= c && c <= 'Z':
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
