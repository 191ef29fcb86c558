package server_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/locklab/locklab/internal/docgen"
	"github.com/locklab/locklab/internal/server"
)

// docs/operations.md lists exactly the routes New registers.
func TestDocs(t *testing.T) {
	var routes, listed []string
	h := server.New(server.Config{Metrics: http.NotFoundHandler()}).(chi.Routes)
	if err := chi.Walk(h, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		routes = append(routes, method+" "+route)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("| endpoint | who may call it | replies |\n|---|---|---|\n")
	for _, e := range server.Endpoints {
		listed = append(listed, e.Route)
		b.WriteString("| `" + e.Route + "` | " + e.Access + " | " + e.Replies + " |\n")
	}
	slices.Sort(routes)
	slices.Sort(listed)
	if !slices.Equal(routes, listed) {
		t.Fatalf("server.Endpoints lists %v, New registers %v", listed, routes)
	}
	docgen.Check(t, "../../docs/operations.md", "endpoints", b.String())
}
