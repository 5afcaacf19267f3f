package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// pairValid returns a self-signed certificate for testDomain valid from notBefore to
// notAfter, and its key, both PEM.
func pairValid(t *testing.T, notBefore, notAfter time.Time) (certPEM, keyPEM []byte, cert *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1<<61 + testSerial.Add(1)),
		Subject:      pkix.Name{CommonName: testDomain},
		DNSNames:     []string{testDomain},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	if cert, err = x509.ParseCertificate(der); err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), cert
}

// TestTLS_FilesReloadKeepsAValidCertificate: a deploy hook that copies an old pair (one
// that has expired) or one not valid yet over the files would, reloaded, have every
// sender refuse the handshake while a certificate they accept was in hand: the reload
// keeps the one in use, says why, and loads a valid pair put in place afterwards. A pair
// of the same kind replacing one that has expired itself is loaded: nothing better is
// in hand.
func TestTLS_FilesReloadKeepsAValidCertificate(t *testing.T) {
	now := time.Now()
	for _, c := range []struct {
		name                string
		notBefore, notAfter time.Time
		why                 string
	}{
		{"Expired", now.Add(-72 * time.Hour), now.Add(-24 * time.Hour), "expired"},
		{"NotYetValid", now.Add(24 * time.Hour), now.Add(72 * time.Hour), "not valid before"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			certPath, keyPath := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
			certPEM, keyPEM, first := selfSigned(t, testDomain)
			writeFile(t, certPath, certPEM)
			writeFile(t, keyPath, keyPEM)
			logger, logs := testLog(t)
			setup, err := newTLS(tlsSettings{CertFile: certPath, KeyFile: keyPath, Addr: "127.0.0.1:0"}, logger)
			if err != nil {
				t.Fatal(err)
			}
			serving := func() *x509.Certificate {
				c, _ := setup.files.get(nil)
				return c.Leaf
			}

			badCert, badKey, _ := pairValid(t, c.notBefore, c.notAfter)
			replaceFile(t, keyPath, badKey)
			replaceFile(t, certPath, badCert)
			err = setup.Reload()
			if err == nil || !strings.Contains(err.Error(), certPath) || !strings.Contains(err.Error(), c.why) {
				t.Errorf("Reload of a certificate that is %s: %v, want an error naming %s and saying %q", c.name, err, certPath, c.why)
			}
			if got := serving(); got.SerialNumber.Cmp(first.SerialNumber) != 0 {
				t.Fatalf("after the reload of a certificate that is %s: serving serial %v, want the valid %v", c.name, got.SerialNumber, first.SerialNumber)
			}
			if !strings.Contains(logs.String(), "still serving the previous certificate") {
				t.Errorf("the refused reload is not logged:\n%s", logs.String())
			}

			// The operator puts the right pair in place: the next check loads it.
			goodCert, goodKey, second := selfSigned(t, testDomain)
			replaceFile(t, keyPath, goodKey)
			replaceFile(t, certPath, goodCert)
			setup.files.reloadIfChanged()
			if got := serving(); got.SerialNumber.Cmp(second.SerialNumber) != 0 {
				t.Errorf("after a valid pair was put in place: serving serial %v, want %v", got.SerialNumber, second.SerialNumber)
			}
		})
	}

	t.Run("InUseExpiredToo", func(t *testing.T) {
		dir := t.TempDir()
		certPath, keyPath := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
		oldCert, oldKey, _ := pairValid(t, now.Add(-96*time.Hour), now.Add(-48*time.Hour))
		writeFile(t, certPath, oldCert)
		writeFile(t, keyPath, oldKey)
		logger, _ := testLog(t)
		setup, err := newTLS(tlsSettings{CertFile: certPath, KeyFile: keyPath, Addr: "127.0.0.1:0"}, logger)
		if err != nil {
			t.Fatalf("an expired pair at start: %v, want it loaded with a warning", err)
		}
		newCert, newKey, second := pairValid(t, now.Add(-72*time.Hour), now.Add(-24*time.Hour))
		replaceFile(t, keyPath, newKey)
		replaceFile(t, certPath, newCert)
		if err := setup.Reload(); err != nil {
			t.Fatalf("Reload over an expired certificate: %v", err)
		}
		if got, _ := setup.files.get(nil); got.Leaf.SerialNumber.Cmp(second.SerialNumber) != 0 {
			t.Errorf("serving serial %v, want the reloaded %v", got.Leaf.SerialNumber, second.SerialNumber)
		}
	})
}
