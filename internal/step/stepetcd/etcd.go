// Package stepetcd is the step gate in an etcd client: gRPC interceptors
// that stop an armed sale before each request to etcd and record it, in
// words a learner reads ("LeaseGrant ttl=10", "Txn if create_rev(lock/694d…)
// = 0 then Put …"), with a short reply. One pair per client covers every
// version on etcd, as step.Hook does for go-redis, without code in the lock.
//
// It is a package of its own, not part of step: the replica's server
// imports step, and must link no lock service's client (versions'
// TestReadersLinkNoLock); only the binaries that build the etcd client
// import this one.
//
// What it does not show: the requests the etcd client sends from its own
// goroutines under its own context, which carries no sale (the session's
// keep-alive stream), and the watch a waiter waits on: the client shares one
// watch stream among every watch of the same metadata, so the sale that
// opened it would be shown, and kept alive by, the others' watches. A
// waiter's wait shows as the Range that finds the key before its own, the
// sale running, until it is woken and looks again. The lock's own
// keep-alives (KeepAliveOnce: a stream of one request and one reply, sent
// with the sale's context from another goroutine) are shown as Background
// steps, never stopped, as v8's watchdog renewals are.
package stepetcd

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/locklab/locklab/internal/step"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/grpc"
)

// DialOptions put the gate in a client: clientv3.Config.DialOptions. Its
// interceptors run inside the client's own retry: a request it sends again
// is a step again, as it is one more request to etcd.
func DialOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithChainUnaryInterceptor(Unary), grpc.WithChainStreamInterceptor(Stream)}
}

// Unary gates one request: a request of an armed sale's own goroutine stops
// before it is sent and is recorded with its reply; one sent on its behalf
// by another goroutine is recorded, not stopped; any other goes through
// after one context lookup.
func Unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	s := step.From(ctx)
	if s == nil {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	var err error
	if serr := s.Run(ctx, Describe(method, req), func() string {
		err = invoker(ctx, method, req, reply, cc, opts...)
		return Reply(req, reply, err)
	}); serr != nil {
		return serr
	}
	return err
}

// Stream records an armed sale's lease keep-alives (KeepAliveOnce opens a
// stream of its own for one request and its reply): each request with the
// reply received after it. The lock sends them from another goroutine, so
// they are Background steps; on the sale's own goroutine the step would
// stop after its request was sent, before its reply is read. Every other
// stream (the watches: see the package's doc) passes through.
func Stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	cs, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil || method != keepAlive {
		return cs, err
	}
	if s := step.From(ctx); s != nil {
		return &stream{ClientStream: cs, s: s, ctx: ctx, method: method}, nil
	}
	return cs, nil
}

const keepAlive = "/etcdserverpb.Lease/LeaseKeepAlive"

type stream struct {
	grpc.ClientStream
	s      *step.Sale
	ctx    context.Context
	method string
	mu     sync.Mutex
	sent   string // the request whose reply is awaited, described
}

func (st *stream) SendMsg(m any) error {
	err := st.ClientStream.SendMsg(m)
	if err == nil {
		st.mu.Lock()
		st.sent = Describe(st.method, m)
		st.mu.Unlock()
	}
	return err
}

func (st *stream) RecvMsg(m any) error {
	st.mu.Lock()
	what := st.sent
	st.sent = ""
	st.mu.Unlock()
	if what == "" {
		return st.ClientStream.RecvMsg(m)
	}
	var err error
	if serr := st.s.Run(st.ctx, what, func() string { err = st.ClientStream.RecvMsg(m); return Reply(nil, m, err) }); serr != nil {
		return serr
	}
	return err
}

// maxShown is the longest key or value shown whole.
const maxShown = 48

