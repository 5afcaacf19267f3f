package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTLS_FilesKeyReadableByAllWarned: a private key in tls_key_file that every user of
// the machine can read (a copy made with the umask's 0644) lets any of them pass for
// this server to the senders: serve warns, naming the file and its mode, at start and
// at each reload that finds it so. A key its owner alone reads, or its owner and a group
// that the service's user is in (0640, how a deploy hook grants it), is not warned of.
func TestTLS_FilesKeyReadableByAllWarned(t *testing.T) {
	const warning = "can be read by every user of this machine"
	for _, c := range []struct {
		mode  os.FileMode
		warns bool
	}{
		{0o644, true},
		{0o604, true},
		{0o640, false},
		{0o600, false},
		{0o400, false},
	} {
		t.Run(c.mode.String(), func(t *testing.T) {
			dir := t.TempDir()
			certPEM, keyPEM, _ := selfSigned(t, testDomain)
			certPath, keyPath := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
			writeFile(t, certPath, certPEM)
			writeFile(t, keyPath, keyPEM)
			if err := os.Chmod(keyPath, c.mode); err != nil {
				t.Fatal(err)
			}
			logger, logs := testLog(t)
			setup, err := newTLS(tlsSettings{CertFile: certPath, KeyFile: keyPath, Addr: "127.0.0.1:0"}, logger)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Count(logs.String(), warning); (got == 1) != c.warns || got > 1 {
				t.Fatalf("key of mode %#o at start: warned %d times, want %v:\n%s", uint32(c.mode), got, c.warns, logs.String())
			}
			if c.warns && (!strings.Contains(logs.String(), keyPath) || !strings.Contains(logs.String(), "chmod 600")) {
				t.Errorf("the warning does not name %s and how to fix it:\n%s", keyPath, logs.String())
			}
			if err := setup.Reload(); err != nil {
				t.Fatal(err)
			}
			want := 0
			if c.warns {
				want = 2
			}
			if got := strings.Count(logs.String(), warning); got != want {
				t.Errorf("after a reload: warned %d times, want %d:\n%s", got, want, logs.String())
			}
		})
	}
}
