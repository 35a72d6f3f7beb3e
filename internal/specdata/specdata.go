// Package specdata locates the specification test data copied into the
// repository (vectors, samples, captured responses of reference
// implementations), so that tests in every package read the same files
// without depending on anything outside the checkout.
package specdata

import (
	"path/filepath"
	"runtime"
)

// Dir returns the absolute path of the specdata directory.
func Dir() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		panic("specdata: cannot locate source directory")
	}
	return filepath.Dir(file)
}

// Path returns the absolute path of rel (slash-separated) inside the
// specdata directory, e.g. Path("chp/vectors/canon/cases.json").
func Path(rel string) string {
	return filepath.Join(Dir(), filepath.FromSlash(rel))
}
