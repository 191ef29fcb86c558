// The load test's side of the service's HTTP interface: one sale sent
// and its reply tallied, the stock read and set, a replica's health and
// address. The runs (loadtest.go) only call these.

package loadtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/checker"
	"github.com/valyala/fasthttp"
)

// fire sends one request with the request id id, files its reply in tally,
// and returns it as the client saw it.
func (cfg Config) fire(target, id string, tally *Result) checker.Op {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(target)
	req.Header.SetMethod(http.MethodPost)
	if cfg.Plain {
		req.Header.SetMethod(http.MethodGet)
	}
	req.Header.Set("X-Request-Id", id)
	// ?lock= and the fault hooks: the admin token's, where the replicas are
	// reached beyond loopback.
	if cfg.AdminToken != "" {
		req.Header.Set("Authorization", "Bearer "+cfg.AdminToken)
	}
	op := checker.Op{ID: id, Invoke: time.Now()}
	err := cfg.Client.DoTimeout(req, resp, requestTimeout)
	op.Return = time.Now()
	if err != nil {
		tally.FailedBy["transport"]++
		tally.unknown++
		op.Outcome = api.Unknown
		return op
	}
	var body api.Sale
	_ = json.Unmarshal(resp.Body(), &body) // a reply that is not JSON only lacks its replica
	if body.Replica != "" {
		tally.Replicas[body.Replica]++
	}
	op.Outcome, op.Replica = api.Outcome(resp.StatusCode(), body), body.Replica
	if cfg.Plain { // not a sale: any 200 is a request served
		op.Outcome = map[bool]string{true: api.Sold, false: api.Failed}[resp.StatusCode() == http.StatusOK]
	}
	if body.Remaining != nil {
		op.Remaining = *body.Remaining
	}
	switch op.Outcome {
	case api.Sold:
		tally.Sold++
		if body.Warning != "" {
			tally.LeaseWarnings++
		}
	case api.SoldOut:
		tally.SoldOut++
	case api.Fenced:
		tally.Fenced++
	case api.Unknown:
		tally.unknown++
		tally.FailedBy[strconv.Itoa(resp.StatusCode())]++
	default:
		tally.Failed++
		tally.FailedBy[strconv.Itoa(resp.StatusCode())]++
	}
	return op
}

// requestTimeout bounds one request: longer than any -acquire-timeout the
// service would sensibly use, so the service, not the load test, gives up.
const requestTimeout = 2 * time.Minute

// Health reads what a replica reports on /healthz (next to the /sale
// endpoint): its keys and lock settings, what the figures were measured against.
func Health(cfg Config) (api.Health, error) {
	var h api.Health
	healthURL, err := Sibling(cfg.URL, "healthz")
	if err != nil {
		return h, err
	}
	raw, err := cfg.do(http.MethodGet, healthURL, nil)
	if err != nil {
		return h, err
	}
	if err := json.Unmarshal(raw, &h); err != nil {
		return h, fmt.Errorf("loadtest: %s: %w", healthURL, err)
	}
	return h, nil
}

// ReplicaURL turns the service's .../sale endpoint into replica's own
// .../replica/REPLICA/NAME, routed by nginx to that replica alone.
func ReplicaURL(saleURL, replica, name string) (string, error) {
	return Sibling(saleURL, "replica/"+url.PathEscape(replica)+"/"+name)
}

// Sibling turns the service's .../sale endpoint into its .../NAME neighbour.
func Sibling(saleURL, name string) (string, error) {
	u, err := url.Parse(saleURL)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return "", fmt.Errorf("loadtest: -url %q: want an absolute URL such as http://localhost/sale", saleURL)
	}
	base, ok := strings.CutSuffix(u.Path, "/sale")
	if !ok {
		return "", fmt.Errorf("loadtest: -url %q: want the /sale endpoint (its /stock sibling sets and reads the stock)", saleURL)
	}
	u.Path, u.RawQuery = base+"/"+name, ""
	return u.String(), nil
}

func withLock(saleURL, lock, wait string, fence bool) (string, error) {
	u, err := url.Parse(saleURL)
	if err != nil {
		return "", err
	}
	q := u.Query()
	q.Set("lock", lock)
	if wait != "" {
		q.Set("wait", wait)
	}
	if fence {
		q.Set("fence", "1")
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

func (cfg Config) setStock(stockURL string, n int64) error {
	body, _ := json.Marshal(api.SetStock{Stock: &n})
	_, err := cfg.do(http.MethodPut, stockURL, body)
	return err
}

func (cfg Config) stock(stockURL string) (int64, error) {
	raw, err := cfg.do(http.MethodGet, stockURL, nil)
	if err != nil {
		return 0, err
	}
	var body api.Stock
	if err := json.Unmarshal(raw, &body); err != nil || body.Key == "" {
		return 0, fmt.Errorf("loadtest: GET %s: unexpected reply %q", stockURL, raw)
	}
	return body.Stock, nil
}

// do sends an admin request and wants a 200.
func (cfg Config) do(method, url string, body []byte) ([]byte, error) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(url)
	req.Header.SetMethod(method)
	if body != nil {
		req.Header.SetContentType("application/json")
		req.SetBody(body)
	}
	if cfg.AdminToken != "" {
		req.Header.Set("Authorization", "Bearer "+cfg.AdminToken)
	}
	if err := cfg.Client.DoTimeout(req, resp, 30*time.Second); err != nil {
		return nil, fmt.Errorf("loadtest: %s %s: %w", method, url, err)
	}
	raw := bytes.Clone(resp.Body())
	if resp.StatusCode() != http.StatusOK {
		return nil, fmt.Errorf("loadtest: %s %s: %d: %s", method, url, resp.StatusCode(), bytes.TrimSpace(raw))
	}
	return raw, nil
}

// NewClient returns an HTTP client that keeps one connection per concurrent
// worker open, so the load test measures the service, not connection setup.
// fasthttp, not net/http: on a 2-core machine the load generator shares the
// CPU with nginx and the replicas, and fasthttp's client does each request in
// the calling goroutine (net/http runs two goroutines per connection), which
// made it about 1.3x as fast here (make bench-loadtest compares it with wrk).
func NewClient(concurrency int) *fasthttp.Client {
	return &fasthttp.Client{MaxConnsPerHost: concurrency, NoDefaultUserAgentHeader: true}
}
