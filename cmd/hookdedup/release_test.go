package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestCLI_ReleaseRefused: release says why it left a key as it was in the refusal's
// fixed words, for one key and in bulk, and exits non-zero.
func TestCLI_ReleaseRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.db")
	db, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Being handed downstream since now: not stuck for stuck_after (10 min).
	err = db.Record(context.Background(), &storage.Delivery{Source: "ota", Key: "busy", KeyMethod: storage.MethodEventID,
		PayloadHash: "h", Body: []byte(`{}`)}, storage.ClaimOptions{TTL: time.Hour, Dispatch: true})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	cli := cliOn(path)
	why := "ota/busy: " + storage.RefusedBusy.Message()

	if _, err := cli("release", "--source", "ota", "busy", "--reason", "r"); err == nil || err.Error() != why {
		t.Errorf("release of a key in flight: %v; want %q", err, why)
	}
	out, err := cli("release", "--source", "ota", "--state", "processing", "--reason", "r")
	if err == nil || err.Error() != "1 key could not be released" ||
		out != why+"\n1 key matched, 0 changed, 1 refused\n" {
		t.Errorf("bulk release of a key in flight: %v\n%s", err, out)
	}
}

// A state misspelt on the command line (--state proccessed, --state Failed) matches no
// key: keys would report "no keys match" and release "0 keys matched", both exiting 0,
// and the operator would read that nothing is failed. Such a state is refused instead,
// and so is --stuck beside a state no stuck key is in.
func TestCLI_KeysRefusesUnknownState(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.db")
	db, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Record(context.Background(), &storage.Delivery{Source: "ota", Key: "k", KeyMethod: storage.MethodEventID,
		PayloadHash: "h", Body: []byte(`{}`)}, storage.ClaimOptions{TTL: time.Hour})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	cli := cliOn(path)
	for _, args := range [][]string{
		{"keys", "--state", "proccessed"},
		{"keys", "--state", "Failed"},
		{"release", "--source", "ota", "--state", "faild", "--reason", "r"},
		{"keys", "--stuck", "--state", "processed"},
		{"release", "--source", "ota", "--stuck", "--state", "released", "--reason", "r"},
	} {
		out, err := cli(args...)
		if err == nil {
			t.Errorf("%v: no error; printed %q", args, out)
		} else if bad := args[len(args)-1]; args[0] == "keys" && !strings.Contains(err.Error(), bad) {
			t.Errorf("%v: %v does not name %q", args, err, bad)
		}
	}
	if out, err := cli("keys", "--state", "processed", "--limit", "1"); err != nil || !strings.Contains(out, "ota") {
		t.Errorf("keys --state processed: %v\n%s", err, out)
	}
	if out, err := cli("keys", "--stuck", "--state", "failed"); err != nil {
		t.Errorf("keys --stuck --state failed: %v\n%s", err, out)
	}
}

// cliOn runs a command line in-process on the database at path, with an empty
// environment and stdin, and returns its stdout.
func cliOn(path string) func(args ...string) (string, error) {
	return func(args ...string) (string, error) {
		var out, errb bytes.Buffer
		err := run(context.Background(), append(args, "--database", path),
			func(string) string { return "" }, strings.NewReader(""), &out, &errb)
		return out.String(), err
	}
}

