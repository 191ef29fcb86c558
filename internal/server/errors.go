package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/go-chi/chi/v5/middleware"
	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/sale"
	"github.com/locklab/locklab/internal/step"
)

// requestError is a request refused before any work: its code and message.
type requestError struct {
	code, msg string
}

// codes maps each error of the sale to its code (api.Status gives the HTTP
// status); any other error is Redis or the network failing: unavailable.
var codes = []struct {
	err  error
	code string
}{
	{sale.ErrSoldOut, api.CodeSoldOut},
	{sale.ErrLockTimeout, api.CodeLockTimeout},
	{sale.ErrStockMissing, api.CodeStockMissing},
	{sale.ErrFenced, api.CodeFenced},
	// Not fenced: the stock refused nothing. The lock failed to give what
	// the sale needs, nothing was sold, and a retry may get a token.
	{sale.ErrNoToken, api.CodeUnavailable},
	{sale.ErrLeaseLost, api.CodeLeaseLost},
	{sale.ErrStockCorrupt, api.CodeStockCorrupt},
	{sale.ErrIndeterminate, api.CodeIndeterminate},
	{ErrShuttingDown, api.CodeShuttingDown},
	{step.ErrCancelled, api.CodeClientGone}, // the lab reset it, or left it
	{context.Canceled, api.CodeClientGone},
}

// codeOf names an error of the sale by its code.
func codeOf(err error) string {
	for _, c := range codes {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	return api.CodeUnavailable
}

func (h *handlers) fail(w http.ResponseWriter, r *http.Request, err error) {
	code := codeOf(err)
	h.Log.Warn("request failed", "path", r.URL.Path, "code", code, "err", err,
		"request_id", middleware.GetReqID(r.Context()))
	writeError(w, code, err.Error())
}

func writeError(w http.ResponseWriter, code, msg string) {
	writeJSON(w, api.Status(code), api.Error{Error: msg, Code: code})
}

// writeJSON writes v with status; a 503 also says when to retry.
func writeJSON(w http.ResponseWriter, status int, v any) {
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client may be gone; nothing to do then
}
