package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTLS_ACMEDirectoryChanged: a certificate from one CA's directory (a trial on Let's
// Encrypt's staging directory, as README suggests) is not served once acme_directory
// names another (production): the cache is keyed by domain alone, and autocert would
// hand out the staging certificate, which every sender refuses, until its renewal two
// months later. The first CA's account and certificates are set aside in the cache, the
// log says so, and the certificate served is the new CA's.
func TestTLS_ACMEDirectoryChanged(t *testing.T) {
	dns := startDNS(t)
	cacheDir := filepath.Join(t.TempDir(), "acme")

	stagingLn := listen(t)
	staging := startPebble(t, refusingPort(t), portOf(t, stagingLn.Addr()), dns)
	logger, _ := testLog(t)
	first, err := newTLS(staging.settings(cacheDir), logger)
	if err != nil {
		t.Fatal(err)
	}
	serveTLS(t, stagingLn, first.Config, okHandler)
	if _, err := handshake(t, stagingLn.Addr().String(), testDomain, staging.root(t), 2*time.Minute); err != nil {
		t.Fatalf("handshake verified against the first CA's root: %v", err)
	}
	staging.stop()

	productionLn := listen(t)
	production := startPebble(t, refusingPort(t), portOf(t, productionLn.Addr()), dns)
	logger, logs := testLog(t)
	second, err := newTLS(production.settings(cacheDir), logger)
	if err != nil {
		t.Fatal(err)
	}
	serveTLS(t, productionLn, second.Config, okHandler)
	if _, err := handshake(t, productionLn.Addr().String(), testDomain, production.root(t), 2*time.Minute); err != nil {
		t.Fatalf("after acme_directory changed, the handshake does not verify against the new CA's root (the first CA's certificate served?): %v", err)
	}
	if !strings.Contains(logs.String(), staging.dirURL) || !strings.Contains(logs.String(), "set aside") {
		t.Errorf("the change of directory is not logged with the previous one (%s):\n%s", staging.dirURL, logs.String())
	}
	// The first CA's files are kept, private, beside the new ones.
	entries, err := os.ReadDir(cacheDir)
	if err != nil {
		t.Fatal(err)
	}
	aside := 0
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		aside++
		sub := filepath.Join(cacheDir, e.Name())
		checkPrivate(t, sub)
		if _, err := os.Stat(filepath.Join(sub, testDomain)); err != nil {
			t.Errorf("the first CA's certificate is not in %s: %v", sub, err)
		}
	}
	if aside != 1 {
		t.Errorf("%d directories set aside in %s, want 1", aside, cacheDir)
	}

	// A restart on the same directory keeps its cache.
	logger, logs = testLog(t)
	if _, err := newTLS(production.settings(cacheDir), logger); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), "set aside") {
		t.Errorf("a restart on the same directory set its cache aside:\n%s", logs.String())
	}
}

// TestTLS_ACMECacheUnrecorded: a cache from a version that did not record its
// directory is taken as acme_directory's, unless acme_directory is Let's Encrypt's
// production one and a certificate in the cache does not verify against the system's
// roots (a staging certificate, left from a trial): then it is set aside, and production
// is asked anew. Nothing is asked of any CA here: newTLS only prepares.
func TestTLS_ACMECacheUnrecorded(t *testing.T) {
	for _, c := range []struct {
		name, directory string
		aside           bool
	}{
		{"Production", "", true},
		{"OtherDirectory", "https://acme.example.test/directory", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cacheDir := filepath.Join(t.TempDir(), "acme")
			if err := os.Mkdir(cacheDir, 0o700); err != nil {
				t.Fatal(err)
			}
			certPEM, keyPEM, _ := selfSigned(t, testDomain)
			writeFile(t, filepath.Join(cacheDir, testDomain), append(keyPEM, certPEM...))
			writeFile(t, filepath.Join(cacheDir, "acme_account+key"), keyPEM)
			logger, logs := testLog(t)
			if _, err := newTLS(tlsSettings{ACMEDomains: []string{testDomain}, ACMEDirectory: c.directory, CacheDir: cacheDir}, logger); err != nil {
				t.Fatal(err)
			}
			_, err := os.Stat(filepath.Join(cacheDir, testDomain))
			if kept := err == nil; kept == c.aside {
				t.Errorf("the cached certificate kept: %v, want %v:\n%s", kept, !c.aside, logs.String())
			}
			if got := strings.Contains(logs.String(), "set aside"); got != c.aside {
				t.Errorf("logged a set-aside: %v, want %v:\n%s", got, c.aside, logs.String())
			}
			want := c.directory
			if want == "" {
				want = defaultACMEDirectory
			}
			if b, err := os.ReadFile(filepath.Join(cacheDir, acmeDirectoryFile)); err != nil || strings.TrimSpace(string(b)) != want {
				t.Errorf("the cache records %q (%v), want %s", b, err, want)
			}
		})
	}
}

// TestTLS_ACMEDirectoryRecordNotAFile: the cache's record of its directory is read and
// written as a file of its own. A link put there in its place (the cache is beside the
// database, in the service user's directory) had the file it names read into the log
// as the previous directory and written over with the new one, by a serve run as root
// as well; a directory there was read as one. Each is refused, naming the record, and
// the file a link names is left as it was.
func TestTLS_ACMEDirectoryRecordNotAFile(t *testing.T) {
	const secret = "root:$6$not-for-the-log\n"
	for _, kind := range []string{"Symlink", "Directory"} {
		t.Run(kind, func(t *testing.T) {
			cacheDir := filepath.Join(t.TempDir(), "acme")
			if err := os.MkdirAll(cacheDir, 0o700); err != nil {
				t.Fatal(err)
			}
			victim := filepath.Join(t.TempDir(), "shadow")
			if err := os.WriteFile(victim, []byte(secret), 0o600); err != nil {
				t.Fatal(err)
			}
			record := filepath.Join(cacheDir, acmeDirectoryFile)
			if kind == "Symlink" {
				if err := os.Symlink(victim, record); err != nil {
					t.Fatal(err)
				}
			} else if err := os.Mkdir(record, 0o700); err != nil {
				t.Fatal(err)
			}
			logger, logs := testLog(t)
			_, err := newTLS(tlsSettings{ACMEDomains: []string{"hooks.example.com"}, ACMEDirectory: "https://ca.example.test/directory",
				CacheDir: cacheDir, Addr: "127.0.0.1:0"}, logger)
			if err == nil || !strings.Contains(err.Error(), record) || !strings.Contains(err.Error(), "not a file") {
				t.Errorf("newTLS: %v; want a refusal naming %s as not a file", err, record)
			}
			if b, _ := os.ReadFile(victim); string(b) != secret {
				t.Errorf("the file the record links to now holds %q", b)
			}
			if strings.Contains(logs.String(), "not-for-the-log") {
				t.Errorf("the file the record links to is in the log:\n%s", logs.String())
			}
		})
	}
}
