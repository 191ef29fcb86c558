// Package client is the one client of the inventory service's HTTP API: a
// sale, the stock read and set, a replica's history, its health and
// readiness, each call taking a context. The load test, the lab, the
// scenarios, the bench and the local cluster all call the service through
// it, over one HTTP stack (transport.go says which, and why). It shares the
// server's error model: the replies are internal/api's types, and an error
// reply is an *Error carrying its api code and HTTP status.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/locklab/locklab/internal/api"
	"github.com/valyala/fasthttp"
)

// SaleTimeout bounds one sale (Send) when its context does not end sooner:
// longer than any -acquire-timeout the service would sensibly use, so the
// service, not its client, gives up. CallTimeout bounds every other call:
// the stock, the history and the health answer at once, or the replica hangs.
const (
	SaleTimeout = 2 * time.Minute
	CallTimeout = 30 * time.Second
)

// Client calls the service at one base URL: nginx's (http://host), or one
// replica's (http://addr, or nginx's route to it, http://host/replica/NAME).
// Clients made from one another share their connections. Safe for
// concurrent use.
type Client struct {
	base  string // no trailing slash: base + "/sale" is the sale endpoint
	token string
	t     *transport
}

// New is a client of the service at base (http://host:port, no path: the
// parent of /sale) that sends token ("": none) as the admin token with every
// request: PUT /stock, GET /history, ?lock= beyond loopback and the fault
// hooks need it.
func New(base, token string) *Client {
	return &Client{base: strings.TrimSuffix(base, "/"), token: token, t: &transport{}}
}

// ForSale is New for the service whose sale endpoint is saleURL
// (http://localhost/sale, the tools' -url): an absolute URL ending in /sale.
func ForSale(saleURL, token string) (*Client, error) {
	u, err := url.Parse(saleURL)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("client: -url %q: want an absolute URL such as http://localhost/sale", saleURL)
	}
	base, ok := strings.CutSuffix(u.Path, "/sale")
	if !ok {
		return nil, fmt.Errorf("client: -url %q: want the /sale endpoint (its /stock sibling sets and reads the stock)", saleURL)
	}
	u.Path, u.RawQuery = base, ""
	return New(u.String(), token), nil
}

// At is a client of the service at another base (a replica's own address),
// sharing c's connections and admin token.
func (c *Client) At(base string) *Client {
	return &Client{base: strings.TrimSuffix(base, "/"), token: c.token, t: c.t}
}

// Replica is c's client of one replica, through nginx's route to it alone
// (/replica/NAME/).
func (c *Client) Replica(name string) *Client {
	return c.At(c.base + "/replica/" + url.PathEscape(name))
}

// URL is the endpoint name (sale, stock, healthz, ...) of c's service.
func (c *Client) URL(name string) string { return c.base + "/" + name }

// Close closes the idle connections.
func (c *Client) Close() { c.t.close() }

// Query is what a sale asks beyond the version the service runs: another
// version (Lock, with -lock-override), its wait, fencing, and fault hooks
// ("hold=1.5s&off=fence"; the admin token's, with -chaos).
type Query struct {
	Lock, Wait string
	Fence      bool
	Hooks      string
}

// SaleURL is the sale endpoint with q: built once, sent many times (Send).
func (c *Client) SaleURL(q Query) string {
	v := url.Values{}
	if q.Lock != "" {
		v.Set("lock", q.Lock)
	}
	if q.Wait != "" {
		v.Set("wait", q.Wait)
	}
	if q.Fence {
		v.Set("fence", "1")
	}
	u := c.URL("sale")
	if s := v.Encode(); s != "" {
		u += "?" + s
	}
	if q.Hooks != "" {
		u += map[bool]string{true: "&", false: "?"}[strings.Contains(u, "?")] + q.Hooks
	}
	return u
}

// Reply is a reply as Send read it: its status and, when it is JSON, the
// sale's fields (api.Sale; an error reply fills Error and Code).
type Reply struct {
	Status int
	api.Sale
}

// Outcome classifies the reply as a sale (api.Outcome).
func (r Reply) Outcome() string { return api.Outcome(r.Status, r.Sale) }

// Sale sends POST /sale with q and the request id id ("": the service names
// it). A reply other than 200 is also an *Error; no reply is another error.
func (c *Client) Sale(ctx context.Context, q Query, id string) (Reply, error) {
	return c.Send(ctx, http.MethodPost, c.SaleURL(q), id)
}

