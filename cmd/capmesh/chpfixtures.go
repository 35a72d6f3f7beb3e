package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/capmesh/capmesh/chp/boundary"
	"github.com/capmesh/capmesh/chp/boundary/evlog"
	"github.com/capmesh/capmesh/chp/chphttp"
	"github.com/capmesh/capmesh/evidence"
	"github.com/capmesh/capmesh/evidence/logstore"
	"github.com/capmesh/capmesh/host"
	"github.com/capmesh/capmesh/identity"
	"github.com/spf13/cobra"
)

// chpFixtureOptions configures the CHP conformance fixture profile
// (shared/spec/chp/conformance/FIXTURES.md).
type chpFixtureOptions struct {
	// HostID defaults to "conformance-host".
	HostID string
	// StoreDir, when set, keeps evidence durably there (logstore);
	// otherwise in memory.
	StoreDir string
	// Signed gives the host an ephemeral ed25519 key (signed tier).
	Signed bool
	// HTTP carries the keys; nil reads CHP_HOST_API_KEY / CHP_HOST_API_KEYS.
	HTTP *chphttp.Options
	// KeyFile, when set, is the host key (a capmesh identity key file);
	// WitnessDir keeps received witness statements and anchors durably.
	KeyFile, WitnessDir string
}

// chpFixtureBoundary builds a Boundary registered with the fixture profile
// and the HTTP handler serving it. `capmesh server --chp-fixtures` mounts the
// handler; close releases the evidence store.
func chpFixtureBoundary(a *app, o chpFixtureOptions) (b *boundary.Boundary, h http.Handler, closeFn func() error, err error) {
	if o.HostID == "" {
		o.HostID = "conformance-host"
	}
	var store evidence.Store = evidence.NewMemory()
	if o.StoreDir != "" {
		ls, err := logstore.Open(o.StoreDir, &logstore.Options{Logger: a.log})
		if err != nil {
			return nil, nil, nil, err
		}
		store = ls
	}
	cfg := boundary.Config{HostID: o.HostID, HostVersion: versionString(), Store: store, Logger: a.log,
		Policy: boundary.FixturePolicy(), Safety: boundary.FixtureSafety()}
	if o.Signed {
		_, key, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, nil, nil, err
		}
		cfg.Key = key
	}
	if err := fixtureWitnessing(&cfg, o); err != nil {
		store.Close()
		return nil, nil, nil, err
	}
	b, err = boundary.New(cfg)
	if err == nil {
		err = boundary.RegisterFixtures(b)
	}
	if err == nil && o.WitnessDir != "" {
		var ws *evlog.FileWitnessStore
		if ws, err = evlog.OpenFileWitnessStore(o.WitnessDir); err == nil {
			b.SetWitnessStore(ws)
		}
	}
	if err != nil {
		store.Close()
		return nil, nil, nil, err
	}
	httpOpts := o.HTTP
	if httpOpts == nil {
		if httpOpts, err = chphttp.OptionsFromEnv(); err != nil {
			store.Close()
			return nil, nil, nil, usageErrorf("CHP_HOST_API_KEYS: %v", err)
		}
	}
	return b, chphttp.Handler(b, httpOpts), store.Close, nil
}

func init() { register(newChpFixturesCmd) }

func newChpFixturesCmd(a *app) *cobra.Command {
	var (
		addr, key, keys, storeDir, hostID string
		keyFile, witnessDir               string
		signed, insecure                  bool
	)
	cmd := &cobra.Command{
		Use:    "chp-fixtures",
		Short:  "Serve the CHP conformance fixture profile over the CHP HTTP binding",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts, err := chphttp.OptionsFromEnv()
			if err != nil {
				return usageErrorf("CHP_HOST_API_KEYS: %v", err) // the only variable it can refuse
			}
			if key != "" {
				opts.SharedKeys = append(opts.SharedKeys, key)
			}
			if keys != "" {
				named, err := chphttp.ParseNamedKeys(keys)
				if err != nil {
					return usageErrorf("--keys: %v", err)
				}
				opts.NamedKeys = append(opts.NamedKeys, named...)
			}
			_, h, closeStore, err := chpFixtureBoundary(a, chpFixtureOptions{HostID: hostID, StoreDir: storeDir, Signed: signed, HTTP: opts,
				KeyFile: keyFile, WitnessDir: witnessDir})
			if err != nil {
				return err
			}
			defer closeStore()
			ln, err := net.Listen("tcp", addr)
			var ae *net.AddrError
			if errors.As(err, &ae) {
				return withCode(exitUsage, err)
			}
			if err != nil {
				return withCode(exitFailure, err)
			}
			if ta, ok := ln.Addr().(*net.TCPAddr); ok && !ta.IP.IsLoopback() && len(opts.SharedKeys)+len(opts.NamedKeys) == 0 {
				if !insecure {
					_ = ln.Close()
					return usageErrorf("refusing to serve http on %s: %v: anyone who can reach it could invoke the fixtures; give --key/--keys, bind a loopback address, or say --insecure-listen", addr, host.ErrInsecureListen)
				}
				a.log.Warn("INSECURE: serving beyond loopback without credentials", "addr", addr)
			}
			srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
			fmt.Fprintf(a.stdout, "chp fixture profile on http://%s\n", ln.Addr())
			ctx := cmd.Context()
			go func() {
				<-ctx.Done()
				sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_ = srv.Shutdown(sctx)
			}()
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return ctx.Err()
		},
	}
	f := cmd.Flags()
	f.StringVar(&addr, "http", "127.0.0.1:8899", "listen address of the HTTP binding")
	f.StringVar(&key, "key", "", "shared X-CHP-Key (also CHP_HOST_API_KEY)")
	f.StringVar(&keys, "keys", "", "named keys name:key[:scope|scope],… (also CHP_HOST_API_KEYS)")
	f.StringVar(&storeDir, "store", "", "keep evidence durably in this directory (default: memory)")
	f.StringVar(&hostID, "host-id", "conformance-host", "host id")
	f.BoolVar(&signed, "signed", false, "sign exports with an ephemeral ed25519 key")
	f.StringVar(&keyFile, "key-file", "", "sign with this identity key file instead (implies --signed)")
	f.StringVar(&witnessDir, "witness-dir", "", "keep received witness statements and anchors in this directory (default: memory)")
	f.BoolVar(&insecure, "insecure-listen", false, "serve beyond loopback without keys")
	return cmd
}

// fixtureWitnessing loads --key-file into cfg.
func fixtureWitnessing(cfg *boundary.Config, o chpFixtureOptions) error {
	if o.KeyFile == "" {
		return nil
	}
	k, err := identity.Load(o.KeyFile)
	if err != nil {
		return usageErrorf("--key-file: %v", err)
	}
	cfg.Key = k.Ed25519()
	return nil
}
