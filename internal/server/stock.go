package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/locklab/locklab/internal/api"
)

func (h *handlers) stock(w http.ResponseWriter, r *http.Request) {
	n, err := h.Seller.Stock(r.Context())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.Stock{Key: h.Seller.Key(), Stock: n})
}

func (h *handlers) setStock(w http.ResponseWriter, r *http.Request) {
	n, err := parseSetStock(http.MaxBytesReader(w, r.Body, 1<<10))
	if err != nil {
		writeError(w, api.CodeBadRequest, `want {"stock": N} with N a whole number >= 0: `+err.Error())
		return
	}
	if err := h.Seller.SetStock(r.Context(), n); err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.Stock{Key: h.Seller.Key(), Stock: n})
}

// parseSetStock reads PUT /stock's body, api.SetStock, strictly: one JSON
// object whose only key is exactly "stock" (encoding/json would also take
// "STOCK"), an integer literal (not 1e3, not 5.0), nothing after it.
func parseSetStock(body io.Reader) (int64, error) {
	var fields map[string]json.RawMessage
	dec := json.NewDecoder(body)
	if err := dec.Decode(&fields); err != nil {
		return 0, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return 0, errors.New("trailing data after the JSON object")
	}
	raw, ok := fields["stock"]
	switch {
	case !ok:
		return 0, errors.New(`"stock" is missing`)
	case len(fields) != 1:
		return 0, errors.New(`unknown fields: want only "stock"`)
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	switch {
	case err != nil:
		return 0, fmt.Errorf("stock %s: not a whole number", raw)
	case n < 0:
		return 0, fmt.Errorf("stock must be >= 0, got %d", n)
	}
	return n, nil
}
