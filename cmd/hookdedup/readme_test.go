package main

// The README's examples, run as a reader would type them. The conventions they rely on
// are written down in README.md under "README examples":
//
//   - every ```sh block runs, in order, in one bash session with -e and pipefail, in a
//     fresh directory holding bin/hookdedup, where `bin/hookdedup serve` already runs as
//     `make run` would leave it; variables and background jobs carry over between blocks;
//   - 127.0.0.1:8080 and 127.0.0.1:8081 in a block stand for free ports picked here;
//   - a block with `<!-- not run: why -->` on the line before its fence is skipped;
//   - every ```toml block must load as a configuration;
//   - ```text and ```http blocks are output, not checked; no other fence is allowed, so
//     that a shell example cannot hide from the test under another name.

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode"
)

// readmePath is README.md, seen from this package's directory, where go test runs.
const readmePath = "../../README.md"

// readmeBlockTimeout bounds one shell block: none takes more than a few seconds, so this
// only stops a hung example from hanging the test.
const readmeBlockTimeout = 60 * time.Second

// readmeBlock is one fenced block of the README.
type readmeBlock struct {
	lang   string // what follows the opening fence: sh, toml, text, http
	line   int    // the opening fence's line, from 1
	text   string
	notRun bool // `<!-- not run: why -->` stands on the line before the fence
}

// readmeLanguages are the fences the README may use.
var readmeLanguages = map[string]bool{"sh": true, "toml": true, "text": true, "http": true}

// parseReadme returns the README's fenced blocks and its text outside them.
func parseReadme(t *testing.T) (blocks []readmeBlock, prose []string) {
	t.Helper()
	raw, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(raw), "\n")
	for i := 0; i < len(lines); i++ {
		trimmed := strings.TrimLeft(lines[i], " ")
		if !strings.HasPrefix(trimmed, "```") {
			prose = append(prose, lines[i])
			continue
		}
		indent := len(lines[i]) - len(trimmed)
		b := readmeBlock{lang: strings.TrimSpace(strings.TrimPrefix(trimmed, "```")), line: i + 1}
		for j := i - 1; j >= 0; j-- {
			if prev := strings.TrimSpace(lines[j]); prev != "" {
				b.notRun = strings.HasPrefix(prev, "<!-- not run:") && strings.HasSuffix(prev, "-->")
				break
			}
		}
		var body []string
		closed := false
		for i++; i < len(lines); i++ {
			if strings.TrimSpace(lines[i]) == "```" {
				closed = true
				break
			}
			body = append(body, strings.TrimPrefix(lines[i], strings.Repeat(" ", indent)))
		}
		if !closed {
			t.Fatalf("README.md:%d: the block is never closed", b.line)
		}
		b.text = strings.Join(body, "\n") + "\n"
		blocks = append(blocks, b)
	}
	return blocks, prose
}

func TestReadme_Fences(t *testing.T) {
	blocks, _ := parseReadme(t)
	sh := 0
	for _, b := range blocks {
		if !readmeLanguages[b.lang] {
			t.Errorf("README.md:%d: fence %q: use sh (run by TestReadme_Examples), toml, text or http", b.line, b.lang)
		}
		if b.notRun && b.lang != "sh" {
			t.Errorf("README.md:%d: only sh blocks run, so only they can be marked not run", b.line)
		}
		if b.lang == "sh" && !b.notRun {
			sh++
		}
	}
	if sh == 0 {
		t.Error("README.md has no shell example to run: has the convention changed?")
	}
}

// githubAnchor is the fragment GitHub gives a heading.
func githubAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestReadme_Links(t *testing.T) {
	_, prose := parseReadme(t)
	anchors := map[string]bool{}
	for _, l := range prose {
		if h, ok := strings.CutPrefix(strings.TrimLeft(l, "#"), " "); ok && strings.HasPrefix(l, "#") {
			anchors[githubAnchor(h)] = true
		}
	}
	for _, m := range regexp.MustCompile(`\]\(#([^)]*)\)`).FindAllStringSubmatch(strings.Join(prose, "\n"), -1) {
		if !anchors[m[1]] {
			t.Errorf("README.md links to #%s, which is no heading", m[1])
		}
	}
}

// TestReadme_Config loads every TOML example as serve would, with every secret_env set.
func TestReadme_Config(t *testing.T) {
	blocks, _ := parseReadme(t)
	getenv := func(name string) string {
		if strings.HasPrefix(name, "HOOKDEDUP_") {
			return ""
		}
		return "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	}
	generated := func(string) (string, error) { return newSecret() }
	for _, b := range blocks {
		if b.lang != "toml" {
			continue
		}
		path := filepath.Join(t.TempDir(), "hookdedup.toml")
		if err := os.WriteFile(path, []byte(b.text), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := loadConfig(path, true, getenv)
		if err == nil {
			_, err = cfg.sources(getenv, generated)
		}
		if err != nil {
			t.Errorf("README.md:%d: the configuration does not load: %v", b.line, err)
		}
	}
}

// TestReadme_Examples runs the README's shell examples against the built binary.
func TestReadme_Examples(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "openssl", "base64", "od", "awk", "python3"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the README's examples need %s: %v", tool, err)
		}
	}
	blocks, _ := parseReadme(t)
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(hookdedupBinary(t), filepath.Join(dir, "bin", "hookdedup")); err != nil {
		t.Fatal(err)
	}

	// make run: serve on the defaults, in the directory the examples run in. Its port
	// stands for 127.0.0.1:8080.
	makeRun := startLogged(t, dir, "make-run.log", nil)
	addr := strings.TrimPrefix(makeRun.url, "http://")
	second := freeAddr(t)
	ports := strings.NewReplacer("127.0.0.1:8080", addr, "127.0.0.1:8081", second)

	env := []string{"HOME=" + dir, "HOOKDEDUP_ADDR=" + addr}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HOOKDEDUP_") && !strings.HasPrefix(kv, "HOME=") {
			env = append(env, kv)
		}
	}
	sh := startBash(t, dir, env)
	for _, b := range blocks {
		if b.lang != "sh" || b.notRun {
			continue
		}
		out, err := sh.run(ports.Replace(b.text))
		if err != nil {
			t.Fatalf("README.md:%d: %v\n--- the block:\n%s--- its output:\n%s", b.line, err, b.text, out)
		}
		t.Logf("README.md:%d:\n%s", b.line, out)
	}
	sh.close(t)
	makeRun.stop(t)
}

