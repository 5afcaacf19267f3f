package storage

import (
	"context"
	"time"
)

// Store is what an engine keeps and how: every method the receiver, the dispatcher, the
// console and the CLI call, whichever engine runs. The receiver and the console each
// declare the few methods they use; this whole contract is what cmd holds and what the
// engine-neutral tests of storage/enginetest pin. Its methods are safe for concurrent
// use. A method that writes returns an error wrapping ErrWriteTimeout when it could not
// commit in time, and nothing of it was stored.
type Store interface {
	// Clock returns the time every method takes for now (the engine's DB.Now, which
	// tests move).
	Clock() time.Time

	// Alerts and their notifications.

	// Alerts returns the alerts f selects, newest first, each with how its notifications
	// fared.
	Alerts(ctx context.Context, f AlertFilter) ([]Alert, error)

	// GetAlert returns one alert. Returns ErrNotFound if there is none with that id.
	GetAlert(ctx context.Context, id int64) (Alert, error)

	// ActiveAlerts returns every open or acknowledged alert, oldest first.
	ActiveAlerts(ctx context.Context) ([]Alert, error)

	// OpenAlert opens an alert of a.Rule on a.Subject at time at, with a notification of
	// its opening to each of a.Channels, in one transaction. When an alert of that rule and
	// subject is already active it is left as it is and returned with opened false.
	OpenAlert(ctx context.Context, a Alert, at time.Time) (_ Alert, opened bool, err error)

	// HoldAlert records that an evaluation found the condition of an active alert
	// holding at time at (Alert.HeldAt: the latest of every replica's), and what the rule
	// measured then. It sends nothing: notifications are for transitions only.
	HoldAlert(ctx context.Context, id int64, summary, value string, at time.Time) error

	// AcknowledgeAlert marks an open alert acknowledged by actor, audited in the same
	// transaction. Returns ErrNotFound for an unknown alert and ErrAlertState for one that
	// is not open.
	AcknowledgeAlert(ctx context.Context, id int64, actor string, at time.Time) (Alert, error)

	// ResolveAlert resolves an active alert, with a notification of it to each of the
	// alert's channels, in one transaction. actor "" means it resolved by itself (its
	// condition cleared); a user's resolution is audited in the same transaction. Returns
	// ErrNotFound for an unknown alert and ErrAlertState for one already resolved.
	ResolveAlert(ctx context.Context, id int64, actor string, at time.Time) (Alert, error)

	// ClearAlert resolves an active alert by itself (as ResolveAlert with actor ""), its
	// condition clear: only when no evaluation found it holding within clearFor before at
	// (Alert.HeldAt), decided in the transaction that resolves it. Returns ErrAlertHeld
	// otherwise, ErrNotFound for an unknown alert and ErrAlertState for one already
	// resolved.
	ClearAlert(ctx context.Context, id int64, clearFor time.Duration, at time.Time) (Alert, error)

	// SweepAlerts deletes at most limit alerts resolved before cutoff, with their
	// notifications, oldest first, and returns how many alerts it deleted. An alert
	// with a notification still being retried is kept until that is sent or given up
	// on. Active alerts are never deleted.
	SweepAlerts(ctx context.Context, cutoff time.Time, limit int) (int64, error)

	// LeaseNotifications returns up to limit notifications to the channels named (nil:
	// to any) due at now, oldest first, and leases them until now+lease: another sender
	// skips them until then, and one that dies mid-send loses nothing.
	LeaseNotifications(ctx context.Context, now time.Time, lease time.Duration, limit int, channels []string) ([]Notification, error)

	// GiveUpNotifications gives up, as no longer configured, the notifications still
	// pending to channels other than those named that were due before before and that
	// no sender has leased since, and returns how many. A sender leases only its own
	// channels' notifications, so that a replica not yet restarted with a new channel
	// leaves them to one that has it; one that no replica has would wait for good.
	GiveUpNotifications(ctx context.Context, channels []string, before time.Time) (int64, error)

	// FinishNotification records an attempt to send notification n (as leased) at time
	// at. Returns ErrLeaseLost, recording nothing, when n's lease ran out and another
	// sender leased it since: that one's outcome is the one recorded.
	FinishNotification(ctx context.Context, n Notification, res NotificationResult, at time.Time) error

	// NotificationCounts returns how many notifications are in each state (pending, sent,
	// failed) per channel: channel → state → count.
	NotificationCounts(ctx context.Context) (map[string]map[string]int, error)

	// MoneyMismatches returns, per source, how many duplicates received since since had an
	// amount, currency or status that differs from their first delivery's.
	MoneyMismatches(ctx context.Context, since time.Time) (map[string]int64, error)

	// OpenSuspects returns, per source, how many suspected doubles wait for a review:
	// from the running totals and the suspects after them, as SuspectCounts reads them.
	OpenSuspects(ctx context.Context) (map[string]int64, error)

	// SignatureFailures returns, per source, how many deliveries received since since were
	// refused with status (401: a bad or missing signature), stored ones and those only
	// counted (rejection_counts) together. The counted ones are taken by whole minutes,
	// from since's minute on.
	SignatureFailures(ctx context.Context, since time.Time, status int) (map[string]int64, error)

	// FailingStreaks returns, for each source in sources, how many of its latest dispatch
	// attempts failed in a row, counting at most limit.
	FailingStreaks(ctx context.Context, sources []string, limit int) (map[string]int, error)

	// The audit log.

	// AuditLog returns audit rows newest first, those with id below before (0 = from the newest).
	AuditLog(ctx context.Context, before int64, limit int) ([]AuditEntry, error)

	// AuditRows calls fn with every row of the audit log, oldest first, all read in one
	// snapshot (rows appended meanwhile are not included). It stops at fn's first error and
	// returns it.
	AuditRows(ctx context.Context, fn func(AuditEntry) error) error

	// AppendAudit writes one audit row in a transaction of its own (At, when zero, is now):
	// for an action that changes nothing in the database, such as a revealed secret.
	AppendAudit(ctx context.Context, e AuditEntry) error

	// The audit log's hash chain.

	// VerifyAudit checks the whole audit chain, from the genesis, in one read snapshot, and
	// that it passes through anchor unless anchor.Hash is empty. A break comes back in the
	// AuditCheck, not as an error; the error is for a check that could not be made.
	VerifyAudit(ctx context.Context, anchor AuditAnchor) (AuditCheck, error)

	// AuditChain reports the state of the audit chain for the console, checking only what
	// the calls before it have not: each call goes on from the last row found to chain (held
	// in memory, from the genesis at start), after making sure that row still has the hash
	// it was checked with, and checks auditCheckBatch rows at most (More then says rows are
	// left for the next call). A change to the rows below that mark that leaves the mark's
	// own hash alone (a row edited, its hash kept) shows only to VerifyAudit, or after a
	// restart; an anchor check of the mark's row catches every rewrite of the chain up to it.
	AuditChain(ctx context.Context) (AuditCheck, error)

	// Bulk actions by filter, previewed and approved.

	// CreateBulkPreview finds the keys req's filter matches, leaves out those the action
	// cannot act on (counted by reason), and stores the action as a preview with its keys,
	// their money per currency and whether a reprocess will need approval. Nothing is
	// released until Start. Returns ErrTooManyKeys past MaxBulkKeys; a bad kind, filter or
	// reason is an error that names it.
	CreateBulkPreview(ctx context.Context, req BulkRequest) (BulkAction, error)

	// BulkAction returns the bulk action with id. Returns ErrNotFound if there is none.
	BulkAction(ctx context.Context, id int64) (BulkAction, error)

	// BulkActions returns up to limit bulk actions with an id below before (0: from the
	// newest), newest first: those in state, or all of them when state is "". The last
	// one's id is the before of the next page.
	BulkActions(ctx context.Context, state string, before int64, limit int) ([]BulkAction, error)

	// CountBulkActions returns how many bulk actions are in state, or how many there are
	// when state is "".
	CountBulkActions(ctx context.Context, state string) (int, error)

	// BulkKeys returns the first limit keys of a bulk action, in the preview's order, with
	// their outcomes so far.
	BulkKeys(ctx context.Context, id int64, limit int) ([]BulkKey, error)

	// BulkSample returns the keys a preview shows.
	BulkSample(ctx context.Context, id int64) ([]BulkKey, error)

	// BulkSources returns the sources of a bulk action's keys, each once, sorted.
	BulkSources(ctx context.Context, id int64) ([]string, error)

	// StartBulkAction starts a preview on behalf of its requester (ErrNotRequester for
	// anyone else): a reprocess whose money is above a threshold, together with what
	// the requester reprocessed without approval within ReprocessWindow, waits for approval
	// (pending_approval), anything else is queued for the runner (and, a reprocess
	// under t, counts as reprocessed). Audited. Returns an *ActorGoneError when actor is
	// no longer an operator (made a viewer, or removed), read in the start's own
	// transaction.
	StartBulkAction(ctx context.Context, id int64, actor string, t ApprovalThresholds) (BulkAction, error)

	// ReprocessedBy is the money actor reprocessed without a second operator's approval
	// within ReprocessWindow, per currency: the keys reprocessed one by one or as a set
	// under thresholds, and the bulk reprocesses started under them, each amount without
	// its sign (Keys counts the reprocesses: a key, a set or a bulk action each as one
	// in each of its currencies). A reprocess above the thresholds is one above them
	// together with this.
	ReprocessedBy(ctx context.Context, actor string) ([]MoneyTotal, error)

	// ApproveBulkAction approves an action waiting for approval, which is then queued;
	// RefuseBulkAction refuses it for good. Either is audited with its reason (required),
	// and returns ErrSelfApproval when actor requested the action, and an
	// *ActorGoneError when actor is no longer an operator (made a viewer, or removed).
	// ApproveBulkAction returns a *RequesterGoneError when the requester is no longer an
	// operator. Both roles are read in the decision's own transaction.
	ApproveBulkAction(ctx context.Context, id int64, actor, reason string) (BulkAction, error)

	// RefuseBulkAction refuses an action waiting for approval: see ApproveBulkAction.
	RefuseBulkAction(ctx context.Context, id int64, actor, reason string) (BulkAction, error)

	// CancelBulkAction cancels an action: at once when it has not begun to run, else the
	// runner stops before its next batch (the keys done by then stay done). Any operator
	// may cancel; it is audited. ErrBulkState for an action that is over, and an
	// *ActorGoneError when actor is no longer an operator, read in the cancel's own
	// transaction.
	CancelBulkAction(ctx context.Context, id int64, actor, reason string) (BulkAction, error)

	// ClaimBulkAction takes the oldest action ready to run for runner, until now+lease:
	// a queued one, or a running one whose runner's lease ran out (it stopped, or the
	// process did: the action resumes from its first key without an outcome). Two runners
	// never hold one action: the claim is one write transaction, and each batch checks it.
	// ok is false when none is ready.
	ClaimBulkAction(ctx context.Context, runner string, lease time.Duration) (id int64, ok bool, err error)

	// RunBulkBatch acts on up to n keys of action id that have no outcome yet, in one
	// transaction that writes each key's release and audit row (actor: the requester;
	// reason: the action's, naming it) and its outcome together, then renews runner's lease.
	// A key whose claim changed since the preview (another state, re-claimed) is skipped;
	// one whose claim is gone, expired and swept, is released (its trace and business
	// keys forgotten) or refused as releasing or reprocessing it alone would be. A cancel
	// asked for is honoured before any key; with no key left the action is done.
	RunBulkBatch(ctx context.Context, id int64, runner string, stuckBefore time.Time, n int, lease time.Duration) (BulkBatch, error)

	// The runner of bulk actions.

	// RunBulkActions runs bulk actions until ctx ends: it claims each ready action
	// (ClaimBulkAction) and works through its keys a batch at a time (RunBulkBatch),
	// honouring a cancel between batches. It is safe to run in several processes on one
	// database: an action is held by one runner at a time.
	RunBulkActions(ctx context.Context, cfg BulkRunConfig)

	// Dispatch: the queue of accepted events and their attempts.

	// LeaseDue returns up to limit jobs of sources (nil: of every source; empty: none) due
	// at now, oldest first, and leases them until now+lease: another dispatcher, in this
	// process or another, skips them until then. A dispatcher that dies mid-attempt loses
	// nothing: its jobs fall due again when the lease ends.
	LeaseDue(ctx context.Context, now time.Time, lease time.Duration, limit int, sources []string) ([]Job, error)

	// LeaseFirstDue is LeaseDue of sources (none when nil or empty) that takes at most
	// one job of each source, its oldest due: a dispatcher owes each source a worker,
	// and leases the sources owed one together without handing one of them another's.
	LeaseFirstDue(ctx context.Context, now time.Time, lease time.Duration, limit int, sources []string) ([]Job, error)

	// NextDue returns when the earliest processing key of sources (nil: of every source;
	// empty: none) falls due, or the zero time if none.
	NextDue(ctx context.Context, sources []string) (time.Time, error)

	// DispatcherSeen records that the dispatcher id runs at now and hands the sources
	// forwarding downstream, and forgets the dispatchers not seen for DispatcherForgetAfter.
	DispatcherSeen(ctx context.Context, id string, forwarding []string, now time.Time) error

	// ForwardedSources returns the sources that a dispatcher seen at since or later hands
	// downstream.
	ForwardedSources(ctx context.Context, since time.Time) ([]string, error)

	// UnknownMigrations returns the migrations the database records that this build
	// does not have, in order (none: nil): a newer version's serve migrated it since
	// this one opened it (NewerSchemaError says so).
	UnknownMigrations(ctx context.Context) ([]string, error)

	// FinishAttempt records an attempt of job and moves its key on as res says, in one
	// transaction. A key that was released, reprocessed, claimed anew or leased again
	// meanwhile is left as it is (its attempt is still recorded). Reports whether the key
	// moved.
	FinishAttempt(ctx context.Context, job Job, a Attempt, res AttemptResult) (bool, error)

	// YieldLease gives job's lease back unused, nothing handed off: the key falls due
	// at once, and the next lease lists no interrupted attempt for it. A key leased
	// again, settled, released, reprocessed or claimed anew meanwhile is left as it is.
	// Reports whether the lease was given back.
	YieldLease(ctx context.Context, job Job) (bool, error)

	// Attempts returns the attempts made for one source's key, oldest first.
	Attempts(ctx context.Context, source, key string) ([]Attempt, error)

	// LastAttempt returns the latest dispatch attempt of one source's key. Returns
	// ErrNotFound if none was made.
	LastAttempt(ctx context.Context, source, key string) (Attempt, error)

	// Deliveries, listed and read.

	// Deliveries returns one page of the deliveries that match f, newest first. It stays fast
	// at millions of deliveries: each page is found through one index, and a page whose
	// filters need a look at each row examines at most ScanWindow rows (Partial then says
	// so, and Next goes on from where it stopped).
	Deliveries(ctx context.Context, f DeliveryFilter) (DeliveryPage, error)

	// EachDelivery calls fn for every delivery that matches f (ignoring f.Limit), newest
	// first, a page at a time, and stops at fn's first error, which it returns.
	EachDelivery(ctx context.Context, f DeliveryFilter, fn func(Delivery) error) error

	// RecentDuplicates returns up to limit duplicates that carried an amount, received at or
	// after since, newest first: the refunds and cancellations caught.
	RecentDuplicates(ctx context.Context, since time.Time, limit int) ([]Delivery, error)

	// Forensic keys: traces, business keys, correlation.

	// SweepTraces deletes at most limit traces of keys that expired before cutoff (now
	// less the remember period), oldest first, and returns how many it deleted.
	SweepTraces(ctx context.Context, cutoff time.Time, limit int) (int64, error)

	// SweepBusinessKeys deletes at most limit business keys seen before cutoff (now less
	// the longest business window), oldest first, and returns how many it deleted. A key
	// older than its own source's window is never matched (the lookup bounds it too); the
	// sweep only keeps the table small.
	SweepBusinessKeys(ctx context.Context, cutoff time.Time, limit int) (int64, error)

	// SweepCorrelationKeys deletes at most limit correlation keys seen before cutoff (now
	// less the longest correlation window), oldest first, and returns how many it deleted.
	SweepCorrelationKeys(ctx context.Context, cutoff time.Time, limit int) (int64, error)

	// WouldFlag returns the suspects a delivery described by p would be flagged as, were it
	// accepted at p.Now, without writing anything: a business key seen within the window
	// under another key, a correlation through another source, a trace of its expired key
	// (or an expired claim it would take over). Each has Kind, Other, OtherSource, Rule and
	// FirstSeen set.
	WouldFlag(ctx context.Context, p Probe) ([]Suspect, error)

	// FlagsOf returns the forensic flags of delivery id. Returns ErrNotFound if there is no
	// such delivery.
	FlagsOf(ctx context.Context, id int64) (DeliveryFlags, error)

	// Keys (claims) by state.

	// Keys returns one page of the keys matching f, in ListKeys' order, for the console and
	// the API. It stays fast at millions of keys: a listing that has to check each claim (a
	// source's keys, the processed ones) looks at most at ScanWindow of them, newest first,
	// and says so in Partial. ListKeys, for bulk releases and the command line, is exhaustive.
	Keys(ctx context.Context, f KeyFilter) (KeyPage, error)

	// ListKeys returns every claim matching f, up to f.Limit. Stuck keys come oldest first
	// (the longest stuck on top); other listings newest first.
	ListKeys(ctx context.Context, f KeyFilter) ([]Claim, error)

	// StuckCounts counts the stuck keys of each source that has any.
	StuckCounts(ctx context.Context, stuckBefore time.Time) (map[string]int, error)

	// The ledger of money caught and at risk.

	// Ledger returns the money caught and at risk that f selects, per day, source,
	// property and currency, and its totals per currency. It reads, in one snapshot, the
	// daily totals that RollupLedger keeps, the duplicates not folded in yet (up to
	// statsTail of them) and the suspects through their index of flag times. Its cost
	// grows with the rows it returns (days, properties, currencies) and the suspects, not
	// with the deliveries: the totals are summed by the database from ledger_totals, and with
	// f.Limit only the first rows are read.
	Ledger(ctx context.Context, f LedgerFilter) (Ledger, error)

	// RollupLedger folds up to limit duplicates not yet counted into the daily totals that
	// Ledger reads, and reports how many it folded (fewer than limit: it has caught up).
	// It reads them through the index of duplicates and rejections, on a read connection,
	// and writes only the few totals they make; like RollupStats, concurrent calls are
	// safe: the mark moves only from where the counting started.
	RollupLedger(ctx context.Context, limit int) (int, error)

	// Deliveries and claims of one key.

	// Delivery returns the delivery with the given id. Returns ErrNotFound if there is none.
	Delivery(ctx context.Context, id int64) (Delivery, error)

	// KeyDeliveries returns every stored delivery of one source's key, oldest first.
	KeyDeliveries(ctx context.Context, source, key string) ([]Delivery, error)

	// FirstKeyDeliveries returns the first limit stored deliveries of one source's key,
	// oldest first (all of them when limit < 0), and whether the key has more. A key can
	// gather any number of deliveries (a provider that sends one event id for everything, a
	// key field that few values share): pages that show a key must not load them all.
	FirstKeyDeliveries(ctx context.Context, source, key string, limit int) ([]Delivery, bool, error)

	// Claim returns the claim row of one source's key, expired or not. Returns ErrNotFound
	// if the key was never claimed or its row was swept.
	Claim(ctx context.Context, source, key string) (Claim, error)

	// BatchDeliveries returns the item deliveries of one batched request (batch is the id
	// of its first item's delivery), in the request's order, without their headers and
	// bodies, as listings read them. A request holds at most a bounded number of items (the
	// receiver's max_batch_items), so they are read whole. Returns ErrNotFound if none is
	// stored.
	BatchDeliveries(ctx context.Context, batch int64) ([]Delivery, error)

	// BatchEnvelopes returns the batch envelope of each of the deliveries ids (a page's
	// worth) that has one, by delivery id, as Delivery reads it (its own, or its first
	// item's), its text only when it is max bytes or fewer: an export reads its rows' in
	// one query a stretch, and an envelope may be nearly as large as max_body, once for
	// each of a thousand items.
	BatchEnvelopes(ctx context.Context, ids []int64, max int) (map[int64]EnvelopeText, error)

	// Intake: claims and deliveries, group-committed.

	// Record stores d and, unless d is a rejection, claims its key: the delivery is Accepted
	// when it wins the claim (no row, an expired row or a released row for its source and
	// key) and Duplicate otherwise. On success d.ID, d.Outcome, d.FirstDelivery and
	// d.Mismatch are set, and the delivery and claim are committed. d.Status is stored as
	// given: it is the status the caller will answer, which is the caller's to decide. Concurrent calls share
	// one transaction and one fsync (group commit); each returns only after the commit that
	// holds its rows. An error means nothing of d was stored where it will be found: nothing
	// at all, or (ErrFileGone) a commit into a database file that left its path meanwhile.
	//
	// Record waits at most the busy timeout (Options.BusyTimeout) from its call, whatever
	// else waits on the database (another process's lock, the write connection's other
	// users, earlier batches): if d was not yet being written by then, it returns
	// ErrWriteTimeout and d is never written. Once d's transaction holds the lock, Record
	// waits for its commit, a matter of milliseconds.
	Record(ctx context.Context, d *Delivery, claim ClaimOptions) error

	// RecordBatch stores the items of one request that carried several events, each as a
	// delivery of its own with its own key, claimed in order, as Record does one. All of
	// them commit in one transaction, or none: on success every item's ID, Outcome,
	// FirstDelivery and Mismatch are set, and Batch (the id of the first item's delivery)
	// and BatchIndex (its place in items) are stored with it; on error nothing of any item
	// was stored where it will be found. Two items of one key: the first claims it, the
	// second is its duplicate. Rejections cannot be recorded this way: a refused request
	// is one rejected delivery (Record).
	RecordBatch(ctx context.Context, items []*Delivery, claim ClaimOptions) error

	// Rejections counted, not stored.

	// AddRejectionCounts adds counts to the rejections counted without a delivery row, and
	// to the dashboard's hourly totals of rejected deliveries (DeliveryStats), in one
	// transaction: the dashboard then shows every rejection, stored or only counted. The
	// totals count unknown names (StatusUnknownSource) together, under UnknownSources.
	AddRejectionCounts(ctx context.Context, counts []RejectionCount) error

	// RejectionsNotStored returns how many rejections that f would list were counted
	// without being stored individually. Such a rejection has a source, a status and a
	// minute, nothing else: a filter on any other field (an outcome other than rejected, a
	// key, a booking, a property, an event status, mismatches) matches none of them. From
	// and To select whole minutes: a minute counts when it starts at or after From's
	// minute and before To. The cursor (Before) is ignored: the count belongs to the
	// filter, not to a page.
	RejectionsNotStored(ctx context.Context, f DeliveryFilter) (int64, error)

	// SweepRejectionCounts deletes at most limit counts of minutes before cutoff, oldest
	// first, and returns how many it deleted. The dashboard's hourly totals keep them.
	SweepRejectionCounts(ctx context.Context, cutoff time.Time, limit int) (int64, error)

	// Release and reprocess, audited.

	// ReleaseKey releases (or reprocesses) one key and writes the audit row in the same
	// transaction. Returns ErrNotFound for an unknown key, ErrBusy for a key in flight and
	// ErrPayloadGone for a reprocess whose payload is no longer stored (RefusalOf names
	// the refusal each stands for); a release without a reason is an error.
	// Releasing a key that is already free changes nothing and reports Changed false.
	ReleaseKey(ctx context.Context, r Release) (Released, error)

	// ReleaseKeys releases (or reprocesses) every key matching f, at most
	// MaxKeysPerRelease, each with its own audit row as ReleaseKey does, committed
	// releaseBatch keys at a time. A key refused (in flight, gone meanwhile) gets its
	// Refused reason and the others go on; a failed transaction ends the call with its
	// error, and the outcomes committed before it. r's Source and Key are ignored; a
	// release without a reason is an error. It stops early only if ctx ends.
	ReleaseKeys(ctx context.Context, f KeyFilter, r Release) ([]KeyOutcome, error)

	// ReleaseEach releases (or reprocesses) each of keys as ReleaseKeys does: one outcome
	// per key, in order, committed releaseBatch keys at a time. r's Source and Key are
	// ignored; a release without a reason is an error.
	ReleaseEach(ctx context.Context, keys []KeyRef, r Release) ([]KeyOutcome, error)

	// Suspects and their review.

	// Suspects returns one page of the suspects that match f, newest first. Suspects are
	// few next to deliveries (a flag is a rare event), so a page is found by their id
	// and a look at each row.
	Suspects(ctx context.Context, f SuspectFilter) (SuspectPage, error)

	// Suspect returns the suspect with the given id. Returns ErrNotFound if there is none.
	Suspect(ctx context.Context, id int64) (Suspect, error)

	// DeliveriesKept reports which of the deliveries ids are still stored (retention
	// sweeps deliveries; the suspects naming them stay), each one kept as true.
	DeliveriesKept(ctx context.Context, ids []int64) (map[int64]bool, error)

	// SuspectsOf returns the suspects that name any of the deliveries ids, flagged or as
	// the other one, by delivery id (a suspect naming two of them is under both): the
	// flags of a page of the events list, in one query.
	SuspectsOf(ctx context.Context, ids []int64) (map[int64][]Suspect, error)

	// SuspectCounts counts every suspect by kind, state and currency, with their amounts
	// summed exactly per currency (the money at stake), ordered by kind, state and
	// currency (no currency last). It reads, in one snapshot, the running totals that
	// RollupSuspects keeps and the suspects flagged since it last ran, so its figures are
	// exact at every moment and its cost does not grow with the suspects; a sum that no
	// int64 holds counts every suspect of its row as unsummed.
	SuspectCounts(ctx context.Context) ([]SuspectCount, error)

	// RollupSuspects folds up to limit suspects not yet counted into the running totals
	// that SuspectCounts and OpenSuspects read, and reports how many it folded (fewer
	// than limit: it has caught up, or on PostgreSQL the rest are not final yet). A
	// database from before the totals has every suspect to fold, a stretch per call; the
	// counts are exact meanwhile, only slower. Concurrent calls, on one replica or
	// several, and concurrent reviews are safe: each suspect is counted once, in the
	// state it has.
	RollupSuspects(ctx context.Context, limit int) (int, error)

	// ReviewSuspect records an operator's verdict on a suspect: state SuspectConfirmed (a
	// double) or SuspectDismissed (not a double), with a reason, required, and writes the
	// audit row in the same transaction. A suspect already reviewed may be reviewed again
	// (the audit row keeps its previous state). A suspect already folded into the running
	// totals is moved from its old state's to its new one's in that transaction too.
	// Returns ErrNotFound for an unknown id and an error wrapping ErrInvalidReview for
	// another state or an empty reason; it returns the suspect as reviewed.
	ReviewSuspect(ctx context.Context, id int64, actor, state, reason string) (Suspect, error)
	// ReviewSuspectFrom is ReviewSuspect of a suspect its reviewer saw in state from: one
	// that another review moved to another state meanwhile is left as it is, and the
	// error wraps ErrReviewedMeanwhile, with the suspect as it is returned, so that a
	// second operator acting on a stale page does not overturn the first one's verdict
	// unknowingly. from "" is ReviewSuspect.
	ReviewSuspectFrom(ctx context.Context, id int64, actor, from, state, reason string) (Suspect, error)

	// Console sessions.

	// CreateSession starts a console session for u at now and returns its id: a random
	// secret for the session cookie, of which only the SHA-256 is kept. The session is
	// created only while u still has the password hash u.PasswordHash, so a password changed
	// since it was checked cannot gain a session. Returns ErrNotFound if u was removed or its
	// password changed meanwhile.
	CreateSession(ctx context.Context, u User, now time.Time) (string, error)

	// SessionByID returns the session with that id and its user. Returns ErrNotFound for an
	// unknown or ended session. One primary-key look-up: it runs on every console request.
	SessionByID(ctx context.Context, id string) (Session, error)

	// TouchSession records a request of the session with that id at at (its idle time starts
	// again). Callers touch a session once a minute at most: it is a write.
	TouchSession(ctx context.Context, id string, at time.Time) error

	// EndSession ends the session with that id (signing out, or a session found expired).
	// Ending a session that is already gone is not an error.
	EndSession(ctx context.Context, id string) error

	// EndIdleSessions deletes the sessions not seen since seenBefore, and returns how many:
	// those whose browser never came back to be told.
	EndIdleSessions(ctx context.Context, seenBefore time.Time) (int64, error)

	// EndUserSessions ends every session of the named user and writes the audit row, by
	// actor, in the same transaction. Returns how many sessions ended, and ErrNotFound for
	// an unknown user.
	EndUserSessions(ctx context.Context, name, actor string) (int64, error)

	// Statistics per source over time.

	// RollupStats folds up to limit deliveries not yet counted into the hourly totals that
	// DeliveryStats reads, and reports how many it folded (fewer than limit: it has caught
	// up). It then folds up to limit duplicates into the ledger's daily totals
	// (RollupLedger), which keep a mark of their own: a database from before the ledger
	// has its past duplicates counted there too, a stretch per call.
	RollupStats(ctx context.Context, limit int) (int, error)

	// DeliveryStats returns the deliveries received in [from, to) per source, outcome,
	// currency and period of step (a whole number of hours), oldest first. Periods start at from. It
	// reads the hourly totals that RollupStats keeps, and counts the deliveries received
	// since it last ran (up to statsTail of them) as it reads, in the same snapshot: its
	// figures are current, it writes nothing, and its cost does not grow with the
	// deliveries. The rejections of names that no source has come under UnknownSources.
	DeliveryStats(ctx context.Context, from, to time.Time, step time.Duration) ([]StatBucket, error)

	// The database itself.

	// Close waits for queued writes to commit, then closes the database cleanly. Closing
	// again does nothing and returns what the first Close returned.
	Close() error

	// Ping reports whether the database can commit a write now (readiness). Returns an
	// error wrapping ErrFileGone once an engine's file is not the open one.
	Ping(ctx context.Context) error

	// Expiry and retention sweeps.

	// SweepExpired deletes at most limit claims that expired at or before now, through the
	// index of the claims it may delete (claims_expiring), and returns how many it deleted.
	// Keys still owed downstream are kept, however long expired: a key being handed
	// downstream (processing), whose work must not be lost, and a key whose hand-off failed
	// (failed), which stays on the stuck list, with its payload (sqlOwed), until an operator
	// releases or reprocesses it, or a redelivery takes it over. Expiry never waits for the
	// sweep (a claim takes over an expired row itself); the sweep only keeps the table small.
	SweepExpired(ctx context.Context, now time.Time, limit int) (int64, error)

	// SweepDeliveries looks at up to limit deliveries, oldest first from after from, and
	// deletes those received before cutoff whose payload is not owed downstream at now
	// (see sqlOwed). It returns how many it deleted and the cursor to go on from; Done on
	// that cursor means that the walk has looked at every delivery received before cutoff.
	//
	// The walk goes by id, from a cursor, and steps over the owed deliveries: with many
	// keys left unsettled by a downstream outage, a batch that looked for the oldest
	// deliveries to delete would read them all again each time. It ends at the newest
	// delivery received before cutoff: ids grow with receipt times, so the deliveries
	// before it were received before cutoff too (received_at is checked all the same).
	SweepDeliveries(ctx context.Context, now, cutoff time.Time, from SweepCursor, limit int) (int64, SweepCursor, error)

	// NewestReceivedAt returns the receipt time of the newest delivery stored (by id),
	// zero when there is none: the retention sweep's reference, at a start, for a clock
	// that was stepped far forward while the server was down.
	NewestReceivedAt(ctx context.Context) (time.Time, error)

	// Login throttling.

	// LoginAttempt reserves a password check against scopes at now. When none of them has
	// to wait, it counts the attempt as a failure of each, before the password is checked,
	// and returns zero: concurrent attempts are counted one after the other, so a burst of
	// them cannot all pass while the first is being checked. A right password takes the
	// count back with LoginSucceeded. When a scope has to wait, it counts nothing and returns
	// until when the longest wait lasts. A scope whose last failure is older than its
	// policy's Forget starts counting again. A scope is stored by its ThrottleKey, never
	// as given.
	LoginAttempt(ctx context.Context, now time.Time, scopes map[string]Throttle) (time.Time, error)

	// LoginSucceeded takes back the attempt LoginAttempt counted, the password being right:
	// the scope clear forgets its failures, and each scope in keep has this one attempt
	// taken off its count (an address keeps the failures it made for other names).
	LoginSucceeded(ctx context.Context, clear string, keep ...string) error

	// RememberDevice keeps id as the sign-in throttle's device cookie of a browser the
	// named user signed in from at at, by its DeviceKey alone (the cookie keys are in
	// the settings: a cookie is believed only for an id kept here), and forgets the
	// devices not signed in from since forgetBefore. A user removed keeps none.
	RememberDevice(ctx context.Context, name, id string, at, forgetBefore time.Time) error
	// KnownDevice reports whether RememberDevice kept id for the named user at since or
	// later.
	KnownDevice(ctx context.Context, name, id string, since time.Time) (bool, error)

	// API tokens.

	// CreateToken makes a bearer token for the named user and returns it with its metadata,
	// and writes the audit row, by actor, in the same transaction. The token is returned
	// once: only its SHA-256 is kept. Returns ErrNotFound for an unknown user.
	CreateToken(ctx context.Context, userName, name, actor string) (string, Token, error)

	// TokenUser returns the user a valid (unrevoked) token belongs to. Returns ErrNotFound
	// for an unknown or revoked token.
	TokenUser(ctx context.Context, token string) (User, error)

	// RevokeToken revokes a valid token by id, a token of owner only unless owner is "",
	// and writes the audit row, by actor, in the same transaction. Returns ErrNotFound if
	// there is no such valid token (of owner).
	RevokeToken(ctx context.Context, id int64, owner, actor string) error

	// Tokens lists the tokens of owner, or every token if owner is "", newest first.
	Tokens(ctx context.Context, owner string) ([]Token, error)

	// Users and settings.

	// CreateUser adds a user and writes the audit row, by actor, in the same transaction.
	// Returns a *UserNameTakenError, which is ErrExists, if an existing user has the
	// name, letter case (of A to Z) aside; users made before that rule who share a
	// name so are left as they are.
	CreateUser(ctx context.Context, u User, actor string) (User, error)

	// UserByName returns the user with the given name. Returns ErrNotFound if there is none.
	UserByName(ctx context.Context, name string) (User, error)

	// CountUsers returns how many users exist.
	CountUsers(ctx context.Context) (int, error)

	// Setting returns a stored setting. Returns ErrNotFound if it was never set.
	Setting(ctx context.Context, name string) (string, error)

	// SettingOrInit returns the stored setting, first storing init() under that name if it
	// was never set. Two processes racing here agree on one value: the first insert wins.
	SettingOrInit(ctx context.Context, name string, init func() (string, error)) (string, error)

	// SetSetting stores value under name, in place of what was stored there.
	SetSetting(ctx context.Context, name, value string) error

	// SetUserRole gives a user another role, ends their console sessions, and writes the
	// audit row in the same transaction. Returns the previous role (unchanged, and nothing
	// written, when it was already role), ErrNotFound for an unknown user and ErrLastAdmin
	// when role would take the last admin's rights away.
	SetUserRole(ctx context.Context, name, role, actor string) (previous string, err error)

	// SetUserPassword replaces a user's password hash (bcrypt) with one the user chose, or
	// the operator on the command line: it is not one-time, and clears MustChangePassword.
	// It ends the user's console sessions and writes the audit row in the same transaction.
	// Returns ErrNotFound for an unknown user.
	SetUserPassword(ctx context.Context, name, hash, actor string) error

	// SetOneTimePassword is SetUserPassword for a password chosen for the user by someone
	// else: it sets MustChangePassword, so that the console asks the user for their own at
	// their next sign-in.
	SetOneTimePassword(ctx context.Context, name, hash, actor string) error

	// DeleteUser removes a user, with their API tokens and console sessions, and writes the
	// audit row in the same transaction. Returns ErrNotFound for an
	// unknown user and ErrLastAdmin for the last admin.
	DeleteUser(ctx context.Context, name, actor string) error

	// Users returns every user, by name. PasswordHash is left empty.
	Users(ctx context.Context) ([]User, error)
}
