package server

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/sale"
	"github.com/locklab/locklab/internal/step"
	"github.com/locklab/locklab/internal/versions"
)

// stepSettle is how long a step request waits for the sale to stop again
// (or end) before it answers with the sale still running: a step is a
// round trip, but the business work, or a wait for the lock, may take
// longer, and the page reads the state again.
const stepSettle = 2 * time.Second

// Stepped is what a stepped sale's run keeps as its result: the reply
// /sale would have given, and its status.
type Stepped struct {
	Status int      `json:"status"`
	Reply  api.Sale `json:"reply"`
}

// startStepped starts the sale as a stepped one under ?step=ID and answers
// 202 with its state once it stops at its first step: the sale runs on,
// detached from this request (an nginx or write timeout must not end a
// lesson), driven and read through /steps/{id}.
func (h *handlers) startStepped(w http.ResponseWriter, r *http.Request, ctx context.Context, m sale.Method) {
	switch {
	case h.Steps == nil:
		writeError(w, api.CodeBadRequest, "stepping a sale is not served by this replica")
		return
	case h.OverrideAdmin && !h.authorized(r):
		writeError(w, api.CodeUnauthorized, "stepping a sale needs the admin token on a replica reached beyond this machine: send Authorization: Bearer <token>")
		return
	}
	s, err := h.Steps.Start(ctx, r.URL.Query().Get("step"), func(ctx context.Context) any {
		status, reply := h.sell(ctx, r, m)
		return Stepped{status, reply}
	})
	switch {
	case errors.Is(err, step.ErrFull):
		writeError(w, api.CodeBusy, err.Error())
		return
	case err != nil:
		writeError(w, api.CodeBadRequest, err.Error())
		return
	}
	if v, ok := versions.Lookup(m.Name); ok && v.Wait && h.Forget != nil {
		// v3-v8 (the versions -wait applies to) lock one key in the
		// stock's Redis holding the owner: what a crash leaves there,
		// Forget removes. Another's lock (other nodes, a session, a
		// connection) would outlive the lesson: it cannot crash.
		s.Crashable(h.Forget)
	}
	if v, ok := versions.Lookup(m.Name); ok && v.Wait && v.Lease == "renewed" {
		// v8: its watchdog renews through the gated client, from its own
		// goroutine: a pause holds it there, as a frozen process would.
		s.Pausable()
	}
	writeJSON(w, http.StatusAccepted, s.Settle(r.Context(), stepSettle))
}

// stepped is the sale /steps/{id} names, or nil after a 404.
func (h *handlers) stepped(w http.ResponseWriter, r *http.Request) *step.Sale {
	if h.Steps == nil {
		writeError(w, api.CodeNotFound, "stepping a sale is not served by this replica")
		return nil
	}
	s, ok := h.Steps.Get(chi.URLParam(r, "id"))
	if !ok {
		writeError(w, api.CodeNotFound, "no stepped sale "+chi.URLParam(r, "id")+" on this replica (it may run on another, or be over for a minute)")
		return nil
	}
	return s
}

func (h *handlers) stepState(w http.ResponseWriter, r *http.Request) {
	if s := h.stepped(w, r); s != nil {
		writeJSON(w, http.StatusOK, s.State())
	}
}

// stepNext lets the sale take one step and answers its state once it has
// stopped before the next (or ended, or stepSettle passed).
func (h *handlers) stepNext(w http.ResponseWriter, r *http.Request) {
	s := h.stepped(w, r)
	if s == nil {
		return
	}
	if err := s.Next(); err != nil {
		writeError(w, api.CodeNotStopped, err.Error()+": it is "+s.State().State)
		return
	}
	writeJSON(w, http.StatusOK, s.Settle(r.Context(), stepSettle))
}

// stepEnd lets the sale run to its end without stopping.
func (h *handlers) stepEnd(w http.ResponseWriter, r *http.Request) {
	s := h.stepped(w, r)
	if s == nil {
		return
	}
	if err := s.End(); err != nil {
		writeError(w, api.CodeNotStopped, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, s.Settle(r.Context(), stepSettle))
}

// stepPause pauses the sale stopped before a step (the lab's v8 story: a
// holder frozen by a GC pause or SIGSTOP): its watchdog's renewals are held
// at the gate until stepResume, so its lease runs out for real.
func (h *handlers) stepPause(w http.ResponseWriter, r *http.Request) {
	s := h.stepped(w, r)
	if s == nil {
		return
	}
	switch err := s.Pause(); {
	case errors.Is(err, step.ErrNoPause):
		writeError(w, api.CodeBadRequest, err.Error())
		return
	case err != nil:
		writeError(w, api.CodeNotStopped, err.Error()+": it is "+s.State().State)
		return
	}
	writeJSON(w, http.StatusOK, s.State())
}

// stepResume wakes a paused sale: the renewals it held go out now, and it
// is stopped before the step it was paused at. It answers once they have
// (or stepSettle passed), so the page shows what they found.
func (h *handlers) stepResume(w http.ResponseWriter, r *http.Request) {
	s := h.stepped(w, r)
	if s == nil {
		return
	}
	if err := s.Resume(); err != nil {
		writeError(w, api.CodeNotStopped, err.Error()+": it is "+s.State().State)
		return
	}
	writeJSON(w, http.StatusOK, s.Unheld(r.Context(), stepSettle))
}

// stepCrash crashes the sale where it stands (the lab's v3 story: a holder
// that dies): it sends nothing more, not even its release, and its lock
// stays in the store until the reset (stepCancel) removes it.
func (h *handlers) stepCrash(w http.ResponseWriter, r *http.Request) {
	s := h.stepped(w, r)
	if s == nil {
		return
	}
	switch err := s.Crash(); {
	case errors.Is(err, step.ErrNoCrash):
		writeError(w, api.CodeBadRequest, err.Error())
		return
	case err != nil:
		writeError(w, api.CodeNotStopped, err.Error()+": it is "+s.State().State)
		return
	}
	writeJSON(w, http.StatusOK, s.Settle(r.Context(), stepSettle))
}

// stepCancel cancels the sale (the lesson's reset): it writes nothing more
// and releases a lock it holds; a crashed one's lock is removed if it is
// still the sale's (Config.Forget).
func (h *handlers) stepCancel(w http.ResponseWriter, r *http.Request) {
	if s := h.stepped(w, r); s != nil {
		s.Cancel("reset")
		writeJSON(w, http.StatusOK, s.Settle(r.Context(), stepSettle))
	}
}
