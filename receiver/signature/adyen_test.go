package signature_test

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver/signature"
)

// Adyen's published HMAC test vectors, from Adyen's own libraries. Each was
// also recomputed independently (Python hmac over the signing string with
// the hex-decoded key) before it was written down here.
type adyenTestVector struct {
	name, from string
	key        string
	item       string // the NotificationRequestItem, without its signature
	signed     string // what Adyen signs
	signature  string
}

var adyenVectors = []adyenTestVector{
	{
		// Adyen's worked example: the key, signing string and signature its Ruby
		// library's tests check, the item as its webhook examples write it.
		name: "WorkedExample",
		from: "Adyen/adyen-ruby-api-library spec/utils/hmac_validator_spec.rb",
		key:  "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056",
		item: `{"amount": {"value": 1130, "currency": "EUR"}, "pspReference": "7914073381342284",
			"eventCode": "AUTHORISATION", "eventDate": "2019-05-06T17:15:34.121+02:00",
			"merchantAccountCode": "TestMerchant", "operations": ["CANCEL", "CAPTURE", "REFUND"],
			"merchantReference": "TestPayment-1407325143704", "paymentMethod": "visa", "success": "true"}`,
		signed:    "7914073381342284::TestMerchant:TestPayment-1407325143704:1130:EUR:AUTHORISATION:true",
		signature: "coqCmt/IZ4E3CzPvMY8zTjQVL5hYJUiBRg8UU+iCWo0=",
	},
	{
		name: "Authorisation",
		from: "Adyen/adyen-php-api-library tests/Adyen/Util/HmacSignatureTest.php, testNotificationRequestItemHmac",
		key:  "DFB1EB5485895CFA84146406857104ABB4CBCABDC8AAF103A624C8F6A3EAAB00",
		item: `{"pspReference": "7914073381342284", "merchantAccountCode": "TestMerchant",
			"merchantReference": "TestPayment-1407325143704", "amount": {"value": 1130, "currency": "EUR"},
			"eventCode": "AUTHORISATION", "success": "true"}`,
		signed:    "7914073381342284::TestMerchant:TestPayment-1407325143704:1130:EUR:AUTHORISATION:true",
		signature: "Ny9gS2veKo5E4w8/OL6xz1/wvT/hYkAXy1xNc/QvO4I=",
	},
	{
		name: "RefundOfZero",
		from: "Adyen/adyen-php-api-library tests/Adyen/Util/HmacSignatureTest.php, testHmacSignatureForRefundWithZeroValue",
		key:  "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056",
		item: `{"pspReference": "7914073381342284", "merchantAccountCode": "TestMerchant",
			"merchantReference": "TestPayment-1407325143704", "amount": {"value": 0, "currency": "EUR"},
			"eventCode": "REFUND", "success": "true"}`,
		signed:    "7914073381342284::TestMerchant:TestPayment-1407325143704:0:EUR:REFUND:true",
		signature: "J7HhsgZo5KwqdB7LFZJV6rfQgp+RqC2kuYyw/3x3w+8=",
	},
	{
		// Colons and backslashes inside a field are signed as they are.
		name: "ColonsNotEscaped",
		from: "Adyen/adyen-java-api-library src/test/resources/mocks/hmac-validation-webhook.json, " +
			"used by HMACValidatorTest.testValidateHMACWithoutEscaping",
		key: "74F490DD33F7327BAECC88B2947C011FC02D014A473AAA33A8EC93E4DC069174",
		item: `{"additionalData": {"authCode": "052095", "cardSummary": "1111"},
			"amount": {"currency": "EUR", "value": 1000}, "eventCode": "AUTHORISATION",
			"eventDate": "2023-01-10T13:42:29+01:00", "merchantAccountCode": "AntoniStroinski",
			"merchantReference": "\\:/\\/slashes are fun", "operations": ["CANCEL", "CAPTURE", "REFUND"],
			"paymentMethod": "visa", "pspReference": "ZVWN7D3WSMK2WN82", "reason": "052095:1111:03/2030",
			"success": "true"}`,
		signed:    `ZVWN7D3WSMK2WN82::AntoniStroinski:\:/\/slashes are fun:1000:EUR:AUTHORISATION:true`,
		signature: "CZErGCNQaSsxbaQfZaJlakqo7KPP+mIa8a+wx3yNs9A=",
	},
	{
		// amount.value written as a string, as this Java test's payload does.
		name: "ValueAsString",
		from: "Adyen/adyen-java-api-library src/test/java/com/adyen/util/HMACValidatorTest.java, testValidateHMAC",
		key:  "9064450A8892A093D9E97EFCC9639DE31B74F3A7803135555A3C96F5A57915D6",
		item: `{"amount": {"currency": "EUR", "value": "0"}, "eventCode": "REPORT_AVAILABLE",
			"eventDate": "2019-11-20T14:35:36+01:00", "merchantAccountCode": "Magento2Rik",
			"merchantReference": "testMerchantRef1", "pspReference": "test_REPORT_AVAILABLE",
			"reason": "will contain the url to the report", "success": "true"}`,
		signed:    "test_REPORT_AVAILABLE::Magento2Rik:testMerchantRef1:0:EUR:REPORT_AVAILABLE:true",
		signature: "NuEkADFmlCC6VgX+wcoPAegIWxVPNBPCuKlM4Hzo5qc=",
	},
	{
		name: "EveryField",
		from: "Adyen/adyen-go-api-library src/hmacvalidator/hmacvalidator_test.go, Test_Hmacvalidator",
		key:  "DFB1EB5485895CFA84146406857104ABB4CBCABDC8AAF103A624C8F6A3EAAB00",
		item: `{"amount": {"currency": "EUR", "value": 1000}, "eventCode": "EVENT",
			"eventDate": "1970-01-01T00:00:00Z", "merchantAccountCode": "merchantAccount",
			"merchantReference": "reference", "originalReference": "originalReference",
			"paymentMethod": "VISA", "pspReference": "pspReference", "reason": "reason", "success": "true"}`,
		signed:    "pspReference:originalReference:merchantAccount:reference:1000:EUR:EVENT:true",
		signature: "ipnxGCaUZ4l8TUW75a71/ghd2Fe5ffvX0pV4TLTntIc=",
	},
}

