package origin_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/locklab/locklab/internal/origin"
)

// What a page of another site can send through a visitor's browser is
// refused, and what curl, the load test and the stack's own page send is not.
func TestGuard(t *testing.T) {
	h := origin.Guard(origin.NewHosts("nginx", "Lab.Example"), "the replica")(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	cases := []struct {
		name, method, host string
		header             map[string]string
		want               int
	}{
		{"curl", "POST", "localhost:8080", nil, 204},
		{"an IP address", "POST", "127.0.0.1:8080", nil, 204},
		{"IPv6", "POST", "[::1]:8080", nil, 204},
		{"a name given", "POST", "nginx", nil, 204},
		{"a name given, any case and port", "GET", "LAB.example:80", nil, 204},
		{"a .localhost name", "GET", "lab.localhost", nil, 204},
		{"its own page", "POST", "localhost:8080", map[string]string{"Origin": "http://localhost:8080", "Sec-Fetch-Site": "same-origin"}, 204},
		{"typed in the address bar", "POST", "localhost", map[string]string{"Sec-Fetch-Site": "none"}, 204},
		{"a rebound name", "GET", "rebind.example", nil, 421},
		{"a rebound name with a port", "POST", "rebind.example:8080", nil, 421},
		{"a name ending like an address", "GET", "127.0.0.1.evil.example", nil, 421},
		{"no Host", "GET", "", nil, 421},
		{"a cross-site form", "POST", "localhost", map[string]string{"Origin": "http://127.0.0.2:9000", "Sec-Fetch-Site": "cross-site"}, 403},
		{"a cross-site PUT", "PUT", "localhost", map[string]string{"Sec-Fetch-Site": "cross-site"}, 403},
		{"another port of this site", "POST", "localhost", map[string]string{"Origin": "http://localhost:8000", "Sec-Fetch-Site": "same-site"}, 403},
		{"an old browser: Origin only, another port", "POST", "localhost:8080", map[string]string{"Origin": "http://localhost:8000"}, 403},
		{"an old browser: Origin only, another site", "DELETE", "localhost:8080", map[string]string{"Origin": "http://evil.example"}, 403},
		{"an opaque origin", "POST", "localhost:8080", map[string]string{"Origin": "null"}, 403},
		{"a cross-site image GET reads only", "GET", "localhost", map[string]string{"Sec-Fetch-Site": "cross-site"}, 204},
	}
	for _, c := range cases {
		req := httptest.NewRequest(c.method, "http://x/sale", nil)
		req.Host = c.host
		for k, v := range c.header {
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		res := rec.Result()
		if res.StatusCode != c.want {
			t.Errorf("%s: %d, want %d", c.name, res.StatusCode, c.want)
			continue
		}
		if c.want >= 400 {
			var reply struct{ Error, Code string }
			if err := json.NewDecoder(res.Body).Decode(&reply); err != nil || reply.Error == "" || reply.Code == "" {
				t.Errorf("%s: %d without a JSON error (%v): %+v", c.name, c.want, err, reply)
			}
		}
	}
}

func TestParseNames(t *testing.T) {
	names, err := origin.ParseNames(" nginx, Lab.Example ,,")
	if err != nil || len(names) != 2 || names[0] != "nginx" || names[1] != "lab.example" {
		t.Errorf("ParseNames: %q %v", names, err)
	}
	for _, bad := range []string{"nginx:80", "http://x", "a b", "x/y"} {
		if _, err := origin.ParseNames(bad); err == nil {
			t.Errorf("ParseNames(%q): no error", bad)
		}
	}
}
