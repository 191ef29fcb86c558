// Package api is what the inventory service and its clients agree on, written
// once: the replies' shapes, the error codes and the HTTP status of each, and
// the service's default addresses and keys. The server, the load test, the
// scenarios, the bench and the local cluster all import it, so a change to the
// contract is one edit.
package api

import "net/http"

// The service's defaults: its port, the stock key and the lock key (the
// tutorial's), the independent Redis nodes redlock uses, and the members of
// the etcd cluster the etcd lock uses (etcd's convention for a local
// three-member cluster, 2379, 22379, 32379, with the first moved off 2379,
// where a host's own etcd listens, as the Redis nodes are off 6379), and the
// ZooKeeper ensemble the zk lock uses (2181 moved off the same way). The
// local cluster starts its processes where these point.
const (
	DefaultPort     = 8080
	DefaultStockKey = "inventory:001"
	DefaultLockKey  = "inventoryRedisLock"
	DefaultRedlock  = "localhost:6381,localhost:6382,localhost:6383"
	DefaultEtcd     = "localhost:12379,localhost:22379,localhost:32379"
	DefaultZK       = "localhost:12181,localhost:22181,localhost:32181"
)

// Sale is the reply to POST /sale: Sold with Remaining, or Error and Code.
type Sale struct {
	Sold      bool   `json:"sold"`
	Remaining *int64 `json:"remaining,omitempty"`
	Lock      string `json:"lock"`
	Replica   string `json:"replica"`
	Error     string `json:"error,omitempty"`
	Code      string `json:"code,omitempty"`
	// Warning reports a sale that went through while its lock did not hold
	// to the end, or whose release failed: the unit is sold.
	Warning string `json:"warning,omitempty"`
}

// Store is what the store holds now, as GET /store answers it: the lab's
// lessons show it between two stepped sales, read live, never computed.
type Store struct {
	StockKey string `json:"stock_key"`
	// Stock is the stock key's value as Redis holds it; nil: no such key.
	Stock *string `json:"stock"`
	// Lock is the lock key; nil: nobody holds the lock (no key).
	Lock *LockKey `json:"lock"`
	// Fence is the newest holder the stock has let read or write (fencing's
	// single-node domain); nil: no fenced sale has touched it.
	Fence *FenceHolder `json:"fence,omitempty"`
	// Counter is the last fencing token handed out (0: none yet).
	Counter int64 `json:"counter,omitempty"`
	// Queue is the lock a lock service keeps (etcd, ZooKeeper, MariaDB),
	// read when GET /store?lock=NAME names such a version; nil otherwise.
	Queue *Queue `json:"queue,omitempty"`
	// Nodes are the lock key on each node of a lock kept on several
	// (Redlock), read when GET /store?lock=NAME names such a version: a
	// node that restarted without persistence is seen to have forgotten
	// it. nil otherwise.
	Nodes []NodeKey `json:"nodes,omitempty"`
}

// NodeKey is the lock key on one node of a lock kept on several: its
// holder and PTTL (Lock), nobody's (Lock nil), or the node down (Down:
// why it did not answer).
type NodeKey struct {
	Node string   `json:"node"`
	Lock *LockKey `json:"lock"`
	Down string   `json:"down,omitempty"`
}

// Queue is a lock as its lock service holds it: where it lives, and its
// entries, the holder first, then the waiters in the order they will be
// served (etcd's keys by create revision, ZooKeeper's nodes by sequence,
// MariaDB's GET_LOCK waiters longest-waiting first). Empty: nobody holds it.
type Queue struct {
	Lock    string       `json:"lock"`  // the version
	Where   string       `json:"where"` // etcd's key prefix, ZooKeeper's directory, the table and row, the named lock
	Entries []QueueEntry `json:"entries"`
}

// QueueEntry is one holder or waiter, with what identifies it in its store.
type QueueEntry struct {
	// Key names it in the store: etcd's key, ZooKeeper's node, the row, the
	// connection holding or waiting for the named lock.
	Key   string `json:"key"`
	Holds bool   `json:"holds"`
	// Owner is the sale's owner where the store keeps it (ZooKeeper's node
	// data, the row's owner); etcd and GET_LOCK keep none.
	Owner   string `json:"owner,omitempty"`
	Lease   string `json:"lease,omitempty"`   // etcd: the key's lease, hex (the key ends with it)
	Session string `json:"session,omitempty"` // ZooKeeper: the session owning the ephemeral node, hex
	Conn    string `json:"conn,omitempty"`    // MariaDB: the connection id holding or waiting
	// Revision is etcd's create revision, ZooKeeper's creation zxid: the
	// order of the queue, and the fencing token of the holder.
	Revision int64 `json:"revision,omitempty"`
	// PTTLms is what is left of its lease in milliseconds (etcd's lease,
	// read in whole seconds; the row's expiry), at most 0 once expired; nil:
	// no lease (ZooKeeper's session, GET_LOCK's connection).
	PTTLms *int64 `json:"pttl_ms,omitempty"`
	// WaitedMs is how long a GET_LOCK waiter has waited in the server.
	WaitedMs int64 `json:"waited_ms,omitempty"`
}

// LockKey is the lock key as Redis holds it: its owner (a string's value,
// or a hash's field with its count: v7, v8) and the milliseconds left of
// its lease (-1: no expiry, v3).
type LockKey struct {
	Key    string `json:"key"`
	Type   string `json:"type"`
	Owner  string `json:"owner"`
	Count  string `json:"count,omitempty"`
	PTTLms int64  `json:"pttl_ms"`
}

