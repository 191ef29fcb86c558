module github.com/locklab/locklab

go 1.26.0

require (
	github.com/go-chi/chi/v5 v5.5.0
	github.com/go-redsync/redsync/v4 v4.18.1
	github.com/google/uuid v1.6.0
	github.com/petermattis/goid v0.0.0-20260820044319-269ab09b5261
	github.com/redis/go-redis/v9 v9.23.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)
