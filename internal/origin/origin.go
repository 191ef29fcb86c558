// Package origin keeps other web sites out of the stack, for the replicas and
// the lab alike. A page of another site, open in the same browser as the lab,
// can send image GETs, no-cors POSTs and auto-submitted forms to localhost;
// a page whose name its owner rebinds to 127.0.0.1 (DNS rebinding) can even
// read the replies. Two checks stop both, with no token:
//
//   - the Host: a request is answered only under a name the server serves
//     (localhost, an IP address, its own host name, the names it is given);
//     a rebound page sends its own name, and gets 421;
//   - the site: a request that changes something (any method but GET, HEAD
//     and OPTIONS) is refused (403) when the browser says it came from
//     another site (Sec-Fetch-Site cross-site, or same-site: another port or
//     subdomain), or when it carries an Origin that is not the Host it was
//     sent to.
//
// Requests with neither header (curl, the load test, other services) pass:
// only browsers send them, and a browser always does for a cross-site
// request. So nothing that changes state may answer GET (POST /sale only).
package origin

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/locklab/locklab/internal/api"
)

// Hosts is the set of names a server answers to, beyond localhost, its
// subdomains (*.localhost resolves to loopback by RFC 6761 in browsers) and
// IP addresses, which no other site can rebind.
type Hosts map[string]bool

// NewHosts returns the names given, lower case, without a port or brackets.
func NewHosts(names ...string) Hosts {
	h := Hosts{}
	for _, n := range names {
		if n = hostname(n); n != "" {
			h[n] = true
		}
	}
	return h
}

// ParseNames reads a comma-separated list of host names, as a -hosts flag
// takes them: letters, digits, dots and hyphens each (no port, no scheme).
func ParseNames(s string) ([]string, error) {
	var names []string
	for n := range strings.SplitSeq(s, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		for _, c := range []byte(n) {
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '-') {
				return nil, fmt.Errorf("host %q: want a name of letters, digits, dots and hyphens (no port, no scheme)", n)
			}
		}
		names = append(names, strings.ToLower(n))
	}
	return names, nil
}

// Allows reports whether a request sent to host (a Host header: a name or
// an address, with or without a port) is for this server.
func (h Hosts) Allows(host string) bool {
	host = hostname(host)
	return h[host] || host == "localhost" || strings.HasSuffix(host, ".localhost") || net.ParseIP(host) != nil
}

// hostname is host without its port and brackets, lower case.
func hostname(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return strings.Trim(strings.ToLower(strings.TrimSpace(host)), "[]")
}

// SameSite reports whether r may change something: it says it came from no
// other site, and its Origin, if any, is the address it was sent to (scheme
// aside: the stack serves plain HTTP, a TLS proxy in front keeps the Host).
func SameSite(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "cross-site", "same-site":
		return false
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && u.Host != "" && strings.EqualFold(u.Host, r.Host)
}

// Safe reports whether method only reads.
func Safe(method string) bool {
	return method == http.MethodGet || method == http.MethodHead || method == http.MethodOptions
}

// Guard answers 421 to a request for a host not in hosts and 403 to one
// that would change something from another site; what says whose rules
// refused it ("the replica", "the lab").
func Guard(hosts Hosts, what string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !hosts.Allows(r.Host) {
				refuse(w, api.CodeUnknownHost, what+" does not answer to the host "+quote(r.Host)+
					": a name it was not given may be a DNS rebinding attack (add it with -hosts)")
				return
			}
			if !Safe(r.Method) && !SameSite(r) {
				refuse(w, api.CodeCrossOrigin, "a request that changes something must come from "+what+"'s own site, not from another page")
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func refuse(w http.ResponseWriter, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(api.Status(code))
	_ = json.NewEncoder(w).Encode(api.Error{Error: msg, Code: code})
}