// TestCLI_KeysPages: keys lists a page at a time, and says on stderr how to go on; the
// pages of a listing, stuck or not, hold each key once, in the listing's order, and
// many keys stuck since one millisecond are paged through one by one.
func TestCLI_KeysPages(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.db")
	db, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Being handed downstream since an hour ago: stuck past stuck_after (10 min). Three
	// keys share each millisecond.
	hourAgo := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	var want []string
	for i := range 8 {
		key := "evt_" + string(rune('a'+i))
		d := &storage.Delivery{Source: "ota", Key: key, KeyMethod: storage.MethodEventID, PayloadHash: "h",
			Body: []byte(`{}`), ReceivedAt: hourAgo.Add(time.Duration(i/3) * time.Millisecond)}
		if err := db.Record(context.Background(), d, storage.ClaimOptions{TTL: 24 * time.Hour, Dispatch: true}); err != nil {
			t.Fatal(err)
		}
		want = append(want, key)
	}
	db.Close()
	newest := slices.Clone(want)
	slices.Reverse(newest)
	page := func(args ...string) (keys []string, next []string) {
		t.Helper()
		var out, errb bytes.Buffer
		err := run(context.Background(), append(append([]string{"keys", "--limit", "2"}, args...), "--database", path),
			func(string) string { return "" }, strings.NewReader(""), &out, &errb)
		if err != nil {
			t.Fatalf("keys %v: %v\n%s", args, err, errb.String())
		}
		for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n")[1:] {
			keys = append(keys, strings.Fields(line)[1])
		}
		if msg := errb.String(); msg != "" {
			_, on, ok := strings.Cut(strings.TrimSpace(msg), "run again with ")
			if !ok {
				t.Fatalf("keys %v: stderr %q does not say how to go on", args, msg)
			}
			next = strings.Fields(on)
		}
		return keys, next
	}
	for _, tc := range []struct {
		name  string
		first []string
		want  []string
	}{
		{"Stuck", []string{"--stuck"}, want}, // longest stuck first
		{"Newest", nil, newest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			args := tc.first
			for range 10 {
				keys, next := page(args...)
				got = append(got, keys...)
				if next == nil {
					break
				}
				args = append(slices.Clone(tc.first), next...)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("pages listed %v, want %v", got, tc.want)
			}
		})
	}
	if _, err := cliOn(path)("keys", "--after", "1.2.3"); err == nil || !strings.Contains(err.Error(), "after without stuck") {
		t.Errorf("keys --after without --stuck: %v", err)
	}
	if _, err := cliOn(path)("keys", "--stuck", "--after", "junk"); err == nil || !strings.Contains(err.Error(), `--after: "junk"`) {
		t.Errorf("keys --stuck --after junk: %v", err)
	}
}

