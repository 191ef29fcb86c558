package scenario

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/checker"
	"github.com/locklab/locklab/internal/reason"
)

var (
	sold          = reply{status: http.StatusOK, outcome: api.Sold}
	lockTimeout   = reply{status: http.StatusServiceUnavailable, code: api.CodeLockTimeout, outcome: api.Failed}
	unavailable   = reply{status: http.StatusServiceUnavailable, code: api.CodeUnavailable, outcome: api.Failed}
	indeterminate = reply{status: http.StatusServiceUnavailable, code: api.CodeIndeterminate}
)

// A cell whose precondition did not happen is never a pass, whatever it was
// expected to observe.
func TestNotTestedIsNeverOK(t *testing.T) {
	c := Cell{Expected: NoOversell, Observed: notTested(reason.New("x", "B gave up"))}
	if c.OK() || !c.NotTested() {
		t.Fatalf("%+v: OK %v, NotTested %v; want a cell that is not tested and not OK", c, c.OK(), c.NotTested())
	}
	c.Expected = c.Observed
	if c.OK() {
		t.Fatal("a cell expected to test nothing reports OK")
	}
}

// Finding 4: with INVENTORY_TTL=3s INVENTORY_ACQUIRE_TIMEOUT=1s, v7's B gave
// up after 1 s, before A's lease ran out, and the cell said "no oversell",
// v8's row. B must have sold, or waited past A's lease.
func TestSlowHolderNeedsBToOutwaitTheLease(t *testing.T) {
	gaveUp := lockTimeout
	gaveUp.elapsed = time.Second
	got := slowVerdict(0, 1, sold, gaveUp, 3*time.Second)
	if !strings.HasPrefix(got, NotTested) || !strings.Contains(got, "raise INVENTORY_ACQUIRE_TIMEOUT above INVENTORY_TTL") {
		t.Errorf("B gave up after 1s under a 3s lease: observed %q; want not tested, saying what to raise", got)
	}
	outwaited := lockTimeout
	outwaited.elapsed = 3200 * time.Millisecond // v8: the watchdog kept A's lease past its TTL
	bSold := sold
	bSold.elapsed = 1500 * time.Millisecond
	fenced := reply{status: http.StatusPreconditionFailed, code: api.CodeFenced, outcome: api.Fenced}
	for _, c := range []struct {
		oversold, held int64
		rs, rb         reply
		want           string
	}{
		{0, 1, sold, outwaited, NoOversell},
		{0, 1, sold, bSold, NoOversell},
		{0, 1, fenced, bSold, StaleRefused},
		{1, 0, sold, bSold, ForeignDelete},
		{1, 1, sold, bSold, NoForeignDelete},
	} {
		if got := slowVerdict(c.oversold, c.held, c.rs, c.rb, 3*time.Second); got != c.want {
			t.Errorf("slowVerdict(%d, %d, %s, %s after %s) = %q; want %q", c.oversold, c.held, c.rs, c.rb, c.rb.elapsed, got, c.want)
		}
	}
}

// Deliver 4: an acquire deadline no longer than the lease, where the cell
// needs B to outwait it, is refused before any fault.
func TestShortAcquireTimeoutIsRefused(t *testing.T) {
	short := Env{Faults: &toxiproxy.Client{}, TTL: 3 * time.Second, AcquireTimeout: time.Second}
	long := Env{Faults: &toxiproxy.Client{}, TTL: time.Second, AcquireTimeout: 5 * time.Second}
	for _, s := range All {
		if !s.OutwaitsLease {
			continue
		}
		if why := s.Unfit(short); !strings.Contains(why, "INVENTORY_ACQUIRE_TIMEOUT") || why != s.Refuses(short) {
			t.Errorf("%s under -ttl 3s, -acquire-timeout 1s: Unfit %q; want it refused", s.Name, why)
		}
		if why := s.Unfit(long); why != "" {
			t.Errorf("%s under -ttl 1s, -acquire-timeout 5s: Unfit %q; want it run", s.Name, why)
		}
	}
	for _, name := range []string{"slow-holder", "slow-holder+fence"} {
		if i := slices.IndexFunc(All, func(s Scenario) bool { return s.Name == name }); i < 0 || !All[i].OutwaitsLease {
			t.Errorf("%s does not say that its B outwaits the lease", name)
		}
	}
}

// Finding 1, failover+ack: A's 503 counts only when the acknowledgement
// caused it (a WAIT reached the node, A wrote nothing); an A that sold and
// whose sale the failover lost is the fix failing, never "no two holders".
func TestFailoverAckPrecondition(t *testing.T) {
	for _, c := range []struct {
		ra     reply
		waited bool
		wrote  int64
		ok     bool
	}{
		{unavailable, true, 0, true},
		{unavailable, false, 0, false}, // something else stopped A
		{lockTimeout, false, 0, false},
		{unavailable, true, 1, false}, // A wrote
		{sold, true, 1, false},
	} {
		why := gaveUpForAck(c.ra, c.waited, c.wrote).Text
		if (why == "") != c.ok {
			t.Errorf("gaveUpForAck(%s, waited %v, wrote %d) = %q; want gave up: %v", c.ra, c.waited, c.wrote, why, c.ok)
		}
	}
	// replica_ack doing nothing: A sold before the failover, B after it on
	// the promoted standby, which lacks A's write (10 -> 9).
	if !confirmedLost(10, 9, sold, sold) {
		t.Error("two 200s, the promoted stock down by one: want a confirmed sale lost")
	}
	if confirmedLost(10, 9, unavailable, sold) {
		t.Error("A gave up, B sold one: want no confirmed sale lost")
	}
	// And the history's lost update contradicts "no two holders".
	if agrees(NoTwoHolders, checker.Verdict{LostUpdates: 1}) == "" {
		t.Error("no two holders with a lost update in the history: want the evidence to disagree")
	}
}

// Finding 1, failover-write+ack: "no confirmed sale lost" needs A's write to
// have reached the primary and not the standby, and A's reply held back as
// indeterminate; a 503 that wrote nothing tested nothing.
func TestFailoverWritePrecondition(t *testing.T) {
	for _, c := range []struct {
		name                       string
		ack                        bool
		ra                         reply
		primary, standby, promoted int64
		want                       string
	}{
		{"fixed", true, indeterminate, 9, 10, 10, NoConfirmedLost},
		{"flaw", false, sold, 9, 10, 10, ConfirmedLost},
		{"ack did nothing", true, sold, 9, 10, 10, ConfirmedLost},
		{"A never wrote", true, lockTimeout, 10, 10, 10, NotTested},
		{"A never wrote, no ack", false, unavailable, 10, 10, 10, NotTested},
		{"a 503 not indeterminate", true, unavailable, 9, 10, 10, NotTested},
		{"the link never stalled", true, indeterminate, 9, 9, 9, NotTested},
	} {
		got := writeVerdict(c.ack, c.ra, 10, c.primary, c.standby, c.promoted)
		if got != c.want && !(c.want == NotTested && strings.HasPrefix(got, NotTested)) {
			t.Errorf("%s: writeVerdict(ack %v, %s, 10, %d, %d, %d) = %q; want %q", c.name, c.ack, c.ra, c.primary, c.standby, c.promoted, got, c.want)
		}
	}
}
