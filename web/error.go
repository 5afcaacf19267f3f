package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/hookdedup/hookdedup/storage"
)

// Error is an error whose message the user may read: the console shows it on an error
// page, the API answers it as {"error": Message}, both with the status Code. Handlers
// return one for what the request got wrong (a bad parameter, a form that does not
// validate). Any other error is internal: its text goes to the log, never to the user.
type Error struct {
	Code    int    // the HTTP status: 400, 403, 404, 409, 422 …
	Message string // for whoever sent the request, in their words
}

func (e *Error) Error() string { return e.Message }

// Errorf returns an *Error with status code and a message formatted as fmt.Sprintf does.
func Errorf(code int, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

var (
	errNotFound  = &Error{http.StatusNotFound, "There is nothing at this address."}
	errForbidden = &Error{http.StatusForbidden, "Your role does not allow this. Ask an admin."}
)

func badRequest(msg string) error { return &Error{http.StatusBadRequest, msg} }

// errorStatus is the HTTP status err is answered with: an *Error's own, 404 for
// storage.ErrNotFound, 409 for a conflict with the state of the data (a key in flight,
// a name taken, the last admin), 503 for a write the database could not take now and
// did not store (its file left its path, or another process held the lock past the
// busy timeout), else 500.
func errorStatus(err error) int {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Code
	}
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, storage.ErrBusy), errors.Is(err, storage.ErrExists), errors.Is(err, storage.ErrLastAdmin):
		return http.StatusConflict
	case errors.Is(err, storage.ErrFileGone), errors.Is(err, storage.ErrWriteTimeout):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// retryAfter is the Retry-After of a 503, in seconds: a lock held by another process
// is usually let go within that.
const retryAfter = "5"

// errorMessage is what the user may read of err: an *Error's message, else fixed words
// for its status (code), taken from words. Never the text of err itself.
func errorMessage(err error, code int, words map[int]string) string {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Message
	}
	if m, ok := words[code]; ok {
		return m
	}
	return words[http.StatusInternalServerError]
}

// The console's words for errors that carry none of their own.
var consoleWords = map[int]string{
	http.StatusNotFound: "There is nothing at this address.",
	http.StatusConflict: "Something else changed this meanwhile. Reload the page and try again.",
	http.StatusServiceUnavailable: "The database cannot store changes right now, and nothing was changed. " +
		"Try again in a moment; if this lasts, tell whoever runs hookdedup.",
	http.StatusInternalServerError: "The server could not complete this request. " +
		"It has been logged; try again in a moment.",
}

// The API's words for errors that carry none of their own.
var apiWords = map[int]string{
	http.StatusNotFound:            "not found",
	http.StatusConflict:            "conflict with the current state; try again later",
	http.StatusServiceUnavailable:  "the database cannot store changes now; nothing was changed; retry later",
	http.StatusInternalServerError: "internal error; it has been logged",
}

// consoleError answers a console request that failed with err: an error page with
// errorStatus's code, and one log line when the error is internal.
func (s *Server) consoleError(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, context.Canceled) {
		return // the client went away
	}
	code := errorStatus(err)
	if code >= 500 {
		s.log.Error("console request failed", logMethod, r.Method, logPath, r.URL.Path, logErr, err)
	}
	if code == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", retryAfter)
	}
	s.renderError(w, r, code, errorTitle(code), errorMessage(err, code, consoleWords))
}

// apiError answers an API request that failed with err: {"error": …} with
// errorStatus's code, and one log line when the error is internal.
func (s *Server) apiError(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, context.Canceled) {
		return // the client went away
	}
	code := errorStatus(err)
	if code >= 500 {
		s.log.Error("api request failed", logMethod, r.Method, logPath, r.URL.Path, logErr, err)
	}
	switch code {
	case http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer realm="hookdedup"`)
	case http.StatusServiceUnavailable:
		w.Header().Set("Retry-After", retryAfter)
	}
	writeAPI(w, code, map[string]string{"error": errorMessage(err, code, apiWords)})
}

// errorTitle is the heading of the console's error page for status code.
func errorTitle(code int) string {
	switch {
	case code == http.StatusBadRequest:
		return "Bad request"
	case code == http.StatusForbidden:
		return "Not allowed"
	case code == http.StatusNotFound:
		return "Not found"
	case code == http.StatusConflict:
		return "Changed meanwhile"
	case code == http.StatusUnprocessableEntity:
		return "Not accepted"
	case code == http.StatusServiceUnavailable:
		return "Not stored, try again"
	case code >= 500:
		return "Something went wrong"
	}
	return http.StatusText(code)
}

// serve runs a console handler and answers its error with consoleError.
func (s *Server) serve(h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			s.consoleError(w, r, err)
		}
	})
}
