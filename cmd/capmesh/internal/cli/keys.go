package cli

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/capmesh/capmesh/identity"
)

// KeyPath is a --key/--out flag's value, or the default key path under the
// state directory.
func KeyPath(env Env, flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	p, err := identity.DefaultKeyPath(env.DataDir())
	if err != nil {
		return "", UsageErrorf("%v", err)
	}
	return p, nil
}

// LoadKey loads the key at KeyPath(env, flag), with an error that says what
// to do when there is none. It returns the path it read.
func LoadKey(env Env, flag string) (*identity.PrivateKey, string, error) {
	path, err := KeyPath(env, flag)
	if err != nil {
		return nil, "", err
	}
	k, err := identity.Load(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, path, fmt.Errorf("no key at %s; create one with 'capmesh keys generate'", path)
	}
	return k, path, err
}
