package endpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/capmesh/capmesh/internal/xdg"
)

// SocketDir returns the directory where capmesh and its peers place their
// sockets, creating it (mode 0700) when missing:
//
//   - $BIOMEOS_SOCKET_DIR when set;
//   - otherwise $XDG_RUNTIME_DIR/biomeos (the Primal IPC Protocol v3.1
//     location);
//   - otherwise a private per-user directory, $TMPDIR/biomeos-<uid>; then
//     fallback is true and callers should say so in their log, since peers
//     looking in the standard place will not find the socket.
func SocketDir() (dir string, fallback bool, err error) {
	switch {
	case os.Getenv("BIOMEOS_SOCKET_DIR") != "":
		dir = os.Getenv("BIOMEOS_SOCKET_DIR")
	case os.Getenv("XDG_RUNTIME_DIR") != "":
		dir = filepath.Join(os.Getenv("XDG_RUNTIME_DIR"), "biomeos")
	default:
		dir = filepath.Join(os.TempDir(), "biomeos-"+strconv.Itoa(os.Getuid()))
		fallback = true
	}
	if err := xdg.EnsurePrivateDir(dir); err != nil {
		return "", fallback, fmt.Errorf("socket directory: %w", err)
	}
	return dir, fallback, nil
}

// FamilyID returns the family the process runs in: $FAMILY_ID, or "" for
// standalone mode (unset or "default").
func FamilyID() string {
	f := os.Getenv("FAMILY_ID")
	if f == "default" {
		return ""
	}
	return f
}

// SocketName returns the file name of a primal's socket: "<name>.sock", or
// "<name>-<FAMILY_ID>.sock" when running family-scoped.
func SocketName(name string) string {
	if f := FamilyID(); f != "" {
		return name + "-" + f + ".sock"
	}
	return name + ".sock"
}

// SocketPath returns where the primal called name listens: the socket
// directory joined with SocketName(name).
func SocketPath(name string) (string, error) {
	if err := ValidateName(name); err != nil {
		return "", err
	}
	dir, _, err := SocketDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, SocketName(name)), nil
}

// ValidateName checks a primal or domain name used in a socket file name:
// lowercase letters, digits, '-' and '_', starting with a letter.
func ValidateName(name string) error {
	if name == "" {
		return errors.New("endpoint: empty name")
	}
	for i, r := range name {
		ok := (r >= 'a' && r <= 'z') || (i > 0 && ((r >= '0' && r <= '9') || r == '-' || r == '_'))
		if !ok {
			return fmt.Errorf("endpoint: name %q: use lowercase letters, digits, '-' and '_', starting with a letter", name)
		}
	}
	return nil
}

// UnixOptions configure ListenUnix. A nil *UnixOptions means defaults.
type UnixOptions struct {
	// Mode of the socket file. Default 0600, or the value of the
	// environment variable <NAME>_SOCKET_MODE (octal, e.g. 0660) when
	// EnvName is set.
	Mode fs.FileMode
	// EnvName is the primal name whose <NAME>_SOCKET_MODE variable may
	// override the mode.
	EnvName string
	// DomainLink, when set, is the path of a capability-domain symlink to
	// create next to the socket (for example ".../biomeos/kv.sock"
	// pointing at "capmesh-kv.sock").
	DomainLink string
	// Logger reports symlink conflicts. Default slog.Default().
	Logger *slog.Logger
}

// UnixListener is a listening Unix socket that removes its file and its
// domain symlink when closed.
type UnixListener struct {
	*net.UnixListener
	path string
	link string // empty when no symlink was made
}

// Path returns the socket's path.
func (l *UnixListener) Path() string { return l.path }

// DomainLink returns the domain symlink's path, or "" if none was made.
func (l *UnixListener) DomainLink() string { return l.link }

// Close stops listening and removes the socket file and, if it still points
// at this socket, the domain symlink.
func (l *UnixListener) Close() error {
	if l.link != "" {
		if target, err := os.Readlink(l.link); err == nil && (target == filepath.Base(l.path) || target == l.path) {
			_ = os.Remove(l.link)
		}
	}
	return l.UnixListener.Close() // unlinks the socket file
}

// ErrSocketInUse reports that another process is listening on the path.
var ErrSocketInUse = errors.New("socket is in use by a live process")

