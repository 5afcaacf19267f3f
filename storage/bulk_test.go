package storage_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage"
)

func TestParseApprovalThresholds(t *testing.T) {
	got, err := storage.ParseApprovalThresholds(map[string]string{"eur": "1000.00", "JPY": "100000", "*": "500"})
	if err != nil || !reflect.DeepEqual(got, storage.ApprovalThresholds{"EUR": "1000.00", "JPY": "100000", "*": "500"}) {
		t.Fatalf("%v, %v", got, err)
	}
	for _, tt := range []struct {
		in   map[string]string
		want string
	}{
		{map[string]string{"EURO": "1"}, `"EURO" is not a currency code`},
		{map[string]string{"EUR": "lots"}, `EUR = "lots"`},
		{map[string]string{"EUR": "-5"}, `EUR = "-5"`},
		{map[string]string{"EUR": "1,000.00"}, `EUR = "1,000.00"`},
		{map[string]string{"JPY": "100.50"}, "JPY has 0 decimal places"},
		{map[string]string{"EUR": "1", "eur": "2"}, "EUR is given twice"},
	} {
		if _, err := storage.ParseApprovalThresholds(tt.in); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: %v; want an error saying %q", tt.in, err, tt.want)
		}
	}
	th := storage.ApprovalThresholds{"EUR": "350.40"}
	if over := th.Over([]storage.MoneyTotal{{Currency: "EUR", Gross: "350.40"}}, 0); len(over) != 0 {
		t.Errorf("at the threshold: %v; want nothing over", over)
	}
	if over := th.Over([]storage.MoneyTotal{{Currency: "EUR", Gross: "350.41"}, {Currency: "JPY", Gross: "99999999"}}, 0); len(over) != 1 {
		t.Errorf("a cent above: %v; want EUR alone", over)
	}
	for n, want := range map[int]string{1: "1 amount is not a number", 2: "2 amounts are not numbers"} {
		if over := th.Over(nil, n); !reflect.DeepEqual(over, []string{want}) {
			t.Errorf("%d amounts unreadable: %q; want %q", n, over, want)
		}
	}
}
