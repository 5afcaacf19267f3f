package signature

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Shared-secret schemes, for the many hotel systems that sign nothing
// (DESIGN.md, "Configuration"). They prove who sent a delivery, not that
// its body is intact or fresh.
//
// Values are compared as SHA-256 digests: the digests have one length
// whatever was sent, so a constant-time comparison of them reveals neither
// the content nor the length of a secret.

const authorizationHeader = "Authorization"

var (
	// One message for both failures: saying which part was wrong would
	// help a guesser.
	errBasicAuth = errors.New("user name or password does not match")
	errToken     = errors.New("token does not match any secret")
)

// ErrMissingQueryParameter is the error of a verifier whose credential is a query
// parameter that the request's query does not hold. The caller, which has the raw
// query, can say why a parameter that is there was not read (a semicolon in it).
var ErrMissingQueryParameter = errors.New("missing query parameter")

// maxCredential bounds what an unauthenticated caller makes us decode
// and hash.
const maxCredential = 4 << 10

type basicAuthVerifier struct {
	user      digest   // SHA-256 of the configured user name
	passwords []digest // SHA-256 of each secret
	signUser  string   // for Sign only
	signPass  string
}

func newBasicAuthVerifier(user string, secrets []string) (Verifier, error) {
	if user == "" {
		return nil, errors.New("basic_user is required for basic-auth")
	}
	// RFC 7617: the user-id ends at the first colon, so one with a colon
	// could never match.
	if strings.Contains(user, ":") {
		return nil, errors.New("basic_user must not contain ':'")
	}
	v := &basicAuthVerifier{
		user:      sha256.Sum256([]byte(user)),
		passwords: make([]digest, len(secrets)),
		signUser:  user,
		signPass:  secrets[0],
	}
	for i, s := range secrets {
		v.passwords[i] = sha256.Sum256([]byte(s))
	}
	return v, nil
}

func (v *basicAuthVerifier) Scheme() string         { return schemeBasicAuth }
func (v *basicAuthVerifier) Timestamped() bool      { return false }
func (v *basicAuthVerifier) Integrity() bool        { return false }
func (v *basicAuthVerifier) DefaultEventID() string { return "" }

// basicChallenge asks for Basic credentials in UTF-8 (RFC 7617), the encoding Verify
// compares a password in.
const basicChallenge = `Basic realm="hookdedup", charset="UTF-8"`

// Challenge makes basicAuthVerifier a Challenger.
func (v *basicAuthVerifier) Challenge() string { return basicChallenge }

func (v *basicAuthVerifier) Verify(h http.Header, _ url.Values, _ []byte, _ time.Time) error {
	a := headerValue(h, authorizationHeader)
	if a == "" {
		return missingHeader(authorizationHeader)
	}
	const basic = "Basic "
	if len(a) < len(basic) || !strings.EqualFold(a[:len(basic)], basic) {
		return malformed(authorizationHeader, "want Basic credentials")
	}
	enc := strings.TrimLeft(a[len(basic):], " ")
	if len(enc) > maxCredential {
		return malformed(authorizationHeader, fmt.Sprintf("credentials longer than %d bytes", maxCredential))
	}
	// Stack buffers fit any ordinary credentials; AppendDecode moves to the
	// heap only for longer ones.
	var srcBuf [128]byte
	var dstBuf [96]byte
	creds, err := base64.StdEncoding.AppendDecode(dstBuf[:0], append(srcBuf[:0], enc...))
	if err != nil {
		return malformed(authorizationHeader, "credentials are not valid base64")
	}
	user, pass, ok := bytes.Cut(creds, []byte{':'})
	if !ok {
		return malformed(authorizationHeader, "credentials have no ':' between user and password")
	}

	// Every comparison runs, whichever fails, so the time taken does not
	// tell a right user name from a right password.
	uh, ph := sha256.Sum256(user), sha256.Sum256(pass)
	match := subtle.ConstantTimeCompare(uh[:], v.user[:])
	anyPass := 0
	for i := range v.passwords {
		anyPass |= subtle.ConstantTimeCompare(ph[:], v.passwords[i][:])
	}
	if match&anyPass != 1 {
		return errBasicAuth
	}
	return nil
}

