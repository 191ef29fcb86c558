package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/sale"
)

// Each error of the sale has its code, wrapped errors included, and each
// code its status in api's one table.
func TestCodeOf(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("context: %w", err) }
	for err, want := range map[error]int{
		wrap(sale.ErrSoldOut):                      http.StatusConflict,
		wrap(sale.ErrLockTimeout):                  http.StatusServiceUnavailable,
		wrap(sale.ErrStockMissing):                 http.StatusServiceUnavailable,
		wrap(sale.ErrStockCorrupt):                 http.StatusInternalServerError,
		wrap(sale.ErrFenced):                       http.StatusPreconditionFailed,
		wrap(sale.ErrLeaseLost):                    http.StatusServiceUnavailable,
		wrap(sale.ErrNoToken):                      http.StatusServiceUnavailable,
		wrap(context.Canceled):                     499,
		errors.New("dial tcp: connection refused"): http.StatusServiceUnavailable,
	} {
		if got := api.Status(codeOf(err)); got != want {
			t.Errorf("api.Status(codeOf(%v)) = %d, want %d", err, got, want)
		}
	}
}
