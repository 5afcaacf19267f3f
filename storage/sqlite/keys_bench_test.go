package sqlite_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// BenchmarkConsole_StuckCounts counts the stuck keys after a downstream outage: 200,000
// keys of two sources left failed or processing. The count runs every 15 s for the
// stuck-keys gauge and on each dashboard and keys page, which is when support staff
// look at them.
func BenchmarkConsole_StuckCounts(b *testing.B) {
	ctx := context.Background()
	db := benchOpen(b, "NORMAL")
	outage := time.Now().Add(-2 * time.Hour)
	body := func(int) []byte { return []byte(benchBody) }
	for _, f := range []storagetest.Fill{
		{Source: "ota", Keys: 100_000, State: storage.StateProcessing},
		{Source: "ota", Keys: 50_000, State: storage.StateFailed},
		{Source: "pay", Keys: 50_000, State: storage.StateFailed},
	} {
		state := f.State
		f.Key = func(i int) string { return fmt.Sprintf("%s-%s", benchKey(int64(i)), state) }
		f.ClaimedAt, f.TTL, f.Headers, f.Body = outage, 24*time.Hour, `{}`, body
		if err := storagetest.BulkLoad(ctx, db, f, nil); err != nil {
			b.Fatal(err)
		}
	}
	want := map[string]int{"ota": 150_000, "pay": 50_000}
	b.ReportAllocs()
	for b.Loop() {
		got, err := db.StuckCounts(ctx, time.Now().Add(-10*time.Minute))
		if err != nil {
			b.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			b.Fatalf("stuck counts %v, want %v", got, want)
		}
	}
}
