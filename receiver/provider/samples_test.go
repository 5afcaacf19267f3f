package provider_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver"
	"github.com/hookdedup/hookdedup/receiver/provider"
	"github.com/hookdedup/hookdedup/receiver/signature"
	"github.com/hookdedup/hookdedup/storage"
)

// testdata/NAME.json and NAME-*.json are deliveries written in each
// sender's documented shape (the values are made up). sampleHeaders are
// the headers those senders send along that the presets read.
var sampleHeaders = map[string]http.Header{
	"github":  {"X-Github-Delivery": {"72d3162e-cc78-11e3-81ab-4c9367dc0958"}, "X-Github-Event": {"issues"}},
	"shopify": {"X-Shopify-Webhook-Id": {"b54557e4-bdd9-4b37-8a5f-bf7d70bcd043"}, "X-Shopify-Topic": {"orders/updated"}},
	"guesty":  {"Webhook-Id": {"msg_2mQ8dWqz5pT4vK9sL1nB7xR3cY"}},
}

func samples(t *testing.T, name string) map[string][]byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", name+"*.json"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, f := range files {
		base := strings.TrimSuffix(filepath.Base(f), ".json")
		if base != name && !strings.HasPrefix(base, name+"-") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[base] = b
	}
	if len(out) == 0 {
		t.Fatalf("no testdata/%s.json: every preset needs a delivery in its sender's shape", name)
	}
	return out
}

// lookup resolves an RFC 6901 pointer in a decoded document.
func lookup(doc any, ptr string) (any, error) {
	if ptr == "" {
		return doc, nil
	}
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		switch v := doc.(type) {
		case map[string]any:
			next, ok := v[tok]
			if !ok {
				return nil, fmt.Errorf("%s: no member %q", ptr, tok)
			}
			doc = next
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(v) {
				return nil, fmt.Errorf("%s: no element %q", ptr, tok)
			}
			doc = v[i]
		default:
			return nil, fmt.Errorf("%s: %q names inside a scalar", ptr, tok)
		}
	}
	return doc, nil
}

