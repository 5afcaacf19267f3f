package web_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/web"
)

// A downstream that wants credentials gets them in forward_url (user:password@, or a
// token in the query): the only way the configuration offers. Every viewer opens event
// pages, and admins the sources page, so neither may show them.
func TestConsole_ForwardURLCredentialsNotShown(t *testing.T) {
	for _, tc := range []struct{ name, url string }{
		{"PasswordAndQuery", "https://hookdedup:" + fwdPassword + "@downstream.example/events?token=" + fwdToken},
		{"TokenAsUser", "https://" + fwdToken + "@downstream.example/events"},
	} {
		t.Run(tc.name, func(t *testing.T) { checkForwardURLNotShown(t, tc.url) })
	}
}

const fwdPassword, fwdToken = "fwd-PASSWORD-never-shown", "fwd-TOKEN-never-shown"

func checkForwardURLNotShown(t *testing.T, forward string) {
	e := newConsoleEnv(t, func(c *web.Config) {
		for i := range c.Sources {
			if c.Sources[i].Name == "pms" {
				c.Sources[i].ForwardURL = forward
				c.Sources[i].Settings = []web.SourceSetting{{Name: "forward_url", Value: strconv.Quote(c.Sources[i].ForwardURL)}}
			}
		}
	})
	id := e.dup.ID + 2 // the pms delivery, recorded after the rejected one
	for _, role := range []string{"viewer", "admin"} {
		c := e.as(t, role)
		for _, path := range []string{"/events/" + strconv.FormatInt(id, 10), "/sources"} {
			code, body := c.get(path)
			if path == "/sources" && role != "admin" {
				continue
			}
			if code != http.StatusOK {
				t.Fatalf("%s GET %s = %d", role, path, code)
			}
			if !strings.Contains(body, "downstream.example") {
				t.Fatalf("%s GET %s: the forward URL is not shown at all", role, path)
			}
			for _, secret := range []string{fwdPassword, fwdToken} {
				if strings.Contains(body, secret) {
					t.Errorf("%s GET %s shows the forward_url credential %q", role, path, secret)
				}
			}
		}
	}
}
