package signature

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Adyen's standard notification webhooks carry no signature header. Each
// NotificationRequestItem in the body's notificationItems array carries its
// own HMAC-SHA256, base64, in additionalData.hmacSignature, computed with
// the hex-decoded HMAC key over eight of the item's fields joined by ':':
//
//	pspReference:originalReference:merchantAccountCode:merchantReference:value:currency:eventCode:success
//
// (docs.adyen.com/development-resources/webhooks/secure-webhooks/verify-hmac-signatures,
// and HMACValidator.getDataToSign in Adyen/adyen-java-api-library). An absent
// or null field counts as the empty string; value is amount.value, the
// amount in minor units; nothing is escaped, so a ':' inside a field stays
// as it is (Adyen's own test vectors include one).

// schemeAdyen is the `signature` value of a source that receives Adyen's
// notification webhooks.
const schemeAdyen = "adyen"

// maxAdyenItems bounds the HMACs one unauthenticated request can cost.
// Adyen's JSON notifications carry one item (their documentation says so);
// the bound leaves room for batches without letting a 1 MiB body of tiny
// items buy tens of thousands of HMACs.
const maxAdyenItems = 1000

// adyenHMACField is where the signature sits inside an item, as messages
// name it.
const adyenHMACField = "additionalData.hmacSignature"

var (
	errAdyenNoSignature = errors.New("missing " + adyenHMACField +
		" (turn on HMAC signing for this webhook in Adyen's Customer Area)")
	errAdyenBadSignature = errors.New(adyenHMACField + " is not a base64 HMAC-SHA256")
	errAdyenMismatch     = errors.New(adyenHMACField + " does not match any secret")
	errAdyenSign         = errors.New("sign: adyen signs inside each notification item, " +
		"not in a header: use AdyenHMAC.SignNotification on the body")
)

// AdyenHMAC checks and produces the HMAC signatures of Adyen's notification
// webhooks. It holds one or more keys: an item verifies if any of them
// signed it, so a key can be rotated in Adyen's Customer Area while
// deliveries signed with the old one are still on their way. Sign* use the
// first key. An AdyenHMAC is safe for concurrent use.
type AdyenHMAC struct {
	keys *hmacKeys
}

// NewAdyenHMAC decodes hexKeys, the HMAC keys as Adyen's Customer Area shows
// them (64 hex digits). Errors say what is wrong with a key and identify it
// by its position (#1, #2, …), never by its value.
func NewAdyenHMAC(hexKeys []string) (*AdyenHMAC, error) {
	if err := checkSecrets(hexKeys); err != nil {
		return nil, err
	}
	keys := make([][]byte, len(hexKeys))
	for i, s := range hexKeys {
		if len(s)%2 != 0 {
			return nil, fmt.Errorf("secret #%d has an odd number of characters: "+
				"an Adyen HMAC key is hexadecimal, two digits per byte (64 digits as the Customer Area shows it)", i+1)
		}
		k, err := hex.DecodeString(s)
		if err != nil {
			return nil, fmt.Errorf("secret #%d is not hexadecimal: "+
				"an Adyen HMAC key is 64 digits 0-9 and A-F, as the Customer Area shows it", i+1)
		}
		keys[i] = k
	}
	k, err := newHMACKeys(keys)
	if err != nil {
		return nil, err
	}
	return &AdyenHMAC{keys: k}, nil
}

// VerifyItem checks one NotificationRequestItem (its JSON object, without
// the {"NotificationRequestItem": …} wrapper). It returns nil if the item's
// additionalData.hmacSignature matches one of the keys, and otherwise an
// error saying what was wrong, which never contains a key or the expected
// signature. Comparisons run in constant time.
func (a *AdyenHMAC) VerifyItem(item []byte) error {
	p, err := parseAdyenItem(item)
	if err != nil {
		return err
	}
	if p.signature == "" {
		return errAdyenNoSignature
	}
	if p.ambiguous != "" {
		return errors.New(p.ambiguous)
	}
	var sig [1]digest
	if !decodeBase64(&sig[0], p.signature, false) {
		return errAdyenBadSignature
	}
	st := a.keys.get()
	st.pre = st.pre[:0]
	ok := a.keys.match(st, []byte(p.signed), sig[:])
	a.keys.put(st)
	if !ok {
		return errAdyenMismatch
	}
	return nil
}

