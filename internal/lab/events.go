package lab

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// hub sends every event to every page that listens. A page that cannot keep
// up (its buffer full) is dropped, never waited for: its browser reconnects
// and starts again from a snapshot, and the run never slows down for it.
//
// Each stream costs a snapshot of the running run (up to MaxRequests holds)
// when it opens and a buffer while it lasts, so there are at most
// MaxStreams at once, MaxStreamsPerClient of them from one client.
type hub struct {
	mu      sync.Mutex
	subs    map[chan []byte]string // the client of each
	clients map[string]int
}

// The caps on the live streams: a page opens one; a few tabs, or a
// reconnect before the old stream is seen closed, fit under the per-client
// one.
const (
	MaxStreams          = 64
	MaxStreamsPerClient = 8
)

// errTooManyStreams is a subscription over a cap.
var errTooManyStreams = errors.New("too many live streams")

func newHub() *hub { return &hub{subs: map[chan []byte]string{}, clients: map[string]int{}} }

// subscribe opens a stream for client, or says it is over a cap.
func (h *hub) subscribe(client string) (chan []byte, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.subs) >= MaxStreams || h.clients[client] >= MaxStreamsPerClient {
		return nil, errTooManyStreams
	}
	ch := make(chan []byte, 64)
	h.subs[ch] = client
	h.clients[client]++
	return ch, nil
}

func (h *hub) unsubscribe(ch chan []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.drop(ch)
}

// drop ends ch's subscription, if it still runs; h.mu is held.
func (h *hub) drop(ch chan []byte) {
	client, ok := h.subs[ch]
	if !ok {
		return
	}
	delete(h.subs, ch)
	if h.clients[client]--; h.clients[client] == 0 {
		delete(h.clients, client)
	}
	close(ch)
}

// close ends every subscription.
func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		h.drop(ch)
	}
}

func (h *hub) send(msg []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		select {
		case ch <- msg:
		default: // too slow: dropped; it reconnects
			h.drop(ch)
		}
	}
}

// streamClient names a stream's client for its cap: the address nginx says it
// proxied for (X-Real-IP), or else the connection's. A client that sends its
// own X-Real-IP straight to the lab escapes its own cap, not MaxStreams.
func streamClient(r *http.Request) string {
	if ip := r.Header.Get("X-Real-IP"); ip != "" {
		return ip
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// publish sends an event of kind with v as its JSON data.
func (l *Lab) publish(kind string, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		l.cfg.Log.Warn("an event that is not JSON", "kind", kind, "err", err)
		return
	}
	l.hub.send(fmt.Appendf(nil, "event: %s\ndata: %s\n\n", kind, data))
}

// events is the page's live feed (Server-Sent Events): first a snapshot
// (the stack, the runs, the running one's holds so far, each cell's last
// state), then every event,
// and a comment every 15 s so that nginx and the browser keep it open.
func (l *Lab) events(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, "no_stream", "this connection cannot stream")
		return
	}
	ch, err := l.hub.subscribe(streamClient(r))
	if err != nil {
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusTooManyRequests, "too_many_streams",
			fmt.Sprintf("too many live streams: the lab sends at most %d at once, %d to one client; close another tab of the lab", MaxStreams, MaxStreamsPerClient))
		return
	}
	defer l.hub.unsubscribe(ch)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no") // nginx: pass it on as it comes
	w.WriteHeader(http.StatusOK)
	snap := map[string]any{"stack": l.stack.nodes()}
	l.mu.Lock()
	runs := make([]summary, 0, len(l.runs))
	for _, run := range l.runs {
		runs = append(runs, run.summary())
	}
	if l.running != nil {
		snap["running"] = l.running.snapshot()
	}
	l.mu.Unlock()
	snap["runs"] = runs
	snap["cells"] = l.cellStates()
	data, _ := json.Marshal(snap)
	fmt.Fprintf(w, "retry: 1000\nevent: snapshot\ndata: %s\n\n", data)
	flusher.Flush()
	keepAlive := time.NewTicker(15 * time.Second)
	defer keepAlive.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case msg, ok := <-ch:
			if !ok {
				return // dropped: the browser reconnects
			}
			if _, err := w.Write(msg); err != nil {
				return
			}
			flusher.Flush()
		case <-keepAlive.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return
			}
			flusher.Flush()
		}
	}
}
