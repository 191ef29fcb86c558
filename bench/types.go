package main

// Report is one bench run, as printed and as written to JSON.
type Report struct {
	Date        string            `json:"date"`
	Machine     string            `json:"machine"`
	Settings    map[string]string `json:"replica_settings"`
	Concurrency int               `json:"concurrency"`
	Seconds     float64           `json:"seconds_per_version"`
	// Serial is the four-command loop's rate: SET NX PX, GET, SET, Lua
	// release from one goroutine; the median of every row's slices. No
	// single-lock design sells faster serially.
	Serial float64 `json:"serial_ceiling_per_sec"`
	// Nginx is GET /healthz through nginx: the HTTP path's ceiling,
	// measured before and after atomic's run.
	Nginx    float64            `json:"nginx_ceiling_per_sec"`
	Rows     []Row              `json:"versions"`
	Compare  *Comparison        `json:"libraries,omitempty"`
	Default  []DefaultRun       `json:"default_load_test"`
	MemoryMB map[string]float64 `json:"replica_peak_rss_mb"`
	Gate     *GateCost          `json:"step_gate,omitempty"`
	Targets  []Target           `json:"targets"`
}

// Row is one version with one way of waiting.
type Row struct {
	Lock string `json:"lock"`
	Wait string `json:"wait,omitempty"`
	// Own is its own ceiling: acquire, sale, release, serially, no HTTP;
	// Serial the four-command loop's; both measured around this row's run.
	Own         float64 `json:"own_ceiling_per_sec"`
	Serial      float64 `json:"serial_ceiling_per_sec"`
	OwnVsSerial float64 `json:"own_vs_serial"`
	// Through nginx, -c concurrent sales: the medians of the rounds.
	Sales  float64 `json:"sales_per_sec"`
	P50    float64 `json:"p50_ms"`
	P99    float64 `json:"p99_ms"`
	Failed int     `json:"failed"`
	// HoldOwn and HoldNginx are the mean time one sale held the lock, in
	// microseconds: in the own ceiling, and through nginx (from the
	// replicas' locklab_lock_hold_seconds). Their quotient is most of the
	// ratio: a locked sale can go no faster than one hold at a time.
	HoldOwn   float64 `json:"hold_own_us,omitempty"`
	HoldNginx float64 `json:"hold_nginx_us,omitempty"`
	// Handover is the rest of each sale's share of the time through nginx
	// (1/Sales - HoldNginx): the lock passing from one holder to the next,
	// which polling pays with the wait for the next waiter's attempt.
	Handover float64 `json:"handover_us,omitempty"`
	// RoundTrip is a Redis round trip (a PING from the bench to the locks'
	// node), µs, measured during the row's runs through nginx: the median
	// of the rounds' medians. A hand-over of one round trip takes about
	// this long.
	RoundTrip float64 `json:"round_trip_us,omitempty"`
	// Busy is the share of the time through nginx that the lock was held
	// (HoldNginx x Sales): what a wait controls, since the rest is the
	// hand-over. Bound is the most Ratio could be with no hand-over at all
	// (1/HoldNginx over Own): what the hold through nginx allows.
	Busy  float64 `json:"lock_busy,omitempty"`
	Bound float64 `json:"ratio_bound,omitempty"`
	// Ratio is Sales over Own (over the nginx ceiling for atomic, which has
	// no lock to serialise on): the median of Rounds, each round's run over its ceiling
	// (own, or nginx's for atomic) measured just before and just after it;
	// RatioMin and RatioMax are their spread.
	Ratio    float64   `json:"ratio"`
	RatioOf  string    `json:"ratio_of"`
	Rounds   []float64 `json:"ratio_rounds"`
	RatioMin float64   `json:"ratio_min"`
	RatioMax float64   `json:"ratio_max"`
	// CommandsPerSale is the Redis commands every node the bench uses ran
	// during the run through nginx (INFO commandstats, before and after),
	// per sale; AttemptsPerSale the lock attempts per acquisition (the
	// replicas' locklab_lock_acquire_attempts). Neither depends on how busy
	// the machine is: they compare across machines and runs.
	CommandsPerSale float64 `json:"commands_per_sale"`
	AttemptsPerSale float64 `json:"attempts_per_sale,omitempty"`
	// RoundTripsPerSale counts what the replicas sent instead (their
	// locklab_redis_round_trips_total): a script is one round trip, where
	// CommandsPerSale also counts every command it ran inside Redis.
	RoundTripsPerSale float64 `json:"round_trips_per_sale"`
	// Load is the latency curve: p50 and p99 at a few offered loads, in an
	// open model (latency counted from each request's due time).
	Load []LoadPoint `json:"latency_vs_load,omitempty"`
}

// LoadPoint is one offered load of a row's latency curve.
type LoadPoint struct {
	Offered  float64 `json:"offered_per_sec"`
	Achieved float64 `json:"sales_per_sec"`
	P50      float64 `json:"p50_ms"`
	P99      float64 `json:"p99_ms"`
	Failed   int     `json:"failed"`
}

// loadShares are the offered loads of a latency curve, as shares of the
// row's closed-loop sales/s.
var loadShares = []float64{0.25, 0.5, 0.75, 1}

// DefaultRun is one version under the default load test.
type DefaultRun struct {
	Lock     string         `json:"lock"`
	Wait     string         `json:"wait,omitempty"`
	Sold     int            `json:"sold"`
	SoldOut  int            `json:"sold_out"`
	Failed   int            `json:"failed"`
	FailedBy map[string]int `json:"failed_by,omitempty"`
	Oversold int64          `json:"oversold"`
	P99      float64        `json:"p99_ms"`
}

// Target is one of issue 6's targets, checked against this run.
type Target struct {
	Name string `json:"name"`
	Want string `json:"want"`
	Got  string `json:"got"`
	Met  bool   `json:"met"`
}
