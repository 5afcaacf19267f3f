package storage_test

import (
	"reflect"
	"testing"

	"github.com/hookdedup/hookdedup/storage"
)

func TestSummarize(t *testing.T) {
	changed := storage.Released{Previous: storage.StateFailed, Changed: true}
	free := storage.Released{Previous: storage.StateReleased}
	for _, tt := range []struct {
		name     string
		outcomes []storage.KeyOutcome
		want     storage.ReleaseSummary
	}{
		{"None", nil, storage.ReleaseSummary{Refusals: map[storage.Refusal]int{}}},
		{"Mixed", []storage.KeyOutcome{
			{Key: "a", Released: changed},
			{Key: "b", Released: free},
			{Key: "c", Released: changed},
			{Key: "d", Released: storage.Released{Previous: storage.StateProcessing}, Refused: storage.RefusedBusy},
			{Key: "e", Refused: storage.RefusedNotFound},
			{Key: "f", Released: storage.Released{Previous: storage.StateProcessed}, Refused: storage.RefusedPayloadGone},
			{Key: "g", Refused: storage.RefusedNotFound},
		}, storage.ReleaseSummary{Matched: 7, Changed: 2, Unchanged: 1, Refused: 4, Refusals: map[storage.Refusal]int{
			storage.RefusedBusy: 1, storage.RefusedNotFound: 2, storage.RefusedPayloadGone: 1}}},
		{"AllFree", []storage.KeyOutcome{{Key: "a", Released: free}, {Key: "b", Released: free}},
			storage.ReleaseSummary{Matched: 2, Unchanged: 2, Refusals: map[storage.Refusal]int{}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := storage.Summarize(tt.outcomes); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Summarize = %+v, want %+v", got, tt.want)
			}
		})
	}
}
