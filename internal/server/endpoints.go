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
	{"POST /sale", "anyone; `?lock=` and `?wait=` with `-lock-override`, beyond loopback only with the admin token (401); the fault hooks with the admin token and `-chaos`; " +
		"`?step=ID` (a stepped sale, the lab's lessons: its lock's lease is 10 s whatever `-ttl` says, `&fence=1` fences it and `&nested=1` takes its lock twice, nested, without `-chaos`; it waits for its lock at most 5 s of its running time, the time stopped at a step not counted) from loopback, or with the admin token beyond it",
		"200 `{\"sold\":true,\"remaining\":99,\"lock\":\"v6\",\"replica\":\"inventory-1\"}` (with a `warning` when the lease expired before release: the unit was sold); " +
			"409 `sold_out`; 412 `fenced` (fencing refused a stale write: nothing sold); 400 for a bad or disallowed `?lock=` or `?wait=`; " +
			"503 with `Retry-After`: `lock_timeout` (not obtained within `-acquire-timeout`), `unavailable` (Redis or the quorum unreachable before anything was written, or a fenced sale's lock handed out no token: nothing sold), " +
			"`indeterminate` (the stock's write was sent and its reply lost: the unit may or may not be sold), `busy` (`-max-in-flight` sales running), " +
			"`shutting_down` (stopping while the sale waited: nothing sold), `stock_missing`, `lease_lost` (the lock known lost before the write: nothing sold); " +
			"500 `stock_corrupt` (the stock is not a number); " +
			"with `?step=ID`: 202 and the sale's state (below) once it stops before its first step, the sale running on by itself; 400 for an id in use or not a plain token; 503 `busy` past 16 stepped sales"},
	{"GET /stock", "anyone", "`{\"key\":\"inventory:001\",\"stock\":99}`; 503 `busy` past its own cap of 16 requests at once (as for `/history`, `/metrics`, `/readyz`)"},
	{"PUT /stock", "the admin token, when one is set (401)", "body `{\"stock\":100}` exactly: one object, the one key `stock`, an integer literal, nothing after it; 400 otherwise"},
	{"GET /history", "the admin token, when one is set (401)",
		"`?since=TIME` (RFC 3339) or `?after=SEQ&limit=N`: the sales this replica recorded, each with its request id, version, wait, owner, fencing token, " +
			"start and end, lock obtained, stock read and written (time, value), refused by fencing, release sent and returned, status and code; " +
			"`truncated` when its ring (`-history`) dropped some"},
	{"GET /steps/{id}", "the admin token, when one is set (401)",
		"a stepped sale's state: `state` (`stopped`, `running` or `done`), `phase` (`acquire`, `stock`, `release`), `done` (each step's `command` as sent and its `reply`, " +
			"redis-cli style: `SET lock owner px 10000 nx` -> `OK`, `GET inventory:001` -> `\"10\"`, `EVAL ...` -> `0`; etcd's requests as `LeaseGrant ttl=10` -> `lease 694d... ttl=10`, a statement to MariaDB with its arguments in place, `SELECT GET_LOCK('locklab:lock', 4.9)` -> `1`, ZooKeeper's as `create /locklab/lock/...-lock- ...` -> the node's path; the steps of a background goroutine such as v8's watchdog with phase `background`, shown, never stopped), " +
			"`next` (the step it is stopped before), `deadline` (cancelled then: 5 minutes after it started), `cancelled` (why), and once done `result` (`status` and the `/sale` `reply`); " +
			"`crashed`, `left` (its lock maybe still in the store) and `forgot` (what removing it answered: `1` deleted, `0` gone or another's) for a crashed sale; " +
			"404 when this replica runs no sale of that id (or it ended over a minute ago). A sale nobody reads or drives for 30 s is cancelled: the page went away"},
	{"POST /steps/{id}/next", "the admin token, when one is set (401)", "lets the sale take the step it is stopped before; the state once it has stopped before the next, ended, or 2 s passed (`running`); 409 `not_stopped` when it is not stopped"},
	{"POST /steps/{id}/end", "the admin token, when one is set (401)", "lets the sale run to its end without stopping; the state once done, or after 2 s"},
	{"POST /steps/{id}/crash", "the admin token, when one is set (401)", "crashes the sale where it stands, as a process dying would (the replica stays up): it sends nothing more, not even its release, so its lock stays in the store until the reset, 30 s unread, or the 5-minute bound removes it if it still holds the sale's owner; " +
		"the state once done; 400 for a version whose lock is not one key in the stock's Redis (only v3-v8 may crash), 409 `not_stopped` when it is done or cancelled"},
	{"POST /steps/{id}/pause", "the admin token, when one is set (401)", "pauses the sale stopped before a step, as a GC pause or SIGSTOP freezes a whole process: its background goroutines' commands (v8's watchdog's renewals) are held, not sent, until it resumes, so its lease runs out for real (`paused`, and `held`: the commands waiting); " +
		"400 for a version with no background work to freeze (only v8), 409 `not_stopped` when it is not stopped before a step, or already paused; `next` and `end` answer 409 while it is paused. The reset, 30 s unread and the 5-minute bound cancel a paused sale like any other: it wakes and releases its lock"},
	{"POST /steps/{id}/resume", "the admin token, when one is set (401)", "wakes a paused sale: the commands it held go out now, and it stays stopped before the step it was paused at; the state once they have answered, or after 2 s; 409 `not_stopped` when it is not paused"},
	{"DELETE /steps/{id}", "the admin token, when one is set (401)", "cancels the sale (the lesson's reset): it sends nothing more to the stock, gives up waiting for the lock, and releases a lock it holds; a crashed sale's lock is removed if it still holds the sale's owner (compare-and-delete), never another's; the state once done, or after 2 s"},
	{"GET /store", "the admin token, when one is set (401)",
		"what the store holds now, read in one round trip (the lab's lessons show it between two stepped sales): `stock`, `lock` (`key`, `type`, `owner`, a hash's `count`, `pttl_ms`, -1 with no expiry; null: no lock key), " +
			"`fence` (the newest holder fencing has registered at the stock: `token`, `owner`), `counter` (the last fencing token handed out); 503 when Redis does not answer. " +
			"`?lock=etcd` (`zk`, `db-getlock`): `lock` is that version's own lock instead of the Redis key: etcd's first key under the mutex's prefix (`owner`: the key, `pttl_ms`: its lease's time to live, in whole seconds), " +
			"ZooKeeper's first node in the lock's directory (`owner`: the data its holder wrote, `pttl_ms` -1: it goes with its session), MariaDB's named lock (`owner`: the holding connection's id, `pttl_ms` -1: no lease)"},
	{"GET /healthz", "anyone", "200 while the process is up: the replica, the stock and lock keys, and its lock settings (the tools read them here)"},
	{"GET /readyz", "anyone", "200 when the stock's Redis answers, 503 otherwise"},
	{"GET /metrics", "anyone", "Prometheus metrics: sales by version and outcome, lock waits and holds, renewals, leases lost"},
}
