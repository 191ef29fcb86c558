package sale

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/locklab/locklab/internal/redistest"
)

// Every order of a stale holder's (S, token 1) and a fresh holder's (B,
// token 2) read and write of the stock, each read before its own write. A
// holder sells when its read and its write both pass; whatever the order,
// the stock must drop by exactly the units sold. Our first fencing checked
// the token only at the write, and oversold the moment S wrote first.
func TestFencingHoldsInEveryOrder(t *testing.T) {
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	orders := []string{"Sr Sw Br Bw", "Sr Br Sw Bw", "Sr Br Bw Sw", "Br Sr Bw Sw", "Br Sr Sw Bw", "Br Bw Sr Sw"}
	for _, order := range orders {
		t.Run(order, func(t *testing.T) {
			s := New(rdb, Options{Key: "stock:" + strings.ReplaceAll(order, " ", "")})
			if err := s.SetStock(ctx, 10); err != nil {
				t.Fatal(err)
			}
			holders := map[byte]*fencing{
				'S': {token: 1, owner: "S", key: s.key + ":fence:redis"},
				'B': {token: 2, owner: "B", key: s.key + ":fence:redis"},
			}
			read, refused, sold := map[byte]int64{}, map[byte]bool{}, 0
			for _, step := range strings.Fields(order) {
				h, f := step[0], holders[step[0]]
				if refused[h] {
					continue
				}
				var err error
				if step[1] == 'r' {
					read[h], err = s.read(ctx, f, nil)
				} else if _, err = s.write(ctx, nil, read[h]-1, f); err == nil {
					sold++
				}
				switch {
				case errors.Is(err, ErrFenced):
					refused[h] = true
				case err != nil:
					t.Fatal(err)
				}
			}
			after, err := s.Stock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if taken := 10 - after; int64(sold) != taken {
				t.Fatalf("%d sold, %d taken from the stock (refused: %v): the oversell fencing must prevent", sold, taken, refused)
			}
			if order != "Sr Sw Br Bw" && !refused['S'] {
				t.Fatal("the stale holder was not refused although the fresh one touched the stock in between")
			}
			if refused['B'] {
				t.Fatal("the fresh holder was refused")
			}
		})
	}
}

// Equal tokens from two owners (redlock's can repeat) do not both pass; the
// same owner may touch the stock again (a read, then its write); tokens of
// two domains are never compared.
func TestFencingOwnersAndDomains(t *testing.T) {
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	s := New(rdb, Options{Key: "stock"})
	if err := s.SetStock(ctx, 10); err != nil {
		t.Fatal(err)
	}
	at := func(token int64, owner, domain string) *fencing {
		return &fencing{token: token, owner: owner, key: s.key + ":fence:" + domain}
	}
	for i, tc := range []struct {
		f       *fencing
		refused bool
	}{
		{at(6, "A", "redlock"), false},
		{at(6, "A", "redlock"), false}, // the same holder again
		{at(6, "B", "redlock"), true},  // the same token, another owner
		{at(1, "C", "redis"), false},   // another domain: 6 says nothing about it
		{at(7, "B", "redlock"), false},
		{at(6, "A", "redlock"), true}, // older now
	} {
		_, err := s.read(ctx, tc.f, nil)
		if refused := errors.Is(err, ErrFenced); refused != tc.refused || (err != nil && !refused) {
			t.Fatalf("step %d (%s): err %v, want refused %v", i, fmt.Sprint(*tc.f), err, tc.refused)
		}
	}
}