// ListenUnix binds a Unix socket at path safely:
//
//   - the directory is created 0700 (an existing one must not be writable
//     by others);
//   - an existing socket file is removed only after a connection attempt
//     proves nobody listens on it (a stale socket); a live one is never
//     stolen — ListenUnix fails with ErrSocketInUse instead;
//   - a non-socket file at path is left alone and reported;
//   - the socket gets mode 0600 (see UnixOptions.Mode) while the 0700
//     directory keeps others out in between;
//   - the optional domain symlink is created atomically (a temporary link
//     renamed into place), never replacing a link to another live socket.
func ListenUnix(path string, opts *UnixOptions) (*UnixListener, error) {
	if opts == nil {
		opts = &UnixOptions{}
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	mode, err := socketMode(opts)
	if err != nil {
		return nil, err
	}
	if err := xdg.EnsurePrivateDir(filepath.Dir(path)); err != nil {
		return nil, fmt.Errorf("socket directory: %w", err)
	}
	if err := removeStale(path); err != nil {
		return nil, err
	}
	ul, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, fmt.Errorf("listen %s: %w", path, ErrSocketInUse)
		}
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	if err := os.Chmod(path, mode); err != nil {
		ul.Close()
		return nil, fmt.Errorf("chmod %s: %w", path, err)
	}
	l := &UnixListener{UnixListener: ul, path: path}
	if opts.DomainLink != "" && opts.DomainLink != path {
		switch err := makeDomainLink(opts.DomainLink, path); {
		case err == nil:
			l.link = opts.DomainLink
		case errors.Is(err, ErrSocketInUse):
			log.Warn("domain symlink left alone: it points at another live socket", "link", opts.DomainLink, "err", err)
		default:
			ul.Close()
			return nil, err
		}
	}
	return l, nil
}

// CheckSocketModeEnv reports whether <NAME>_SOCKET_MODE, when set, is a
// mode ListenUnix accepts, so that a command can refuse a bad setting as a
// usage error before it starts serving.
func CheckSocketModeEnv(name string) error {
	_, err := socketMode(&UnixOptions{EnvName: name})
	return err
}

func socketMode(opts *UnixOptions) (fs.FileMode, error) {
	if opts.EnvName != "" {
		key := envKey(opts.EnvName) + "_SOCKET_MODE"
		if v := os.Getenv(key); v != "" {
			m, err := strconv.ParseUint(v, 8, 32)
			if err != nil || m > 0o777 {
				return 0, fmt.Errorf("%s=%q: want an octal mode such as 0600", key, v)
			}
			return fs.FileMode(m), nil
		}
	}
	if opts.Mode != 0 {
		return opts.Mode, nil
	}
	return 0o600, nil
}

// envKey turns a primal name into an environment variable prefix:
// "my-primal" → "MY_PRIMAL".
func envKey(name string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z':
			return r - 'a' + 'A'
		case (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9'):
			return r
		default:
			return '_'
		}
	}, name)
}

// removeStale removes path if it is a socket nobody listens on.
func removeStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode()&fs.ModeSocket == 0 {
		return fmt.Errorf("listen %s: a file that is not a socket is in the way; remove it yourself if it is not needed", path)
	}
	if live(path) {
		return fmt.Errorf("listen %s: %w (another instance is running; stop it or choose another name)", path, ErrSocketInUse)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing stale socket %s: %w", path, err)
	}
	return nil
}

// live reports whether something accepts connections on the socket at
// path. Only a refused (or impossible) connection counts as dead; a slow
// accept is alive.
func live(path string) bool {
	c, err := net.DialTimeout("unix", path, 200*time.Millisecond)
	if err == nil {
		c.Close()
		return true
	}
	return !(errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOENT))
}

// makeDomainLink points link at the socket target (relative, since both
// live in the same directory), replacing an existing link only when it is
// dangling, stale, or already ours.
func makeDomainLink(link, target string) error {
	rel := target
	if filepath.Dir(link) == filepath.Dir(target) {
		rel = filepath.Base(target)
	}
	if fi, err := os.Lstat(link); err == nil {
		if fi.Mode()&fs.ModeSymlink == 0 {
			return fmt.Errorf("domain symlink %s: a file that is not a symlink is in the way", link)
		}
		cur, _ := os.Readlink(link)
		curAbs := cur
		if !filepath.IsAbs(cur) {
			curAbs = filepath.Join(filepath.Dir(link), cur)
		}
		if cur != rel && curAbs != target && live(curAbs) {
			return fmt.Errorf("domain symlink %s -> %s: %w", link, cur, ErrSocketInUse)
		}
	}
	tmp := fmt.Sprintf("%s.tmp-%d", link, os.Getpid())
	_ = os.Remove(tmp)
	if err := os.Symlink(rel, tmp); err != nil {
		return fmt.Errorf("domain symlink %s: %w", link, err)
	}
	if err := os.Rename(tmp, link); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("domain symlink %s: %w", link, err)
	}
	return nil
}

// ListenTCP binds newline JSON-RPC on TCP at addr ("127.0.0.1:9000",
// ":9000" is taken literally and listens on all interfaces).
func ListenTCP(addr string) (net.Listener, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen tcp %s: %w", addr, err)
	}
	return l, nil
}

// SocketPrimal is the inverse of SocketName: the primal a socket endpoint
// names, "beardog" for unix:///…/beardog.sock and for
// …/beardog-<FAMILY_ID>.sock when the process runs in that family; "" for
// other endpoints.
func SocketPrimal(ep string) string {
	p, ok := strings.CutPrefix(ep, "unix://")
	if !ok {
		return ""
	}
	base, ok := strings.CutSuffix(filepath.Base(p), ".sock")
	if !ok {
		return ""
	}
	if f := FamilyID(); f != "" {
		if b, ok := strings.CutSuffix(base, "-"+f); ok {
			return b
		}
	}
	return base
}
