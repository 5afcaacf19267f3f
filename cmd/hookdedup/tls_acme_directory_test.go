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
