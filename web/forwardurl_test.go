package web_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/web"
)

// A downstream that wants credentials gets them in forward_url (user:password@, a
// token in the query, or one in the path as Slack's and Discord's webhooks): the only way the configuration offers. Every viewer opens event
// pages, and admins the sources page, so neither may show them.
func TestConsole_ForwardURLCredentialsNotShown(t *testing.T) {
	for _, tc := range []struct{ name, url string }{
		{"PasswordAndQuery", "https://hookdedup:" + fwdPassword + "@downstream.example/events?token=" + fwdToken},
		{"TokenAsUser", "https://" + fwdToken + "@downstream.example/events"},
		{"TokenAsBareQuery", "https://downstream.example/events?" + fwdToken},
		{"TokenInFragment", "https://downstream.example/events#" + fwdToken},
		{"TokenInPath", "https://downstream.example/services/T00000000/" + fwdToken},
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

// Incoming webhooks of Slack and Discord, as their documentation spells them: the token
// is the last path segment.
const (
	slackURL   = "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX"
	discordURL = "https://discord.com/api/webhooks/123456789012345678/" +
		"Kq7fZ2xR9mW4tY8uP3sL6vN1bC5hJ0gD-aE_iO2kQ7rT4yU9wX3zM8nB1cV6fG5hJ0lA"
)

// TestRedactURL: what may carry a credential is masked, a query parameter without a
// value, a fragment and a path segment that may be a token included; what names the
// downstream (scheme, host, port, an ordinary path) and the names of the query's
// parameters stay, so that an operator can tell which URL it is.
func TestRedactURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"https://pms.example/in", "https://pms.example/in"},
		{"https://hook:hunter2@pms.example/in", "https://hook:xxxxx@pms.example/in"},
		{"https://tok-123@pms.example/in", "https://xxxxx@pms.example/in"},
		{"https://pms.example:8443/in?token=tok-123&site=9", "https://pms.example:8443/in?site=xxxxx&token=xxxxx"},
		// A name with no value may be the secret itself, a token ending in base64's "=".
		{"https://pms.example/in?token=", "https://pms.example/in?xxxxx"},
		{"https://down.example/hook?c2VjcmV0dG9rZW4=", "https://down.example/hook?xxxxx"},
		{"https://down.example/hook?c2VjcmV0dG9r==", "https://down.example/hook?xxxxx"},
		{"https://down.example/hook?secret-token=", "https://down.example/hook?xxxxx"},
		{"https://down.example/hook?a=1&c2VjcmV0=&b=2", "https://down.example/hook?a=xxxxx&b=xxxxx&xxxxx"},
		{"https://down.example/hook?=s3cr3t", "https://down.example/hook?=xxxxx"},
		{"https://down.example/hook?s3cr3tT0k3n", "https://down.example/hook?xxxxx"},
		{"https://down.example/hook?site=9&s3cr3tT0k3n&t0k3n2", "https://down.example/hook?site=xxxxx&xxxxx"},
		{"https://down.example/hook?site=9&%zz=s3cr3t", "https://down.example/hook?site=xxxxx&xxxxx"},
		{"https://down.example/hook#s3cr3tT0k3n", "https://down.example/hook#xxxxx"},
		{"https://down.example/hook?a=1#access_token=s3cr3t", "https://down.example/hook?a=xxxxx#xxxxx"},
		{"https://down.example/hook?", "https://down.example/hook?"},
		// Path segments that may be tokens: 16 characters or more, unless lower-case
		// words joined by - _ . (each under 16 letters); 32 or more always.
		{slackURL, "https://hooks.slack.com/services/T00000000/B00000000/xxxxx"},
		{"https://hooks.slack.com/services/T0123ABCD/B0123ABCDEF/aB3dE5gH7jK9mN1pQ3sT5vW7", "https://hooks.slack.com/services/T0123ABCD/B0123ABCDEF/xxxxx"},
		{discordURL, "https://discord.com/api/webhooks/xxxxx/xxxxx"},
		{"https://chat.example/hooks/3ogxh8o9njbxdyfbe9b5qyy5ah", "https://chat.example/hooks/xxxxx"},
		{"https://api.telegram.org/bot123456:ABC-DEF1234ghIkl-zyx57W2v1u123ew11/sendMessage", "https://api.telegram.org/xxxxx/sendMessage"},
		{"https://webhook.site/550e8400-e29b-41d4-a716-446655440000", "https://webhook.site/xxxxx"},
		{"https://down.example/hook/" + strings.Repeat("abcdefgh-", 4), "https://down.example/hook/xxxxx"},
		{"https://down.example/hook/incomingwebhooks", "https://down.example/hook/xxxxx"},
		{"https://down.example/hook/s3cr3t%2Fs3cr3t%2Fs3cr3t", "https://down.example/hook/xxxxx"},
		{"https://down.example/hook/r%C3%A9servations-h%C3%B4tel", "https://down.example/hook/xxxxx"},
		// Under 16 characters a token is not recognised (the README says so); the query is
		// masked as ever.
		{"https://down.example/t0k3n/x?sig=s3cr3t", "https://down.example/t0k3n/x?sig=xxxxx"},
		{"https://pms.example/hooks/booking", "https://pms.example/hooks/booking"},
		{"https://pms.example/api/v1/events", "https://pms.example/api/v1/events"},
		{"https://pms.example/webhook-receiver/booking_events/", "https://pms.example/webhook-receiver/booking_events/"},
		{"https://pms.example/hotels/HTL-LIS-01/events.json", "https://pms.example/hotels/HTL-LIS-01/events.json"},
		{"https://pms.example/r%C3%A9servations", "https://pms.example/r%C3%A9servations"},
		{"https://down.example/%zz", "(not shown: not a valid URL)"},
		{"https:hook:s3cr3t@down.example/hook", "(not shown: not a valid URL)"},
		{"hook:s3cr3t@down.example/hook", "(not shown: not a valid URL)"},
	} {
		if got := web.RedactURL(tc.in); got != tc.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
