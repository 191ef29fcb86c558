package history

import (
	"crypto/rand"
	"encoding/hex"
)

// RunID names one run (a load test's version, a scenario's cell): its
// requests' ids are RunID-N, so its sales can be told apart in a replica's
// history.
func RunID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
