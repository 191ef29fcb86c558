package server

// Endpoint is one of the service's routes as the docs list it: who may call
// it and what it answers. New registers the routes; a test holds this list
// to them, and writes it into docs/operations.md.
type Endpoint struct {
	Route   string // METHOD /path
	Access  string
	Replies string
}

// Endpoints are the service's routes. Every reply is JSON and carries
// X-Request-Id.
var Endpoints = []Endpoint{
	{"POST /sale", "anyone; `?lock=` and `?wait=` with `-lock-override`, beyond loopback only with the admin token (401); the fault hooks with the admin token and `-chaos`",
		"200 `{\"sold\":true,\"remaining\":99,\"lock\":\"v6\",\"replica\":\"inventory-1\"}` (with a `warning` when the lease expired before release: the unit was sold); " +
			"409 `sold_out`; 412 `fenced` (fencing refused a stale write: nothing sold); 400 for a bad or disallowed `?lock=` or `?wait=`; " +
			"503 with `Retry-After`: `lock_timeout` (not obtained within `-acquire-timeout`), `unavailable` (Redis or the quorum unreachable before anything was written, or a fenced sale's lock handed out no token: nothing sold), " +
			"`indeterminate` (the stock's write was sent and its reply lost: the unit may or may not be sold), `busy` (`-max-in-flight` sales running), " +
			"`shutting_down` (stopping while the sale waited: nothing sold), `stock_missing`, `lease_lost` (the lock known lost before the write: nothing sold); " +
			"500 `stock_corrupt` (the stock is not a number)"},
	{"GET /stock", "anyone", "`{\"key\":\"inventory:001\",\"stock\":99}`; 503 `busy` past its own cap of 16 requests at once (as for `/history`, `/metrics`, `/readyz`)"},
	{"PUT /stock", "the admin token, when one is set (401)", "body `{\"stock\":100}` exactly: one object, the one key `stock`, an integer literal, nothing after it; 400 otherwise"},
	{"GET /history", "the admin token, when one is set (401)",
		"`?since=TIME` (RFC 3339) or `?after=SEQ&limit=N`: the sales this replica recorded, each with its request id, version, wait, owner, fencing token, " +
			"start and end, lock obtained, stock read and written (time, value), refused by fencing, release sent and returned, status and code; " +
			"`truncated` when its ring (`-history`) dropped some"},
	{"GET /healthz", "anyone", "200 while the process is up: the replica, the stock and lock keys, and its lock settings (the tools read them here)"},
	{"GET /readyz", "anyone", "200 when the stock's Redis answers, 503 otherwise"},
	{"GET /metrics", "anyone", "Prometheus metrics: sales by version and outcome, lock waits and holds, renewals, leases lost"},
}
