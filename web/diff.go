package web

import (
	"fmt"

	"github.com/hookdedup/hookdedup/views"
)

// diffLines is a line diff of a and b by longest common subsequence: lines of a only
// are "-", of b only "+", common "=". It gives up (false) when len(a)*len(b) exceeds
// limit squared, to keep the work bounded.
func diffLines(a, b []string, limit int) ([]views.DiffLine, bool) {
	// Common head and tail cost nothing and shrink the table.
	head := 0
	for head < len(a) && head < len(b) && a[head] == b[head] {
		head++
	}
	tail := 0
	for tail < len(a)-head && tail < len(b)-head && a[len(a)-1-tail] == b[len(b)-1-tail] {
		tail++
	}
	ma, mb := a[head:len(a)-tail], b[head:len(b)-tail]
	if len(ma)*len(mb) > limit*limit {
		return nil, false
	}
	// lcs[i][j] is the LCS length of ma[i:] and mb[j:].
	lcs := make([][]int32, len(ma)+1)
	for i := range lcs {
		lcs[i] = make([]int32, len(mb)+1)
	}
	for i := len(ma) - 1; i >= 0; i-- {
		for j := len(mb) - 1; j >= 0; j-- {
			if ma[i] == mb[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out []views.DiffLine
	same := func(i, j int) { out = append(out, views.DiffLine{Op: "=", Text: a[i], LeftNo: i + 1, RightNo: j + 1}) }
	for i := range head {
		same(i, i)
	}
	i, j := 0, 0
	for i < len(ma) || j < len(mb) {
		switch {
		case i < len(ma) && j < len(mb) && ma[i] == mb[j]:
			same(head+i, head+j)
			i, j = i+1, j+1
		case i < len(ma) && (j == len(mb) || lcs[i+1][j] >= lcs[i][j+1]):
			out = append(out, views.DiffLine{Op: "-", Text: ma[i], LeftNo: head + i + 1})
			i++
		default:
			out = append(out, views.DiffLine{Op: "+", Text: mb[j], RightNo: head + j + 1})
			j++
		}
	}
	for k := range tail {
		same(len(a)-tail+k, len(b)-tail+k)
	}
	return out, true
}

// collapse replaces each run of unchanged lines longer than 2*context+1 by its first and
// last context lines around one line that says how many were left out (Op "…").
func collapse(lines []views.DiffLine, context int) []views.DiffLine {
	var out []views.DiffLine
	for i := 0; i < len(lines); {
		if lines[i].Op != "=" {
			out = append(out, lines[i])
			i++
			continue
		}
		j := i
		for j < len(lines) && lines[j].Op == "=" {
			j++
		}
		head, tail := context, context
		if i == 0 {
			head = 0
		}
		if j == len(lines) {
			tail = 0
		}
		if j-i > head+tail+1 {
			out = append(out, lines[i:i+head]...)
			out = append(out, views.DiffLine{Op: "…", Text: fmt.Sprintf("%d unchanged lines", j-i-head-tail)})
			out = append(out, lines[j-tail:j]...)
		} else {
			out = append(out, lines[i:j]...)
		}
		i = j
	}
	return out
}