// Send sends method u (a URL of this service: SaleURL, URL) with the
// request id id ("": none) and reads the reply: the load test's hot path,
// one allocation-light request. A reply other than 200 is also an *Error;
// no reply is another error.
func (c *Client) Send(ctx context.Context, method, u, id string) (Reply, error) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(u)
	req.Header.SetMethod(method)
	if id != "" {
		req.Header.Set("X-Request-Id", id)
	}
	c.authorize(req)
	if err := c.t.do(ctx, req, resp, SaleTimeout); err != nil {
		return Reply{}, fmt.Errorf("client: %s %s: %w", method, u, err)
	}
	r := Reply{Status: resp.StatusCode()}
	_ = json.Unmarshal(resp.Body(), &r.Sale) // a reply that is not JSON (nginx's 502) has its status only
	if r.Status != http.StatusOK {
		return r, &Error{Method: method, URL: u, Status: r.Status, Code: r.Code, Message: r.Sale.Error}
	}
	return r, nil
}

// Error is an error reply: its HTTP status and, when the service (or
// nginx, deploy/nginx.conf) wrote it, its api code and message
// (api.Error). Its status is api.Status(Code) for every code the service
// gives.
type Error struct {
	Method, URL string
	Status      int
	Code        string // an api.Code*; "": the reply carried none
	Message     string
	Body        string // the reply as sent, when it was not an api.Error
}

func (e *Error) Error() string {
	msg := e.Message
	if e.Code != "" {
		msg = e.Code + ": " + msg
	}
	if msg == "" {
		msg = e.Body
	}
	return fmt.Sprintf("client: %s %s: %d %s", e.Method, e.URL, e.Status, strings.TrimSpace(msg))
}

// CodeOf is err's api code ("": err is no error reply, or carries none).
func CodeOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// StatusOf is err's HTTP status (0: err is no error reply).
func StatusOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

func (c *Client) authorize(req *fasthttp.Request) {
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
}

// call sends method to endpoint name?query with in as its JSON body (nil:
// none), wants a 200, and decodes its JSON reply into out (nil: discarded;
// a *[]byte: the reply as sent).
func (c *Client) call(ctx context.Context, method, name string, query url.Values, in, out any) error {
	u := c.URL(name)
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(u)
	req.Header.SetMethod(method)
	if in != nil {
		body, err := json.Marshal(in)
		if err != nil {
			return err
		}
		req.Header.SetContentType("application/json")
		req.SetBody(body)
	}
	c.authorize(req)
	if err := c.t.do(ctx, req, resp, CallTimeout); err != nil {
		return fmt.Errorf("client: %s %s: %w", method, u, err)
	}
	raw := resp.Body()
	if status := resp.StatusCode(); status != http.StatusOK {
		e := &Error{Method: method, URL: u, Status: status}
		var reply api.Error
		if json.Unmarshal(raw, &reply) == nil && reply.Code != "" {
			e.Code, e.Message = reply.Code, reply.Error
		} else {
			e.Body = string(bytes.TrimSpace(raw[:min(len(raw), 512)]))
		}
		return e
	}
	if out == nil {
		return nil
	}
	if p, ok := out.(*[]byte); ok { // not JSON: as sent
		*p = bytes.Clone(raw)
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("client: %s %s: %w: %q", method, u, err, raw[:min(len(raw), 512)])
	}
	return nil
}

// Stock reads the stock (GET /stock).
func (c *Client) Stock(ctx context.Context) (int64, error) {
	var s api.Stock
	if err := c.call(ctx, http.MethodGet, "stock", nil, nil, &s); err != nil {
		return 0, err
	}
	if s.Key == "" {
		return 0, fmt.Errorf("client: GET %s: a reply with no key", c.URL("stock"))
	}
	return s.Stock, nil
}

// SetStock sets the stock to n (PUT /stock, with the admin token).
func (c *Client) SetStock(ctx context.Context, n int64) error {
	return c.call(ctx, http.MethodPut, "stock", nil, api.SetStock{Stock: &n}, nil)
}

// Health reads what the replica that answers says on /healthz: its name,
// its keys and its lock settings (what a run was measured against).
func (c *Client) Health(ctx context.Context) (api.Health, error) {
	var h api.Health
	return h, c.call(ctx, http.MethodGet, "healthz", nil, nil, &h)
}

// Ready is nil when the replica that answers is ready (GET /readyz: its
// stock's Redis answers).
func (c *Client) Ready(ctx context.Context) error {
	return c.call(ctx, http.MethodGet, "readyz", nil, nil, nil)
}

// Metrics reads the replica's /metrics: Prometheus's text exposition, as
// sent (the bench reads its holds and round trips there).
func (c *Client) Metrics(ctx context.Context) ([]byte, error) {
	var raw []byte
	return raw, c.call(ctx, http.MethodGet, "metrics", nil, nil, &raw)
}
