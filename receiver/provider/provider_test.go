package provider_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver"
	"github.com/hookdedup/hookdedup/receiver/provider"
	"github.com/hookdedup/hookdedup/receiver/signature"
)

// testSecret returns a well-formed secret for scheme, so that a failure of
// signature.New is the preset's fault, not the secret's.
func testSecret(scheme string) string {
	switch scheme {
	case "adyen":
		return "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056"
	case "standard-webhooks":
		return "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	}
	return "a-test-secret-for-the-preset-table"
}

func signatureConfig(p provider.Preset) signature.Config {
	return signature.Config{
		Scheme:      p.Signature,
		Secrets:     []string{testSecret(p.Signature)},
		Header:      p.SignatureHeader,
		Encoding:    p.SignatureEncoding,
		Prefix:      p.SignaturePrefix,
		BasicUser:   p.BasicUser,
		TokenHeader: p.TokenHeader,
		TokenQuery:  p.TokenQuery,
	}
}

// pointerProblem reports a setting that is not a usable JSON pointer, by
// the same rules the receiver applies to key fields.
func pointerProblem(ptr string) error {
	return receiver.KeySpec{KeyFields: []string{ptr}}.Validate()
}

func TestPresets_Table(t *testing.T) {
	names := provider.Names()
	if len(names) < 10 {
		t.Fatalf("Names() = %v, want at least the ten senders the presets cover", names)
	}
	if !slices.IsSorted(names) || len(slices.Compact(slices.Clone(names))) != len(names) {
		t.Fatalf("Names() = %v, want sorted and unique (Lookup searches the table)", names)
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			p, ok := provider.Lookup(name)
			if !ok || p.Name != name {
				t.Fatalf("Lookup(%q) = %q, %v", name, p.Name, ok)
			}
			if name != strings.ToLower(name) || strings.ContainsAny(name, " \t/") {
				t.Errorf("name %q: want lower case, usable in a config value", name)
			}
			if p.Title == "" || p.Note == "" {
				t.Error("Title and Note are shown to users: want both")
			}
			if len(p.Docs) == 0 {
				t.Error("no documentation: every preset names what it was checked against")
			}
			for _, d := range p.Docs {
				if !strings.HasPrefix(d, "https://") || strings.ContainsAny(d, " \n") {
					t.Errorf("doc %q is not an https URL", d)
				}
			}

			// The scheme and its settings are what signature.New accepts.
			v, err := signature.New(signatureConfig(p))
			if err != nil {
				t.Fatalf("signature.New with the preset's scheme %q: %v", p.Signature, err)
			}
			if v.Scheme() != p.Signature {
				t.Errorf("verifier scheme %q, preset %q", v.Scheme(), p.Signature)
			}

			// How an event gets its key is what the receiver accepts.
			spec := receiver.KeySpec{EventID: p.EventID, KeyFields: p.KeyFields}
			if err := spec.Validate(); err != nil {
				t.Errorf("event_id/key_fields: %v", err)
			}
			for field, ptr := range map[string]string{
				"batch": p.Batch, "item": p.Item, "property_field": p.PropertyField,
				"booking_field": p.BookingField, "status_field": p.StatusField,
				"currency_field": p.CurrencyField,
			} {
				if ptr == "" {
					continue
				}
				if err := pointerProblem(ptr); err != nil {
					t.Errorf("%s %q: %v", field, ptr, err)
				}
			}
			if err := receiver.CheckAmountField(p.AmountField); err != nil {
				t.Error(err)
			}
			if p.Item != "" && p.Batch == "" {
				t.Errorf("item %q without batch", p.Item)
			}
			if p.AmountMinorUnits && len(p.AmountField) == 0 {
				t.Error("amount in minor units, but no amount field")
			}
			if (len(p.AmountField) == 0) != (p.CurrencyField == "") {
				t.Error("an amount is summed per currency: want both amount_field and currency_field, or neither")
			}
			switch p.Answer {
			case provider.AnswerJSON, provider.AnswerAccepted:
			default:
				t.Errorf("answer %q", p.Answer)
			}
		})
	}
}

