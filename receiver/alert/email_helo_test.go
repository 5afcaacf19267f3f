package alert_test

import (
	"context"
	"errors"
	"regexp"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver/alert"
)

// heloDomain is what RFC 5321 (4.1.4, 2.3.5) has a client give in EHLO: a
// fully-qualified domain name, or an address literal ([192.0.2.1], [IPv6:…]).
var heloDomain = regexp.MustCompile(`^(([A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?\.)+[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?|\[[0-9.]+\]|\[IPv6:[0-9A-Fa-f:.]+\])$`)

// TestEmail_EHLONamesTheClient: an email channel greets the server with a
// fully-qualified name or its address literal, not a bare word: a relay that refuses
// such a greeting (Postfix's reject_non_fqdn_helo_hostname answers every RCPT TO
// "504 5.5.2 <hookdedup>: Helo command rejected: need fully-qualified hostname") failed
// every attempt, each recipient refused for good.
func TestEmail_EHLONamesTheClient(t *testing.T) {
	s := startRcptServer(t, func(string) string { return "" })
	f := newFixture(t)
	c, err := alert.NewChannel(alert.ChannelConfig{Name: "mail", Type: alert.TypeEmail, SMTPAddr: s.ln.Addr().String(),
		From: "alerts@hotel.example", To: []string{"ops@hotel.example"}, CAFile: s.caFile, MaxAttempts: 1,
		Timeout: 10 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := f.engine(t, []alert.Rule{{Name: "db", Kind: alert.KindDatabaseNotReady, Channels: []string{"mail"}}},
		[]*alert.Channel{c}, func(c *alert.Config) {
			c.Ready = func(context.Context) error { return errors.New("ping: database is locked") }
		})
	f.evaluate(t, e)
	s.mu.Lock()
	helos := append([]string(nil), s.helos...)
	s.mu.Unlock()
	if len(helos) == 0 {
		t.Fatalf("no EHLO reached the server; log:\n%s", f.logs.String())
	}
	for _, h := range helos {
		if !heloDomain.MatchString(h) {
			t.Errorf("EHLO %q: want a fully-qualified domain name or an address literal", h)
		}
	}
}
