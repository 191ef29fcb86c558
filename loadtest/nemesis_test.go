package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/checker"
	"github.com/locklab/locklab/internal/loadtest"
	"github.com/locklab/locklab/internal/scenario"
)

// A run of 1,000 requests on both replicas, all sold, the history read and
// clean, as the nemesis's judge gets it.
func nemesisRun() loadtest.Result {
	return loadtest.Result{Lock: "v8", Requests: 1000, Sold: 1000, Replicas: map[string]int{"inventory-1": 500, "inventory-2": 500},
		Verdict: checker.Verdict{HistoryChecked: true, Holds: 1000, Linearizability: "ok"}}
}

var (
	v8Procs    = []string{"inventory-1", "inventory-2", "redis-6381"}
	pauseStock = scenario.Fault{At: 2 * time.Second, Kind: scenario.FaultPause, Target: "redis-6381", For: 2 * time.Second}
)

// judged is the run's row and its line in the table.
func judged(t *testing.T, res loadtest.Result, faults []scenario.Fault, procs []string) (scenario.NemesisRow, string) {
	t.Helper()
	r := scenario.JudgeNemesis(res, false, 12, faults, procs, time.Now())
	return r, nemesisLine(r)
}

// The control: a run that was tried (a fault on its node) and held is ok.
func TestNemesisRowOK(t *testing.T) {
	r, line := judged(t, nemesisRun(), []scenario.Fault{pauseStock}, v8Procs)
	if len(r.NotTested) > 0 || !strings.HasSuffix(line, "\tnone\tok") || !strings.Contains(line, "\t0\t0\tok\t") {
		t.Fatalf("a clean run: not tested %v, line %q", r.NotTested, line)
	}
}

// Finding 2: both replicas' history truncated, so two holders and lost
// updates were never looked at: "-" with the note, and not tested (the
// run's exit status fails), never "0 0 ... ok".
func TestNemesisHistoryNotRead(t *testing.T) {
	res := nemesisRun()
	res.Verdict.HistoryChecked = false
	res.HistoryNote = "the replicas' history was not read: history: replica inventory-1 kept too few sales for this run (raise its -history)"
	r, line := judged(t, res, []scenario.Fault{pauseStock}, v8Procs)
	if len(r.NotTested) == 0 || !strings.Contains(r.NotTested[0], "kept too few sales") {
		t.Fatalf("not tested %v, want the history's note", r.NotTested)
	}
	if !strings.Contains(line, "\t-\t-\tok\t-\tnot tested: the replicas' history was not read") {
		t.Fatalf("line %q: want two holders, lost updates and violation \"-\", and the note", line)
	}
}

// The suspected finding: a replica the nemesis killed comes back with an
// empty history (it keeps it in memory) and its ring, not full, says
// nothing; the run's history is incomplete, not checked. A kill of a
// replica the run did not use (v1's other) leaves it checked.
func TestNemesisKilledReplicaHistoryIncomplete(t *testing.T) {
	kill := scenario.Fault{At: 5 * time.Second, Kind: scenario.FaultKill, Target: "inventory-2"}
	r, line := judged(t, nemesisRun(), []scenario.Fault{kill}, v8Procs)
	if r.HistoryChecked || len(r.NotTested) == 0 || !strings.Contains(r.HistoryNote, "inventory-2 at 5.0 s") {
		t.Fatalf("history checked %v, note %q, not tested %v: want incomplete", r.HistoryChecked, r.HistoryNote, r.NotTested)
	}
	if !strings.Contains(line, "\t-\t-\tok\t-\tnot tested: the replicas' history is incomplete") {
		t.Fatalf("line %q", line)
	}
	v1 := nemesisRun()
	v1.Lock, v1.Replicas = "v1", map[string]int{"inventory-1": 1000}
	if r, _ := judged(t, v1, []scenario.Fault{kill, pauseStock}, []string{"inventory-1", "redis-6381"}); !r.HistoryChecked || len(r.NotTested) > 0 {
		t.Fatalf("the other replica killed: checked %v, not tested %v", r.HistoryChecked, r.NotTested)
	}
}

// Finding 5: every sale refused (atomic fenced: 400 each) is not a green
// row: the table shows the failed and not-served counts, and the row is
// not tested; so is one that served under half its requests.
func TestNemesisNothingSold(t *testing.T) {
	res := nemesisRun()
	res.Lock, res.Sold, res.Failed, res.FailedBy = "atomic", 0, 1000, map[string]int{"400": 1000}
	r, line := judged(t, res, []scenario.Fault{pauseStock}, v8Procs)
	if !strings.Contains(strings.Join(r.NotTested, ";"), "nothing sold") || !strings.Contains(line, "\t0\t0\t1000\t0\t1000\t") {
		t.Fatalf("not tested %v, line %q: want nothing sold, failed 1000, not served 1000", r.NotTested, line)
	}
	res.Sold, res.Failed = 300, 700
	if r, _ := judged(t, res, []scenario.Fault{pauseStock}, v8Procs); !strings.Contains(strings.Join(r.NotTested, ";"), "300 of 1000 requests served") {
		t.Fatalf("300 served of 1000: not tested %v", r.NotTested)
	}
}

// Finding 6: a row counts only the faults that hit a process its sales
// used; a row no fault hit is not tested.
func TestNemesisCountsFaultsOnItsProcesses(t *testing.T) {
	spare := scenario.Fault{At: time.Second, Kind: scenario.FaultPause, Target: "redis-6383", For: time.Second}
	cut := scenario.Fault{At: 3 * time.Second, Kind: scenario.FaultPartition, Target: "inventory-1>redis-6383", For: time.Second}
	faults := []scenario.Fault{spare, spare, cut}
	if r, _ := judged(t, nemesisRun(), faults, []string{"redis-6381"}); r.Faults != 0 || !strings.Contains(strings.Join(r.NotTested, ";"), "no fault") {
		t.Fatalf("faults only on redlock's node: v8 counted %d, not tested %v", r.Faults, r.NotTested)
	}
	if r, _ := judged(t, nemesisRun(), faults, []string{"redis-6381", "redis-6383"}); r.Faults != 3 {
		t.Fatalf("redlock counted %d, want 3", r.Faults)
	}
}

// Finding 7: -wait reaches the nemesis's runs as the load test's; a -wait
// no chosen version uses is refused before any load (the old nemesis ran
// the replicas' own wait, poll, and said nothing).
func TestNemesisWait(t *testing.T) {
	o, err := parse([]string{"-nemesis", "-duration", "1s", "-wait", "handoff", "-lock", "v6,etcd"}, noEnv, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	runs, err := nemesisRuns(o)
	if err != nil || len(runs) != 2 || runs[0].cfg.Wait != "handoff" || runs[1].cfg.Wait != "" {
		t.Fatalf("runs %+v, %v: want v6 handoff, etcd its own", runs, err)
	}
	var stderr bytes.Buffer
	args := []string{"-nemesis", "-duration", "1s", "-wait", "handoff", "-lock", "etcd", "-url", "http://127.0.0.1:1/sale"}
	if got := run(context.Background(), args, noEnv, &bytes.Buffer{}, &stderr); got != 2 || !strings.Contains(stderr.String(), "wait their own way") {
		t.Fatalf("-wait handoff -lock etcd: exit %d, %s", got, stderr.String())
	}
}