// withSignature adds additionalData.hmacSignature to an item written as in
// adyenVectors (whose additionalData, when present, comes first).
func withSignature(item, sig string) string {
	if strings.HasPrefix(item, `{"additionalData": {`) {
		return strings.Replace(item, `{"additionalData": {`, `{"additionalData": {"hmacSignature": "`+sig+`", `, 1)
	}
	return strings.Replace(item, "{", `{"additionalData": {"hmacSignature": "`+sig+`"}, `, 1)
}

func notification(items ...string) []byte {
	wrapped := make([]string, len(items))
	for i, it := range items {
		wrapped[i] = `{"NotificationRequestItem": ` + it + `}`
	}
	return []byte(`{"live": "false", "notificationItems": [` + strings.Join(wrapped, ", ") + `]}`)
}

func mustAdyen(t *testing.T, keys ...string) *signature.AdyenHMAC {
	t.Helper()
	a, err := signature.NewAdyenHMAC(keys)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestAdyenHMAC_PublishedVectors(t *testing.T) {
	for _, v := range adyenVectors {
		t.Run(v.name, func(t *testing.T) {
			signed := withSignature(v.item, v.signature)
			got, err := signature.AdyenSigningString([]byte(signed))
			if err != nil || got != v.signed {
				t.Fatalf("signing string = %q, %v\n                want %q (%s)", got, err, v.signed, v.from)
			}
			a := mustAdyen(t, v.key)
			if err := a.VerifyItem([]byte(signed)); err != nil {
				t.Fatalf("VerifyItem of the vector from %s: %v", v.from, err)
			}
			// Adyen shows keys in upper case; lower case is the same key.
			if err := mustAdyen(t, strings.ToLower(v.key)).VerifyItem([]byte(signed)); err != nil {
				t.Errorf("lower-case key: %v", err)
			}

			// The scheme, on a whole notification body.
			vf := mustVerifier(t, signature.Config{Scheme: "adyen", Secrets: []string{v.key}})
			if err := vf.Verify(http.Header{}, url.Values{}, notification(signed), time.Now()); err != nil {
				t.Errorf("Verify(notification): %v", err)
			}

			// Sign produces what Adyen sent.
			resigned, err := a.SignItem([]byte(v.item))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(resigned), `"hmacSignature":"`+v.signature+`"`) {
				t.Errorf("SignItem = %s, want hmacSignature %s", resigned, v.signature)
			}
		})
	}
}

