package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/web"
)

// The key lab says what a payload would be flagged as, from a read-only lookup, and
// writes nothing.
func TestLab_Foresees(t *testing.T) {
	ctx := context.Background()
	e := newConsoleEnv(t, func(cfg *web.Config) {
		db := cfg.Store.(*sqlite.DB)
		cfg.Probe = func(source string, h http.Header, body []byte) (storage.Probe, error) {
			return storage.Probe{Source: source, Key: "derived:abc", BusinessKey: "B", BusinessWindow: time.Hour, Now: db.Now()}, nil
		}
	})
	c := e.as(t, "viewer")
	lab := func() nodes {
		t.Helper()
		c.get("/lab")
		code, body, _ := c.post("/lab", url.Values{"source": {"ota"}, "payload": {`{"booking_id":"BK-1"}`}})
		if code != http.StatusOK {
			t.Fatalf("POST /lab = %d", code)
		}
		return parsePage(t, body).testid("lab-result")
	}
	lab().testid("lab-flags-none").shows("flagged as nothing")

	first := &storage.Delivery{Source: "ota", Key: "evt_1", KeyMethod: "event_id", PayloadHash: "x", BusinessKey: "B", Body: []byte(`{}`)}
	if err := e.db.Record(ctx, first, storage.ClaimOptions{TTL: time.Hour, BusinessWindow: time.Hour}); err != nil {
		t.Fatal(err)
	}
	flag := lab().testid("lab-flags").testid("lab-flag")
	flag.shows("suspected duplicate", fmt.Sprintf("Delivery %d of ota", first.ID))
	if f, err := e.db.FlagsOf(ctx, first.ID); err != nil || len(f.Suspects) != 0 {
		t.Errorf("the lab wrote suspects: %+v, %v", f, err)
	}
}

