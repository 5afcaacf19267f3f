package receiver

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
)

// TestAppendAnswer_SameAsMarshal holds the hand-built answer to the bytes json.Marshal
// writes for it, escapes included: providers and tests parse it, operators read it.
func TestAppendAnswer_SameAsMarshal(t *testing.T) {
	for _, a := range []answer{
		{},
		{Status: "ok"},
		{Status: "accepted", Key: "msg_1", Delivery: "12"},
		{Status: "duplicate", Key: "derived:ab12", Delivery: "13", FirstDelivery: "12"},
		{Key: "evt_<script>&\"quoted\"\\", Delivery: "1"},
		{Key: "a<b", Status: ">", Error: "x & y"},
		{Key: "Hôtel \u2028\u2029 😀", Status: "accepted"},
		{Key: "\x7f", Error: "bad\x00\x01\b\f\n\r\t\x1f"},
		{Error: "invalid \xff UTF-8"},
		{Error: `unknown source "a"`},
	} {
		want, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, '\n')
		if got := appendAnswer(nil, a); string(got) != string(want) {
			t.Errorf("appendAnswer(%+v) = %q; json.Marshal writes %q", a, got, want)
		}
		rec := httptest.NewRecorder()
		writeJSON(rec, http.StatusTeapot, a)
		if rec.Body.String() != string(want) || rec.Header().Get("Content-Length") != itoa(len(want)) ||
			rec.Header().Get("Content-Type") != "application/json" || rec.Code != http.StatusTeapot {
			t.Errorf("writeJSON(%+v): %d %v %q", a, rec.Code, rec.Header(), rec.Body)
		}
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestStoredHeaders redacts each kind of credential header on its own, leaves the
// request's headers as they were, and keeps everything else.
func TestStoredHeaders(t *testing.T) {
	src := &Source{RedactHeaders: []string{"x-webhook-token"}}
	tests := []struct {
		name string
		in   http.Header
		want http.Header
	}{
		{"Nothing", http.Header{"Webhook-Id": {"msg_1"}, "Content-Type": {"application/json"}},
			http.Header{"Webhook-Id": {"msg_1"}, "Content-Type": {"application/json"}}},
		{"Authorization", http.Header{"Authorization": {"Bearer s"}, "Webhook-Id": {"msg_1"}},
			http.Header{"Authorization": {"[redacted]"}, "Webhook-Id": {"msg_1"}}},
		{"ProxyAuthorization", http.Header{"Proxy-Authorization": {"Basic s"}},
			http.Header{"Proxy-Authorization": {"[redacted]"}}},
		{"Cookie", http.Header{"Cookie": {"a=1", "b=2"}}, http.Header{"Cookie": {"[redacted]"}}},
		{"SourceHeader", http.Header{"X-Webhook-Token": {"s3cret"}, "Webhook-Id": {"msg_1"}},
			http.Header{"X-Webhook-Token": {"[redacted]"}, "Webhook-Id": {"msg_1"}}},
		{"SourceHeaderEmpty", http.Header{"X-Webhook-Token": {""}}, http.Header{"X-Webhook-Token": {""}}},
		{"SourceHeaderAfterEmpty", http.Header{"X-Webhook-Token": {"", "s3cret"}}, http.Header{"X-Webhook-Token": {"[redacted]"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.in.Clone()
			got := src.storedHeaders(tt.in)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("storedHeaders(%v) = %v; want %v", tt.in, got, tt.want)
			}
			if !reflect.DeepEqual(tt.in, before) {
				t.Errorf("storedHeaders changed the request's headers: %v, were %v", tt.in, before)
			}
		})
	}
}
