// Package web is the console's HTTP layer: routes, sessions, sign-in and roles,
// cross-site request forgery protection, the JSON API, and the handlers that turn
// storage's data into the view models that package views renders. It never imports
// receiver: what it needs of the intake side (sources, key derivation) arrives through
// Config.
//
// Every route is registered in one place (Register in server.go), each wrapped in the
// role it needs; the server enforces roles on every request, whatever the page shows.
// Handlers return an error, and one adapter per surface answers it (error.go): the
// console with an error page, the API with {"error": …}. An *Error carries its status
// and the words the user reads; storage.ErrNotFound is a 404 and a conflict with the
// data's state (ErrBusy, ErrExists, ErrLastAdmin) a 409; anything else is a 500 with
// generic words, and its text goes to the log alone. Sessions are
// gorilla/sessions cookies whose keys live in the database (the console.session_keys
// setting). Each request reads its user afresh, so a changed role holds at once, and a
// session carries a digest of the user's row and password hash, so a new password, or a
// new user of the same name, ends it.
//
// A page never loads an unbounded list: a key's deliveries are shown KeyDeliveriesShown
// at a time with a link to the rest, and the events and keys lists page by keyset, so a
// key with 100,000 deliveries or a table of millions answers as fast as a small one.
package web
