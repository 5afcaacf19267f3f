// Package sqlite keeps hookdedup's state in one SQLite file: claims, deliveries, dispatch
// attempts, users, API tokens, the audit log and settings, as the types of package
// storage. Its behaviour is pinned by the engine-neutral suite storage/enginetest, which
// speaks of claims and deliveries; the tests of this package cover what only SQLite has.
//
// # Connections
//
// Open makes three pools on one file, each with its pragmas in the DSN (a PRAGMA sent
// through Exec would reach one pooled connection only): one connection that writes, with
// BEGIN IMMEDIATE; readers, for the console and the API; and one connection of the
// checkpointer's (see checkpoint.go). Migrations are the numbered .sql files under
// migrations/, embedded, each applied in its own transaction and recorded.
//
// # Group commit
//
// Record queues a delivery for the writer goroutine, which commits whatever is queued in
// one transaction: a few multi-row statements for the claims and the deliveries of the
// whole batch, then one commit and, under synchronous=FULL, one fsync shared by all of
// them. Each Record returns only after the commit that holds its rows. Under load a batch
// holds twenty-odd deliveries and takes about 2 ms, over half of it the commit; a lone
// delivery commits at once, and pays a commit of its own (~320 µs under FULL, ~130 µs
// under NORMAL).
//
// Each new event writes about 3 pages of WAL: its row, and a leaf each of two indexes
// keyed by the provider's random event id, the claims' UNIQUE(source, key), which the
// contract rests on, and the deliveries' (source, key), which finds every delivery of a
// key. A redelivery identical to its first delivery writes neither: its claim is held,
// and it stores its body as a reference to that delivery, through which the indexes of
// keys and bookings find it (migration 0020); half duplicates average about 1.9 pages a
// delivery. With millions of keys those leaves are scattered through a multi-gigabyte file,
// and reading them and writing them back is what costs a third of the throughput at 5 M
// keys. Intake is bound by CPU, not by flushes: under load synchronous=NORMAL gains
// nothing measurable over FULL.
//
// # Reads at scale
//
// Listings page by keyset (an id to go on before) and never count rows. A filter that no
// index answers (property, status, accepted) looks at ScanWindow rows per page at most,
// and says so (Partial), so a page costs the same whatever the table's size. Partial
// indexes hold the keys still owed downstream (claims_unsettled) and the released ones,
// so that the stuck-keys count and the keys page never read every claim.
package sqlite
