package main

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/hookdedup/hookdedup/receiver"
	"github.com/hookdedup/hookdedup/receiver/provider"
	"github.com/hookdedup/hookdedup/static"
	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/outage"
	"github.com/hookdedup/hookdedup/web"
)

// rollupStats keeps the dashboard's hourly totals and the suspects' running totals up
// to date off the intake path: every few seconds it folds in the deliveries and the
// suspects that arrived, in bounded batches, until ctx ends.
func rollupStats(ctx context.Context, db storage.Store, log *slog.Logger) {
	rollupStatsEvery(ctx, db, log, 5*time.Second)
}

// rollupStatsEvery is rollupStats with a round every every.
func rollupStatsEvery(ctx context.Context, db storage.Store, log *slog.Logger, every time.Duration) {
	const batch = 5000
	t := time.NewTicker(every)
	defer t.Stop()
	stats := outage.New(log, slog.LevelWarn, "rolling up delivery stats", "delivery stats rolled up again")
	suspects := outage.New(log, slog.LevelWarn, "rolling up suspect totals", "suspect totals rolled up again")
	for {
		n, err := db.RollupStats(ctx, batch)
		if ctx.Err() == nil {
			stats.Note(time.Now(), err)
		}
		ns, err := db.RollupSuspects(ctx, batch)
		if ctx.Err() == nil {
			suspects.Note(time.Now(), err)
		}
		if n == batch || ns == batch {
			continue // a backlog (first start on a large database): keep going
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// newConsole builds the console's server, adapting the receiver's sources to what
// package web declares and handing it the receiver's key derivation as a function
// (web never imports receiver). wake is called after a key is reprocessed, so that the
// dispatcher takes it at once; clockSkew (may be nil) is the intake's
// Receiver.ClockSkew, for the dashboard. edit, if any, completes the console's
// configuration (serve's alerts).
func newConsole(ctx context.Context, db storage.Store, sources []receiver.Source, cfg config, log *slog.Logger,
	wake func(), clockSkew func() (time.Duration, int), edit ...func(*web.Config)) (*web.Server, error) {
	byName := map[string]receiver.Source{}
	for _, s := range sources {
		byName[s.Name] = s
	}
	wc := web.Config{
		Store:           db,
		Sources:         consoleSources(sources, cfg),
		StuckAfter:      cfg.StuckAfter,
		MaxBody:         cfg.MaxBody,
		ConsoleNames:    cfg.ConsoleNames,
		IdleTimeout:     cfg.SessionIdle,
		AbsoluteTimeout: cfg.SessionMax,
		Wake:            wake,
		ClockSkew:       clockSkew,
		Static:          static.FS,
		Now:             db.Clock,
		Logger:          log,
		Events: func(name string, h http.Header, body []byte) ([][]byte, error) {
			src, ok := byName[name]
			if !ok {
				return nil, errors.New("unknown source")
			}
			return src.Events(h, body)
		},
		Derive: func(name string, h http.Header, body []byte) (storage.Derivation, error) {
			src, ok := byName[name]
			if !ok {
				return storage.Derivation{}, errors.New("unknown source")
			}
			return receiver.Derive(src.Keys, h, body)
		},
		Probe: func(name string, h http.Header, body []byte) (storage.Probe, error) {
			src, ok := byName[name]
			if !ok {
				return storage.Probe{}, errors.New("unknown source")
			}
			return receiver.ProbeFor(&src, h, body, db.Clock())
		},
		RevealSecret: func(ctx context.Context, name string) (string, error) {
			return db.Setting(ctx, generatedSecretSetting(name))
		},
		ApprovalThreshold: cfg.ApprovalThreshold,
	}
	for _, e := range edit {
		e(&wc)
	}
	return web.New(ctx, wc)
}

func generatedSecretSetting(source string) string { return "source." + source + ".secret" }

// consoleSources describes the sources for the console, their secrets masked: the
// console never holds a configured secret, only where it comes from. Each source's
// settings are listed as `hookdedup sources` lists them, with where each came from.
func consoleSources(sources []receiver.Source, cfg config) []web.Source {
	configs := map[string]sourceConfig{}
	for _, sc := range cfg.Sources {
		configs[sc.Name] = sc
	}
	out := make([]web.Source, 0, len(sources))
	for _, s := range sources {
		ws := web.Source{
			Name: s.Name, Scheme: s.Verifier.Scheme(), Timestamped: s.Verifier.Timestamped(), Integrity: s.Verifier.Integrity(),
			EventID: s.Keys.EventIDText(), KeyFields: s.Keys.KeyFields, TTL: s.TTL, ForwardURL: s.ForwardURL,
			MaxAttempts: s.MaxAttempts, AmountField: s.AmountField, CurrencyField: s.CurrencyField, Batch: s.Batch,
			PropertyField: s.PropertyField, BookingField: s.BookingField, StatusField: s.StatusField,
		}
		sc := configs[s.Name]
		for _, m := range maskedSecrets(sc) {
			ws.Secrets = append(ws.Secrets, web.Secret{Masked: m.masked, Origin: m.origin, Revealable: m.generated})
		}
		if p, ok := provider.Lookup(sc.Provider); ok {
			ws.Provider, ws.ProviderTitle, ws.ProviderNote = p.Name, p.Title, p.Note
		}
		// The sources were built from these tables, so settling them again cannot fail;
		// if it did, the page would show no settings rather than wrong ones.
		shown, _ := describeSource(sc, s)
		for _, set := range shown {
			if set.secret {
				continue // the secrets are listed on their own, masked
			}
			ws.Settings = append(ws.Settings, web.SourceSetting{Name: set.name, Value: set.value,
				FromPreset: set.origin == fromPreset, Default: set.origin == fromDefault})
		}
		out = append(out, ws)
	}
	return out
}
