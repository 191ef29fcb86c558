// Package reason is a sentence the lab's page says in its reader's
// language: a code (the page's catalogue has server.CODE), the numbers and
// names put in it, and its English text, for the API's other readers and
// the record. The page finds a reason by its text among those a reply
// lists (as it finds an outcome's code), so the fields that carry the
// English stay as they are.
package reason

import (
	"fmt"
	"regexp"
)

// Reason is one sentence: Text is Form with each {name} replaced by
// Params[name].
type Reason struct {
	Code   string            `json:"code"`
	Params map[string]string `json:"params,omitempty"`
	Text   string            `json:"text"`
}

var slot = regexp.MustCompile(`\{(\w+)\}`)

// New is the reason code, its English text form with each {name} replaced
// by the value after name in pairs (name, value, name, value...).
func New(code, form string, pairs ...any) Reason {
	r := Reason{Code: code}
	if len(pairs) > 0 {
		r.Params = make(map[string]string, len(pairs)/2)
		for i := 0; i+1 < len(pairs); i += 2 {
			r.Params[fmt.Sprint(pairs[i])] = fmt.Sprint(pairs[i+1])
		}
	}
	r.Text = slot.ReplaceAllStringFunc(form, func(m string) string {
		if v, ok := r.Params[m[1:len(m)-1]]; ok {
			return v
		}
		return m
	})
	return r
}

func (r Reason) String() string { return r.Text }

// Texts are the reasons' texts: the English the API's string fields carry.
func Texts(rs []Reason) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Text
	}
	return out
}