// TestCLI_KeysLastPage: the page after a full last page says there are no more keys,
// not that none match; and the last page of a pass through the stuck keys says how many
// became stuck since its first page, which no page of it lists.
func TestCLI_KeysLastPage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.db")
	db, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Processing since 2 h ago and since 30 min ago: both stuck past stuck_after (10 min).
	for key, ago := range map[string]time.Duration{"evt_old": 2 * time.Hour, "evt_new": 30 * time.Minute} {
		d := &storage.Delivery{Source: "ota", Key: key, KeyMethod: storage.MethodEventID, PayloadHash: "h",
			Body: []byte(`{}`), ReceivedAt: time.Now().Add(-ago)}
		if err := db.Record(context.Background(), d, storage.ClaimOptions{TTL: 24 * time.Hour, Dispatch: true}); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	keys := func(args ...string) (string, string) {
		t.Helper()
		var out, errb bytes.Buffer
		if err := run(context.Background(), append(append([]string{"keys"}, args...), "--database", path),
			func(string) string { return "" }, strings.NewReader(""), &out, &errb); err != nil {
			t.Fatalf("keys %v: %v", args, err)
		}
		return out.String(), errb.String()
	}
	after := func(hint string) storage.KeyCursor {
		t.Helper()
		_, on, _ := strings.Cut(hint, "--after ")
		fields := strings.Fields(on)
		if len(fields) == 0 {
			t.Fatalf("no --after in %q", hint)
		}
		c, err := storage.ParseKeyCursor(fields[0])
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	_, hint := keys("--stuck", "--limit", "2")
	if out, msg := keys("--stuck", "--limit", "2", "--after", after(hint).String()); !strings.Contains(out, "no more keys") || msg != "" {
		t.Errorf("the page after a full last page: %q, stderr %q; want no more keys", out, msg)
	}
	// A pass whose first page was read an hour ago: evt_new was not stuck then.
	_, hint = keys("--stuck", "--limit", "1")
	c := after(hint)
	c.StuckBefore = time.Now().Add(-time.Hour)
	out, msg := keys("--stuck", "--limit", "1", "--after", c.String())
	if strings.Contains(out, "evt_new") || !strings.Contains(msg, "1 key became stuck after this pass's first page") {
		t.Errorf("the pass's last page: %q, stderr %q; want it to say 1 key became stuck meanwhile", out, msg)
	}
}

// TestCLI_KeysFailedPassSaysNothingBecameStuck: only processing keys become stuck by
// time, so the last page of a pass through the failed ones has none to tell of.
func TestCLI_KeysFailedPassSaysNothingBecameStuck(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.db")
	db, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i, name := range []string{"evt_failed_a", "evt_failed_b"} {
		if err := storagetest.BulkLoad(ctx, db, storagetest.Fill{Source: "ota", Keys: 1, Key: func(int) string { return name },
			ClaimedAt: time.Now().Add(-time.Duration(3+i) * time.Hour), TTL: 48 * time.Hour, Headers: `{}`,
			Body: func(int) []byte { return []byte(`{}`) }, State: storage.StateFailed}, nil); err != nil {
			t.Fatal(err)
		}
	}
	d := &storage.Delivery{Source: "ota", Key: "evt_processing", KeyMethod: storage.MethodEventID, PayloadHash: "h",
		Body: []byte(`{}`), ReceivedAt: time.Now().Add(-30 * time.Minute)}
	if err := db.Record(ctx, d, storage.ClaimOptions{TTL: 24 * time.Hour, Dispatch: true}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	keys := func(args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		if err := run(ctx, append(append([]string{"keys"}, args...), "--database", path),
			func(string) string { return "" }, strings.NewReader(""), &out, &errb); err != nil {
			t.Fatalf("keys %v: %v", args, err)
		}
		return errb.String()
	}
	_, on, _ := strings.Cut(keys("--stuck", "--state", "failed", "--limit", "1"), "--after ")
	fields := strings.Fields(on)
	if len(fields) == 0 {
		t.Fatal("the first page did not say how to go on")
	}
	c, err := storage.ParseKeyCursor(fields[0])
	if err != nil {
		t.Fatal(err)
	}
	c.StuckBefore = time.Now().Add(-time.Hour) // the first page was read an hour ago
	if msg := keys("--stuck", "--state", "failed", "--limit", "5", "--after", c.String()); strings.Contains(msg, "became stuck") {
		t.Errorf("a pass through the failed keys says %q", strings.TrimSpace(msg))
	}
}

// TestCLI_ReprocessOfASourceNotConfigured: a key of a source the configuration no longer
// has (renamed or removed while its events were owed downstream) is not reprocessed, as
// nothing would send it; serve warns of such keys as it starts; a release frees them.
func TestCLI_ReprocessOfASourceNotConfigured(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.db")
	db, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	db.Now = func() time.Time { return time.Now().Add(-time.Hour) } // stuck by now
	for _, k := range []string{"q1", "q2"} {
		err = errors.Join(err, db.Record(context.Background(), &storage.Delivery{Source: "pms", Key: k, KeyMethod: storage.MethodEventID,
			PayloadHash: "h", Body: []byte(`{}`)}, storage.ClaimOptions{TTL: 24 * time.Hour, Dispatch: true}))
	}
	db.Close()
	if err != nil {
		t.Fatal(err)
	}

	s := runServeInProcess(t, openSource, nil, "--database", path, "--addr", "127.0.0.1:0")
	s.stop()
	if log := s.stderr.String(); !strings.Contains(log, `source \"pms\" is not in the configuration, and 2 of its keys are processing or failed`) {
		t.Errorf("serve's log says nothing of pms's two queued keys:\n%s", log)
	}

	cli := cliOn(path)
	out, err := cli("release", "--source", "pms", "q1", "--reason", "r", "--reprocess")
	if err == nil || !strings.Contains(err.Error(), `source "pms" is not in the configuration, so nothing would send a reprocessed key of it downstream`) {
		t.Errorf("reprocess of a key of a source not configured: %q, %v; want it refused, saying why", out, err)
	}
	if out, err := cli("release", "--source", "pms", "--stuck", "--reason", "r", "--reprocess"); err == nil {
		t.Errorf("reprocess of every stuck key of a source not configured: %q; want it refused", out)
	}
	if out, err := cli("release", "--source", "pms", "q1", "--reason", "r"); err != nil || !strings.Contains(out, "pms/q1: processing -> released") {
		t.Errorf("release of a key of a source not configured: %q, %v; want it freed", out, err)
	}
}

// TestCLI_KeysOfAnUnknownSource: keys --source of a name that is neither configured nor
// holds a stored key is refused, naming it and the configured sources, where it would
// read as a source without keys; a source removed from the configuration whose keys are
// stored is still listed, and a configured source without keys matches none.
func TestCLI_KeysOfAnUnknownSource(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.db")
	db, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Record(context.Background(), &storage.Delivery{Source: "pms", Key: "q1", KeyMethod: storage.MethodEventID,
		PayloadHash: "h", Body: []byte(`{}`)}, storage.ClaimOptions{TTL: 24 * time.Hour})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	cli := cliOn(path)

	_, err = cli("keys", "--source", "nope")
	if err == nil || !strings.Contains(err.Error(), `no source "nope"`) || !strings.Contains(err.Error(), "configured: ota") {
		t.Errorf("keys --source nope: %v; want an error naming nope and the configured sources", err)
	}
	if _, err = cli("keys", "--source", "nope", "--stuck"); err == nil || !strings.Contains(err.Error(), `no source "nope"`) {
		t.Errorf("keys --source nope --stuck: %v; want an error naming nope", err)
	}
	out, err := cli("keys", "--source", "pms")
	if err != nil || !strings.Contains(out, "q1") {
		t.Errorf("keys --source pms (removed from the configuration, a key stored): %v\n%s", err, out)
	}
	// Its keys in another state: none match, but the source is known.
	if out, err = cli("keys", "--source", "pms", "--state", "failed"); err != nil || !strings.Contains(out, "no keys match") {
		t.Errorf("keys --source pms --state failed: %v\n%s", err, out)
	}
	if out, err = cli("keys", "--source", "ota"); err != nil || !strings.Contains(out, "no keys match") {
		t.Errorf("keys --source ota (configured, no key): %v\n%s", err, out)
	}
}

// TestCLI_BulkReleaseOfAnUnknownSource: a bulk release naming a source that is neither
// configured nor holds a stored key (a typo) is refused, naming it, as keys refuses it,
// where it would answer "0 keys matched" and read as a source with nothing stuck. A
// configured source without keys matches none, and a source removed from the
// configuration whose keys are stored is still released.
func TestCLI_BulkReleaseOfAnUnknownSource(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.db")
	db, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	db.Now = func() time.Time { return time.Now().Add(-time.Hour) } // stuck by now
	err = db.Record(context.Background(), &storage.Delivery{Source: "pms", Key: "q1", KeyMethod: storage.MethodEventID,
		PayloadHash: "h", Body: []byte(`{}`)}, storage.ClaimOptions{TTL: 24 * time.Hour, Dispatch: true})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	cli := cliOn(path)

	for _, args := range [][]string{
		{"release", "--source", "pmss", "--stuck", "--reason", "downstream back"},
		{"release", "--source", "pmss", "--state", "failed", "--reason", "downstream back"},
	} {
		out, err := cli(args...)
		if err == nil || !strings.Contains(err.Error(), `no source "pmss"`) || !strings.Contains(err.Error(), "configured: ota") {
			t.Errorf("%v: %v, printed %q; want an error naming pmss and the configured sources", args, err, out)
		}
	}
	if out, err := cli("release", "--source", "ota", "--stuck", "--reason", "downstream back"); err != nil ||
		out != "0 keys matched, 0 changed, 0 refused\n" {
		t.Errorf("bulk release of a configured source without keys: %v\n%s", err, out)
	}
	if out, err := cli("release", "--source", "pms", "--stuck", "--reason", "downstream back"); err != nil ||
		!strings.Contains(out, "pms/q1: processing -> released") {
		t.Errorf("bulk release of a source removed from the configuration, a key stored: %v\n%s", err, out)
	}
}

// TestCLI_BulkReleaseSaysWhenItStoppedShort: a bulk release takes at most
// storage.MaxKeysPerRelease keys a run: a run that stopped there says so, and the next
// releases the rest without that line.
func TestCLI_BulkReleaseSaysWhenItStoppedShort(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.db")
	db, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	err = storagetest.BulkLoad(context.Background(), db, storagetest.Fill{Source: "ota", Keys: storage.MaxKeysPerRelease + 1,
		ClaimedAt: time.Now().Add(-time.Hour), TTL: 24 * time.Hour, Headers: "{}", State: storage.StateFailed,
		Key:  func(i int) string { return fmt.Sprintf("outage-%05d", i) },
		Body: func(int) []byte { return []byte("{}") }}, nil)
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	cli := cliOn(path)
	const more = "stopped at 10000 keys, the most one call takes: more may match; run it again for the rest"
	for _, want := range []struct {
		matched string
		more    bool
	}{{"10000 keys matched, 10000 changed", true}, {"1 key matched, 1 changed", false}} {
		out, err := cli("release", "--source", "ota", "--state", "failed", "--reason", "downstream back")
		if err != nil || !strings.Contains(out, want.matched) || strings.Contains(out, more) != want.more {
			t.Fatalf("bulk release: %v; want %q, the line that more may match %t\n…%s", err, want.matched, want.more, out[max(0, len(out)-300):])
		}
	}
}

// TestCLI_ReprocessSaysWhetherThePayloadIsSent: release --reprocess says that a key of a
// source without forward_url is recorded processed again and nothing is sent, and that
// one of a forwarding source is dispatched again.
func TestCLI_ReprocessSaysWhetherThePayloadIsSent(t *testing.T) {
	dir := t.TempDir()
	path, cfg := filepath.Join(dir, "t.db"), filepath.Join(dir, "hookdedup.toml")
	writeFile(t, cfg, []byte(`
[[source]]
name = "pms"
signature = "none"
event_id = "/id"

[[source]]
name = "crs"
signature = "none"
event_id = "/id"
forward_url = "http://127.0.0.1:9/events"
`))
	db, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	db.Now = func() time.Time { return time.Now().Add(-time.Hour) } // stuck by now
	for _, src := range []string{"pms", "crs"} {
		err = errors.Join(err, db.Record(context.Background(), &storage.Delivery{Source: src, Key: "k1", KeyMethod: storage.MethodEventID,
			PayloadHash: "h", Body: []byte(`{}`)}, storage.ClaimOptions{TTL: 24 * time.Hour, Dispatch: true}))
	}
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	cli := cliOn(path)
	for _, c := range []struct{ source, want string }{
		{"pms", "pms/k1: processing -> processing; the source has no forward_url, so serve records it processed again within seconds, sending nothing"},
		{"crs", "crs/k1: processing -> processing; its stored payload will be dispatched again"},
	} {
		out, err := cli("release", "--config", cfg, "--source", c.source, "k1", "--reason", "r", "--reprocess")
		if err != nil || strings.TrimSpace(out) != c.want {
			t.Errorf("reprocess of a %s key: %q, %v; want %q", c.source, out, err, c.want)
		}
	}
}

// TestCLI_KeysListedCountsOne: a full page of one key says "1 key listed", not "1 keys
// listed", and a full page of two says "2 keys listed".
func TestCLI_KeysListedCountsOne(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.db")
	db, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"evt_a", "evt_b", "evt_c"} {
		if err := db.Record(context.Background(), &storage.Delivery{Source: "ota", Key: key, KeyMethod: storage.MethodEventID,
			PayloadHash: "h", Body: []byte(`{}`)}, storage.ClaimOptions{TTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	for limit, want := range map[string]string{"1": "1 key listed; there may be more", "2": "2 keys listed; there may be more"} {
		var out, errb bytes.Buffer
		if err := run(context.Background(), []string{"keys", "--limit", limit, "--database", path},
			func(string) string { return "" }, strings.NewReader(""), &out, &errb); err != nil {
			t.Fatalf("keys --limit %s: %v", limit, err)
		}
		if !strings.HasPrefix(errb.String(), want) {
			t.Errorf("keys --limit %s: stderr %q; want it to begin %q", limit, errb.String(), want)
		}
	}
}
