package postgres_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/postgrestest"
)

// planRows is how many deliveries TestEvents_Plans stores: enough for PostgreSQL's
// statistics to tell a rare value from a common one, as they would in production.
const planRows = 200_000

// fillDeliveries stores n deliveries, one every 500 ms from start, straight through SQL:
// one in ten from pms, the rest from ota; one in seven a duplicate, one in fifty
// rejected, one in 211 a mismatch (one in 422 in the money); five properties; two
// deliveries per booking and per key; an amount on every third, which is cancelled; a
// batch of three every 1000; a suspect on every 997th. The newest 5000 are all from
// ota, none rejected: a source and an outcome that the statistics call common but that
// a page of the newest deliveries has to look far for.
func fillDeliveries(t *testing.T, url string, n int, start time.Time) {
	t.Helper()
	conn := postgrestest.Connect(t, url)
	ctx := t.Context()
	_, err := conn.Exec(ctx, `
INSERT INTO deliveries (id, source, received_at, outcome, status, key, key_method, payload_hash, mismatch,
	money_mismatch, property, booking, event_status, amount, currency, headers, body, batch, batch_index)
SELECT i, CASE WHEN i % 10 = 0 AND i <= $1 - 5000 THEN 'pms' ELSE 'ota' END, $2::bigint + i * 500,
	CASE WHEN i % 50 = 0 AND i <= $1 - 5000 THEN 'rejected' WHEN i % 7 = 0 THEN 'duplicate' ELSE 'accepted' END, 200,
	'evt_' || (i / 2), 'event_id', 'h', i % 211 = 0, i % 422 = 0, 'HTL-' || (i % 5), 'BK-' || (i / 2),
	CASE WHEN i % 3 = 0 THEN 'cancelled' ELSE 'confirmed' END, CASE WHEN i % 3 = 0 THEN '120.50' ELSE '' END,
	CASE WHEN i % 3 = 0 THEN 'EUR' ELSE '' END, '{}', convert_to(repeat(md5(i::text), 3), 'UTF8'),
	CASE WHEN i % 1000 < 3 THEN i - i % 1000 ELSE 0 END, CASE WHEN i % 1000 < 3 THEN i % 1000 ELSE 0 END
FROM generate_series(1, $1) AS i`, n, start.UnixMilli())
	if err != nil {
		t.Fatal(err)
	}
	_, err = conn.Exec(ctx, `
INSERT INTO suspects (kind, delivery, source, flagged_at, state)
SELECT 'business_key', i, 'ota', $2::bigint + i * 500, CASE WHEN i % 2 = 0 THEN 'open' ELSE 'dismissed' END
FROM generate_series(997, $1, 997) AS i`, n, start.UnixMilli())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `SELECT setval('delivery_ids', $1)`, n); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `VACUUM ANALYZE deliveries`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `VACUUM ANALYZE suspects`); err != nil {
		t.Fatal(err)
	}
}

