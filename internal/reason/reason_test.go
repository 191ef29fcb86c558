package reason

import "testing"

// A reason's text is its form with its params put in; a slot with no
// param stays as it is (a form's typo shows, rather than vanishing).
func TestNew(t *testing.T) {
	r := New("soldButDown", "{sold} sold, but the stock went down by {by}", "sold", 3, "by", -1)
	if r.Text != "3 sold, but the stock went down by -1" || r.Params["sold"] != "3" || r.Params["by"] != "-1" {
		t.Errorf("got %+v", r)
	}
	if r := New("x", "served {n} of {of}", "n", 2); r.Text != "served 2 of {of}" {
		t.Errorf("a missing param: %q", r.Text)
	}
	if r := New("soldNothing", "sold nothing"); r.Text != "sold nothing" || r.Params != nil {
		t.Errorf("no params: %+v", r)
	}
}