// Describe is the request req of the gRPC method, etcdctl-like: "Range
// lock/* by create asc limit 1", "Put lock/694d… \"\" lease=694d…".
func Describe(method string, req any) string {
	switch r := req.(type) {
	case *pb.RangeRequest:
		return describeRange(r)
	case *pb.PutRequest:
		return describePut(r)
	case *pb.DeleteRangeRequest:
		return "DeleteRange " + keyRange(r.GetKey(), r.GetRangeEnd())
	case *pb.TxnRequest:
		return describeTxn(r)
	case *pb.LeaseGrantRequest:
		if r.GetID() != 0 {
			return fmt.Sprintf("LeaseGrant ttl=%d id=%x", r.GetTTL(), r.GetID())
		}
		return fmt.Sprintf("LeaseGrant ttl=%d", r.GetTTL())
	case *pb.LeaseRevokeRequest:
		return fmt.Sprintf("LeaseRevoke %x", r.GetID())
	case *pb.LeaseKeepAliveRequest:
		return fmt.Sprintf("LeaseKeepAlive %x", r.GetID())
	case *pb.LeaseTimeToLiveRequest:
		return fmt.Sprintf("LeaseTimeToLive %x", r.GetID())
	}
	// Any other: its method's name ("/etcdserverpb.Maintenance/Status").
	return method[strings.LastIndexByte(method, '/')+1:]
}

func describeRange(r *pb.RangeRequest) string {
	var b strings.Builder
	b.WriteString("Range " + keyRange(r.GetKey(), r.GetRangeEnd()))
	if r.GetSortOrder() != pb.RangeRequest_NONE {
		fmt.Fprintf(&b, " by %s %s", strings.ToLower(r.GetSortTarget().String()), map[pb.RangeRequest_SortOrder]string{pb.RangeRequest_ASCEND: "asc", pb.RangeRequest_DESCEND: "desc"}[r.GetSortOrder()])
	}
	if r.GetLimit() > 0 {
		fmt.Fprintf(&b, " limit %d", r.GetLimit())
	}
	if r.GetMaxCreateRevision() > 0 {
		fmt.Fprintf(&b, " created<=%d", r.GetMaxCreateRevision())
	}
	if r.GetRevision() > 0 {
		fmt.Fprintf(&b, " at rev %d", r.GetRevision())
	}
	if r.GetCountOnly() {
		b.WriteString(" count")
	}
	return b.String()
}

func describePut(r *pb.PutRequest) string {
	s := "Put " + shown(r.GetKey()) + " " + strconv.Quote(cut(string(r.GetValue())))
	if r.GetLease() != 0 {
		s += fmt.Sprintf(" lease=%x", r.GetLease())
	}
	return s
}

func describeTxn(r *pb.TxnRequest) string {
	cmps := make([]string, len(r.GetCompare()))
	for i, c := range r.GetCompare() {
		cmps[i] = describeCompare(c)
	}
	s := "Txn"
	if len(cmps) > 0 {
		s += " if " + strings.Join(cmps, " and ")
	}
	s += " then " + describeOps(r.GetSuccess())
	if len(r.GetFailure()) > 0 {
		s += " else " + describeOps(r.GetFailure())
	}
	return s
}

func describeCompare(c *pb.Compare) string {
	var target, value string
	switch u := c.GetTargetUnion().(type) {
	case *pb.Compare_Version:
		target, value = "version", strconv.FormatInt(u.Version, 10)
	case *pb.Compare_CreateRevision:
		target, value = "create_rev", strconv.FormatInt(u.CreateRevision, 10)
	case *pb.Compare_ModRevision:
		target, value = "mod_rev", strconv.FormatInt(u.ModRevision, 10)
	case *pb.Compare_Value:
		target, value = "value", strconv.Quote(cut(string(u.Value)))
	case *pb.Compare_Lease:
		target, value = "lease", fmt.Sprintf("%x", u.Lease)
	default:
		target, value = strings.ToLower(c.GetTarget().String()), "?"
	}
	op := map[pb.Compare_CompareResult]string{pb.Compare_EQUAL: "=", pb.Compare_GREATER: ">", pb.Compare_LESS: "<", pb.Compare_NOT_EQUAL: "!="}[c.GetResult()]
	return fmt.Sprintf("%s(%s) %s %s", target, keyRange(c.GetKey(), c.GetRangeEnd()), op, value)
}

func describeOps(ops []*pb.RequestOp) string {
	if len(ops) == 0 {
		return "nothing"
	}
	parts := make([]string, len(ops))
	for i, op := range ops {
		switch {
		case op.GetRequestRange() != nil:
			parts[i] = describeRange(op.GetRequestRange())
		case op.GetRequestPut() != nil:
			parts[i] = describePut(op.GetRequestPut())
		case op.GetRequestDeleteRange() != nil:
			parts[i] = "DeleteRange " + keyRange(op.GetRequestDeleteRange().GetKey(), op.GetRequestDeleteRange().GetRangeEnd())
		case op.GetRequestTxn() != nil:
			parts[i] = "(" + describeTxn(op.GetRequestTxn()) + ")"
		default:
			parts[i] = "?"
		}
	}
	return strings.Join(parts, "; ")
}

