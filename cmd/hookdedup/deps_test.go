package main

import (
	"maps"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// module is the import path of this module; packages of it are named below by their
// path inside it ("storage", "receiver/signature").
const module = "github.com/hookdedup/hookdedup"

// allowedImports says, for each package of the module, what it may import directly:
//   - "std": the standard library, except what forbiddenDeps takes out;
//   - a package of the module, by its path inside it;
//   - a package outside it, by its import path.
//
// A pattern ending in "/..." also allows every package below it. A package of the module
// that is missing here fails the test: a new package says what it may import.
var allowedImports = map[string][]string{
	"cmd/hookdedup": {"std", "receiver", "storage/outage", "receiver/provider", "receiver/signature", "static", "storage", "web",
		"receiver/alert",
		// The wiring picks the storage engine.
		"storage/sqlite", "storage/postgres",
		"github.com/BurntSushi/toml", "golang.org/x/crypto/bcrypt",
		// HTTPS: certificates over ACME, and host names checked as IDNA.
		"golang.org/x/crypto/acme/...", "golang.org/x/net/idna"},
	"receiver": {"std", "receiver/signature", "storage", "storage/outage",
		"github.com/go-json-experiment/json/...", "github.com/prometheus/client_golang/..."},
	// Alerts: rules over storage, notifications sent over HTTP (signed as Standard
	// Webhooks) and SMTP.
	"receiver/alert": {"std", "receiver/signature", "storage", "storage/outage"},
	// Provider presets are plain data: settings a sender needs, nothing that runs.
	"receiver/provider": {"std"},
	// The signature schemes are plain cryptography over a request: they need nothing of
	// the intake path. Adyen signs fields inside each item, read with the strict JSON
	// decoder that refuses duplicate member names.
	"receiver/signature": {"std", "github.com/go-json-experiment/json/..."},
	"static":             {"std"},
	// The domain: types, errors and rules; each engine is a package beneath it.
	"storage": {"std", "storage/outage"},
	// How a background loop logs an outage, for loops of every layer (engines included).
	"storage/outage": {"std"},
	// "C": the log's write-combining VFS (walbuf.c) calls the SQLite that go-sqlite3
	// compiles in.
	"storage/sqlite": {"std", "storage", "storage/outage", "github.com/mattn/go-sqlite3", "C"},
	// golang.org/x/sys/unix: CLOCK_BOOTTIME, the replicas' time between readings of the
	// server's clock (clock.go), which the standard library does not read.
	"storage/postgres": {"std", "storage", "storage/outage", "github.com/jackc/pgx/v5/...", "golang.org/x/sys/unix"},
	// Helpers for tests of several packages: a database in a temp dir, bulk fills.
	"storage/storagetest": {"std", "storage", "storage/sqlite", "github.com/mattn/go-sqlite3", "golang.org/x/crypto/bcrypt"},
	// The engine-neutral storage suite: it may import no engine.
	"storage/enginetest": {"std", "storage", "golang.org/x/crypto/bcrypt"},
	// A throwaway PostgreSQL cluster for tests, a database per test, reached with pgx.
	"storage/postgrestest": {"std", "github.com/jackc/pgx/v5"},
	// views only renders the view models it is given.
	"views": {"std", "views/...", "github.com/a-h/templ/..."},
	// Rendered pages parsed as HTML, for tests of views and web.
	"views/viewstest": {"std", "github.com/a-h/templ", "golang.org/x/net/html/..."},
	"web": {"std", "storage", "views", "github.com/a-h/templ/...", "github.com/gorilla/sessions",
		"golang.org/x/crypto/bcrypt"},
}

// forbiddenDeps are packages that a package of the module may not depend on at all,
// directly or through any other package, with the reason.
var forbiddenDeps = map[string][]forbidden{
	"storage": {
		{"net/http/...", "storage speaks no HTTP: it keeps headers as map[string][]string, and the receiver decides an answer's status"},
		{"database/sql/...", "storage is the domain: the SQL is its engines'"},
	},
	"storage/sqlite": {
		{"net/http/...", "storage speaks no HTTP: it keeps headers as map[string][]string, and the receiver decides an answer's status"},
	},
	"views": {
		{"database/sql/...", "views renders what it is given and queries nothing"},
	},
}

type forbidden struct{ pattern, why string }

// TestDependencies guards the layout with an allow-list: dependencies point cmd → web,
// receiver → storage; web → views; receiver and web never import each other; views
// only renders; storage does the SQL and nothing of HTTP.
func TestDependencies(t *testing.T) {
	graph := goListDeps(t)
	report := func(arrow, msg string) { t.Errorf("%s: %s", arrow, msg) }
	for _, path := range slices.Sorted(maps.Keys(graph)) {
		p := graph[path]
		name, ok := strings.CutPrefix(path, module+"/")
		if !ok || p.std {
			continue
		}
		allowed, ok := allowedImports[name]
		if !ok {
			t.Errorf("%s has no entry in allowedImports: say what it may import", name)
			continue
		}
		for _, imp := range p.imports {
			if !importAllowed(graph, imp, allowed) {
				report(name+" -> "+short(imp), "not allowed; "+name+" may import "+strings.Join(allowed, ", "))
			}
		}
		for _, f := range forbiddenDeps[name] {
			for _, chain := range reach(graph, path, f.pattern) {
				report(name+" -> "+strings.Join(chain, " -> "), "forbidden: "+f.why)
			}
		}
	}
}

// pkg is one package of the build: whether it is in the standard library, and what it
// imports.
type pkg struct {
	std     bool
	imports []string
}

// goListDeps returns every package the module's packages depend on, theirs included,
// by import path. Test files are left out: the guard is on what ships.
func goListDeps(t *testing.T) map[string]pkg {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-f",
		`{{.ImportPath}}|{{.Standard}}|{{join .Imports " "}}`, module+"/...").Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	graph := map[string]pkg{}
	for line := range strings.Lines(string(out)) {
		fields := strings.Split(strings.TrimSpace(line), "|")
		if len(fields) != 3 {
			t.Fatalf("go list printed %q", line)
		}
		graph[fields[0]] = pkg{std: fields[1] == "true", imports: strings.Fields(fields[2])}
	}
	return graph
}

// importAllowed reports whether imp is matched by one of the allowed patterns.
func importAllowed(graph map[string]pkg, imp string, allowed []string) bool {
	for _, a := range allowed {
		switch {
		case a == "std":
			if graph[imp].std {
				return true
			}
		case strings.HasPrefix(imp, module+"/"):
			if matches(short(imp), a) {
				return true
			}
		default:
			if matches(imp, a) {
				return true
			}
		}
	}
	return false
}

// matches reports whether path is pattern, or below it when pattern ends in "/...".
func matches(path, pattern string) bool {
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return path == base || strings.HasPrefix(path, base+"/")
	}
	return path == pattern
}

// short names a package of the module by its path inside it, any other by its path.
func short(path string) string {
	return strings.TrimPrefix(path, module+"/")
}

// reach returns, for each package matching pattern that from depends on, one chain of
// imports leading there (from itself left out). The search does not go past a match, so
// net/http's own imports are not reported again beside it.
func reach(graph map[string]pkg, from, pattern string) [][]string {
	var chains [][]string
	via := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, imp := range graph[p].imports {
			if _, seen := via[imp]; seen {
				continue
			}
			via[imp] = p
			if !matches(imp, pattern) {
				queue = append(queue, imp)
				continue
			}
			var chain []string
			for q := imp; q != from; q = via[q] {
				chain = append(chain, short(q))
			}
			slices.Reverse(chain)
			chains = append(chains, chain)
		}
	}
	return chains
}
