package main

import (
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestTLS_FilesChainOutOfOrderNamed: a certificate file whose chain comes before the
// certificate of the key (the intermediate first, as some CAs' bundles are put together
// by hand) is refused with an error that says so, not as a key of another certificate:
// the key and the certificate are right, their order in the file is not.
func TestTLS_FilesChainOutOfOrderNamed(t *testing.T) {
	ca := newTestCA(t)
	dir := t.TempDir()
	leafPEM, keyPEM := ca.issue(t, testDomain)
	intermediatePEM, _ := ca.issue(t, "intermediate.example.test")
	certPath, keyPath := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	writeFile(t, certPath, slices.Concat(intermediatePEM, leafPEM))
	writeFile(t, keyPath, keyPEM)
	_, err := newTLS(tlsSettings{CertFile: certPath, KeyFile: keyPath}, slog.New(slog.DiscardHandler))
	if err == nil {
		t.Fatal("newTLS accepted a chain whose first certificate is not the key's")
	}
	for _, w := range []string{"tls_cert_file " + certPath, "second", "first"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
	if strings.Contains(err.Error(), "does not go with") {
		t.Errorf("error %q says the key is another certificate's", err)
	}

	// In order, the same files load.
	writeFile(t, certPath, slices.Concat(leafPEM, intermediatePEM))
	if _, err := newTLS(tlsSettings{CertFile: certPath, KeyFile: keyPath}, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatalf("the leaf first: %v", err)
	}
}
