package receiver

import (
	"encoding/json"
	"strings"
	"testing"
)

// envelopeCases are batched bodies with the envelope each must leave, whatever the
// sender's layout: the array goes with its member and one comma, the whitespace
// between tokens goes, and every name, string and number stays as written.
var envelopeCases = []struct{ batch, body, want string }{
	{"/Events", `{"EnterpriseId":"851df8c8","IntegrationId":"c8bee838","Events":[{"Discriminator":"ServiceOrderUpdated","Value":{"Id":"1"}}]}`,
		`{"EnterpriseId":"851df8c8","IntegrationId":"c8bee838"}`},
	{"/notificationItems", "{\n  \"live\": \"false\",\n  \"notificationItems\": [\n    {\"NotificationRequestItem\": {}}\n  ]\n}",
		`{"live":"false"}`},
	{"/Events", `{"Events":[{}], "rate" : 1.50 , "id":12345678901234567890}`, `{"rate":1.50,"id":12345678901234567890}`},
	{"/Events", `{ "Events" : [ {} ] }`, `{}`},
	{"/Events", `{"a":1,"Events":[{}],"b":"two  words\t"}`, `{"a":1,"b":"two  words\t"}`},
	{"/data/items", `{"data":{"items":[{}],"kind":"k"},"id":7}`, `{"data":{"kind":"k"},"id":7}`},
	{"/groups/1", `{"groups":[{"a":1},[{}],true]}`, `{"groups":[{"a":1},null,true]}`},
	{"/Events", `{"a\"b":"x","Ev\u0065nts":[{}]}`, `{"a\"b":"x"}`},
	{"/Events", `{"note":"\"Events\":[{}]","Events":[{}]}`, `{"note":"\"Events\":[{}]"}`},
	{"/Events", `{"Name":"Hôtel Zürich 東京 😀","Events":[{}]}`, `{"Name":"Hôtel Zürich 東京 😀"}`},
	{"/Events", `{"Nested":{"x":[1, 2]},"Events":[{"Events":[]}],"End":null}`, `{"Nested":{"x":[1,2]},"End":null}`},
	// Text cut in the middle of an emoji by the sender's serialiser, in the envelope and
	// in an item.
	{"/Events", `{"Note":"cut \ud83d","Events":[{"Text":"x \udc00"}]}`, `{"Note":"cut \ud83d"}`},
}

func TestBatchEnvelope(t *testing.T) {
	for _, c := range envelopeCases {
		items, got, err := SplitBatch([]byte(c.body), c.batch, "", 0)
		if err != nil || len(items) == 0 {
			t.Fatalf("%s: %v", c.body, err)
		}
		if got != c.want {
			t.Errorf("envelope of %s:\n got %s\nwant %s", c.body, got, c.want)
		}
	}
}

// FuzzBatchEnvelope: whatever body a batched source accepts, its envelope is one valid
// JSON text no longer than the body.
func FuzzBatchEnvelope(f *testing.F) {
	for _, c := range envelopeCases {
		f.Add(c.body, c.batch)
	}
	f.Fuzz(func(t *testing.T, body, batch string) {
		if CheckBatch(batch, "", KeySpec{}) != nil {
			return
		}
		_, env, err := SplitBatch([]byte(body), batch, "", 0)
		if err != nil {
			return
		}
		if !json.Valid([]byte(env)) || len(env) > len(body) || strings.ContainsAny(env, "\n\r") {
			t.Fatalf("body %q, batch %q: envelope %q", body, batch, env)
		}
	})
}