// freeAddr returns a 127.0.0.1 address that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// bashSession is one bash process that runs blocks one after another, as one terminal
// would: each block is read from fd 3 up to a NUL byte and eval'd, then a line holding
// done is printed. Its commands read /dev/null, not the blocks. When bash exits, after
// the last block or a failed command, it stops its background jobs (SIGTERM) and waits
// for them, so that once its output is drained nothing of the examples runs any more.
type bashSession struct {
	cmd    *exec.Cmd
	pgid   int
	blocks io.WriteCloser
	done   string

	mu       sync.Mutex
	out      strings.Builder
	finished chan struct{} // a block's done line was read
	drained  chan struct{} // every writer of the output is gone
	exited   chan struct{} // bash exited; err says how
	err      error
}

const bashDriver = `set -e -o pipefail
shopt -s inherit_errexit
exec </dev/null
trap '__jobs=$(jobs -p); if [ -n "$__jobs" ]; then kill $__jobs 2>/dev/null || true; wait || true; fi' EXIT
while IFS= read -r -d '' __block <&3; do
	eval "$__block"
	printf '\n%s\n' "$__done"
done
`

// startBash starts the session in dir. If the test ends before the session has wound
// down, its process group is killed.
func startBash(t *testing.T, dir string, env []string) *bashSession {
	t.Helper()
	token := make([]byte, 16)
	rand.Read(token)
	s := &bashSession{done: "readme-block-done-" + hex.EncodeToString(token),
		finished: make(chan struct{}, 1), drained: make(chan struct{}), exited: make(chan struct{})}
	blocksR, blocksW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	s.cmd = exec.Command("bash", "--noprofile", "--norc", "-c", bashDriver)
	s.cmd.Dir = dir
	s.cmd.Env = append(env, "__done="+s.done)
	s.cmd.Stdout, s.cmd.Stderr = outW, outW
	s.cmd.ExtraFiles = []*os.File{blocksR}
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	blocksR.Close()
	outW.Close() // bash and its children hold their own copies
	s.blocks = blocksW
	s.pgid = s.cmd.Process.Pid

	go func() {
		r := bufio.NewReader(outR)
		for {
			line, err := r.ReadString('\n')
			if strings.TrimSuffix(line, "\n") == s.done {
				s.finished <- struct{}{}
			} else {
				s.mu.Lock()
				s.out.WriteString(line)
				s.mu.Unlock()
			}
			if err != nil {
				outR.Close()
				close(s.drained)
				return
			}
		}
	}()
	go func() {
		s.err = s.cmd.Wait()
		close(s.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-s.drained:
			return // bash and its jobs are gone: the group may be another's by now
		default:
		}
		s.kill()
		<-s.exited
		select {
		case <-s.drained:
		case <-time.After(readmeBlockTimeout):
			t.Error("the examples' processes did not exit after SIGKILL")
		}
	})
	return s
}

// kill ends every process of the session. It is called only while a member of the
// session's process group still holds the output open, so the group is still the
// session's.
func (s *bashSession) kill() { syscall.Kill(-s.pgid, syscall.SIGKILL) }

// wound waits until bash and its jobs have gone (their output is drained), killing them
// if they take longer than a block may.
func (s *bashSession) wound() bool {
	select {
	case <-s.drained:
		return true
	case <-time.After(readmeBlockTimeout):
		s.kill()
		return false
	}
}

// run runs one block and returns its output. The error says whether the block failed
// (bash exited: under -e a failed command ends the session) or did not finish in time.
func (s *bashSession) run(block string) (string, error) {
	s.mu.Lock()
	start := s.out.Len()
	s.mu.Unlock()
	output := func() string {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.out.String()[start:]
	}
	if _, err := io.WriteString(s.blocks, block+"\x00"); err != nil {
		return output(), fmt.Errorf("bash no longer reads blocks: %w", err)
	}
	select {
	case <-s.finished:
		return output(), nil
	case <-s.exited:
		// Under -e a failed command ends bash, which stops its jobs on the way out:
		// once they are gone the output is whole.
		s.wound()
		return output(), fmt.Errorf("a command failed: bash exited with %v", s.err)
	case <-time.After(readmeBlockTimeout):
		return output(), errors.New("the block did not finish within " + readmeBlockTimeout.String())
	}
}

// close ends the session: bash reads no more blocks and exits.
func (s *bashSession) close(t *testing.T) {
	t.Helper()
	s.blocks.Close()
	if !s.wound() {
		t.Fatal("bash and the examples' background jobs did not stop after the last block")
	}
	<-s.exited
	if s.err != nil {
		t.Errorf("bash exited with %v", s.err)
	}
}
