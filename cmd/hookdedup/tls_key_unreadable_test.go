package main

import (
	"encoding/pem"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// encryptedKey is a P-256 key of no use elsewhere, encrypted with the passphrase
// "secret" (openssl pkcs8 -topk8), as PEM.
var encryptedKey, _ = pem.Decode([]byte(`-----BEGIN ENCRYPTED PRIVATE KEY-----
MIHsMFcGCSqGSIb3DQEFDTBKMCkGCSqGSIb3DQEFDDAcBAgBWDbztIUpxwICCAAw
DAYIKoZIhvcNAgkFADAdBglghkgBZQMEASoEEHDZYaqmWMNmiGPYgQV3H5sEgZBX
nru5v8SO6GEB+2RuKmSCZ0pRZYKt0QYCNoolpo68KD6oA2e9jz0HjkkmbYTM7LGf
M8NjwB62CRnkQQBX72AdeDId62kGRWZPPOl3hyI0IZPKPFxGpCdWDHzjBPemcdI9
TkKPZgoAwWauakyMJViA3SRiStiDYITtmezmuGAcFGkVo1v6nRKkUcjkkVTI/lQ=
-----END ENCRYPTED PRIVATE KEY-----
`))

// TestTLS_FilesKeyUnreadableNamed: a key file whose key serve cannot read, encrypted
// with a passphrase (PKCS #8's ENCRYPTED PRIVATE KEY, or OpenSSL's older Proc-Type
// header) or damaged, is refused for what it is, not as a key that "does not go with"
// the certificate: that would send the operator after another key, or another
// certificate, when the one they have is right but must be written without a
// passphrase.
func TestTLS_FilesKeyUnreadableNamed(t *testing.T) {
	dir := t.TempDir()
	certPEM, keyPEM, _ := selfSigned(t, testDomain)
	certPath := filepath.Join(dir, "cert.pem")
	writeFile(t, certPath, certPEM)
	der, _ := pem.Decode(keyPEM)
	for _, c := range []struct {
		name  string
		block *pem.Block
		want  []string
	}{
		{"PKCS8Encrypted", encryptedKey, []string{"encrypted", "passphrase", "openssl pkey"}},
		{"ProcTypeEncrypted", &pem.Block{Type: "EC PRIVATE KEY", Headers: map[string]string{
			"Proc-Type": "4,ENCRYPTED", "DEK-Info": "AES-128-CBC,00112233445566778899AABBCCDDEEFF"}, Bytes: der.Bytes[:48]},
			[]string{"encrypted", "passphrase", "openssl pkey"}},
		{"Damaged", &pem.Block{Type: "PRIVATE KEY", Bytes: der.Bytes[:20]}, []string{"cannot be read"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			keyPath := filepath.Join(dir, c.name+".pem")
			if err := os.WriteFile(keyPath, pem.EncodeToMemory(c.block), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := newTLS(tlsSettings{CertFile: certPath, KeyFile: keyPath}, slog.New(slog.DiscardHandler))
			if err == nil {
				t.Fatal("newTLS accepted it")
			}
			if !strings.Contains(err.Error(), "tls_key_file "+keyPath) || strings.Contains(err.Error(), "does not go with") {
				t.Errorf("error %q: want it to name tls_key_file %s, and not to say the key does not go with the certificate", err, keyPath)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}
