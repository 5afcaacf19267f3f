package main

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/receiver"
	"github.com/hookdedup/hookdedup/storage"

	"github.com/prometheus/client_golang/prometheus"
)

// TestReadme_MetricsSection: the README's Metrics section is what a scrape config and
// its alert rules are written from. Every hookdedup_ series /metrics exposes is named
// there with its labels, and every outcome hookdedup_deliveries_total is counted under,
// so that an alert on deliveries that could not be stored (answered 503) can be written
// from the README alone.
func TestReadme_MetricsSection(t *testing.T) {
	b, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	start := strings.Index(text, "\n### Metrics\n")
	if start < 0 {
		t.Fatal("README.md has no Metrics section")
	}
	section := text[start+1:]
	section = section[:strings.Index(section, "\n### Alerts\n")]

	m := receiver.NewMetrics(nil)
	desc := regexp.MustCompile(`fqName: "([^"]+)".*variableLabels: \{([^}]*)\}`)
	v := reflect.ValueOf(m).Elem()
	named := 0
	for i := range v.NumField() {
		if !v.Field(i).CanInterface() {
			continue
		}
		c, ok := v.Field(i).Interface().(prometheus.Collector)
		if !ok {
			continue
		}
		ch := make(chan *prometheus.Desc, 1)
		c.Describe(ch)
		d := desc.FindStringSubmatch((<-ch).String())
		if d == nil {
			t.Fatalf("field %s: no name in its description", v.Type().Field(i).Name)
		}
		want := "`" + d[1]
		if d[2] != "" {
			want += "{" + d[2] + "}"
		}
		named++
		if !strings.Contains(section, want+"`") {
			t.Errorf("README's Metrics section does not name %s`", want)
		}
	}
	if named < 11 {
		t.Fatalf("%d series described, want every one of receiver.Metrics", named)
	}

	deliveries := section[strings.Index(section, "`hookdedup_deliveries_total"):]
	deliveries = deliveries[:strings.Index(deliveries, "`hookdedup_claim_duration_seconds`")]
	for _, outcome := range []string{string(storage.Accepted), string(storage.Duplicate), string(storage.Rejected), "error"} {
		if !strings.Contains(deliveries, "`"+outcome+"`") {
			t.Errorf("README names no outcome %q of hookdedup_deliveries_total: %q", outcome, deliveries)
		}
	}
}