// For a payload whose key is held, the lab says what the duplicate would be flagged as
// against the key's first delivery: a mismatch when its payload differs, a money
// mismatch when its amount (compared as a number), currency or status does too.
func TestLab_ForeseesADuplicatesMismatch(t *testing.T) {
	ctx := context.Background()
	var probe storage.Probe
	e := newConsoleEnv(t, func(cfg *web.Config) {
		cfg.Probe = func(source string, h http.Header, body []byte) (storage.Probe, error) { return probe, nil }
	})
	first := &storage.Delivery{Source: "ota", Key: "derived:abc", KeyMethod: "derived", PayloadHash: "h1",
		Amount: "120.00", Currency: "EUR", EventStatus: "cancelled", Body: []byte(`{}`)}
	if err := e.db.Record(ctx, first, storage.ClaimOptions{TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	c := e.as(t, "viewer")
	c.get("/lab")
	for _, tc := range []struct {
		name                    string
		hash, amount, currency  string
		status                  string
		mismatch, moneyMismatch bool
	}{
		{"SamePayload", "h1", "120.00", "EUR", "cancelled", false, false},
		{"OtherFields", "h2", "120.00", "EUR", "cancelled", true, false},
		{"AmountSpeltOtherwise", "h2", "120", "EUR", "cancelled", true, false},
		{"OtherAmount", "h2", "99.00", "EUR", "cancelled", true, true},
		{"OtherCurrency", "h2", "120.00", "USD", "cancelled", true, true},
		{"OtherStatus", "h2", "120.00", "EUR", "confirmed", true, true},
		{"NoAmount", "h2", "", "", "cancelled", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			probe = storage.Probe{Source: "ota", Key: "derived:abc", PayloadHash: tc.hash,
				Amount: tc.amount, Currency: tc.currency, EventStatus: tc.status, Now: e.db.Now()}
			code, body, _ := c.post("/lab", url.Values{"source": {"ota"}, "payload": {`{"booking_id":"BK-1"}`}})
			if code != http.StatusOK {
				t.Fatalf("POST /lab = %d", code)
			}
			res := parsePage(t, body).testid("lab-result")
			res.testid("lab-claim").shows("would be a duplicate")
			if !tc.mismatch {
				res.testid("lab-flags-none").shows("As a duplicate", "flagged as nothing")
				return
			}
			var kinds []string
			for _, x := range res.testid("lab-flags").testid("lab-flag").list {
				f := nodes{t, []*html.Node{x}}
				f.shows(fmt.Sprintf("delivery %d", first.ID))
				kinds = append(kinds, f.text())
			}
			want := 1
			if tc.moneyMismatch {
				want = 2
			}
			if len(kinds) != want || !strings.HasPrefix(kinds[0], "mismatch") ||
				(tc.moneyMismatch && !strings.HasPrefix(kinds[1], "money mismatch")) {
				t.Errorf("flags = %q, want a mismatch%s", kinds, map[bool]string{true: " and a money mismatch"}[tc.moneyMismatch])
			}
		})
	}
	if f, err := e.db.FlagsOf(ctx, first.ID); err != nil || f.MoneyMismatch || len(f.Suspects) != 0 {
		t.Errorf("the lab wrote flags: %+v, %v", f, err)
	}
}

// A source with business_key_blocks answers a re-send of a business event under a new
// key as a duplicate of the delivery found, and hands it nowhere: the lab must say so,
// not that it would be accepted and flagged, nor foresee flags that a blocked delivery
// never takes.
func TestLab_ForeseesABlockedResend(t *testing.T) {
	ctx := context.Background()
	var db *sqlite.DB
	e := newConsoleEnv(t, func(cfg *web.Config) {
		db = cfg.Store.(*sqlite.DB)
		cfg.Probe = func(source string, h http.Header, body []byte) (storage.Probe, error) {
			return storage.Probe{Source: source, Key: "derived:abc", BusinessKey: "B", BusinessWindow: time.Hour,
				BusinessBlocks: true, Now: db.Now(),
				Correlations: []storage.CorrelationKey{{Rule: "double-refund", Hash: "C", Window: time.Hour}}}, nil
		}
	})
	opt := storage.ClaimOptions{TTL: time.Hour, BusinessWindow: time.Hour, BusinessBlocks: true}
	first := &storage.Delivery{Source: "ota", Key: "evt_1", KeyMethod: "event_id", PayloadHash: "x", BusinessKey: "B", Body: []byte(`{}`)}
	if err := e.db.Record(ctx, first, opt); err != nil {
		t.Fatal(err)
	}
	psp := &storage.Delivery{Source: "pms", Key: "pay_1", KeyMethod: "event_id", PayloadHash: "y", Body: []byte(`{}`),
		Correlations: []storage.CorrelationKey{{Rule: "double-refund", Hash: "C", Window: time.Hour}}}
	if err := e.db.Record(ctx, psp, storage.ClaimOptions{TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	c := e.as(t, "viewer")
	c.get("/lab")
	code, body, _ := c.post("/lab", url.Values{"source": {"ota"}, "payload": {`{"booking_id":"BK-1"}`}})
	if code != http.StatusOK {
		t.Fatalf("POST /lab = %d", code)
	}
	res := parsePage(t, body).testid("lab-result")
	res.testid("lab-claim").shows("would be a duplicate", fmt.Sprintf("delivery %d", first.ID))
	if claim := res.testid("lab-claim").text(); strings.Contains(claim, "would be accepted") {
		t.Errorf("the lab says %q of a delivery intake would block", claim)
	}
	flags := res.testid("lab-flags").testid("lab-flag")
	if len(flags.list) != 1 {
		t.Fatalf("flags = %q, want the business key's alone (a blocked delivery takes no other)", flags.text())
	}
	flags.shows(fmt.Sprintf("Delivery %d of ota", first.ID), "not handed downstream")

	// What the lab foresaw is what intake does with that payload.
	d := intakeOutcome(t, db, opt)
	if d.Outcome != storage.Duplicate || d.FirstDelivery != first.ID {
		t.Fatalf("intake = %s of %d; the lab's foresight is checked against it", d.Outcome, d.FirstDelivery)
	}
}

// intakeOutcome records, as intake would, the re-send the lab was shown.
func intakeOutcome(t *testing.T, db *sqlite.DB, opt storage.ClaimOptions) *storage.Delivery {
	t.Helper()
	d := &storage.Delivery{Source: "ota", Key: "derived:abc", KeyMethod: "derived", PayloadHash: "z", BusinessKey: "B", Body: []byte(`{}`)}
	if err := db.Record(context.Background(), d, opt); err != nil {
		t.Fatal(err)
	}
	return d
}
