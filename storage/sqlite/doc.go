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
// them (the writer's connection hands each commit's log frames to the kernel in one
// write: walbuf.c). Each Record returns only after the commit that holds its rows. Under load a batch
// holds twenty-odd deliveries and takes about 2 ms, over half of it the commit; a lone
// delivery commits at once, and pays a commit of its own (~320 µs under FULL, ~130 µs
// under NORMAL).
//
// Each new event writes its row and a leaf of the claims' UNIQUE(source, key), keyed by
// the provider's random event id, which the contract rests on. The deliveries' own index
// of keys takes an accepted delivery only once its claim lets go of it (migration 0022),
// and a redelivery identical to its first delivery stores its body as a reference to
// that delivery, through which the indexes of keys and bookings find it (migration
// 0020). With millions of keys the claims' leaves are scattered through a multi-gigabyte
// file, and reading them and writing them back is what costs a third of the throughput
// at 5 M keys. On an empty database intake is bound by CPU more than by flushes: under load
// synchronous=NORMAL answers 1.04-1.14x what FULL does. With 1 M keys stored each
// commit's flush takes longer, and NORMAL answers 1.20-1.26x: the flush in the writer's
// path is much of what a stored size loses. Taking it off that path (a goroutine of its own
// fdatasyncing the WAL while the writer commits the next batch, each batch answered once
// flushed) cost more CPU a delivery than it saved on a 2-core VM, where each flush costs
// CPU and smaller batches mean more of them.
//
// # Reads at scale
//
// Listings page by keyset (an id to go on before) and never count rows. A filter that no
// index answers (property, status, accepted) looks at ScanWindow rows per page at most,
// and says so (Partial), so a page costs the same whatever the table's size. Partial
// indexes hold the keys still owed downstream (claims_unsettled) and the released ones,
// so that the stuck-keys count and the keys page never read every claim.
package sqlite
