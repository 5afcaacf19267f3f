package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencyDirection guards the layout: cmd → web, receiver → storage; web → views;
// receiver and web never import each other; views only renders.
func TestDependencyDirection(t *testing.T) {
	const mod = "github.com/hookdedup/hookdedup/"
	forbidden := map[string][]string{
		"storage":  {"receiver", "web", "views", "static", "cmd/hookdedup"},
		"receiver": {"web", "views", "static", "cmd/hookdedup"},
		// The schemes need nothing of the intake path; receiver imports them.
		"receiver/signature": {"receiver", "storage", "web", "views", "static", "cmd/hookdedup"},
		"web":                {"receiver", "cmd/hookdedup"},
		"views":              {"storage", "receiver", "web", "cmd/hookdedup"},
	}
	for pkg, bad := range forbidden {
		out, err := exec.Command("go", "list", "-deps", mod+pkg).CombinedOutput()
		if err != nil {
			if strings.Contains(string(out), "no required module provides") || strings.Contains(string(out), "no Go files") {
				continue // a package without Go files imports nothing
			}
			t.Fatalf("go list %s: %v\n%s", pkg, err, out)
		}
		deps := map[string]bool{}
		for _, d := range strings.Fields(string(out)) {
			deps[d] = true
		}
		for _, b := range bad {
			if deps[mod+b] {
				t.Errorf("%s imports %s: dependencies must point cmd → web, receiver → storage; web → views", pkg, b)
			}
		}
	}
}