// The ttl must outlast the sender's redelivery window, so that a
// redelivery finds its key still claimed; an undocumented window gets
// three days at least. Thin senders are the exception the preset states:
// their ttl is short, because their key cannot tell a redelivery from a
// later change.
func TestPresets_TTL(t *testing.T) {
	for _, name := range provider.Names() {
		p, _ := provider.Lookup(name)
		switch {
		case p.Thin:
			if p.TTL <= 0 || p.TTL > 15*time.Minute {
				t.Errorf("%s: thin events, ttl %v: want a short ttl (at most 15m)", name, p.TTL)
			}
			if !strings.Contains(p.Note, "ttl") {
				t.Errorf("%s: a thin preset must say in its note why its ttl is short", name)
			}
		case p.Redelivery > 0 && p.TTL <= p.Redelivery:
			t.Errorf("%s: ttl %v is not above the documented redelivery window %v", name, p.TTL, p.Redelivery)
		case p.Redelivery == 0 && p.TTL < 72*time.Hour:
			t.Errorf("%s: undocumented redelivery window, ttl %v: want at least 72h", name, p.TTL)
		}
	}
	// The figures the senders document, as the issue and the docs state them.
	for name, want := range map[string]time.Duration{
		"stripe": 4 * 24 * time.Hour,  // Stripe retries for up to 3 days
		"adyen":  31 * 24 * time.Hour, // Adyen retries for up to 30 days
		"github": 4 * 24 * time.Hour,  // redelivery by hand for 3 days
	} {
		if p, _ := provider.Lookup(name); p.TTL < want {
			t.Errorf("%s: ttl %v, want at least %v", name, p.TTL, want)
		}
	}
}

// Redelivery is what each sender's documentation says of its retries, where it says
// anything: Channex's webhook page gives its schedule, eleven attempts of which the
// last comes close to 24 hours after the event.
func TestPresets_DocumentedRedelivery(t *testing.T) {
	for name, want := range map[string]time.Duration{
		"adyen":   30 * 24 * time.Hour,
		"beds24":  30 * time.Minute,
		"channex": 24 * time.Hour,
		"github":  3 * 24 * time.Hour,
		"shopify": 4 * time.Hour,
		"stripe":  3 * 24 * time.Hour,
	} {
		p, _ := provider.Lookup(name)
		if p.Redelivery != want {
			t.Errorf("%s: redelivery %v, want the documented %v", name, p.Redelivery, want)
		}
		if strings.Contains(p.Note, "does not say for how long") {
			t.Errorf("%s: the note says the retries are undocumented: %q", name, p.Note)
		}
	}
}

func TestLookup_ReturnsACopy(t *testing.T) {
	p, _ := provider.Lookup("adyen")
	p.KeyFields[0] = "/changed"
	p.Docs[0] = "changed"
	again, _ := provider.Lookup("adyen")
	if again.KeyFields[0] == "/changed" || again.Docs[0] == "changed" {
		t.Error("changing a looked-up preset changed the table")
	}
	stripe, _ := provider.Lookup("stripe")
	stripe.EventID[0] = "/changed"
	stripe.AmountField[0] = "/changed"
	if again, _ := provider.Lookup("stripe"); again.EventID[0] == "/changed" || again.AmountField[0] == "/changed" {
		t.Error("changing a looked-up preset's event_id or amount_field changed the table")
	}
	n := provider.Names()
	n[0] = "changed"
	if provider.Names()[0] == "changed" {
		t.Error("changing Names() changed the table")
	}
}

func TestResolve(t *testing.T) {
	if p, err := provider.Resolve("mews"); err != nil || p.Name != "mews" {
		t.Errorf("Resolve(mews) = %q, %v", p.Name, err)
	}
	for _, tc := range []struct{ name, want string }{
		{"adyn", `"adyn" is not a known provider (want one of adyen, apaleo, beds24, channex, cloudbeds, github, guesty, mews, shopify, stripe)`},
		{"Adyen", `"Adyen" is not a known provider`},
		{"", "is empty (want one of adyen,"},
	} {
		_, err := provider.Resolve(tc.name)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Resolve(%q) = %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
	if _, ok := provider.Lookup("ADYEN"); ok {
		t.Error("Lookup is exact: ADYEN found")
	}
}

// Every preset's business key is a list of pointers the receiver accepts.
func TestPresets_BusinessKey(t *testing.T) {
	for _, name := range provider.Names() {
		p, _ := provider.Lookup(name)
		if err := receiver.CheckBusinessKey(p.BusinessKey); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
