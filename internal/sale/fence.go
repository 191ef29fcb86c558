package sale

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/locklab/locklab/internal/chaos"
	"github.com/redis/go-redis/v9"
)

// fencing is a holder's identity at the stock: its token, its owner, and
// the key that keeps the newest holder of its token domain.
type fencing struct {
	token int64
	owner string
	key   string
}

// fence is the fencing of a hold with token under m, or nil when the sale is not fenced. A fenced
// sale whose lease has no token is ErrNoToken: it is never run unfenced.
//
// With the fence switched off (chaos.Off.Fence) the sale still sends its
// token with every read and write, in a domain of its own (the key names
// its owner): the check is there, compared with no other holder's token.
// A sale that went on without the lock (chaos.Off.Lock) has no token and
// runs unfenced.
func (s *Service) fence(ctx context.Context, m Method, token int64, owner string) (*fencing, error) {
	off := chaos.From(ctx).Off
	switch {
	case m.Fence == "":
		return nil, nil
	case off.Lock && token == 0:
		return nil, nil
	case token <= 0:
		return nil, fmt.Errorf("%w (%s, token %d)", ErrNoToken, m.Name, token)
	case off.Fence:
		return &fencing{token: token, owner: owner, key: s.key + ":fence:off:" + owner}, nil
	}
	return &fencing{token: token, owner: owner, key: FenceKey(s.key, m.Fence)}, nil
}

//go:embed fenced.lua
var fencedSrc string

var fencedScript = redis.NewScript(fencedSrc)

// FenceKey is the hash beside the stock where the sales of token domain
// (the lock's fencing domain: "redis", "redlock", ...) register their
// holder and token before they write: the newest one the stock accepts.
func FenceKey(stock, domain string) string { return stock + ":fence:" + domain }
