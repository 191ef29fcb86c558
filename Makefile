# locklab: make test runs every check against real redis-server processes that
# the tests start themselves on free ports.
GO ?= go

.PHONY: test vet build check-redis clean

test: check-redis vet
	$(GO) test -race ./...

vet:
	$(GO) vet ./...

build:
	$(GO) build -o bin/inventory ./cmd/inventory

check-redis:
	@command -v redis-server >/dev/null 2>&1 || { \
	  echo "redis-server is not installed; the tests start real Redis servers."; \
	  echo "Install it: sudo apt-get install redis-server (Debian/Ubuntu), brew install redis (macOS)"; \
	  exit 1; }

clean:
	rm -rf bin
