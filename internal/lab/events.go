package lab

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// hub sends every event to every page that listens. A page that cannot keep
// up (its buffer full) is dropped, never waited for: its browser reconnects
// and starts again from a snapshot, and the run never slows down for it.
type hub struct {
	mu   sync.Mutex
	subs map[chan []byte]bool
}

func newHub() *hub { return &hub{subs: map[chan []byte]bool{}} }

func (h *hub) subscribe() chan []byte {
	ch := make(chan []byte, 64)
	h.mu.Lock()
	h.subs[ch] = true
	h.mu.Unlock()
	return ch
}

func (h *hub) unsubscribe(ch chan []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.subs[ch] {
		delete(h.subs, ch)
		close(ch)
	}
}

// close ends every subscription.
func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		delete(h.subs, ch)
		close(ch)
	}
}

func (h *hub) send(msg []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		select {
		case ch <- msg:
		default: // too slow: dropped; it reconnects
			delete(h.subs, ch)
			close(ch)
		}
	}
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
// (the stack, the runs, the running one's holds so far), then every event,
// and a comment every 15 s so that nginx and the browser keep it open.
func (l *Lab) events(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, "no_stream", "this connection cannot stream")
		return
	}
	ch := l.hub.subscribe()
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
