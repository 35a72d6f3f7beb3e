package deptest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"testing"
)

// maxFuncLines is the longest a function of the module (tests aside) may
// be, counted as issue 16 counts: the line of its closing brace minus the
// line of its func keyword (doc comment excluded).
const maxFuncLines = 100

// longFuncs are the functions allowed over maxFuncLines, by file and name
// (Type.Method for a method), each with its reason: a table, a hot path,
// or owned by another change in flight. The list may only shrink:
// TestFunctionLength fails when a listed function is short or gone, so
// that its entry is removed.
var longFuncs = map[string]string{}

// TestFunctionLength parses every non-test .go file of the module (nested
// modules, testdata and hidden directories aside) and fails for any
// function over maxFuncLines that longFuncs does not list, and for any
// entry of longFuncs that is no longer long.
func TestFunctionLength(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	long, err := longFunctions(root)
	if err != nil {
		t.Fatal(err)
	}
	for key, n := range long {
		if _, ok := longFuncs[key]; !ok {
			t.Errorf("%s is %d lines, over %d: split it (or, for a table or a measured hot path, list it in longFuncs with the reason)", key, n, maxFuncLines)
		}
	}
	for key := range longFuncs {
		if _, ok := long[key]; !ok {
			t.Errorf("%s is listed in longFuncs but is no longer over %d lines (or is gone): remove its entry", key, maxFuncLines)
		}
	}
}

// longFunctions returns the functions over maxFuncLines under root, by
// "path: name", with their length.
func longFunctions(root string) (map[string]int, error) {
	long := map[string]int{}
	fset := token.NewFileSet()
	err := walkSources(root, func(path, rel string) error {
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			if n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line; n > maxFuncLines {
				long[rel+": "+funcName(fd)] = n
			}
		}
		return nil
	})
	return long, err
}

// funcName is a function's name, or Type.Method for a method.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	typ := fd.Recv.List[0].Type
	for {
		switch x := typ.(type) {
		case *ast.StarExpr:
			typ = x.X
			continue
		case *ast.IndexExpr: // a generic receiver T[P]
			typ = x.X
			continue
		case *ast.IndexListExpr:
			typ = x.X
			continue
		case *ast.ParenExpr:
			typ = x.X
			continue
		case *ast.Ident:
			return x.Name + "." + fd.Name.Name
		}
		return fd.Name.Name
	}
}
