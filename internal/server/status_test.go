package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/locklab/locklab/internal/sale"
)

// The one table from errors to statuses, wrapped errors included.
func TestStatusOf(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("context: %w", err) }
	for err, want := range map[error]int{
		wrap(sale.ErrSoldOut):                      http.StatusConflict,
		wrap(sale.ErrLockTimeout):                  http.StatusServiceUnavailable,
		wrap(sale.ErrStockMissing):                 http.StatusServiceUnavailable,
		wrap(sale.ErrStockCorrupt):                 http.StatusInternalServerError,
		wrap(sale.ErrFenced):                       http.StatusPreconditionFailed,
		wrap(context.Canceled):                     499,
		errors.New("dial tcp: connection refused"): http.StatusServiceUnavailable,
	} {
		if got, _ := statusOf(err); got != want {
			t.Errorf("statusOf(%v) = %d, want %d", err, got, want)
		}
	}
}
