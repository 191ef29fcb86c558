package lab

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/versions"
)

// The step-through: the page drives two stepped sales, A on one replica and
// B on another, and reads the store between them. A stepped sale lives on
// the replica that started it, so every call goes to that replica alone,
// by nginx's /replica/NAME/ route (round robin would find it on the other
// half the time), with the admin token, which never reaches the page. The
// lab adds nothing of its own: each reply is the replica's, passed on.

// lessonSale is what the page asks to start a stepped sale with.
type lessonSale struct {
	ID    string `json:"id"`
	Lock  string `json:"lock"`
	Fence bool   `json:"fence"`
	// Nested takes the lock twice, nested (v6's story: it waits on itself).
	Nested bool `json:"nested"`
	// Stock, when set, is written first: the lesson's starting stock.
	Stock *int64 `json:"stock,omitempty"`
	// Lease, when set, is the sale's lease (a Go duration; Redlock only,
	// which the replica checks): Redlock's restart story, whose holder
	// must outlive a person's clicks through two nodes' restarts.
	Lease string `json:"lease,omitempty"`
}

// maxLessonStock bounds the stock a lesson starts with.
const maxLessonStock = 1000

// lessonStart starts a stepped sale on the replica the path names (POST
// /sale?step=ID&lock=L[&fence=1][&nested=1][&lease=D]) and answers its state, stopped before its
// first step. Refused while a run or a cell uses the stack: a lesson's
// stock and lock are theirs too.
func (l *Lab) lessonStart(w http.ResponseWriter, r *http.Request) {
	var s lessonSale
	if err := decode(r, &s); err != nil {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, err.Error())
		return
	}
	if _, ok := versions.Lookup(s.Lock); !ok {
		writeError(w, http.StatusBadRequest, api.CodeUnknownLock, fmt.Sprintf("no version %q", s.Lock))
		return
	}
	if s.Stock != nil && (*s.Stock < 0 || *s.Stock > maxLessonStock) {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, fmt.Sprintf("a lesson's stock is 0-%d", maxLessonStock))
		return
	}
	if l.refuseBusy(w, "steps its sales on the same stock and lock") {
		return
	}
	if s.Stock != nil {
		body, _ := json.Marshal(api.SetStock{Stock: s.Stock})
		if !l.pass(w, r, "", http.MethodPut, "stock", "", body, http.StatusOK) {
			return
		}
	}
	q := url.Values{"step": {s.ID}, "lock": {s.Lock}}
	if s.Fence {
		q.Set("fence", "1")
	}
	if s.Nested {
		q.Set("nested", "1")
	}
	if s.Lease != "" {
		q.Set("lease", s.Lease)
	}
	l.pass(w, r, r.PathValue("replica"), http.MethodPost, "sale", q.Encode(), nil, 0)
}

// lessonStep passes a step call (GET the state, POST next, end, crash,
// pause or resume, DELETE: reset) to the replica the path names.
func (l *Lab) lessonStep(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("replica")
	if l.isFrozen(name) && r.Method != http.MethodDelete { // it would answer nothing until thawed
		writeError(w, http.StatusConflict, "frozen", "replica "+name+" is frozen by the lesson: thaw it first")
		return
	}
	if r.Method == http.MethodDelete {
		// The reset, or the page leaving: the lesson's faults undone
		// first, whatever the page asked before (its thaw or its start
		// of a node may be lost as it goes).
		if err := l.thaw(name, "the reset"); err != nil {
			writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, "could not thaw "+name+": "+err.Error())
			return
		}
		if err := l.startNodes("the reset"); err != nil {
			writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, "could not start again a node the lesson stopped: "+err.Error())
			return
		}
	}
	path := "steps/" + url.PathEscape(r.PathValue("id"))
	switch do := r.PathValue("do"); do {
	case "":
	case "next", "end", "crash", "pause", "resume":
		path += "/" + do
	default:
		writeError(w, http.StatusNotFound, api.CodeNotFound, "a step is next, end, crash, pause or resume, not "+do)
		return
	}
	l.pass(w, r, r.PathValue("replica"), r.Method, path, "", nil, 0)
}

// lessonStore is what the store holds now, read by the first replica not
// frozen (every replica reads the same store); ?lock=NAME, passed on, adds
// the lock a lock service keeps (etcd, ZooKeeper, MariaDB), which the
// replica reads and checks.
func (l *Lab) lessonStore(w http.ResponseWriter, r *http.Request) {
	replicas := slices.DeleteFunc(slices.Clone(l.found.find(r.Context())), l.isFrozen)
	if len(replicas) == 0 {
		writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, "no replica is running")
		return
	}
	var query string
	if lock := r.URL.Query().Get("lock"); lock != "" {
		query = url.Values{"lock": {lock}}.Encode()
	}
	l.pass(w, r, replicas[0], http.MethodGet, "store", query, nil, 0)
}

// pass sends method path?query (with body) to replica ("": through nginx's
// round robin) with the admin token, and writes its reply to w. With want
// set, a reply of that status is not written but reported (true), so the
// caller goes on; any other is written.
func (l *Lab) pass(w http.ResponseWriter, r *http.Request, replica, method, path, query string, body []byte, want int) bool {
	svc, err := l.service()
	if err != nil {
		writeError(w, http.StatusInternalServerError, "bad_config", err.Error())
		return false
	}
	if replica != "" {
		if !slices.Contains(l.found.find(r.Context()), replica) {
			writeError(w, http.StatusNotFound, api.CodeNotFound, fmt.Sprintf("no replica %q on this stack now", replica))
			return false
		}
		svc = svc.Replica(replica)
	}
	// The reply is passed on as sent, status and body: a proxy, not a
	// call of the service's API, so net/http, not the client's decoding.
	u := svc.URL(path)
	if query != "" {
		u += "?" + query
	}
	req, err := http.NewRequestWithContext(r.Context(), method, u, bytes.NewReader(body))
	if err != nil {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, err.Error())
		return false
	}
	if l.cfg.AdminToken != "" {
		req.Header.Set("Authorization", "Bearer "+l.cfg.AdminToken)
	}
	res, err := l.http.Do(req)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, "the replica did not answer: "+err.Error())
		return false
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, "the replica's reply was cut: "+err.Error())
		return false
	}
	if want != 0 && res.StatusCode == want {
		return true
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(res.StatusCode)
	_, _ = w.Write(raw)
	return false
}