// VerifyNotification checks every item of a notification webhook's body
// ({"live": …, "notificationItems": [{"NotificationRequestItem": {…}}, …]}).
// A body is authentic only if all its items are: the first item that fails
// makes the whole body fail, with an error naming its index, such as
// "notificationItems[2]: additionalData.hmacSignature does not match any
// secret".
func (a *AdyenHMAC) VerifyNotification(body []byte) error {
	items, err := adyenItems(body)
	if err != nil {
		return err
	}
	for i, item := range items {
		if err := a.VerifyItem(item); err != nil {
			return fmt.Errorf("notificationItems[%d]: %w", i, err)
		}
	}
	return nil
}

// SignItem returns item with additionalData.hmacSignature set to its
// signature under the first key, as Adyen would send it. Members of the
// item come out in sorted order; the values are unchanged.
func (a *AdyenHMAC) SignItem(item []byte) ([]byte, error) {
	p, err := parseAdyenItem(item)
	if err != nil {
		return nil, err
	}
	mac := hmac.New(sha256.New, a.keys.keys[0])
	mac.Write([]byte(p.signed))
	sig := base64.StdEncoding.EncodeToString(mac.Sum(nil))

	var members map[string]jsontext.Value
	if err := json.Unmarshal(item, &members); err != nil {
		return nil, fmt.Errorf("NotificationRequestItem: %w", err)
	}
	additional := map[string]jsontext.Value{}
	if v, ok := members["additionalData"]; ok && v.Kind() != 'n' {
		if err := json.Unmarshal(v, &additional); err != nil {
			return nil, fmt.Errorf("additionalData is not an object: %w", err)
		}
	}
	additional["hmacSignature"], _ = jsontext.AppendQuote(nil, sig)
	if members["additionalData"], err = json.Marshal(additional, json.Deterministic(true)); err != nil {
		return nil, err
	}
	return json.Marshal(members, json.Deterministic(true))
}

// SignNotification returns body with every item signed by SignItem, for
// the demo and for tests. Members of each object come out in sorted order.
func (a *AdyenHMAC) SignNotification(body []byte) ([]byte, error) {
	var doc map[string]jsontext.Value
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("body is not a JSON object: %w", err)
	}
	var items []map[string]jsontext.Value
	if err := json.Unmarshal(doc["notificationItems"], &items); err != nil {
		return nil, errors.New("notificationItems is not an array of objects")
	}
	for i, wrapper := range items {
		signed, err := a.SignItem(wrapper["NotificationRequestItem"])
		if err != nil {
			return nil, fmt.Errorf("notificationItems[%d]: %w", i, err)
		}
		wrapper["NotificationRequestItem"] = signed
	}
	var err error
	if doc["notificationItems"], err = json.Marshal(items, json.Deterministic(true)); err != nil {
		return nil, err
	}
	return json.Marshal(doc, json.Deterministic(true))
}

// AdyenSigningString returns the text Adyen signs for one
// NotificationRequestItem, for explaining a delivery (`hookdedup key`) and
// for tests. It returns an error naming the field if the item is not a JSON
// object or a signed field has the wrong type.
func AdyenSigningString(item []byte) (string, error) {
	p, err := parseAdyenItem(item)
	return p.signed, err
}

// adyenItem is what verification needs from one item.
type adyenItem struct {
	signed    string // the signing string
	signature string // additionalData.hmacSignature, "" when absent
	// ambiguous says why the signature would not pin the item's key, "" when it does:
	// a signed field but merchantReference (the merchant's own text) holds
	//   - a colon. The signing string escapes nothing: "A:" then "B" signs as "A" then
	//     ":B". With merchantReference the only field that may hold one, the three
	//     fields before it and the four after it are each the text between two colons,
	//     and the string splits into its fields one way only.
	//   - U+FFFD. Every lone surrogate (a \ud83d escape) signs as that one character,
	//     as Adyen's libraries sign it (Node writes U+FFFD, Java '?'), while the key
	//     keeps each spelling apart: 2,049 spellings of one signed text.
	// Adyen's references, account codes, currencies, event codes and success ("true",
	// "false") hold neither.
	ambiguous string
}

