package loadtest_test

import (
	"testing"

	"github.com/locklab/locklab/internal/servicetest"
	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine they started is still
// running when they end, but the client's own (servicetest.ClientGoroutines).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, servicetest.ClientGoroutines...) }