// events splits a delivery by the preset's batch and item pointers.
func events(t *testing.T, p provider.Preset, body []byte) [][]byte {
	t.Helper()
	if p.Batch == "" {
		return [][]byte{body}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	batch, err := lookup(doc, p.Batch)
	if err != nil {
		t.Fatalf("batch: %v", err)
	}
	elems, ok := batch.([]any)
	if !ok || len(elems) == 0 {
		t.Fatalf("batch %s is not a non-empty array", p.Batch)
	}
	var out [][]byte
	for i, e := range elems {
		item, err := lookup(e, p.Item)
		if err != nil {
			t.Fatalf("element %d: item: %v", i, err)
		}
		b, err := json.Marshal(item)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// Each preset, applied to a delivery in its sender's documented shape:
// the delivery verifies under the preset's scheme, every event in it gets
// a key the way the preset says, distinct events get distinct keys, and
// every label the preset names is found.
func TestPresets_DocumentedDeliveries(t *testing.T) {
	now := time.Unix(1767258900, 0)
	for _, name := range provider.Names() {
		t.Run(name, func(t *testing.T) {
			p, _ := provider.Lookup(name)
			cfg := signatureConfig(p)
			v, err := signature.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			spec := receiver.KeySpec{EventID: p.EventID, KeyFields: p.KeyFields}
			labels := map[string]string{
				"property": p.PropertyField, "booking": p.BookingField, "status": p.StatusField,
				"currency": p.CurrencyField,
			}
			for i, place := range p.AmountField {
				labels[fmt.Sprintf("amount[%d]", i)] = storage.PlacePointer(place)
			}
			found := map[string]bool{}

			for file, body := range samples(t, name) {
				h, q := sampleHeaders[name].Clone(), url.Values{}
				if h == nil {
					h = http.Header{}
				}
				if p.Signature == "adyen" {
					a, err := signature.NewAdyenHMAC(cfg.Secrets)
					if err != nil {
						t.Fatal(err)
					}
					if body, err = a.SignNotification(body); err != nil {
						t.Fatalf("%s: %v", file, err)
					}
				} else if err := v.Sign(h, q, body, now); err != nil {
					t.Fatalf("%s: Sign: %v", file, err)
				}
				if err := v.Verify(h, q, body, now); err != nil {
					t.Fatalf("%s: the preset's scheme refuses a delivery signed its way: %v", file, err)
				}

				keys := map[string]bool{}
				for i, ev := range events(t, p, body) {
					d, err := receiver.Derive(spec, h, ev)
					if err != nil {
						t.Fatalf("%s, event %d: %v\n%s", file, i, err, ev)
					}
					if keys[d.Key] {
						t.Errorf("%s, event %d: key %s repeats an earlier event of the same delivery", file, i, d.Key)
					}
					keys[d.Key] = true
					for label, ptr := range labels {
						if ptr != "" && receiver.Text(ev, ptr) != "" {
							found[label] = true
						}
					}
					t.Logf("%s, event %d: %s key %s", file, i, d.Method, d.Key)
				}
			}
			for label, ptr := range labels {
				if ptr != "" && !found[label] {
					t.Errorf("%s_field %q names nothing in the documented deliveries", label, ptr)
				}
			}
		})
	}
}

// What each preset keys on, shown on one event: ids where the sender has
// them, and where it has none, a redelivery (the same event again) keeps
// its key while a different event gets another.
func TestPresets_KeyMethod(t *testing.T) {
	for name, want := range map[string]string{
		"stripe": storage.MethodEventID, "github": storage.MethodEventID, "shopify": storage.MethodEventID,
		"guesty": storage.MethodEventID, "channex": storage.MethodEventID,
		"adyen": storage.MethodDerived, "mews": storage.MethodDerived, "apaleo": storage.MethodDerived,
		"cloudbeds": storage.MethodDerived, "beds24": storage.MethodDerived,
	} {
		p, _ := provider.Lookup(name)
		body := samples(t, name)[name]
		ev := events(t, p, body)[0]
		h := sampleHeaders[name]
		d, err := receiver.Derive(receiver.KeySpec{EventID: p.EventID, KeyFields: p.KeyFields}, h, ev)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if d.Method != want {
			t.Errorf("%s: keyed by %s, want %s", name, d.Method, want)
		}
		again, _ := receiver.Derive(receiver.KeySpec{EventID: p.EventID, KeyFields: p.KeyFields}, h.Clone(), bytes.Clone(ev))
		if again.Key != d.Key {
			t.Errorf("%s: a redelivery got key %s, the first %s", name, again.Key, d.Key)
		}
	}
}

// Where the key is derived, each key field tells events apart: changing
// any one of them in an event gives a new key.
func TestPresets_KeyFieldsDistinguish(t *testing.T) {
	for _, name := range provider.Names() {
		p, _ := provider.Lookup(name)
		if len(p.EventID) > 0 {
			continue // keyed on the sender's id where present
		}
		ev := events(t, p, samples(t, name)[name])[0]
		spec := receiver.KeySpec{KeyFields: p.KeyFields}
		base, err := receiver.Derive(spec, nil, ev)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, field := range p.KeyFields {
			var doc map[string]any
			if err := json.Unmarshal(ev, &doc); err != nil {
				t.Fatal(err)
			}
			// Replace the field's top-level member (all key fields start at
			// a member of the event).
			member := strings.Split(field[1:], "/")[0]
			if _, ok := doc[member]; !ok {
				continue // absent in this sample
			}
			doc[member] = "changed"
			changed, _ := json.Marshal(doc)
			d, err := receiver.Derive(spec, nil, changed)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if d.Key == base.Key {
				t.Errorf("%s: changing %s left the key unchanged", name, field)
			}
		}
	}
}
