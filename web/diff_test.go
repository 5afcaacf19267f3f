package web

import (
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/views"
)

func render(lines []views.DiffLine) string {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l.Op + l.Text + "\n")
	}
	return b.String()
}

func TestDiffLines(t *testing.T) {
	for _, tc := range []struct {
		name, a, b, want string
	}{
		{"Same", "x\ny", "x\ny", "=x\n=y\n"},
		{"Changed", "a\nb\nc", "a\nB\nc", "=a\n-b\n+B\n=c\n"},
		{"Added", "a\nc", "a\nb\nc", "=a\n+b\n=c\n"},
		{"Removed", "a\nb\nc", "a\nc", "=a\n-b\n=c\n"},
		{"AllNew", "a", "b", "-a\n+b\n"},
		{"Moved", "a\nb\nc\nd", "b\nc\na\nd", "-a\n=b\n=c\n+a\n=d\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := diffLines(strings.Split(tc.a, "\n"), strings.Split(tc.b, "\n"), 100)
			if !ok || render(got) != tc.want {
				t.Fatalf("diff:\n%s\nwant:\n%s", render(got), tc.want)
			}
		})
	}
	t.Run("LineNumbers", func(t *testing.T) {
		got, _ := diffLines([]string{"a", "b", "c"}, []string{"a", "x", "c", "d"}, 100)
		want := []views.DiffLine{
			{Op: "=", Text: "a", LeftNo: 1, RightNo: 1},
			{Op: "-", Text: "b", LeftNo: 2},
			{Op: "+", Text: "x", RightNo: 2},
			{Op: "=", Text: "c", LeftNo: 3, RightNo: 3},
			{Op: "+", Text: "d", RightNo: 4},
		}
		if len(got) != len(want) {
			t.Fatalf("got %v", got)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("line %d = %+v, want %+v", i, got[i], want[i])
			}
		}
	})
	t.Run("TooBig", func(t *testing.T) {
		a := strings.Split(strings.Repeat("a\n", 50), "\n")
		b := strings.Split(strings.Repeat("b\n", 50), "\n")
		if _, ok := diffLines(a, b, 10); ok {
			t.Fatal("a 50×50 diff passed a limit of 10²")
		}
	})
	t.Run("Collapse", func(t *testing.T) {
		a := strings.Split("1\n2\n3\n4\n5\n6\n7\n8\n9\n10", "\n")
		b := append(append([]string{}, a[:5]...), "X")
		b = append(b, a[6:]...)
		got, _ := diffLines(a, b, 100)
		want := "…2 unchanged lines\n=3\n=4\n=5\n-6\n+X\n=7\n=8\n=9\n=10\n"
		if r := render(collapse(got, 3)); r != want {
			t.Fatalf("collapsed:\n%s\nwant:\n%s", r, want)
		}
	})
}

func TestCSVCell(t *testing.T) {
	for in, want := range map[string]string{"": "", "BK-1": "BK-1", "=1+1": "'=1+1", "-12.50": "-12.50", "+x": "'+x", "@SUM(A1)": "'@SUM(A1)"} {
		if got := csvCell(in); got != want {
			t.Errorf("csvCell(%q) = %q, want %q", in, got, want)
		}
	}
}
