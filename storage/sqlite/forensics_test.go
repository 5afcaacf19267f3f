package sqlite_test

import (
	"context"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// Intake's lookups go by the tables' keys, whatever the number of rows in the windows:
// never a scan, never the seen_at index, never a sort. The pending keys are read through
// by the key lab alone (p): a few thousand at most, and by the rowids the writer has for
// each key (json_each) for intake.
func TestDB_Forensics_Plans(t *testing.T) {
	plans, err := storagetest.Open(t).ExplainForensics(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for name, plan := range plans {
		scan := false
		for line := range strings.SplitSeq(plan, "\n") {
			// Scanning the chunk's own VALUES is the point; scanning a table is not.
			scan = scan || strings.Contains(line, "SCAN ") && !strings.Contains(line, "VALUES") && !strings.Contains(line, "CONSTANT ROW") &&
				!strings.HasSuffix(line, "SCAN v") && !strings.HasSuffix(line, "SCAN p") && !strings.HasSuffix(line, "SCAN days") && !strings.Contains(line, "SCAN (subquery-") &&
				!strings.Contains(line, "SCAN json_each VIRTUAL TABLE")
		}
		if scan || strings.Contains(plan, "_seen") || strings.Contains(plan, "TEMP B-TREE") {
			t.Errorf("%s plan:\n%s", name, plan)
		}
	}
}
