package etcd

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestPasswordInURLNeverShown: a password put in the URL (refused by
// design) shows in no error, whole or in part, whatever characters it
// holds ('@', '?', '/', ','), from ParseURL or from Open; the raw URL is
// never echoed.
func TestPasswordInURLNeverShown(t *testing.T) {
	for _, raw := range []string{
		"etcds://capmesh:s3cr3t@etcd.example:2379",
		"etcds://capmesh:s3@cr3t@etcd.example:2379",
		"etcds://capmesh:s3cr3t?x@etcd.example:2379",
		"etcds://capmesh:s3/cr3t@etcd.example:2379",
		"etcd://capmesh:s3cr3t,x@etcd.example:2379",
		"etcds://capmesh:s3cr3t@etcd.example:2379?bogus=1",
		"etcds://capmesh?s3cr3t@etcd.example:2379",
		"etcds://capmesh/s3cr3t@etcd.example:2379",
	} {
		o, err := ParseURL(raw)
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			o.DialTimeout = time.Second
			var s *Store
			s, err = Open(ctx, o)
			cancel()
			if s != nil {
				s.Close()
			}
		}
		if err == nil {
			t.Errorf("%s: accepted", raw)
			continue
		}
		for _, part := range []string{"s3cr3t", "cr3t", "s3"} {
			if strings.Contains(err.Error(), part) {
				t.Errorf("%s: the error shows %q of the password: %v", raw, part, err)
				break
			}
		}
	}
}

// TestParseURLRefusesBadPorts: a port that is not a number (where a
// password put in the URL ends up when it holds a '?') is refused.
func TestParseURLRefusesBadPorts(t *testing.T) {
	for _, raw := range []string{"etcd://h1:http", "etcd://h1:", "etcd://h1:99999", "etcd://h1:-1", "etcd://:2379", "etcds://capmesh:s3cr3t?x@h1"} {
		if o, err := ParseURL(raw); err == nil {
			t.Errorf("%s: accepted as %v", raw, o.Endpoints)
		}
	}
}

// FuzzParseURLHidesPassword: whatever the password in a URL, ParseURL's
// error never holds it.
func FuzzParseURLHidesPassword(f *testing.F) {
	for _, s := range [][2]string{{"s3cr3t", "etcd.example:2379"}, {"a@b?c/d,e", "h1,h2:2380/p?node=n"}, {"p%41ss", "[::1]:2379"}, {"x?y@z", "h?x=1"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pass, tail string) {
		if len(pass) < 4 || strings.Contains(tail, pass) {
			return
		}
		_, err := ParseURL("etcds://u:" + pass + "@" + tail)
		if err == nil {
			t.Fatalf("a password in the URL was accepted")
		}
		// the same URL with another password: what the error says anyway
		_, other := ParseURL("etcds://u:" + strings.Repeat("\x01", len(pass)) + "@" + tail)
		if strings.Contains(err.Error(), pass) && (other == nil || !strings.Contains(other.Error(), pass)) {
			t.Fatalf("the error shows the password %q: %v", pass, err)
		}
	})
}
