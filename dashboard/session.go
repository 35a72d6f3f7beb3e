package dashboard

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// The operator signs in by presenting a key on /ui/login; the dashboard
// keeps it server side under a random session id, which the browser
// holds in an HttpOnly, SameSite=Strict cookie scoped to /ui. The key
// itself never reaches the browser again.
const (
	cookieName  = "capmesh_ui"
	sessionTTL  = 12 * time.Hour
	maxSessions = 256
)

type session struct {
	key     string
	expires time.Time
}

type sessions struct {
	mu  sync.Mutex
	m   map[string]session
	now func() time.Time
}

func newSessions(now func() time.Time) *sessions {
	return &sessions{m: map[string]session{}, now: now}
}

// add starts a session for key and returns its id.
func (s *sessions) add(key string) string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	id := base64.RawURLEncoding.EncodeToString(b[:])
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if len(s.m) >= maxSessions {
		// Drop the expired ones; if none, the one closest to expiry.
		oldest, at := "", time.Time{}
		for k, v := range s.m {
			if !v.expires.After(now) {
				delete(s.m, k)
				continue
			}
			if oldest == "" || v.expires.Before(at) {
				oldest, at = k, v.expires
			}
		}
		if len(s.m) >= maxSessions {
			delete(s.m, oldest)
		}
	}
	s.m[id] = session{key: key, expires: now.Add(sessionTTL)}
	return id
}

// get returns the key of the request's live session.
func (s *sessions) get(r *http.Request) (string, bool) {
	c, err := r.Cookie(cookieName)
	if err != nil || c.Value == "" {
		return "", false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[c.Value]
	if !ok {
		return "", false
	}
	if !v.expires.After(s.now()) {
		delete(s.m, c.Value)
		return "", false
	}
	return v.key, true
}

// drop ends the request's session.
func (s *sessions) drop(r *http.Request) {
	if c, err := r.Cookie(cookieName); err == nil {
		s.mu.Lock()
		delete(s.m, c.Value)
		s.mu.Unlock()
	}
}

// sameOrigin refuses a form posted from another site: a browser sends
// Origin on a cross-site POST.
func sameOrigin(r *http.Request) error {
	o := r.Header.Get("Origin")
	if o == "" || o == "null" && r.Header.Get("Sec-Fetch-Site") == "same-origin" {
		return nil
	}
	u, err := url.Parse(o)
	if err != nil || u.Host != r.Host {
		return errors.New("cross-origin form refused")
	}
	return nil
}

func (d *Dashboard) loginPage(w http.ResponseWriter, r *http.Request) {
	d.render(w, r, http.StatusOK, "login", "Sign in", map[string]any{"Error": ""})
}

// login checks the presented key with the dashboard's policy and with the
// node (a key the node refuses is refused), then starts a session.
func (d *Dashboard) login(w http.ResponseWriter, r *http.Request) {
	if err := sameOrigin(r); err != nil {
		d.fail(w, r, http.StatusForbidden, err)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	key := r.PostFormValue("key")
	if key == "" {
		d.render(w, r, http.StatusBadRequest, "login", "Sign in", map[string]any{"Error": "enter a key"})
		return
	}
	if _, err := d.cfg.Policy.AuthenticateKey(key); err != nil {
		d.render(w, r, http.StatusUnauthorized, "login", "Sign in", map[string]any{"Error": "the key was refused"})
		return
	}
	probe := r.WithContext(withKey(r.Context(), key))
	if err := d.call(r.Context(), probe, "identity.get", map[string]any{}, nil); err != nil {
		d.render(w, r, http.StatusUnauthorized, "login", "Sign in", map[string]any{"Error": "the node refused the key"})
		return
	}
	id := d.sessions.add(key)
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: id, Path: Prefix, HttpOnly: true, Secure: r.TLS != nil,
		SameSite: http.SameSiteStrictMode, MaxAge: int(sessionTTL / time.Second)})
	http.Redirect(w, r, Prefix+"/", http.StatusSeeOther)
}

func (d *Dashboard) logout(w http.ResponseWriter, r *http.Request) {
	if err := sameOrigin(r); err != nil {
		d.fail(w, r, http.StatusForbidden, err)
		return
	}
	d.sessions.drop(r)
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: Prefix, HttpOnly: true, SameSite: http.SameSiteStrictMode, MaxAge: -1})
	http.Redirect(w, r, Prefix+"/", http.StatusSeeOther)
}