// adyenItemJSON holds the signed members raw, so that each one's type can
// be checked and reported by name. Member names match case-sensitively and
// a repeated name is an error (the defaults of this JSON package): a lax
// parser would let "PSPREFERENCE" or a second "pspReference" decide what is
// verified while the key is derived from another value.
type adyenItemJSON struct {
	PSPReference        jsontext.Value `json:"pspReference"`
	OriginalReference   jsontext.Value `json:"originalReference"`
	MerchantAccountCode jsontext.Value `json:"merchantAccountCode"`
	MerchantReference   jsontext.Value `json:"merchantReference"`
	Amount              jsontext.Value `json:"amount"`
	EventCode           jsontext.Value `json:"eventCode"`
	Success             jsontext.Value `json:"success"`
	AdditionalData      jsontext.Value `json:"additionalData"`
}

func parseAdyenItem(item []byte) (adyenItem, error) {
	if len(item) == 0 {
		return adyenItem{}, errors.New("NotificationRequestItem is missing")
	}
	// A lone surrogate in the item's text (a shopper's name cut in the middle of an
	// emoji) reads as U+FFFD, as intake reads it in labels, rather than refusing the item.
	item = MendLoneSurrogates(bytes.Clone(item))
	var raw adyenItemJSON
	if err := json.Unmarshal(item, &raw); err != nil {
		return adyenItem{}, fmt.Errorf("NotificationRequestItem is not a valid JSON object: %w", err)
	}
	var amount struct {
		Value    jsontext.Value `json:"value"`
		Currency jsontext.Value `json:"currency"`
	}
	if !isNull(raw.Amount) {
		if err := json.Unmarshal(raw.Amount, &amount); err != nil {
			return adyenItem{}, fmt.Errorf("amount is not a JSON object: %w", err)
		}
	}
	var additional struct {
		HMACSignature jsontext.Value `json:"hmacSignature"`
	}
	if !isNull(raw.AdditionalData) {
		if err := json.Unmarshal(raw.AdditionalData, &additional); err != nil {
			return adyenItem{}, fmt.Errorf("additionalData is not a JSON object: %w", err)
		}
	}

	// The eight signed fields, in Adyen's order.
	var parts [8]string
	var err error
	for _, f := range []struct {
		dst  *string
		name string
		v    jsontext.Value
	}{
		{&parts[0], "pspReference", raw.PSPReference},
		{&parts[1], "originalReference", raw.OriginalReference},
		{&parts[2], "merchantAccountCode", raw.MerchantAccountCode},
		{&parts[3], "merchantReference", raw.MerchantReference},
		{&parts[5], "amount.currency", amount.Currency},
		{&parts[6], "eventCode", raw.EventCode},
	} {
		if *f.dst, err = adyenString(f.name, f.v); err != nil {
			return adyenItem{}, err
		}
	}
	if parts[4], err = adyenMinorUnits(amount.Value); err != nil {
		return adyenItem{}, err
	}
	if parts[7], err = adyenSuccess(raw.Success); err != nil {
		return adyenItem{}, err
	}
	sig, err := adyenString(adyenHMACField, additional.HMACSignature)
	if err != nil {
		return adyenItem{}, err
	}
	p := adyenItem{signed: strings.Join(parts[:], ":"), signature: sig}
	// amount.value is digits only (adyenMinorUnits).
	for i, name := range [...]string{"pspReference", "originalReference", "merchantAccountCode", "", "",
		"amount.currency", "eventCode", "success"} {
		if name == "" {
			continue
		}
		if strings.Contains(parts[i], ":") {
			p.ambiguous = name + " holds a colon: Adyen signs its fields joined by colons, unescaped, so text moved " +
				"across that colon would be signed alike while the item's key changed; only merchantReference may hold one"
			break
		}
		if strings.ContainsRune(parts[i], utf8.RuneError) {
			p.ambiguous = name + " holds U+FFFD or a lone surrogate: Adyen signs every lone surrogate as one character, " +
				"so the text could be spelled another way and signed alike while the item's key changed; only merchantReference may hold one"
			break
		}
	}
	return p, nil
}

func isNull(v jsontext.Value) bool { return len(v) == 0 || v.Kind() == 'n' }

