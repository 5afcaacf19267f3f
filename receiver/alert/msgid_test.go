package alert

import (
	"strings"
	"testing"
)

// TestMsgIDPart_ConsecutiveDots: a channel's name, part of a direct notification's
// Message-ID, may hold dots in a row ("ops...mail"): the id holds none, as RFC 5322's
// dot-atom-text requires.
func TestMsgIDPart_ConsecutiveDots(t *testing.T) {
	for _, name := range []string{"ops...mail", "night....shift"} {
		id := msgIDPart("alert_direct_opened_1764489600000_" + name)
		if strings.Contains(id, "..") || id == "" {
			t.Errorf("msgIDPart of a direct id for channel %q = %q: not dot-atom-text (two dots in a row)", name, id)
		}
	}
}
