package provider

import "time"

const day = 24 * time.Hour

// tokenHeader is the header hookdedup's presets ask senders to send a
// shared token in, where the sender lets its user choose the header.
const tokenHeader = "X-Webhook-Token"

// channexBookingEvents are Channex's events that report a booking revision
// itself, as an event_id qualifier's values.
const channexBookingEvents = "booking|booking_new|booking_modification|booking_cancellation"

// presets is the table, sorted by Name (Lookup searches it; a test keeps
// it sorted).
var presets = []Preset{
	{
		Name:      "adyen",
		Title:     "Adyen",
		Signature: "adyen",
		// All four are fields Adyen signs, so a forged item cannot take
		// another item's key. success is in the key so that a failed and a
		// later successful report of one pspReference and eventCode are not
		// collapsed; a redelivery repeats it.
		KeyFields:        []string{"/merchantAccountCode", "/pspReference", "/eventCode", "/success"},
		Batch:            "/notificationItems",
		Item:             "/NotificationRequestItem",
		PropertyField:    "/merchantAccountCode",
		BookingField:     "/merchantReference",
		StatusField:      "/eventCode",
		AmountField:      []string{"/amount/value"},
		CurrencyField:    "/amount/currency",
		AmountMinorUnits: true,
		// Adyen's currency table: Chilean pesos and Icelandic krónur in hundredths,
		// Cape Verde escudos and Indonesian rupiah whole, where ISO 4217 says otherwise
		// (Adyen's libraries' getDecimalPlaces agree).
		CurrencyExponents: map[string]int{"CLP": 2, "ISK": 2, "CVE": 0, "IDR": 0},
		// A second refund (or capture …) of one order for the same amount, under
		// another pspReference. success is in it, as in the key: a shopper's second
		// attempt at a payment Adyen refused is a new pspReference for the same order
		// and amount, and the one that takes the money.
		BusinessKey: []string{"/merchantAccountCode", "/merchantReference", "/eventCode", "/amount/value", "/amount/currency", "/success"},
		// A request Adyen refused (success false: a refused payment, a refund or
		// capture request that failed) and a refund or capture the card scheme
		// rejected afterwards (REFUND_FAILED and CAPTURE_FAILED, success true: the
		// notification was processed) report an amount that never moved.
		NoMoney:    []string{"/success = false", "/eventCode = REFUND_FAILED|CAPTURE_FAILED"},
		TTL:        35 * day,
		Redelivery: 30 * day,
		Answer:     AnswerAccepted,
		Docs: []string{
			"https://docs.adyen.com/development-resources/webhooks/secure-webhooks/verify-hmac-signatures",
			"https://github.com/Adyen/adyen-java-api-library/blob/main/src/main/java/com/adyen/util/HMACValidator.java",
			"https://docs.adyen.com/development-resources/webhooks/webhook-types",
			"https://docs.adyen.com/development-resources/webhooks/handle-webhook-events",
			"https://docs.adyen.com/development-resources/webhooks/troubleshoot",
			"https://docs.adyen.com/development-resources/currency-codes",
			"https://github.com/Adyen/adyen-java-api-library/blob/main/src/main/java/com/adyen/util/Util.java",
		},
		Note: "Each notification item is checked against its own HMAC (additionalData.hmacSignature; " +
			"the secret is the hex HMAC key from the Customer Area) and keyed on merchant account, " +
			"pspReference, eventCode and success, all fields Adyen signs. Adyen retries for up to 30 days; " +
			"the ttl is 35 days. Amounts are in minor units. The Basic auth Adyen can add is not checked.",
	},
	{
		Name:      "apaleo",
		Title:     "apaleo",
		Signature: "token",
		// apaleo documents id only as "the webhook internal id"; combined
		// with the event's own fields, no two events share a key whatever
		// that id turns out to be.
		KeyFields:     []string{"/id", "/topic", "/type", "/propertyId", "/data/entityId", "/timestamp"},
		TokenQuery:    "token",
		PropertyField: "/propertyId",
		StatusField:   "/type",
		TTL:           7 * day,
		Answer:        AnswerJSON,
		Docs: []string{
			"https://apaleo.dev/guides/webhook/webhooks-payload.html",
			"https://apaleo.dev/guides/webhook/configuration",
		},
		Note: "apaleo's events name the changed entity (data.entityId) and carry an id apaleo documents only " +
			"as \"the webhook internal id\"; the key combines it with topic, type, property, entity and the " +
			"event's timestamp, so a later change of the same entity is a new event. apaleo signs nothing: " +
			"the token goes in the URL. apaleo does not document how long it retries; the ttl is 7 days.",
	},
	{
		Name:      "beds24",
		Title:     "Beds24",
		Signature: "token",
		// The inventory webhook's whole body.
		KeyFields:     []string{"/ownerId", "/propId", "/roomId", "/action"},
		TokenHeader:   tokenHeader,
		PropertyField: "/propId",
		StatusField:   "/action",
		TTL:           5 * time.Minute,
		Redelivery:    30 * time.Minute,
		Thin:          true,
		Answer:        AnswerJSON,
		Docs: []string{
			"https://wiki.beds24.com/index.php/Inventory_Webhooks",
			"https://wiki.beds24.com/index.php/Category:Webhooks",
		},
		Note: "For Beds24's inventory webhook, whose body only names a room to sync: no event id, no time. " +
			"The key is the whole body and the ttl is 5 minutes, although Beds24 retries for 30: a second " +
			"change of one room within the ttl shows as a duplicate, and a longer ttl would hide routine " +
			"changes to catch rare retries. The token goes in the webhook's Custom Header field. " +
			"Beds24's booking webhook (version 1) is not JSON and is not covered.",
	},
	{
		Name:        "channex",
		Title:       "Channex",
		Signature:   "token",
		TokenHeader: tokenHeader,
		// Only the booking family shares the revision's id: the unmapped room and rate
		// events and non_acked_booking name the same revision, yet each reports
		// something else about it (non_acked_booking that the first hand-off went
		// wrong), so they fall back to the key fields, which hold /event.
		EventID: []string{
			"/payload/revision_id when /event = " + channexBookingEvents,
			"/payload/booking_revision_id when /event = " + channexBookingEvents,
		},
		KeyFields:     []string{"/event", "/property_id", "/timestamp", "/payload"},
		PropertyField: "/property_id",
		BookingField:  "/payload/booking_id",
		StatusField:   "",
		TTL:           7 * day,
		// Eleven attempts after a 5xx, the last close to 24 hours after the event.
		Redelivery: 24 * time.Hour,
		Answer:     AnswerJSON,
		Docs: []string{
			"https://docs.channex.io/api-v.1-documentation/webhook-collection",
		},
		Note: "Booking events (booking, booking_new, booking_modification, booking_cancellation) are keyed on " +
			"their booking revision's id, one per revision, read from payload.revision_id (booking) or " +
			"payload.booking_revision_id (the others), so a \"booking\" and a \"booking_new\" webhook for one " +
			"revision count once; other events (the unmapped room and rate events, non_acked_booking, ari, " +
			"message, …) on event, property, timestamp and payload, so an alert about a revision is never taken " +
			"for its booking webhook. The token goes in a header set in the webhook's headers field. " +
			"Channex retries a webhook answered with a 5xx status, eleven times over about 24 hours, and no " +
			"other answer (a refusal with 401 or 422 is not retried); the ttl is 7 days.",
	},
	{
		Name:          "cloudbeds",
		Title:         "Cloudbeds",
		Signature:     "token",
		TokenQuery:    "token",
		KeyFields:     []string{"/event", "/propertyID", "/reservationID", "/status", "/timestamp"},
		PropertyField: "/propertyID",
		BookingField:  "/reservationID",
		StatusField:   "/status",
		// One reservation reaching one status twice: a re-sent cancellation.
		BusinessKey: []string{"/event", "/propertyID", "/reservationID", "/status"},
		TTL:         7 * day,
		Answer:      AnswerJSON,
		Docs: []string{
			"https://developers.cloudbeds.com/docs/webhooks-1",
		},
		Note: "Cloudbeds' events carry no event id: the key is event, property, reservation, status and the " +
			"event's timestamp, so a later change of the same reservation is a new event. The payload field " +
			"names could not be checked against a sample in Cloudbeds' own pages: check them with " +
			"`hookdedup key` on a first real delivery. The token goes in the URL. Cloudbeds does not document " +
			"its retries; the ttl is 7 days.",
	},
	{
		Name:        "github",
		Title:       "GitHub",
		Signature:   "github",
		EventID:     []string{"header:X-GitHub-Delivery"},
		StatusField: "/action",
		TTL:         8 * day,
		Redelivery:  3 * day,
		Answer:      AnswerJSON,
		FormEncoded: true,
		Docs: []string{
			"https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries",
			"https://docs.github.com/en/webhooks/using-webhooks/best-practices-for-using-webhooks",
			"https://docs.github.com/en/webhooks/testing-and-troubleshooting-webhooks/redelivering-webhooks",
			"https://docs.github.com/en/webhooks/using-webhooks/handling-failed-webhook-deliveries",
			"https://docs.github.com/en/marketplace/listing-on-github-marketplace/configuring-the-github-marketplace-webhook",
		},
		Note: "Keyed on X-GitHub-Delivery, which a redelivery keeps. GitHub does not retry by itself; a " +
			"delivery can be redelivered by hand for 3 days (7 on GitHub Enterprise Server), so the ttl is " +
			"8 days. Both content types work: application/json, and application/x-www-form-urlencoded with " +
			"the JSON in payload=.",
	},
	{
		Name:      "guesty",
		Title:     "Guesty",
		Signature: "standard-webhooks",
		EventID:   []string{"header:webhook-id"},
		TTL:       7 * day,
		Answer:    AnswerJSON,
		Docs: []string{
			"https://open-api-docs.guesty.com/docs/webhooks",
			"https://docs.svix.com/receiving/verifying-payloads/how-manual",
			"https://docs.svix.com/retries",
		},
		Note: "Assumes Standard Webhooks (Svix) signing and keys on the message id, which stays the same " +
			"across retries; Guesty's own page on signature verification could not be read to confirm it. " +
			"A wrong guess shows as 401 answers, never as unchecked deliveries. The ttl (7 days) is well " +
			"beyond Svix's retry schedule of about 28 hours.",
	},
	{
		Name:       "mews",
		Title:      "Mews",
		Signature:  "token",
		TokenQuery: "token",
		// Discriminator and Value are all an event has: the whole event.
		KeyFields:   []string{"/Discriminator", "/Value"},
		Batch:       "/Events",
		StatusField: "/Discriminator",
		TTL:         5 * time.Minute,
		Thin:        true,
		Answer:      AnswerJSON,
		// An Integration Webhook (Action and Data, no Events), which Mews may send to
		// the same URL, is refused, and carries the property's Connector API token.
		RedactFields: []string{"/Data/AccessToken"},
		Docs: []string{
			"https://docs.mews.com/connector-api/events/wh-general",
			"https://docs.mews.com/connector-api/events/wh-integration",
			"https://docs.mews.com/connector-api/events/wh-faq",
		},
		Note: "Mews' General Webhooks batch events in Events, each only a type and an entity id: a redelivery " +
			"and a later change of the same entity look alike. Each event is keyed on its Discriminator and " +
			"Value with a 5-minute ttl, so a change after that is a new event; Mews documents its retries " +
			"only as \"after a few minutes\". Mews adds a shared token to the URL.",
	},
	{
		Name:          "shopify",
		Title:         "Shopify",
		Signature:     "shopify",
		EventID:       []string{"header:X-Shopify-Webhook-Id"},
		AmountField:   []string{"/total_price"},
		CurrencyField: "/currency",
		// No business key: Shopify sends one webhook per subscribed topic with the
		// resource as its body, so orders/create, orders/paid and orders/updated of one
		// order share every body field, and only the X-Shopify-Topic header tells them
		// apart. Any body fields would flag (or, with business_key_blocks, drop) the
		// second topic's webhook of every order.
		TTL:        48 * time.Hour,
		Redelivery: 4 * time.Hour,
		Answer:     AnswerJSON,
		Docs: []string{
			"https://shopify.dev/docs/apps/build/webhooks/verify-deliveries",
			"https://shopify.dev/docs/apps/build/webhooks/ignore-duplicates",
			"https://shopify.dev/changelog/updates-to-webhook-retry-mechanism",
		},
		Note: "Keyed on X-Shopify-Webhook-Id, one per delivery and kept by its retries. Shopify's duplicates " +
			"guide also names X-Shopify-Event-Id, shared by the webhooks of several subscriptions to one " +
			"event: set event_id to \"header:X-Shopify-Event-Id\" to count those once. Shopify retries 8 times " +
			"over 4 hours; the ttl is 48 hours. Order amounts (total_price) are decimal strings in major units. " +
			"No business key: the webhooks of different topics for one order carry the same body.",
	},
	{
		Name:        "stripe",
		Title:       "Stripe",
		Signature:   "stripe",
		EventID:     []string{"/id"},
		StatusField: "/type",
		// charge.refunded carries the Charge, whose amount is what was charged. The refund
		// the event reports is the newest of the charge's refunds list, first in it, which
		// API versions before 2022-11-15 include; later ones leave the list out, and only
		// amount_refunded (all refunds of the charge so far) is left. Every other object
		// with money (a Refund, a Dispute, a PaymentIntent, a Charge of another event)
		// holds it in amount.
		AmountField: []string{
			"/data/object/refunds/data/0/amount when /type = charge.refunded",
			"/data/object/amount_refunded when /type = charge.refunded",
			"/data/object/amount",
		},
		CurrencyField:    "/data/object/currency",
		AmountMinorUnits: true,
		// Stripe keeps ISK a two-decimal currency in its API (100 is one króna),
		// where ISO 4217 has no minor unit, and counts MGA among its zero-decimal
		// currencies (100 is a hundred ariary), where ISO 4217 gives it two decimals.
		CurrencyExponents: map[string]int{"ISK": 2, "MGA": 0},
		// Two refunds (or disputes) of one charge for one amount under different
		// event ids; other objects carry no charge field, so get no business key. The
		// object's status is in it: a refund or dispute is reported again, under the
		// same type, each time its status moves (pending, succeeded; won, lost).
		BusinessKey: []string{"/type", "/data/object/charge", "/data/object/amount", "/data/object/currency", "/data/object/status"},
		// A Refund, Charge or Payout that failed or was canceled, whatever event
		// reports it (refund.failed, charge.refund.updated, charge.failed), moved no
		// money; nor did a PaymentIntent whose payment failed, which goes back to
		// requires_payment_method.
		NoMoney: []string{
			"/data/object/status = failed|canceled",
			"/type = refund.failed|charge.failed|payment_intent.payment_failed|payment_intent.canceled",
		},
		TTL:        7 * day,
		Redelivery: 3 * day,
		Answer:     AnswerJSON,
		Docs: []string{
			"https://docs.stripe.com/webhooks",
			"https://docs.stripe.com/webhooks/process-undelivered-events",
			"https://docs.stripe.com/currencies",
			"https://docs.stripe.com/api/refunds/object",
		},
		Note: "Keyed on the event id (/id); Stripe-Signature is checked with its timestamp. Stripe retries for " +
			"up to 3 days in live mode; the ttl is 7 days. Amounts are in the currency's smallest unit, read " +
			"from data.object.amount, or for charge.refunded from the newest of the charge's refunds where the " +
			"event lists them (API versions before 2022-11-15), else from its amount_refunded (everything " +
			"refunded of it so far, where amount is what was charged); " +
			"Stripe writes currency codes in lower case, and its currencies page lists currencies with " +
			"rules of their own.",
	},
}
