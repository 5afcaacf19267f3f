package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestConfig_ConsoleNames: console_names is read from the file, the environment or a
// flag, as a browser sends a name in Host (ASCII, lower case, no trailing dot), and what
// is no host name is refused, naming the setting.
func TestConfig_ConsoleNames(t *testing.T) {
	load := func(toml string, vars map[string]string, args ...string) (config, error) {
		t.Helper()
		path := filepath.Join(t.TempDir(), "h.toml")
		if err := os.WriteFile(path, []byte(toml), 0o600); err != nil {
			t.Fatal(err)
		}
		e := env{getenv: func(k string) string { return vars[k] }, stderr: &bytes.Buffer{}}
		f := newFlags("serve", e)
		if _, err := f.parse(append([]string{"--config", path}, args...)); err != nil {
			t.Fatal(err)
		}
		return f.load(e)
	}
	for _, c := range []struct {
		name, toml string
		vars       map[string]string
		args       []string
		want       []string
	}{
		{"Defaults", "", nil, nil, nil},
		{"File", `console_names = ["Console.Corp.Example.com.", "hookdedup.tail1234.ts.net", "bücher.example"]`, nil, nil,
			[]string{"console.corp.example.com", "hookdedup.tail1234.ts.net", "xn--bcher-kva.example"}},
		{"Environment", `console_names = ["a.example"]`, map[string]string{"HOOKDEDUP_CONSOLE_NAMES": "b.example, c.example"}, nil,
			[]string{"b.example", "c.example"}},
		{"Flag", "", map[string]string{"HOOKDEDUP_CONSOLE_NAMES": "b.example"}, []string{"--console-names", "d.example"}, []string{"d.example"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := load(c.toml, c.vars, c.args...)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(cfg.ConsoleNames, c.want) {
				t.Errorf("console_names %q, want %q", cfg.ConsoleNames, c.want)
			}
		})
	}
	for _, c := range []struct {
		name, toml string
		vars       map[string]string
		want       string
	}{
		{"URL", `console_names = ["http://console.example.com"]`, nil, `console_names: "http://console.example.com" is not a host name`},
		{"Port", `console_names = ["console.example.com:8081"]`, nil, `console_names: "console.example.com:8081" is not a host name`},
		{"EnvPath", "", map[string]string{"HOOKDEDUP_CONSOLE_NAMES": "console.example.com/"}, `HOOKDEDUP_CONSOLE_NAMES: "console.example.com/" is not a host name`},
		{"LongLabel", `console_names = ["` + strings.Repeat("a", 64) + `.example.com"]`, nil, `.example.com" is not a valid host name (each dot-separated part is 1 to 63`},
		{"Underscore", `console_names = ["hook_dedup.example.com"]`, nil, `console_names: "hook_dedup.example.com" is not a valid host name`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := load(c.toml, c.vars)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}

// TestServe_ConsoleNames: a name in console_names is served on console_addr over plain
// HTTP, the console's pages and /metrics alike; another name is refused there.
func TestServe_ConsoleNames(t *testing.T) {
	s := runServeInProcess(t, `addr = "127.0.0.1:0"
console_addr = "127.0.0.1:0"
console_names = ["Console.Corp.Example.com"]
`+openSource, nil)
	con := s.p.console.url()
	get := func(path, host string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, con+path, nil)
		req.Host = host
		resp, err := noRedirects.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, path := range []string{"/login", "/metrics"} {
		if code := get(path, "console.corp.example.com:8081"); code != http.StatusOK {
			t.Errorf("GET %s as a name in console_names: %d, want 200", path, code)
		}
		if code := get(path, "other.corp.example.com:8081"); code != http.StatusMisdirectedRequest {
			t.Errorf("GET %s as a name not in console_names: %d, want 421", path, code)
		}
	}
}

// TestServe_ConsoleNamesToldAtStart: a console served over plain HTTP where a private
// network reaches it says at the start which names it answers to and which setting adds
// one, so that a LAN name's 421 is no surprise; with console_names, it lists them.
func TestServe_ConsoleNamesToldAtStart(t *testing.T) {
	for _, tc := range []struct{ toml, names string }{
		{`addr = "127.0.0.1:0"` + "\n", "console_names=none"},
		{`addr = "127.0.0.1:0"
console_addr = "127.0.0.1:0"
console_names = ["hookdedup.corp.example.com", "box.tail1234.ts.net"]
`, "console_names=hookdedup.corp.example.com,box.tail1234.ts.net"},
	} {
		s := runServeInProcess(t, tc.toml+openSource, nil)
		con := s.p.public
		if s.p.console != nil {
			con = s.p.console
		}
		storagetest.Eventually(t, 5*time.Second, func() error {
			log := s.stderr.String()
			if !strings.Contains(log, "add the name users reach it by to console_names") || !strings.Contains(log, tc.names) ||
				!strings.Contains(log, "addr="+con.ln.Addr().String()) {
				return fmt.Errorf("log does not name the console's names (%s) and console_names:\n%s", tc.names, log)
			}
			return nil
		})
		s.stop()
	}
}
