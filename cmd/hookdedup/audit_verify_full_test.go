package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
)

// audit verify's report on stdout on a full disk is not written: verify fails naming it,
// with exit status 2 (not checked as asked), never 0 over an empty report, where the
// anchor to keep was lost, nor 1, which says the chain is broken.
func TestAuditVerify_FullDisk(t *testing.T) {
	full := devFull(t)
	dir := t.TempDir()
	path := auditDB(t, dir)
	var stderr bytes.Buffer
	err := run(context.Background(), []string{"audit", "verify", "--database", path},
		func(string) string { return "" }, strings.NewReader(""), full, &stderr)
	var unchecked auditUncheckedError
	if !errors.Is(err, syscall.ENOSPC) || !errors.As(err, &unchecked) {
		t.Errorf("audit verify to a full disk: %v, want an error that says no space is left, exit status 2", err)
	}
	// A broken chain is said as broken, whatever became of the report.
	tamper(t, path, "UPDATE audit_log SET reason = 'changed' WHERE id = 3")
	err = run(context.Background(), []string{"audit", "verify", "--database", path},
		func(string) string { return "" }, strings.NewReader(""), full, &stderr)
	if err == nil || errors.As(err, &unchecked) || !strings.Contains(err.Error(), "audit log broken at row 3") {
		t.Errorf("a broken chain verified to a full disk: %v, want the break, exit status 1", err)
	}
}
