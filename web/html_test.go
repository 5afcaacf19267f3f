package web_test

import (
	"net/url"
	"slices"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/hookdedup/hookdedup/views/viewstest"
)

// nodes is a selection of a parsed page's elements, for tests that check what a page
// shows rather than how its markup is spelled: chained selectors over viewstest's
// parsing and matching. Its text, unlike viewstest.Text, puts a space between
// elements, so that cells of a row do not run together.
type nodes struct {
	t    testing.TB
	list []*html.Node
}

// parsePage parses an HTML answer; its selection is the document.
func parsePage(t testing.TB, body string) nodes {
	t.Helper()
	return nodes{t, []*html.Node{viewstest.Parse(t, body)}}
}

// find returns the elements below the selection for which match is true, in document
// order.
func (n nodes) find(match func(*html.Node) bool) nodes {
	out := nodes{t: n.t}
	seen := map[*html.Node]bool{} // a selection may hold an element and its parent
	for _, x := range n.list {
		for c := range x.ChildNodes() {
			for _, e := range viewstest.Find(c, match) {
				if !seen[e] {
					seen[e] = true
					out.list = append(out.list, e)
				}
			}
		}
	}
	return out
}

// testid returns the elements below the selection whose data-testid is id.
func (n nodes) testid(id string) nodes {
	return n.find(func(x *html.Node) bool { return attr(x, "data-testid") == id })
}

// tag returns the elements below the selection named name ("a", "tr", "input").
func (n nodes) tag(name string) nodes {
	return n.find(func(x *html.Node) bool { return x.Data == name })
}

// named returns the form fields below the selection whose name is name.
func (n nodes) named(name string) nodes {
	return n.find(func(x *html.Node) bool { return attr(x, "name") == name })
}

// withAttr returns the elements below the selection whose attribute key is value.
func (n nodes) withAttr(key, value string) nodes {
	return n.find(func(x *html.Node) bool { return attr(x, key) == value })
}

// class returns the elements below the selection that have every class of names.
func (n nodes) class(names ...string) nodes {
	return n.find(func(x *html.Node) bool {
		have := strings.Fields(attr(x, "class"))
		for _, c := range names {
			if !slices.Contains(have, c) {
				return false
			}
		}
		return true
	})
}

func (n nodes) len() int { return len(n.list) }

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

// attrs returns the values of attribute key of the selection's elements that have it.
func (n nodes) attrs(key string) []string {
	var out []string
	for _, x := range n.list {
		for _, a := range x.Attr {
			if a.Key == key {
				out = append(out, a.Val)
			}
		}
	}
	return out
}

// hrefs returns where the links below the selection go.
func (n nodes) hrefs() []string { return n.tag("a").attrs("href") }

// shows fails the test for each of wants that the selection's text does not hold.
func (n nodes) shows(wants ...string) {
	n.t.Helper()
	text := n.text()
	for _, w := range wants {
		if !strings.Contains(text, w) {
			n.t.Errorf("page does not show %q", w)
		}
	}
}

// has fails the test for each data-testid of ids that no element below the selection
// has.
func (n nodes) has(ids ...string) {
	n.t.Helper()
	for _, id := range ids {
		if n.testid(id).len() == 0 {
			n.t.Errorf("page has no data-testid=%q", id)
		}
	}
}

// formValues is what a browser submits for the forms of the selection unchanged: each
// enabled field's value, hidden ones included, a checkbox or radio button only when
// checked, a select's selected option (its first when none is), a textarea's text.
// Buttons send nothing: a test adds what it types or clicks.
func (n nodes) formValues() url.Values {
	out := url.Values{}
	for _, x := range n.find(func(x *html.Node) bool {
		return (x.Data == "input" || x.Data == "select" || x.Data == "textarea") && attr(x, "name") != ""
	}).list {
		if _, disabled := viewstest.Attr(x, "disabled"); disabled {
			continue
		}
		name := attr(x, "name")
		switch x.Data {
		case "input":
			switch attr(x, "type") {
			case "submit", "button", "reset", "image", "file":
				continue
			case "checkbox", "radio":
				if _, checked := viewstest.Attr(x, "checked"); !checked {
					continue
				}
				v, ok := viewstest.Attr(x, "value")
				if !ok {
					v = "on"
				}
				out.Add(name, v)
				continue
			}
			out.Add(name, attr(x, "value"))
		case "select":
			opts := nodes{n.t, []*html.Node{x}}.tag("option").list
			if len(opts) == 0 {
				continue
			}
			chosen := opts[0]
			for _, o := range opts {
				if _, selected := viewstest.Attr(o, "selected"); selected {
					chosen = o
				}
			}
			v, ok := viewstest.Attr(chosen, "value")
			if !ok {
				v = nodes{n.t, []*html.Node{chosen}}.text()
			}
			out.Add(name, v)
		case "textarea":
			var b strings.Builder
			for c := range x.ChildNodes() {
				if c.Type == html.TextNode {
					b.WriteString(c.Data)
				}
			}
			out.Add(name, b.String())
		}
	}
	return out
}

// attr is x's attribute key, "" when it has none.
func attr(x *html.Node, key string) string {
	v, _ := viewstest.Attr(x, key)
	return v
}
