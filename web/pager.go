package web

import (
	"errors"
	"maps"
	"net/http"
	"net/url"
	"strconv"
)

// A console list shows its rows newest first, a page at a time. A page after the first
// is named in its address by a cursor, before (the rows below that id) or, on the
// stuck keys, after; the rest of the address is the list's filter or tab, which every
// page keeps. The JSON API reads its cursors with apiID, in its own words.

// pager makes the addresses of the pages of the list at path, each with the query
// kept.
type pager struct {
	path string
	kept url.Values
}

// newPager is the pager of the list at path with the query q, less its cursors.
func newPager(path string, q url.Values) pager {
	kept := maps.Clone(q)
	delete(kept, "before")
	delete(kept, "after")
	return pager{path, kept}
}

// before is the address of the page of the rows below the id before.
func (p pager) before(id int64) string { return p.with("before", strconv.FormatInt(id, 10)) }

// after is the address of the page that goes on after cursor, as the stuck keys do.
func (p pager) after(cursor string) string { return p.with("after", cursor) }

// newest is the address of the list's first page.
func (p pager) newest() string { return p.url(p.kept) }

func (p pager) with(cursor, value string) string {
	q := maps.Clone(p.kept)
	if q == nil {
		q = url.Values{}
	}
	q.Set(cursor, value)
	return p.url(q)
}

func (p pager) url(q url.Values) string {
	if len(q) == 0 {
		return p.path
	}
	return p.path + "?" + q.Encode()
}

// pageBefore reads the before of a list's query q: 0 for the first page, which an
// empty before names too (no page links there, and no row is named), else the id a
// page's Older link gives. Anything else is refused rather than read as the first
// page, which would show the newest rows under an address that asked for others.
func pageBefore(q url.Values) (int64, error) {
	b := q.Get("before")
	if b == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(b, 10, 64)
	switch {
	case errors.Is(err, strconv.ErrRange) && n > 0:
		return 0, cursorError("before", b, "is too large to be an id")
	case err != nil || n <= 0:
		return 0, cursorError("before", b, "is not an id, a whole number from 1")
	}
	return n, nil
}

// cursorError refuses a page address whose cursor name holds value, which no page of
// the list links to; why says what is wrong with it. The user who edited or cut the
// link is told which part of the address is wrong, and what it held.
func cursorError(name, value, why string) error {
	return Errorf(http.StatusBadRequest, "That page address is not valid: %s=%q %s. Start again from the list's first page.", name, value, why)
}