func TestAdyenHMAC_Tampered(t *testing.T) {
	v := adyenVectors[0]
	a := mustAdyen(t, v.key)
	signed := withSignature(v.item, v.signature)
	for _, tc := range []struct{ name, from, to string }{
		{"Amount", `"value": 1130`, `"value": 11300`},
		{"AmountSpelledAsString", `"value": 1130`, `"value": "1131"`},
		{"Currency", `"currency": "EUR"`, `"currency": "USD"`},
		{"PSPReference", `"7914073381342284"`, `"7914073381342285"`},
		{"EventCode", `"AUTHORISATION"`, `"REFUND"`},
		{"Success", `"success": "true"`, `"success": "false"`},
		{"OriginalReferenceAdded", `"success": "true"`, `"success": "true", "originalReference": "X"`},
		// A case variant is another member: it must not stand in for the
		// signed one (the key is derived from pspReference as spelled).
		{"CaseVariantDoesNotCount", `"pspReference": "7914073381342284"`,
			`"pspReference": "forged", "PSPREFERENCE": "7914073381342284"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tampered := strings.Replace(signed, tc.from, tc.to, 1)
			if tampered == signed {
				t.Fatalf("%q not found in the item", tc.from)
			}
			err := a.VerifyItem([]byte(tampered))
			if err == nil || !strings.Contains(err.Error(), "does not match any secret") {
				t.Errorf("VerifyItem(tampered) = %v, want a mismatch", err)
			}
		})
	}
	// What Adyen does not sign is not checked: the scheme says so
	// (Integrity false).
	unsigned := strings.Replace(signed, `"success": "true"`, `"success": "true", "reason": "changed"`, 1)
	if err := a.VerifyItem([]byte(unsigned)); err != nil {
		t.Errorf("a change outside the signed fields: %v", err)
	}
}

// TestAdyenHMAC_ColonMovedAcrossFields: Adyen joins the signed fields with colons and
// escapes none, so text moved across a colon is signed alike. Moved out of
// merchantReference into merchantAccountCode (which the key is derived from), the
// signature still matches: such an item is refused, while the colon in the merchant's
// own reference, as Adyen sent it, is accepted.
func TestAdyenHMAC_ColonMovedAcrossFields(t *testing.T) {
	i := slices.IndexFunc(adyenVectors, func(x adyenTestVector) bool { return x.name == "ColonsNotEscaped" })
	v := adyenVectors[i]
	a := mustAdyen(t, v.key)
	signed := withSignature(v.item, v.signature)
	if err := a.VerifyItem([]byte(signed)); err != nil {
		t.Fatalf("the item as Adyen signed it: %v", err)
	}
	moved := strings.Replace(signed, `"merchantAccountCode": "AntoniStroinski"`, `"merchantAccountCode": "AntoniStroinski:\\"`, 1)
	moved = strings.Replace(moved, `"merchantReference": "\\:/\\/slashes are fun"`, `"merchantReference": "/\\/slashes are fun"`, 1)
	if got, err := signature.AdyenSigningString([]byte(moved)); err != nil || got != v.signed {
		t.Fatalf("the moved item signs as %q (%v); want the same string as the item, %q", got, err, v.signed)
	}
	err := a.VerifyItem([]byte(moved))
	if err == nil || !strings.Contains(err.Error(), "merchantAccountCode holds a colon") {
		t.Errorf("VerifyItem(colon moved into merchantAccountCode) = %v, want a refusal naming the field", err)
	}
	// Moved the other way, into the fields after it: merchantReference "ORD:12", 100 EUR,
	// AUTHORISATION, "true" signs as merchantReference "ORD", value 12, currency "100",
	// eventCode "EUR" and success "AUTHORISATION:true" do.
	tail := withSignature(`{"merchantAccountCode": "M", "merchantReference": "ORD", "pspReference": "P",
		"amount": {"value": 12, "currency": "100"}, "eventCode": "EUR", "success": "AUTHORISATION:true"}`, "c2lnbmF0dXJl")
	if got, err := signature.AdyenSigningString([]byte(tail)); err != nil || got != "P::M:ORD:12:100:EUR:AUTHORISATION:true" {
		t.Fatalf("the item moved towards the end signs as %q (%v)", got, err)
	}
	if err := a.VerifyItem([]byte(tail)); err == nil || !strings.Contains(err.Error(), "success holds a colon") {
		t.Errorf("VerifyItem(colon moved into success) = %v, want a refusal naming it", err)
	}
	for _, field := range []string{"pspReference", "eventCode"} {
		item := strings.Replace(signed, `"`+field+`": "`, `"`+field+`": "x:`, 1)
		if err := a.VerifyItem([]byte(item)); err == nil || !strings.Contains(err.Error(), field+" holds a colon") {
			t.Errorf("VerifyItem(colon in %s) = %v, want a refusal naming it", field, err)
		}
	}
}

func TestAdyenHMAC_Rotation(t *testing.T) {
	v := adyenVectors[0]
	other := strings.Repeat("0123456789ABCDEF", 4)
	signed := []byte(withSignature(v.item, v.signature))
	if err := mustAdyen(t, other, v.key).VerifyItem(signed); err != nil {
		t.Errorf("signed with the second of two keys: %v", err)
	}
	if err := mustAdyen(t, other).VerifyItem(signed); err == nil {
		t.Error("a key that signed nothing accepted the item")
	}
	// Sign uses the first key.
	resigned, err := mustAdyen(t, other, v.key).SignItem([]byte(v.item))
	if err != nil {
		t.Fatal(err)
	}
	if err := mustAdyen(t, v.key).VerifyItem(resigned); err == nil {
		t.Error("SignItem used the second key")
	}
	if err := mustAdyen(t, other).VerifyItem(resigned); err != nil {
		t.Errorf("SignItem with the first key: %v", err)
	}
}

func TestNewAdyenHMAC_BadKeys(t *testing.T) {
	const good = "DFB1EB5485895CFA84146406857104ABB4CBCABDC8AAF103A624C8F6A3EAAB00"
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" // a Standard Webhooks secret pasted by mistake
	for _, tc := range []struct {
		name string
		keys []string
		want string
	}{
		{"NotHex", []string{secret}, "secret #1 is not hexadecimal: an Adyen HMAC key is 64 digits 0-9 and A-F"},
		{"SecondNotHex", []string{good, good[:62] + "ZZ"}, "secret #2 is not hexadecimal"},
		{"OddLength", []string{good[:63]}, "secret #1 has an odd number of characters"},
		{"Empty", []string{""}, "secret is required"},
		{"None", nil, "secret is required"},
		{"TrailingNewline", []string{good + "\n"}, "secret #1 has leading or trailing whitespace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := signature.NewAdyenHMAC(tc.keys)
			if a != nil {
				t.Error("got an AdyenHMAC along with the error")
			}
			checkErr(t, err, tc.want, secret, good)
			// The scheme reports the same error.
			_, err = signature.New(signature.Config{Scheme: "adyen", Secrets: tc.keys})
			checkErr(t, err, tc.want, secret, good)
		})
	}
}

func TestAdyenHMAC_MalformedItems(t *testing.T) {
	v := adyenVectors[0]
	a := mustAdyen(t, v.key)
	for _, tc := range []struct{ name, item, want string }{
		{"NoSignature", v.item, "missing additionalData.hmacSignature (turn on HMAC signing"},
		{"EmptySignature", withSignature(v.item, ""), "missing additionalData.hmacSignature"},
		{"SignatureNotBase64", withSignature(v.item, "not*base64"), "additionalData.hmacSignature is not a base64 HMAC-SHA256"},
		{"SignatureTooShort", withSignature(v.item, "Ny9gS2veKo5E4w8="), "additionalData.hmacSignature is not a base64 HMAC-SHA256"},
		{"SignatureNotString", strings.Replace(v.item, "{", `{"additionalData": {"hmacSignature": 42}, `, 1),
			"additionalData.hmacSignature is a JSON number, want a string"},
		{"NotJSON", `{"pspReference": `, "NotificationRequestItem is not a valid JSON object"},
		{"NotObject", `["pspReference"]`, "NotificationRequestItem is not a valid JSON object"},
		{"Empty", ``, "NotificationRequestItem is missing"},
		{"RepeatedMember", strings.Replace(v.item, "{", `{"pspReference": "1", `, 1), "NotificationRequestItem is not a valid JSON object"},
		{"PSPReferenceNumber", strings.Replace(v.item, `"7914073381342284"`, `7914073381342284`, 1),
			"pspReference is a JSON number, want a string"},
		{"EventCodeObject", strings.Replace(v.item, `"AUTHORISATION"`, `{}`, 1), "eventCode is a JSON object, want a string"},
		{"AmountFraction", strings.Replace(v.item, `1130`, `11.30`, 1), `amount.value "11.30" is not a whole number of minor units`},
		{"AmountExponent", strings.Replace(v.item, `1130`, `1.13e3`, 1), "is not a whole number of minor units"},
		{"AmountTooLarge", strings.Replace(v.item, `1130`, `99999999999999999999`, 1), "is not a whole number of minor units"},
		{"AmountValueBoolean", strings.Replace(v.item, `1130`, `true`, 1), "amount.value is a JSON boolean, want a whole number of minor units"},
		{"AmountNotObject", strings.Replace(v.item, `{"value": 1130, "currency": "EUR"}`, `1130`, 1), "amount is not a JSON object"},
		{"SuccessNumber", strings.Replace(v.item, `"success": "true"`, `"success": 1`, 1), "success is a JSON number, want a string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := a.VerifyItem([]byte(tc.item))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("VerifyItem = %v\nwant an error containing %q", err, tc.want)
			}
		})
	}
}

// Absent fields sign as empty strings, so items that differ only there agree
// with Adyen's libraries.
func TestAdyenSigningString_AbsentAndTyped(t *testing.T) {
	for _, tc := range []struct{ item, want string }{
		// Adyen/adyen-java-api-library HMACValidatorTest.testValidateHMACMissingOptionalField.
		{`{"eventCode": "REPORT_AVAILABLE", "merchantAccountCode": "Magento2Rik",
			"merchantReference": "testMerchantRef1", "pspReference": "test_REPORT_AVAILABLE", "success": "true"}`,
			"test_REPORT_AVAILABLE::Magento2Rik:testMerchantRef1:::REPORT_AVAILABLE:true"},
		{`{"pspReference": null, "amount": null, "success": "false"}`, ":::::::false"},
		{`{"amount": {"value": -5, "currency": null}, "success": "true"}`, "::::-5:::true"},
		{`{"amount": {"value": "007"}}`, "::::7:::"},
		{`{}`, ":::::::"},
	} {
		got, err := signature.AdyenSigningString([]byte(tc.item))
		if err != nil || got != tc.want {
			t.Errorf("AdyenSigningString(%s) = %q, %v; want %q", tc.item, got, err, tc.want)
		}
	}
}

// Adyen sends success as text; a boolean, which signs the same text but keys
// differently, is refused rather than let a replay pass as a new event.
func TestAdyenSigningString_BooleanSuccessRefused(t *testing.T) {
	for _, item := range []string{`{"success": true}`, `{"success": false}`} {
		if got, err := signature.AdyenSigningString([]byte(item)); err == nil || !strings.Contains(err.Error(), "success") {
			t.Errorf("AdyenSigningString(%s) = %q, %v; want an error naming success", item, got, err)
		}
	}
}

func TestAdyenHMAC_Notification(t *testing.T) {
	v := adyenVectors[0]
	a := mustAdyen(t, v.key)
	good := withSignature(v.item, v.signature)
	bad := strings.Replace(good, `"value": 1130`, `"value": 1`, 1)
	unsigned := v.item

	if err := a.VerifyNotification(notification(good, good, good)); err != nil {
		t.Errorf("three good items: %v", err)
	}
	tooMany := make([]string, 1001)
	for i := range tooMany {
		tooMany[i] = good
	}
	for _, tc := range []struct {
		name string
		body []byte
		want string
	}{
		{"ThirdTampered", notification(good, good, bad), "notificationItems[2]: additionalData.hmacSignature does not match any secret"},
		{"FirstUnsigned", notification(unsigned, good), "notificationItems[0]: missing additionalData.hmacSignature"},
		{"Empty", notification(), "notificationItems is empty"},
		{"NoItems", []byte(`{"live": "false"}`), "body has no notificationItems"},
		{"ItemsNotArray", []byte(`{"notificationItems": {}}`), "notificationItems is not an array"},
		{"NoWrapper", []byte(`{"notificationItems": [` + good + `]}`), "notificationItems[0] has no NotificationRequestItem"},
		{"NotJSON", []byte(`notificationItems`), "body is not an Adyen notification"},
		{"TooMany", notification(tooMany...), "notificationItems has 1001 items, more than 1000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := a.VerifyNotification(tc.body)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("VerifyNotification = %v\nwant an error containing %q", err, tc.want)
			}
		})
	}
}

func TestAdyenHMAC_SignNotification(t *testing.T) {
	a := mustAdyen(t, adyenVectors[0].key)
	items := make([]string, 3)
	for i := range items {
		items[i] = fmt.Sprintf(`{"pspReference": "PSP%d", "merchantAccountCode": "HotelBerlin",
			"amount": {"value": %d, "currency": "EUR"}, "eventCode": "REFUND", "success": "true",
			"additionalData": {"bookingId": "B-%d"}}`, i, 1000*i, i)
	}
	signed, err := a.SignNotification(notification(items...))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.VerifyNotification(signed); err != nil {
		t.Fatalf("VerifyNotification(SignNotification(...)) = %v\n%s", err, signed)
	}
	for _, want := range []string{`"live":"false"`, `"bookingId":"B-2"`, `"pspReference":"PSP1"`} {
		if !strings.Contains(string(signed), want) {
			t.Errorf("signed body lost %s: %s", want, signed)
		}
	}
	if _, err := a.SignNotification([]byte(`{"notificationItems": 1}`)); err == nil {
		t.Error("SignNotification of a body without items = nil error")
	}
}

func TestAdyenVerifier(t *testing.T) {
	v := mustVerifier(t, signature.Config{Scheme: "adyen", Secrets: []string{adyenVectors[0].key}})
	if v.Scheme() != "adyen" || v.Timestamped() || v.Integrity() || v.DefaultEventID() != "" {
		t.Errorf("got (%q, timestamped %v, integrity %v, event id %q), want (adyen, false, false, \"\")",
			v.Scheme(), v.Timestamped(), v.Integrity(), v.DefaultEventID())
	}
	// The signature is in the body, which Sign cannot change: it says so
	// instead of sending an unsigned delivery.
	err := v.Sign(http.Header{}, url.Values{}, []byte(`{}`), time.Now())
	if err == nil || !strings.Contains(err.Error(), "SignNotification") {
		t.Errorf("Sign = %v, want an error pointing at SignNotification", err)
	}
}
