package receiver_test

import (
	"net"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// The error of a hand-off that got no answer is stored with the attempt and shown to
// every viewer (keys and event pages, the API): it must not carry the credentials a
// forward_url holds.
func TestDispatch_ErrorHidesForwardURLCredentials(t *testing.T) {
	const password, token = "fwd-PASSWORD-never-stored", "fwd-TOKEN-never-stored"
	db := storagetest.Open(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://hookdedup:" + password + "@" + ln.Addr().String() + "/events?token=" + token
	ln.Close()
	startDispatcher(t, db, forwardSource(t, closed, 1))
	accept(t, db, "evt_1", `{}`)
	c := waitState(t, db, "evt_1", storage.StateFailed)
	if c.LastError == "" {
		t.Fatal("no error recorded")
	}
	for _, secret := range []string{password, token} {
		if strings.Contains(c.LastError, secret) {
			t.Errorf("the recorded error %q holds the forward_url credential %q", c.LastError, secret)
		}
	}
}
