package web

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"testing"
)

// TestLogKeys: the packages that log spell each attribute key the same way: a constant
// of one name has one value everywhere, and no two names share a value.
func TestLogKeys(t *testing.T) {
	byName, byValue := map[string]string{}, map[string]string{}
	for _, file := range []string{"log.go", "../receiver/log.go", "../cmd/hookdedup/log.go"} {
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		ast.Inspect(f, func(x ast.Node) bool {
			spec, ok := x.(*ast.ValueSpec)
			if !ok {
				return true
			}
			for i, id := range spec.Names {
				lit, ok := spec.Values[i].(*ast.BasicLit)
				if !ok {
					t.Errorf("%s: %s is not a string", file, id.Name)
					continue
				}
				v, _ := strconv.Unquote(lit.Value)
				if w, ok := byName[id.Name]; ok && w != v {
					t.Errorf("%s: %s = %q, elsewhere %q", file, id.Name, v, w)
				}
				if w, ok := byValue[v]; ok && w != id.Name {
					t.Errorf("%s: %q is both %s and %s", file, v, id.Name, w)
				}
				byName[id.Name], byValue[v] = v, id.Name
				n++
			}
			return true
		})
		if n == 0 {
			t.Errorf("%s declares no log keys", file)
		}
	}
}
