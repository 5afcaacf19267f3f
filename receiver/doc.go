// Package receiver is hookdedup's intake path: it verifies each webhook delivery, derives
// its idempotency key, claims the key through storage and answers the provider only once
// the delivery is committed. It also hands accepted events downstream (Dispatcher) and
// runs the background sweeps.
//
// # Intake
//
// The handler (Receiver, routes in Register) checks a delivery in the order the README's
// intake contract gives: the source, the size (under http.MaxBytesReader), the signature
// (over the raw body, compared with hmac.Equal, before anything parses it), the JSON, the
// key. Every delivery, rejections included, goes through Store.Record, and the answer is
// written only after Record returns: a 200 always stands for committed rows, a failed
// commit is a 503. A rejection stores its body only once the source's check has passed.
// A source that takes GitHub's form content type (Source.FormEncoded) reads the event's
// JSON from the form's payload field once the signature has been checked over the form;
// the form is what is stored and forwarded. Amounts are stored in major units with their
// currency (Source.money), and the 200 is JSON or, for Adyen, the text "[accepted]".
//
// # Keys
//
// Derive makes a delivery's key from its KeySpec: the provider's event id when the source
// names one and the delivery carries it, otherwise "derived:" and the SHA-256 of the RFC
// 8785 canonical JSON of the key fields. The canonical form comes from
// go-json-experiment's jsontext: about 5 µs and 2 allocations for a 600-byte body, where
// gowebpki/jcs takes 13-16 µs and 283 allocations, which made it a third of intake's CPU.
// FuzzDerive checks that the two give the same bytes, so the keys and payload hashes of
// stored deliveries stay valid.
//
// # Dispatch
//
// The claims table is the queue: Dispatcher leases a due job, posts it to the source's
// forward_url with Idempotency-Key, and records the attempt. A lease outlasts the longest
// attempt by 10 s, so no two dispatchers hold one job, and a job whose process died is
// tried again once its lease has run out, with the same Idempotency-Key.
//
// # Cost
//
// With a store that keeps nothing, the handler (HTTP, the signature, canonical JSON, the
// key, the answer) costs about 36 µs of CPU a request, against 20 for a bare net/http
// handler that reads the body and answers JSON: that is the ceiling of `serve` on a given
// machine, and `make bench` measures it beside serve.
package receiver
