package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage"
)

// TestKeys_CursorOfTheOtherListingRefused: the keys page refuses a before on the stuck
// tab and an after on the others, as the API does, rather than drop it without a word
// and show the first page as if it were the one asked for.
func TestKeys_CursorOfTheOtherListingRefused(t *testing.T) {
	e := newConsoleEnv(t)
	op := e.as(t, storage.RoleOperator)
	for _, path := range []string{"/keys?state=stuck&before=5", "/keys?before=5", "/keys?state=all&after=x", "/keys?state=failed&after=x"} {
		code, body := op.get(path)
		if code != http.StatusBadRequest || !strings.Contains(body, "page address is not valid") {
			t.Errorf("%s = %d; want 400 saying the page address is not valid", path, code)
		}
	}
	for _, path := range []string{"/keys?state=all&before=5", "/keys?state=stuck"} {
		if code, _ := op.page(path); code != http.StatusOK {
			t.Errorf("%s = %d; want 200", path, code)
		}
	}
}