func (v *basicAuthVerifier) Sign(h http.Header, _ url.Values, _ []byte, _ time.Time) error {
	if h == nil {
		return errNilHeader
	}
	h.Set(authorizationHeader, "Basic "+base64.StdEncoding.EncodeToString([]byte(v.signUser+":"+v.signPass)))
	return nil
}

// bearerPrefix starts an Authorization header's bearer token.
const bearerPrefix = "Bearer "

type tokenVerifier struct {
	header    string // as configured, for messages; "" when query is set
	canonical string
	query     string
	tokens    []digest // SHA-256 of each secret
	signToken string
}

func newTokenVerifier(header, query string, secrets []string) (Verifier, error) {
	if (header == "") == (query == "") {
		return nil, errors.New("set exactly one of token_header and token_query")
	}
	if header != "" && !validHeaderName(header) {
		return nil, fmt.Errorf("token_header %q is not a valid header name", header)
	}
	v := &tokenVerifier{
		header:    header,
		canonical: canonicalKey(header),
		query:     query,
		tokens:    make([]digest, len(secrets)),
		signToken: secrets[0],
	}
	for i, s := range secrets {
		v.tokens[i] = sha256.Sum256([]byte(s))
	}
	return v, nil
}

func (v *tokenVerifier) Scheme() string         { return schemeToken }
func (v *tokenVerifier) Timestamped() bool      { return false }
func (v *tokenVerifier) Integrity() bool        { return false }
func (v *tokenVerifier) DefaultEventID() string { return "" }

func (v *tokenVerifier) Verify(h http.Header, q url.Values, _ []byte, _ time.Time) error {
	var tok string
	if v.query != "" {
		// More than one value is refused, whatever each is, saying so: matched one by
		// one, a request could carry any number of guesses; read first only,
		// "?token=&token=…" was refused as missing a token it carries.
		switch vals := q[v.query]; {
		case len(vals) > 1:
			return fmt.Errorf("query parameter %s is given %d times: send it once", v.query, len(vals))
		case len(vals) == 0 || vals[0] == "":
			return fmt.Errorf("%w %s", ErrMissingQueryParameter, v.query)
		default:
			tok = vals[0]
		}
	} else if vals := h[v.canonical]; len(vals) > 1 {
		// As for the query parameter: which line a proxy or the sender meant is not for
		// the verifier to guess.
		return fmt.Errorf("header %s is given %d times: send it once", v.header, len(vals))
	} else if tok = headerValue(h, v.canonical); tok == "" {
		return missingHeader(v.header)
	}
	if len(tok) > maxCredential {
		return fmt.Errorf("token longer than %d bytes", maxCredential)
	}
	var buf [128]byte
	th := sha256.Sum256(append(buf[:0], tok...))
	// A query decodes '+' as a space, so a token with '+' (any base64 one) written into
	// the URL as it is arrives with spaces in their place: the token as the sender wrote
	// it is compared too. Both comparisons run whichever matches, so the time taken does
	// not tell one spelling from the other.
	written := th
	if v.query != "" {
		b := append(buf[:0], tok...)
		for i, c := range b {
			if c == ' ' {
				b[i] = '+'
			}
		}
		written = sha256.Sum256(b)
	}
	// A token sent in Authorization comes as "Bearer <token>" (RFC 6750), the scheme's
	// name in any case: the token after it is compared too, so that the secret is the
	// token the provider shows, not a value to be spelled with the prefix (which, as
	// the whole value, still verifies).
	if v.canonical == authorizationHeader && len(tok) > len(bearerPrefix) && strings.EqualFold(tok[:len(bearerPrefix)], bearerPrefix) {
		written = sha256.Sum256(append(buf[:0], tok[len(bearerPrefix):]...))
	}
	match := 0
	for i := range v.tokens {
		match |= subtle.ConstantTimeCompare(th[:], v.tokens[i][:]) | subtle.ConstantTimeCompare(written[:], v.tokens[i][:])
	}
	if match != 1 {
		return errToken
	}
	return nil
}

func (v *tokenVerifier) Sign(h http.Header, q url.Values, _ []byte, _ time.Time) error {
	if v.query != "" {
		if q == nil {
			return errors.New("sign: nil url.Values for token_query")
		}
		q.Set(v.query, v.signToken)
		return nil
	}
	if h == nil {
		return errNilHeader
	}
	h.Set(v.canonical, v.signToken)
	return nil
}