// adyenString returns a signed string field, "" when absent or null, as
// Adyen's libraries do.
func adyenString(name string, v jsontext.Value) (string, error) {
	if isNull(v) {
		return "", nil
	}
	if v.Kind() != '"' {
		return "", fmt.Errorf("%s is a JSON %s, want a string", name, kindName(v.Kind()))
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	return s, nil
}

// adyenMinorUnits returns amount.value as Adyen's Java library prints it
// (a long): decimal digits with no leading zeros. A whole number in a
// string ("0", as some of Adyen's own examples write it) is read the same
// way; a fraction or an exponent is refused, because minor units are whole.
func adyenMinorUnits(v jsontext.Value) (string, error) {
	if isNull(v) {
		return "", nil
	}
	var s string
	switch v.Kind() {
	case '0':
		s = string(v)
	case '"':
		if err := json.Unmarshal(v, &s); err != nil {
			return "", fmt.Errorf("amount.value: %w", err)
		}
	default:
		return "", fmt.Errorf("amount.value is a JSON %s, want a whole number of minor units", kindName(v.Kind()))
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return "", fmt.Errorf("amount.value %.40q is not a whole number of minor units", s)
	}
	return strconv.FormatInt(n, 10), nil
}

// adyenSuccess returns success as it enters the signing string: Adyen
// sends the string "true" or "false", which is used as sent. A JSON boolean
// is refused, although it would sign the same text: keyed on success, an
// item captured once and replayed with true for "true" would pass as a new
// event.
func adyenSuccess(v jsontext.Value) (string, error) {
	return adyenString("success", v)
}

func kindName(k jsontext.Kind) string {
	switch k {
	case '"':
		return "string"
	case '0':
		return "number"
	case 't', 'f':
		return "boolean"
	case '{':
		return "object"
	case '[':
		return "array"
	}
	return "value"
}

// adyenItems returns the raw NotificationRequestItem of each element of the
// body's notificationItems.
func adyenItems(body []byte) ([]jsontext.Value, error) {
	var doc struct {
		NotificationItems jsontext.Value `json:"notificationItems"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("body is not an Adyen notification (a JSON object with notificationItems): %w", err)
	}
	if isNull(doc.NotificationItems) {
		return nil, errors.New("body has no notificationItems: is this an Adyen standard notification webhook?")
	}
	var wrappers []struct {
		Item jsontext.Value `json:"NotificationRequestItem"`
	}
	if err := json.Unmarshal(doc.NotificationItems, &wrappers); err != nil {
		return nil, errors.New(`notificationItems is not an array of {"NotificationRequestItem": {...}}`)
	}
	switch {
	case len(wrappers) == 0:
		return nil, errors.New("notificationItems is empty")
	case len(wrappers) > maxAdyenItems:
		return nil, fmt.Errorf("notificationItems has %d items, more than %d", len(wrappers), maxAdyenItems)
	}
	items := make([]jsontext.Value, len(wrappers))
	for i, w := range wrappers {
		if isNull(w.Item) {
			return nil, fmt.Errorf("notificationItems[%d] has no NotificationRequestItem", i)
		}
		items[i] = w.Item
	}
	return items, nil
}

// adyenVerifier is the `adyen` scheme: the request is authentic when every
// item of its body is. It is not Integrity: the HMAC covers the eight signed
// fields of each item (the key fields and the amount among them), not the
// rest of the body, such as additionalData or eventDate.
type adyenVerifier struct {
	a *AdyenHMAC
}

func newAdyenVerifier(secrets []string) (Verifier, error) {
	a, err := NewAdyenHMAC(secrets)
	if err != nil {
		return nil, err
	}
	return adyenVerifier{a: a}, nil
}

func (v adyenVerifier) Verify(_ http.Header, _ url.Values, body []byte, _ time.Time) error {
	return v.a.VerifyNotification(body)
}

// Sign cannot put an Adyen signature in a header: it lives in the body,
// which Sign does not change. SignNotification does that.
func (adyenVerifier) Sign(http.Header, url.Values, []byte, time.Time) error { return errAdyenSign }
func (adyenVerifier) Scheme() string                                        { return schemeAdyen }
func (adyenVerifier) Timestamped() bool                                     { return false }
func (adyenVerifier) Integrity() bool                                       { return false }
func (adyenVerifier) DefaultEventID() string                                { return "" }

// VerifyItem checks one NotificationRequestItem, as AdyenHMAC.VerifyItem does: a
// source that splits Adyen's batches into their items checks each item on its own,
// and names the one that fails.
func (v adyenVerifier) VerifyItem(item []byte) error { return v.a.VerifyItem(item) }
