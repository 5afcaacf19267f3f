// Package signature checks that a webhook delivery comes from the provider it claims
// to come from, and signs deliveries the way those providers do (for the demo and for
// tests). [New] turns one source's [Config] into a [Verifier]; the intake handler calls
// its Verify on every delivery before it parses anything, and answers 401 with the
// error's text, which never carries a secret or an expected signature.
//
// The schemes differ in what a passing check proves:
//
//   - Timestamped schemes sign a timestamp along with the body: standard-webhooks
//     (HMAC-SHA256 over "id.timestamp.body", as Svix and the Standard Webhooks
//     libraries send it) and stripe (HMAC-SHA256 over "timestamp.body"). A pass proves
//     the sender holds the secret, the body is intact, and the delivery was signed
//     within the tolerance (5 minutes unless configured): a delivery captured and
//     replayed after that is refused, even once its idempotency key has expired.
//   - Body schemes sign the body alone: github (X-Hub-Signature-256), shopify
//     (X-Shopify-Hmac-Sha256) and the generic hmac-sha256, whose header, encoding and
//     prefix the config names. A pass proves the sender and an intact body, but nothing
//     about when it was signed, so a captured delivery can be replayed at any time; the
//     dedup window is then the only defence, and such sources want a long TTL.
//   - Credential schemes compare a shared secret the provider sends as it is:
//     basic-auth (the secret is the password of a fixed user) and token (in a header
//     or a query parameter). A pass proves the sender only: the body is not covered
//     and nothing is time-bound. Many hotel systems offer nothing stronger.
//   - adyen checks the HMAC that Adyen's notification webhooks carry inside
//     each item of the body (additionalData.hmacSignature), over eight of the
//     item's fields; a body passes only if every item does. A pass proves the
//     sender and the signed fields (references, event code, amount, success),
//     not the rest of the body, and nothing about when it was signed.
//   - none proves nothing and accepts every delivery; a source must name it explicitly.
//
// Every scheme but none takes one or more secrets; a delivery passes if any of them
// matches, so a secret can be rotated without refusing deliveries signed with the old
// one in the meantime. Sign always uses the first.
//
// Comparisons of signatures and credentials run in constant time (hmac.Equal,
// subtle.ConstantTimeCompare), because a comparison that stops at the first differing
// byte tells a caller, through its answer time, how much of a forged value was right;
// repeated, that recovers a valid signature or token byte by byte. Credentials are
// compared as SHA-256 digests, so the comparison also hides a secret's length. Header
// sizes and the number of signatures per header are bounded: all of it is read, and each
// signature may cost an HMAC, before the caller is authenticated.
//
// A Verifier is safe for concurrent use, and Verify does not allocate on the path of an
// authentic delivery: it reuses pooled, pre-keyed HMAC states.
package signature
