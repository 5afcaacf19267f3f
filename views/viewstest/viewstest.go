// Package viewstest reads rendered pages as tests should: parsed as a browser parses
// them, with elements selected by their data-testid, and text read as it is shown
// (entities decoded), rather than by searching the markup for substrings. Only tests
// import it.
package viewstest

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/a-h/templ"
	"golang.org/x/net/html"
)

// Parse parses markup, a whole page or a fragment, as HTML.
func Parse(tb testing.TB, markup string) *html.Node {
	tb.Helper()
	doc, err := html.Parse(strings.NewReader(markup))
	if err != nil {
		tb.Fatalf("parse HTML: %v", err)
	}
	return doc
}

// Render renders c and parses what it wrote.
func Render(tb testing.TB, c templ.Component) *html.Node {
	tb.Helper()
	var b strings.Builder
	if err := c.Render(context.Background(), &b); err != nil {
		tb.Fatalf("render: %v", err)
	}
	return Parse(tb, b.String())
}

// Find returns the elements under n (n included) for which match is true, in document
// order.
func Find(n *html.Node, match func(*html.Node) bool) []*html.Node {
	var out []*html.Node
	for d := range n.Descendants() {
		if d.Type == html.ElementNode && match(d) {
			out = append(out, d)
		}
	}
	if n.Type == html.ElementNode && match(n) {
		out = append([]*html.Node{n}, out...)
	}
	return out
}

// ByTestID returns the elements under n whose data-testid is id, in document order.
func ByTestID(n *html.Node, id string) []*html.Node {
	return Find(n, func(e *html.Node) bool { v, ok := Attr(e, "data-testid"); return ok && v == id })
}

// One returns the one element under n whose data-testid is id, and fails the test if
// there is none or more than one.
func One(tb testing.TB, n *html.Node, id string) *html.Node {
	tb.Helper()
	found := ByTestID(n, id)
	if len(found) != 1 {
		tb.Fatalf("%d elements with data-testid=%q, want 1", len(found), id)
	}
	return found[0]
}

// Elements returns the elements under n with that tag name ("a", "title", "rect").
func Elements(n *html.Node, tag string) []*html.Node {
	return Find(n, func(e *html.Node) bool { return e.Data == tag })
}

// Attr returns the value of n's attribute name, and whether n has it.
func Attr(n *html.Node, name string) (string, bool) {
	for _, a := range n.Attr {
		if a.Namespace == "" && a.Key == name {
			return a.Val, true
		}
	}
	return "", false
}

// HasClass reports whether n's class attribute holds class.
func HasClass(n *html.Node, class string) bool {
	v, _ := Attr(n, "class")
	return slices.Contains(strings.Fields(v), class)
}

// Text returns the text under n as a reader sees it: every text node in document order,
// entities decoded, without the contents of script and style elements.
func Text(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		switch {
		case n.Type == html.TextNode:
			b.WriteString(n.Data)
			return
		case n.Type == html.ElementNode && (n.Data == "script" || n.Data == "style"):
			return
		}
		for c := range n.ChildNodes() {
			walk(c)
		}
	}
	walk(n)
	return b.String()
}
