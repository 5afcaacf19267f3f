package receiver_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// Masking shortens the text read (each secret becomes five x's), so text read past the
// excerpt's bound moves into it: a secret cut by the read's limit (responseExcerpt +
// the longest secret) is then kept unmasked in the stored excerpt, all but one byte.
func TestDispatch_AnswerHidesCredentialCutByReadAfterEarlierMasks(t *testing.T) {
	const token = "qT0kenInTheQueryNeverStored1" // 28 bytes
	db := storagetest.Open(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		w.WriteHeader(http.StatusNotFound)
		tok := r.URL.Query().Get("token")
		// 36 echoes (1008 bytes), 17 bytes of filler, then the token across the read's limit (1052).
		io.WriteString(w, strings.Repeat(tok, 36)+strings.Repeat("y", 17)+tok+strings.Repeat("z", 2000))
	}))
	t.Cleanup(srv.Close)
	startDispatcher(t, db, forwardSource(t, srv.URL+"/events?token="+token, 1))
	accept(t, db, "evt_1", `{}`)
	waitState(t, db, "evt_1", storage.StateFailed)
	last, err := db.LastAttempt(context.Background(), "ota", "evt_1")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(last.Response, token[:20]) {
		t.Errorf("the recorded answer holds most of the forward_url credential: %q", last.Response)
	}
}
