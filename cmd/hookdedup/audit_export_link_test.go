package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAuditExport_OutputThroughLink: an --output that is a symbolic link (latest.csv to
// the auditors' share) is written through, as backup writes through one: the file it
// leads to gets the export, and the link stays. One that leads to nothing (the share
// not mounted) is refused, naming both. Renamed onto, the link was replaced by the
// export, which stayed on the local disk while the command said it was done.
func TestAuditExport_OutputThroughLink(t *testing.T) {
	dir := t.TempDir()
	path := auditDB(t, dir)
	export := func(output string) (string, error) {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), []string{"audit", "export", "--database", path, "--format", "csv", "--output", output},
			func(string) string { return "" }, strings.NewReader(""), &stdout, &stderr)
		return stdout.String() + stderr.String(), err
	}

	share := filepath.Join(dir, "share")
	if err := os.Mkdir(share, 0o700); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(share, "audit.csv")
	if err := os.WriteFile(target, []byte("an earlier export\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "latest.csv")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if out, err := export(link); err != nil {
		t.Fatalf("export through a link: %v\n%s", err, out)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link after the export: %v, %v; want it still a link", fi, err)
	}
	b, err := os.ReadFile(target)
	if err != nil || !strings.HasPrefix(string(b), "id,") {
		t.Errorf("the file the link leads to after the export: %q, %v; want the export", b, err)
	}
	if fi, err := os.Stat(target); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the export's mode: %v, %v; want 0600", fi, err)
	}

	missing := filepath.Join(dir, "mnt", "audit.csv")
	dangling := filepath.Join(dir, "dangling.csv")
	if err := os.Symlink(missing, dangling); err != nil {
		t.Fatal(err)
	}
	out, err := export(dangling)
	if err == nil || !strings.Contains(err.Error(), dangling) || !strings.Contains(err.Error(), missing) ||
		!strings.Contains(err.Error(), "does not exist") {
		t.Errorf("export through a link to nothing: %v\n%s\nwant it refused, naming the link and its target", err, out)
	}
	if fi, err := os.Lstat(dangling); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link to nothing after the refusal: %v, %v; want it still a link", fi, err)
	}
}
