package web_test

import (
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// nodes is a selection of a parsed page's elements, for tests that check what a page
// shows rather than how its markup is spelled.
type nodes struct {
	t    testing.TB
	list []*html.Node
}

// parsePage parses an HTML answer; its selection is the document.
func parsePage(t testing.TB, body string) nodes {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return nodes{t, []*html.Node{doc}}
}

// text is the text of the selection as a reader sees it, runs of white space made one
// space.
func (n nodes) text() string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(x *html.Node) {
		switch {
		case x.Type == html.TextNode:
			b.WriteString(x.Data)
		case x.Type == html.ElementNode && (x.Data == "script" || x.Data == "style"):
			return
		}
		for c := x.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
		b.WriteString(" ")
	}
	for _, x := range n.list {
		walk(x)
	}
	return strings.Join(strings.Fields(b.String()), " ")
}