// TestEvents_Plans checks that each filter of the events list is answered through the
// index it is meant to use, with PostgreSQL's statistics of a table of planRows
// deliveries: no step of a page's plans reads the table in full. With -v it logs the
// plans, run, with what each step read.
func TestEvents_Plans(t *testing.T) {
	if testing.Short() {
		t.Skip("stores many deliveries")
	}
	ctx := t.Context()
	url := postgrestest.NewDatabase(t)
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	db := openEngine(t, url)
	fillDeliveries(t, url, planRows, start)
	db.Now = func() time.Time { return start.Add(planRows * 500 * time.Millisecond) }
	for _, tc := range []struct {
		name  string
		f     storage.DeliveryFilter
		index string
	}{
		{"None", storage.DeliveryFilter{}, "deliveries_pkey"},
		{"Source", storage.DeliveryFilter{Source: "pms"}, "deliveries_source_id"},
		{"SourceCommon", storage.DeliveryFilter{Source: "ota"}, "deliveries_source_id"},
		{"Outcome", storage.DeliveryFilter{Outcome: storage.Duplicate}, "deliveries_outcome_id"},
		{"Rejected", storage.DeliveryFilter{Outcome: storage.Rejected}, "deliveries_outcome_id"},
		{"SourceOutcome", storage.DeliveryFilter{Source: "pms", Outcome: storage.Duplicate}, "deliveries_source_id"},
		{"Mismatch", storage.DeliveryFilter{Mismatch: true, Source: "ota"}, "deliveries_mismatch"},
		{"MoneyMismatch", storage.DeliveryFilter{MoneyMismatch: true, Currency: "EUR"}, "deliveries_mismatch"},
		{"Property", storage.DeliveryFilter{Property: "HTL-3", Status: "cancelled"}, "deliveries_pkey"},
		{"PropertyRare", storage.DeliveryFilter{Property: "HTL-404"}, "deliveries_pkey"},
		{"Accepted", storage.DeliveryFilter{Outcome: storage.Accepted}, "deliveries_pkey"},
		{"RejectedProperty", storage.DeliveryFilter{Outcome: storage.Rejected, Property: "HTL-1"}, "deliveries_outcome_id"},
		{"NoProperty", storage.DeliveryFilter{NoProperty: true}, "deliveries_pkey"},
		{"NoPropertyDuplicates", storage.DeliveryFilter{NoProperty: true, NoCurrency: true, Outcome: storage.Duplicate}, "deliveries_outcome_id"},
		{"NoCurrencySource", storage.DeliveryFilter{NoCurrency: true, Source: "pms"}, "deliveries_source_id"},
		{"HasAmount", storage.DeliveryFilter{HasAmount: true}, "deliveries_pkey"},
		{"HasAmountDuplicates", storage.DeliveryFilter{HasAmount: true, Currency: "EUR", Outcome: storage.Duplicate}, "deliveries_outcome_id"},
		{"HasAmountSource", storage.DeliveryFilter{HasAmount: true, Source: "pms", Outcome: storage.Duplicate}, "deliveries_source_id"},
		{"Booking", storage.DeliveryFilter{Booking: fmt.Sprint("BK-", planRows/3), Source: "ota", Outcome: storage.Duplicate}, "deliveries_booking"},
		{"BookingMissing", storage.DeliveryFilter{Booking: "BK-none"}, "deliveries_booking"},
		{"Key", storage.DeliveryFilter{Key: fmt.Sprint("evt_", planRows/4), KeySources: []string{"ota", "pms"}}, "deliveries_key"},
		{"KeyOneSource", storage.DeliveryFilter{Key: fmt.Sprint("evt_", planRows/4), Source: "ota", Status: "cancelled"}, "deliveries_key"},
		{"Status", storage.DeliveryFilter{Status: "cancelled"}, "deliveries_pkey"},
		{"Batch", storage.DeliveryFilter{Batch: 41000, Source: "ota", Outcome: storage.Duplicate}, "deliveries_batch"},
		{"Flag", storage.DeliveryFilter{Flag: storage.SuspectBusinessKey, FlagState: storage.SuspectOpen, Source: "ota"}, "suspects"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := db.ExplainEvents(ctx, tc.f, testing.Verbose())
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(plan, tc.index) {
				t.Errorf("plan does not use %s:\n%s", tc.index, plan)
			}
			if strings.Contains(plan, "Seq Scan on deliveries") {
				t.Errorf("plan reads the table in full:\n%s", plan)
			}
			t.Logf("%+v\n%s", tc.f, plan)
		})
	}
	t.Run("RecentDuplicates", func(t *testing.T) {
		plan, err := db.ExplainRecentDuplicates(ctx, testing.Verbose())
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(plan, "Seq Scan on deliveries") || !strings.Contains(plan, "deliveries_outcome_id") {
			t.Errorf("recent duplicates do not walk the index of duplicates:\n%s", plan)
		}
		t.Logf("%s", plan)
	})
	t.Run("Ledger", func(t *testing.T) {
		plan, err := db.LedgerPlans(ctx, testing.Verbose())
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(plan, "Seq Scan on deliveries") || strings.Count(plan, "deliveries_outcome_id") != 2 {
			t.Errorf("the ledger's reads of duplicates do not walk the index of duplicates:\n%s", plan)
		}
		t.Logf("%s", plan)
	})
	// The time range and a page of each filter, run: what a console user waits for.
	t.Run("Pages", func(t *testing.T) {
		mid := start.Add(planRows / 2 * 500 * time.Millisecond)
		for _, f := range []storage.DeliveryFilter{
			{From: mid, To: mid.Add(time.Hour)},
			{From: mid, To: mid.Add(time.Hour), Status: "cancelled", Outcome: storage.Duplicate},
			{Source: "pms"},
			{Outcome: storage.Rejected},
		} {
			t0 := time.Now()
			p, err := db.Deliveries(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%+v: %d rows, next %d, partial %v, %s", f, len(p.Deliveries), p.Next, p.Partial, time.Since(t0))
		}
	})
}
