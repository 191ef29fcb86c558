package server

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5/middleware"
	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/history"
	"github.com/locklab/locklab/internal/sale"
)

// remember records the sale in the history, if kept.
func (h *handlers) remember(r *http.Request, m sale.Method, start time.Time, tr sale.Trace, code string) {
	if h.History == nil {
		return
	}
	status := http.StatusOK
	if code != "" {
		status = api.Status(code)
	}
	h.History.Add(history.Sale{ID: middleware.GetReqID(r.Context()), Replica: h.Replica, Lock: m.Name, Wait: m.Wait,
		Start: start, End: time.Now(), Status: status, Code: code, Trace: tr})
}

// history serves the sales recorded since ?since= (RFC 3339, nanoseconds
// allowed; default: all kept) or, with ?after=SEQ, the next at most
// ?limit= (default and most: maxHistoryPage) kept after the one numbered SEQ:
// how the lab follows a run live without reading it all again.
func (h *handlers) history(w http.ResponseWriter, r *http.Request) {
	if h.History == nil {
		writeError(w, api.CodeNotFound, "no history is kept: start the service with -history N (N > 0)")
		return
	}
	q := r.URL.Query()
	var sales []history.Sale
	var truncated bool
	last := h.History.Last()
	if q.Has("after") {
		after, err := strconv.ParseUint(q.Get("after"), 10, 64)
		limit := maxHistoryPage
		if err == nil && q.Has("limit") {
			limit, err = strconv.Atoi(q.Get("limit"))
			if err == nil && (limit < 1 || limit > maxHistoryPage) {
				err = fmt.Errorf("want 1-%d", maxHistoryPage)
			}
		}
		if err != nil {
			writeError(w, api.CodeBadRequest, fmt.Sprintf("after=%q limit=%q: want a record number >= 0 and a page of 1-%d", q.Get("after"), q.Get("limit"), maxHistoryPage))
			return
		}
		sales, truncated, last = h.History.After(after, limit)
	} else {
		var since time.Time
		if v := q.Get("since"); v != "" {
			var err error
			if since, err = time.Parse(time.RFC3339Nano, v); err != nil {
				writeError(w, api.CodeBadRequest, fmt.Sprintf("since=%q: want an RFC 3339 time", v))
				return
			}
		}
		sales, truncated = h.History.Since(since)
	}
	// Streamed, one sale at a time: the whole reply built in memory first
	// raised the replicas' peak memory by megabytes per thousand sales.
	replica, _ := json.Marshal(h.Replica)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, `{"replica":%s,"truncated":%t,"last":%d,"sales":[`, replica, truncated, last) // history.Reply's shape
	for i, s := range sales {
		if i > 0 {
			bw.WriteByte(',')
		}
		raw, _ := json.Marshal(s) // plain data: it cannot fail
		bw.Write(raw)
	}
	bw.WriteString("]}\n")
	_ = bw.Flush() // the client may be gone; nothing to do then
}

// maxHistoryPage bounds one ?after= reply.
const maxHistoryPage = 5000

func (h *handlers) record(m sale.Method, outcome string) {
	if h.Recorder != nil {
		h.Recorder.Sale(m, outcome)
	}
}
