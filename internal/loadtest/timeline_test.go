package loadtest

import (
	"strings"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/checker"
	"github.com/locklab/locklab/internal/history"
	"github.com/locklab/locklab/internal/sale"
)

// The timeline draws one lane per replica, a bar per sale; red exactly
// where holds of two owners overlap; × for a fenced refusal, ? for an unknown
// outcome; and escapes what it prints.
func TestTimeline(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	hold := func(id, replica, owner string, from, to int) history.Sale {
		return history.Sale{ID: id, Replica: replica, Start: ms(from), End: ms(to + 1),
			Trace: sale.Trace{Owner: owner, Obtained: ms(from), Releasing: ms(to)}}
	}
	refused := hold("c", "r2", "C", 30, 40)
	refused.Refused = true
	svg := string(Timeline([]history.Sale{hold("a", "r1", "A", 0, 10), hold("b", "r2", "B", 5, 15), refused},
		[]checker.Op{{ID: "d", Invoke: ms(20), Outcome: api.Unknown}}, []history.Mark{{At: ms(25), Label: "<frozen>"}}))
	if strings.Count(svg, `fill="#d93025"`) != 2 || strings.Count(svg, `fill="#1a73e8"`) != 1 {
		t.Fatalf("want two red bars (a and b overlap) and one blue (c):\n%s", svg)
	}
	for _, want := range []string{">r1<", ">r2<", "×", ">?<", "&lt;frozen&gt;", "stroke-dasharray"} {
		if !strings.Contains(svg, want) {
			t.Fatalf("timeline lacks %q:\n%s", want, svg)
		}
	}
	if Timeline(nil, nil, nil) != "" {
		t.Fatal("an empty run drew a timeline")
	}
}
