package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/locklab/locklab/internal/api"
)

// serve sends one request straight to the handler (no client in between
// to refuse odd input) and returns the reply, which must be a JSON object.
func (s *stack) serve(t *testing.T, req *http.Request) (int, http.Header, map[string]any) {
	t.Helper()
	if req.Host == "example.com" { // httptest's: a name no replica serves (421)
		req.Host = "127.0.0.1"
	}
	w := httptest.NewRecorder()
	s.h.ServeHTTP(w, req)
	var body map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatalf("%s %s: reply %d %q is not a JSON object", req.Method, req.URL, w.Code, w.Body.Bytes())
	}
	return w.Code, w.Header(), body
}

// FuzzSetStock: PUT /stock takes exactly {"stock": N} with N a whole number
// >= 0, and sets that; anything else is a 400 that leaves the stock alone.
func FuzzSetStock(f *testing.F) {
	for _, b := range []string{`{"stock":5}`, `{"stock":0}`, `{"stock":-1}`, `{"stock":1.5}`, `{"stock":"5"}`, `{}`,
		`{"stock":5,"x":1}`, `{"stock":5}{}`, `{"stock":9223372036854775807}`, `{"stock":9223372036854775808}`,
		`{"stock":1e3}`, `{"stock":null}`, `[5]`, ``, `{"STOCK":5}`, `{"stock":05}`, `{"stock":5} `} {
		f.Add(b)
	}
	s := newStack(f, options{})
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, body string) {
		if err := s.rdb.Set(ctx, api.DefaultStockKey, 7, 0).Err(); err != nil {
			t.Fatal(err)
		}
		status, _, reply := s.serve(t, httptest.NewRequest(http.MethodPut, "/stock", strings.NewReader(body)))
		want, wantOK := reference(body)
		got := s.stock(t)
		switch {
		case status == http.StatusOK && (!wantOK || got != strconv.FormatInt(want, 10)):
			t.Fatalf("%q: 200 (%v), stock now %s; the body is not a valid {\"stock\": N}", body, reply, got)
		case status == http.StatusOK:
		case status != http.StatusBadRequest || reply["code"] != api.CodeBadRequest:
			t.Fatalf("%q: %d %v, want 200 or 400 bad_request", body, status, reply)
		case wantOK:
			t.Fatalf("%q: refused (%v), but it sets the stock to %d", body, reply, want)
		case got != "7":
			t.Fatalf("%q: refused, yet the stock changed to %s", body, got)
		}
	})
}

// reference is what PUT /stock should accept, decided independently of the
// handler's decoder: one JSON object, with exactly the key "stock", whose
// value is an integer literal in [0, 2^63).
func reference(body string) (int64, bool) {
	dec := json.NewDecoder(strings.NewReader(body))
	dec.UseNumber()
	var v map[string]any
	if err := dec.Decode(&v); err != nil || strings.Trim(body[dec.InputOffset():], " \t\r\n") != "" {
		return 0, false // not one object, or something after it
	}
	num, ok := v["stock"].(json.Number)
	if !ok || len(v) != 1 {
		return 0, false
	}
	n, err := strconv.ParseInt(string(num), 10, 64)
	return n, err == nil && n >= 0
}

// FuzzSaleQuery: whatever /sale's query and request id, the reply is JSON
// with a known code, a refused request sells nothing, a sale sells exactly
// one, and the request id that comes back is a plain token.
func FuzzSaleQuery(f *testing.F) {
	for _, q := range []string{"", "lock=v6", "lock=v9", "lock=none", "lock=atomic", "wait=notify", "wait=x", "lock=v7&wait=poll",
		"hold=1s", "fence=1", "lock=%zz", "lock=v6&lock=v1", "lock=redlock", ";;&&==", "lock=v1&nested=1"} {
		f.Add(q, "id-1")
	}
	f.Add("lock=v3", "bad id\r\nx: y")
	f.Add("", strings.Repeat("a", 200))
	s := newStack(f, options{override: true})
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, query, id string) {
		if err := s.rdb.Set(ctx, api.DefaultStockKey, 5, 0).Err(); err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest(http.MethodPost, "/sale", nil)
		req.URL.RawQuery = query
		req.Header["X-Request-Id"] = []string{id}
		status, header, reply := s.serve(t, req)
		stock := s.stock(t)
		switch {
		case status == http.StatusOK && (reply["sold"] != true || stock != "4"):
			t.Fatalf("?%s: 200 %v with the stock at %s, want sold and 4", query, reply, stock)
		case status != http.StatusOK && stock != "5":
			t.Fatalf("?%s: %d %v, yet the stock is %s", query, status, reply, stock)
		case status != http.StatusOK && (reply["code"] == nil || api.Status(reply["code"].(string)) != status):
			t.Fatalf("?%s: %d %v: want a known code whose status it is", query, status, reply)
		case status >= 500:
			t.Fatalf("?%s: %d %v: a query can be refused, not fail the service", query, status, reply)
		}
		echoed := header.Get("X-Request-Id")
		if (echoed != id && !plainToken(echoed)) || (echoed == id && !plainToken(id)) {
			t.Fatalf("request id %q came back as %q: want it kept when a plain token, replaced otherwise", id, echoed)
		}
	})
}

func plainToken(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	return strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:-") == ""
}
