package storage

import (
	"context"
	"time"
)

// DeliveryFilter selects deliveries for the console's events list. Empty fields match
// everything.
type DeliveryFilter struct {
	Source   string
	Outcome  Outcome
	Mismatch bool // only duplicates whose payload differs from the first delivery's
	// MoneyMismatch: only the mismatches in the amount, currency or status.
	MoneyMismatch bool
	// Currency selects the deliveries whose amount is in this currency (upper case).
	Currency string
	// Flag selects the deliveries flagged by a suspect of this kind (FlagAny: of any
	// kind), and FlagState, if set, only by suspects in that review state.
	Flag      SuspectKind
	FlagState string
	Property  string
	Booking   string
	Status    string // the event's own status (Delivery.EventStatus), e.g. "cancelled"
	Key       string
	// NoProperty selects only the deliveries that carry no property, and NoCurrency
	// those that carry no currency: the ledger's rows of none. An empty Property or
	// Currency matches every delivery instead.
	NoProperty, NoCurrency bool
	// HasAmount selects only the deliveries that carry an amount (read from their
	// source's amount field), whether or not it is a plain decimal: the ledger counts
	// those as money caught.
	HasAmount bool
	// Batch selects the items of one batched request (the id of its first item
	// delivery); 0 matches every delivery.
	Batch int64
	// KeySources are the sources searched for Key when Source is empty (keys are scoped
	// by source, and the index that finds a key starts with its source).
	KeySources []string
	From, To   time.Time // received at or after From, before To (zero = unbounded)

	// Before is the keyset cursor: deliveries with a smaller id (0 = from the newest).
	Before int64
	// Limit is the page size; default 50.
	Limit int
}

// SelectsRejections reports whether f can select a rejection. A rejection failed a
// check before its key was derived: it carries no key, labels, amount or currency, no
// suspect flags it and it belongs to no batch's items, so those filters never select
// one, nor does an outcome other than rejected; the filters of none (NoProperty,
// NoCurrency) select every one. RejectionsNotStored counts nothing for a filter that
// cannot.
func (f DeliveryFilter) SelectsRejections() bool {
	if f.Outcome != "" && f.Outcome != Rejected {
		return false
	}
	return !f.Mismatch && !f.MoneyMismatch && f.Currency == "" && f.Flag == "" && f.FlagState == "" &&
		f.Property == "" && f.Booking == "" && f.Status == "" && f.Key == "" && !f.HasAmount && f.Batch == 0
}

// FlagAny as DeliveryFilter.Flag selects the deliveries flagged by a suspect of any kind.
const FlagAny SuspectKind = "any"

// DeliveryPage is one page of the events list, newest first.
type DeliveryPage struct {
	Deliveries []Delivery // without Headers and Body
	// Next is the cursor of the following page (DeliveryFilter.Before), 0 when there is none.
	Next int64
	// Partial is true when the page was cut short to stay fast: the filters need a
	// look at each row, and only ScanWindow rows were looked at. Next goes on from there.
	Partial bool
}

// ScanWindow bounds how many rows one page of the events list examines when a filter
// cannot be answered by an index alone: a page never costs more than this many row
// reads, at any table size.
const ScanWindow = 20000

// EachDelivery calls fn for every delivery that matches f (ignoring f.Limit), newest
// first, reading them a page at a time through deliveries (an engine's Deliveries), and
// stops at fn's first error, which it returns. Each page is a query of its own: an
// export as slow as the client that reads it holds no transaction open.
func EachDelivery(ctx context.Context, deliveries func(context.Context, DeliveryFilter) (DeliveryPage, error),
	f DeliveryFilter, fn func(Delivery) error) error {
	f.Limit = 500
	for {
		page, err := deliveries(ctx, f)
		if err != nil {
			return err
		}
		for _, d := range page.Deliveries {
			if err := fn(d); err != nil {
				return err
			}
		}
		if page.Next == 0 {
			return nil
		}
		f.Before = page.Next
	}
}
