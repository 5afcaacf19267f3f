package alert_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver/alert"
	"github.com/hookdedup/hookdedup/storage"
)

// TestSlack_TextEscaped: what a slack message holds from the configuration and from
// deliveries (a rule's name, a source's, a summary, who resolved it) reaches Slack with
// &, < and > escaped as its mrkdwn asks (&amp; &lt; &gt;): a source named <!channel>
// does not notify the whole channel, nor <https://…|text> show a link of its own; the
// webhook channel's JSON carries the same text as written.
func TestSlack_TextEscaped(t *testing.T) {
	s := newSlack(t)
	h := newHook(t, 0)
	m := alert.Message{ID: "alert_notification_1_1", Event: storage.AlertResolvedEvent, Actor: "<!here>", At: time.Now(),
		Summary: "3 stuck keys on <https://evil.example|your bank> & <@U0123>", Value: "3",
		Alert:      storage.Alert{ID: 1, Rule: "stuck <!channel>", Kind: alert.KindStuckKeys, Subject: "<!everyone>", OpenedAt: time.Now()},
		ConsoleURL: "https://console.example/alerts?state=all&before=9"}
	for _, c := range []*alert.Channel{s.channel(t, "chat"), h.channel(t, "hook")} {
		if err := c.Send(context.Background(), m); err != nil {
			t.Fatalf("%s: %v", c.Name(), err)
		}
	}
	got := s.received()
	if len(got) != 1 {
		t.Fatalf("slack received %q; want one message", got)
	}
	text := got[0]
	if strings.ContainsAny(text, "<>") {
		t.Errorf("slack text holds markup: %q", text)
	}
	if rest := strings.NewReplacer("&amp;", "", "&lt;", "", "&gt;", "").Replace(text); strings.Contains(rest, "&") {
		t.Errorf("slack text holds an unescaped &: %q", text)
	}
	for _, want := range []string{"stuck &lt;!channel&gt; on &lt;!everyone&gt;", "by &lt;!here&gt;",
		"&lt;https://evil.example|your bank&gt; &amp; &lt;@U0123&gt;", "state=all&amp;before=9"} {
		if !strings.Contains(text, want) {
			t.Errorf("slack text %q; want it to hold %q", text, want)
		}
	}
	if p := h.payloads(); len(p) != 1 || p[0].Data.Text != m.Text() {
		t.Errorf("webhook payloads %+v; want one whose text is the message's as written", p)
	}
}