// Reply is the reply to req in short: "lease 694d… ttl=10", "[lock/694d…
// created 42]", "(none)", "deleted 1", "then: put at rev 42; [...]", or
// "(error) ...".
func Reply(req, reply any, err error) string {
	if err != nil {
		return "(error) " + err.Error()
	}
	switch r := reply.(type) {
	case *pb.RangeResponse:
		if q, ok := req.(*pb.RangeRequest); ok && q.GetCountOnly() {
			return fmt.Sprintf("count %d", r.GetCount())
		}
		return replyRange(r)
	case *pb.PutResponse:
		return fmt.Sprintf("put at rev %d", r.GetHeader().GetRevision())
	case *pb.DeleteRangeResponse:
		return fmt.Sprintf("deleted %d", r.GetDeleted())
	case *pb.TxnResponse:
		return replyTxn(r)
	case *pb.LeaseGrantResponse:
		if r.GetError() != "" {
			return "(error) " + r.GetError()
		}
		return fmt.Sprintf("lease %x ttl=%d", r.GetID(), r.GetTTL())
	case *pb.LeaseRevokeResponse:
		return "OK"
	case *pb.LeaseKeepAliveResponse:
		if r.GetTTL() <= 0 {
			return "expired"
		}
		return fmt.Sprintf("ttl=%d", r.GetTTL())
	case *pb.LeaseTimeToLiveResponse:
		return fmt.Sprintf("ttl=%d", r.GetTTL())
	}
	return "OK"
}

func replyRange(r *pb.RangeResponse) string {
	if len(r.GetKvs()) == 0 { // its count may include keys a filter (created<=) left out
		return "(none)"
	}
	kvs := make([]string, len(r.GetKvs()))
	for i, kv := range r.GetKvs() {
		kvs[i] = keyValue(kv)
	}
	s := "[" + strings.Join(kvs, ", ") + "]"
	if r.GetMore() {
		s += fmt.Sprintf(" of %d keys", r.GetCount())
	}
	return s
}

func keyValue(kv *mvccpb.KeyValue) string {
	s := shown(kv.GetKey())
	if len(kv.GetValue()) > 0 {
		s += "=" + strconv.Quote(cut(string(kv.GetValue())))
	}
	return s + fmt.Sprintf(" created %d", kv.GetCreateRevision())
}

func replyTxn(r *pb.TxnResponse) string {
	branch := "else"
	if r.GetSucceeded() {
		branch = "then"
	}
	parts := make([]string, len(r.GetResponses()))
	for i, op := range r.GetResponses() {
		switch {
		case op.GetResponseRange() != nil:
			parts[i] = replyRange(op.GetResponseRange())
		case op.GetResponsePut() != nil:
			parts[i] = fmt.Sprintf("put at rev %d", r.GetHeader().GetRevision())
		case op.GetResponseDeleteRange() != nil:
			parts[i] = fmt.Sprintf("deleted %d", op.GetResponseDeleteRange().GetDeleted())
		case op.GetResponseTxn() != nil:
			parts[i] = "(" + replyTxn(op.GetResponseTxn()) + ")"
		}
	}
	if len(parts) == 0 {
		return branch
	}
	return branch + ": " + strings.Join(parts, "; ")
}

// keyRange is a key, or a range as etcd's prefix ("lock/*") or [from, to).
func keyRange(key, end []byte) string {
	switch {
	case len(end) == 0:
		return shown(key)
	case string(end) == string(prefixEnd(key)):
		return shown(key) + "*"
	}
	return "[" + shown(key) + ", " + shown(end) + ")"
}

// prefixEnd is the end of the range of keys that start with key, as
// clientv3.GetPrefixRangeEnd.
func prefixEnd(key []byte) []byte {
	end := []byte(string(key))
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return []byte{0} // every key
}

func shown(key []byte) string {
	s := cut(string(key))
	if s == "" || strings.ContainsAny(s, " \n\t\"") || !strconv.CanBackquote(s) {
		return strconv.Quote(s)
	}
	return s
}

func cut(s string) string {
	if len(s) > maxShown {
		return s[:maxShown] + "…"
	}
	return s
}
