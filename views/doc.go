// Package views renders the console's pages with templ. Each page takes a view model
// shaped like the screen (models.go); views run no queries and make no HTTP calls.
// Elements that tests select carry data-testid.
//
// The .templ files are the source; their generated _templ.go files are committed, so a
// build needs no templ. After changing a .templ file, run `make generate` (go tool templ
// generate -path views) and commit both; `make test` fails on a stale one.
package views
