package storagetest

import (
	"context"
	"fmt"

	"github.com/hookdedup/hookdedup/storage"
)

// Counts are the stored deliveries by outcome.
type Counts struct {
	Accepted, Duplicate, Rejected, Mismatch int64
}

// CountDeliveries counts one source's stored deliveries by outcome ("" counts every
// source). It reads them through the events listing, every page of it: the deliveries
// the console would list, not the rejections counted without a row.
func CountDeliveries(ctx context.Context, db storage.Store, source string) (Counts, error) {
	var c Counts
	err := db.EachDelivery(ctx, storage.DeliveryFilter{Source: source}, func(d storage.Delivery) error {
		switch d.Outcome {
		case storage.Accepted:
			c.Accepted++
		case storage.Duplicate:
			c.Duplicate++
		case storage.Rejected:
			c.Rejected++
		}
		if d.Mismatch {
			c.Mismatch++
		}
		return nil
	})
	if err != nil {
		return Counts{}, fmt.Errorf("count deliveries: %w", err)
	}
	return c, nil
}
