package viewstest_test

import (
	"testing"

	"github.com/hookdedup/hookdedup/views/viewstest"
)

func TestQueries(t *testing.T) {
	doc := viewstest.Parse(t, `<main><p data-testid="a" class="x  y">one &amp; <b>two</b><script>no()</script></p>
		<p data-testid="b">three</p><p data-testid="b">four</p></main>`)
	a := viewstest.One(t, doc, "a")
	if got := viewstest.Text(a); got != "one & two" {
		t.Errorf("Text = %q, want the shown text without the script's", got)
	}
	if !viewstest.HasClass(a, "y") || viewstest.HasClass(a, "x  y") {
		t.Error("HasClass reads the class list")
	}
	if bs := viewstest.ByTestID(doc, "b"); len(bs) != 2 || viewstest.Text(bs[0]) != "three" || viewstest.Text(bs[1]) != "four" {
		t.Errorf("ByTestID(b) = %d elements, want two in document order", len(bs))
	}
	if ps := viewstest.Elements(a, "p"); len(ps) != 1 || ps[0] != a {
		t.Errorf("Elements(p) under a p = %d, want the element itself", len(ps))
	}
	if v, ok := viewstest.Attr(a, "data-testid"); !ok || v != "a" {
		t.Errorf("Attr = %q %v", v, ok)
	}
	if _, ok := viewstest.Attr(a, "id"); ok {
		t.Error("Attr found an attribute that is not there")
	}
}
