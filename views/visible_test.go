package views

import "testing"

func TestVisible(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"Empty", "", ""},
		{"Plain", "evt_123-ABC", "evt_123-ABC"},
		{"LettersOfOtherScripts", "Zürich 東京 שלום", "Zürich 東京 שלום"},
		{"ReplacementCharacterItself", "a\uFFFDb", "a\uFFFDb"},
		{"Backslash", `a\u202eb`, `a\u202eb`},
		{"RightToLeftOverride", "evt_\u202Egnp.exe", `evt_\u202egnp.exe`},
		{"Isolates", "\u2066a\u2067b\u2068c\u2069", `\u2066a\u2067b\u2068c\u2069`},
		{"Marks", "\u200E\u200F\u061C", `\u200e\u200f\u061c`},
		{"Embeddings", "\u202A\u202B\u202C\u202D", `\u202a\u202b\u202c\u202d`},
		{"LineAndParagraphSeparators", "a\u2028b\u2029c", `a\u2028b\u2029c`},
		{"ZeroWidth", "a\u200Bb\u200Dc\uFEFF", `a\u200bb\u200dc\ufeff`},
		{"SoftHyphen", "ab\u00ADc", `ab\u00adc`},
		{"C0", "a\x00b\x1bc\x7f", `a\u0000b\u001bc\u007f`},
		{"LineBreaksAndTab", "a\nb\rc\td", `a\nb\rc\td`},
		{"C1", "a\u0085b\u009bc", `a\u0085b\u009bc`},
		{"AboveTheBMP", "a\U000E0041b", `a\U000e0041b`},
		{"HangulFillers", "evt_1\u3164\u115F\u1160\uFFA0", `evt_1\u3164\u115f\u1160\uffa0`},
		{"GraphemeJoiner", "a\u034Fb\u17B4c", `a\u034fb\u17b4c`},
		{"VariationSelectors", "a\uFE0Fb\U000E0100c", `a\ufe0fb\U000e0100c`},
		{"SpacesButTheSpace", "a b\u00A0c\u202Fd\u3000e", `a b\u00a0c\u202fd\u3000e`},
		{"BlankBraille", "evt\u2800", `evt\u2800`},
		{"NotUTF8", "a\xffb\xe2\x80", `a\xffb\xe2\x80`},
		{"TruncatedBeforeASCII", "\xe2\x80a", `\xe2\x80a`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Visible(tc.in); got != tc.want {
				t.Errorf("Visible(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestVis(t *testing.T) {
	tests := []struct {
		name, in, want, block string
	}{
		{"Plain", "a<b>&", "a&lt;b&gt;&amp;", "a&lt;b&gt;&amp;"},
		{"OneMarkerPerRun", "key\u202E\u2028<x>\u200B",
			`key<span class="esc">\u202e\u2028</span>&lt;x&gt;<span class="esc">\u200b</span>`,
			`key<span class="esc">\u202e\u2028</span>&lt;x&gt;<span class="esc">\u200b</span>`},
		{"BodyText", "{\"guest\": \"山田\u3000太郎 \u2764\uFE0F\"}",
			`{&#34;guest&#34;: &#34;山田<span class="esc">\u3000</span>太郎 ❤<span class="esc">\ufe0f</span>&#34;}`,
			"{&#34;guest&#34;: &#34;山田\u3000太郎 ❤\uFE0F&#34;}"},
		{"Layout", "{\n\t\"a\": \"\u202E\"\r\n}",
			`{<span class="esc">\n\t</span>&#34;a&#34;: &#34;<span class="esc">\u202e</span>&#34;<span class="esc">\r\n</span>}`,
			"{\n\t&#34;a&#34;: &#34;<span class=\"esc\">\\u202e</span>&#34;\r\n}"},
		{"EndsHidden", "a\x00", `a<span class="esc">\u0000</span>`, `a<span class="esc">\u0000</span>`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := renderString(t, vis(tc.in)); got != tc.want {
				t.Errorf("vis(%q) = %s, want %s", tc.in, got, tc.want)
			}
			if got := renderString(t, visBlock(tc.in)); got != tc.block {
				t.Errorf("visBlock(%q) = %s, want %s", tc.in, got, tc.block)
			}
		})
	}
}

// A line of a diff keeps its tabs and shows what a body keeps as text: the line is there
// to show what differs, such as U+00A0 against a space.
func TestVisLine(t *testing.T) {
	got := renderString(t, visLine("\t\"name\": \"a\u00a0b\u2764\uFE0F\""))
	want := "\t&#34;name&#34;: &#34;a<span class=\"esc\">\\u00a0</span>b❤<span class=\"esc\">\\ufe0f</span>&#34;"
	if got != want {
		t.Errorf("visLine = %q, want %q", got, want)
	}
}