// FenceHolder is the newest holder the stock has seen: its token and owner.
type FenceHolder struct {
	Token string `json:"token"`
	Owner string `json:"owner"`
}

// Error is every other endpoint's error reply.
type Error struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

// Stock is the reply to GET and PUT /stock.
type Stock struct {
	Key   string `json:"key"`
	Stock int64  `json:"stock"`
}

// SetStock is the body of PUT /stock. Stock is a pointer so that a missing
// field is told apart from 0.
type SetStock struct {
	Stock *int64 `json:"stock"`
}

// Health is the reply to GET /healthz: the replica, the keys it uses (so no
// tool hard-codes them) and its lock settings (so a report can say what it
// measured against).
type Health struct {
	Status   string            `json:"status"`
	Replica  string            `json:"replica"`
	StockKey string            `json:"stock_key"`
	LockKey  string            `json:"lock_key"`
	Settings map[string]string `json:"settings,omitempty"`
}

// The error codes.
const (
	CodeSoldOut          = "sold_out"
	CodeLockTimeout      = "lock_timeout"
	CodeStockMissing     = "stock_missing"
	CodeFenced           = "fenced"
	CodeLeaseLost        = "lease_lost"
	CodeStockCorrupt     = "stock_corrupt"
	CodeClientGone       = "client_gone"
	CodeUnavailable      = "unavailable"
	CodeIndeterminate    = "indeterminate"
	CodeShuttingDown     = "shutting_down"
	CodeBusy             = "busy"
	CodeBadRequest       = "bad_request"
	CodeUnauthorized     = "unauthorized"
	CodeOverrideDisabled = "override_disabled"
	CodeUnknownLock      = "unknown_lock"
	CodeUnknownWait      = "unknown_wait"
	CodeChaosDisabled    = "chaos_disabled"
	CodeNotFound         = "not_found"
	CodeNotAllowed       = "method_not_allowed"
	// CodeNotStopped refuses a step asked of a stepped sale that is not
	// stopped at one (/steps/{id}/next): it is still running, or done.
	CodeNotStopped = "not_stopped"
	// CodeUnknownHost and CodeCrossOrigin refuse what another web site
	// could send through a visitor's browser (internal/origin): a Host the
	// server does not serve (DNS rebinding), a change from another site.
	CodeUnknownHost = "unknown_host"
	CodeCrossOrigin = "cross_origin"
	// CodeNotSent is nginx's (deploy/nginx.conf), never the service's: no
	// byte of the request reached any replica, so nothing was sold.
	CodeNotSent = "not_sent"
)

// StatusClientGone is nginx's code for a client that closed the request.
const StatusClientGone = 499

// statuses is the one table from codes to HTTP statuses.
var statuses = map[string]int{
	CodeSoldOut:      http.StatusConflict,
	CodeLockTimeout:  http.StatusServiceUnavailable,
	CodeStockMissing: http.StatusServiceUnavailable,
	// Its own status: 409 is "sold out" to every client of this API.
	CodeFenced:           http.StatusPreconditionFailed,
	CodeLeaseLost:        http.StatusServiceUnavailable,
	CodeStockCorrupt:     http.StatusInternalServerError,
	CodeClientGone:       StatusClientGone,
	CodeUnavailable:      http.StatusServiceUnavailable,
	CodeIndeterminate:    http.StatusServiceUnavailable,
	CodeShuttingDown:     http.StatusServiceUnavailable,
	CodeBusy:             http.StatusServiceUnavailable,
	CodeBadRequest:       http.StatusBadRequest,
	CodeUnauthorized:     http.StatusUnauthorized,
	CodeOverrideDisabled: http.StatusBadRequest,
	CodeUnknownLock:      http.StatusBadRequest,
	CodeUnknownWait:      http.StatusBadRequest,
	CodeChaosDisabled:    http.StatusBadRequest,
	CodeNotFound:         http.StatusNotFound,
	CodeNotAllowed:       http.StatusMethodNotAllowed,
	CodeNotStopped:       http.StatusConflict, // never on /sale, where 409 is sold out
	CodeUnknownHost:      http.StatusMisdirectedRequest,
	CodeCrossOrigin:      http.StatusForbidden,
}

// Status is code's HTTP status (500 for a code not in the table).
func Status(code string) int {
	if s, ok := statuses[code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// Outcomes of a /sale request, as the load test and the scenarios count them.
const (
	Sold    = "sold"
	SoldOut = "sold_out"
	Fenced  = "fenced"
	Failed  = "failed" // known to have sold nothing: the lock not obtained, the lease lost, a refused request
	// Unknown may or may not have sold: the reply was lost (a transport
	// error, a timeout), the service's own write lost its reply
	// (CodeIndeterminate), or nginx answered 502 or 504 for a replica that
	// got the request (when none got it, nginx says 503 CodeNotSent).
	Unknown = "unknown"
)

// soldNothing are the 5xx codes the service gives only when nothing was
// written: a write whose reply was lost is CodeIndeterminate, never
// CodeUnavailable.
var soldNothing = map[string]bool{CodeLockTimeout: true, CodeStockMissing: true, CodeLeaseLost: true,
	CodeStockCorrupt: true, CodeUnavailable: true, CodeShuttingDown: true, CodeBusy: true, CodeNotSent: true}

// Outcome classifies a /sale reply.
func Outcome(status int, reply Sale) string {
	switch {
	case status == http.StatusOK && reply.Sold:
		return Sold
	case reply.Code == CodeSoldOut:
		return SoldOut
	case reply.Code == CodeFenced:
		return Fenced
	case status >= 500 && !soldNothing[reply.Code]:
		return Unknown
	}
	return Failed
}
