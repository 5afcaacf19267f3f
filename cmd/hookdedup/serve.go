package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/hookdedup/hookdedup/receiver"
	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/web"
)

func newLogger(level string, e env) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log_level: %q is not one of debug, info, warn, error", level)
	}
	return slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: l})), nil
}

// openStore opens the configured database and builds the sources, whose generated
// secrets live in it. log is storage's, as for openDB.
func openStore(ctx context.Context, cfg config, e env, log *slog.Logger) (*storage.DB, []receiver.Source, error) {
	db, err := cfg.openDB(log)
	if err != nil {
		return nil, nil, err
	}
	sources, err := cfg.sources(e.getenv, func(name string) (string, error) {
		return db.SettingOrInit(ctx, "source."+name+".secret", newSecret)
	})
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	return db, sources, nil
}

// newSecret returns a standard-webhooks secret: whsec_ and 32 random bytes in base64.
func newSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return "whsec_" + base64.StdEncoding.EncodeToString(b), nil
}

// newPassword returns a random password of 20 URL-safe characters.
func newPassword() string {
	b := make([]byte, 15)
	rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// ensureAdmin creates the user "admin" with a one-time password when the database holds
// no user at all, and returns that password ("" when users exist).
func ensureAdmin(ctx context.Context, db *storage.DB) (string, error) {
	n, err := db.CountUsers(ctx)
	if err != nil || n > 0 {
		return "", err
	}
	pw := newPassword()
	hash, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.DefaultCost)
	if err != nil {
		return "", err
	}
	if _, err := db.CreateUser(ctx, storage.User{Name: "admin", Role: storage.RoleAdmin, PasswordHash: string(hash)}, "serve (first start)"); err != nil {
		if errors.Is(err, storage.ErrExists) {
			return "", nil // another process made it first
		}
		return "", err
	}
	return pw, nil
}

func runServe(ctx context.Context, args []string, e env) error {
	flags := newFlags("serve", e)
	open := flags.fs.Bool("open", false, "open the console in the default browser once the server listens")
	if _, err := flags.parse(args); err != nil {
		return err
	}
	cfg, err := flags.load(e)
	if err != nil {
		return err
	}
	log, err := newLogger(cfg.LogLevel, e)
	if err != nil {
		return err
	}
	db, sources, err := openStore(ctx, cfg, e, log)
	if err != nil {
		return err
	}
	defer func() {
		if err := db.Close(); err != nil {
			log.Error("closing database", logErr, err)
		}
	}()
	pw, err := ensureAdmin(ctx, db)
	if err != nil {
		return fmt.Errorf("create admin user: %w", err)
	}
	if pw != "" {
		// Printed, never logged: it is shown once and only here.
		fmt.Fprintf(e.stdout, "created user admin with one-time password: %s\n", pw)
	}

	metrics := receiver.NewMetrics(nil)
	dispatcher := receiver.NewDispatcher(receiver.DispatchConfig{
		Store:      db,
		Sources:    sources,
		StuckAfter: cfg.StuckAfter,
		Logger:     log,
		Metrics:    metrics,
	})
	rc := receiver.New(receiver.Config{
		Sources:    sources,
		Store:      db,
		MaxBody:    cfg.MaxBody,
		Logger:     log,
		Metrics:    metrics,
		OnAccepted: dispatcher.Wake,
	})
	mux := http.NewServeMux()
	rc.Register(mux)
	if err := mountConsole(ctx, mux, db, sources, cfg, log, dispatcher.Wake); err != nil {
		return err
	}

	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	srv := &http.Server{
		// Behind a trusted reverse proxy, the receiver and the console alike see the
		// client's address and scheme.
		Handler:           web.TrustedProxies(cfg.TrustedProxies)(mux),
		ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes:    64 << 10,         // webhooks carry a few headers; 1 MiB is net/http's default
		ReadTimeout:       30 * time.Second, // a slow-loris upload cannot hold a connection for long
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	names := make([]string, len(sources))
	for i, s := range sources {
		names[i] = s.Name
	}
	log.Info("serving", logAddr, ln.Addr().String(), logDatabase, cfg.Database, logConfig, cfg.File, logSources, strings.Join(names, ","))
	fmt.Fprintf(e.stdout, "hookdedup listening on http://%s\n", ln.Addr())
	if *open {
		if err := openBrowser("http://" + ln.Addr().String() + "/"); err != nil {
			log.Warn("could not open a browser", logErr, err)
		}
	}

	bg, stopBG := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		receiver.RunSweeps(bg, db, receiver.SweepConfig{Retention: cfg.Retention}, metrics, log)
	})
	wg.Go(func() { dispatcher.Run(bg) })
	wg.Go(func() { rollupStats(bg, db, log) })

	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	select {
	case err := <-serveErr:
		stopBG()
		wg.Wait()
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down: finishing requests in flight")
	shutCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	err = srv.Shutdown(shutCtx)
	// The last seconds' counts of rejections not stored individually, before the
	// database closes.
	if ferr := rc.FlushRejections(shutCtx); ferr != nil {
		log.Warn("rejection counts not stored", logErr, ferr)
	}
	stopBG()
	wg.Wait()
	if err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	log.Info("stopped")
	return nil
}

// openBrowser asks the desktop to open url, without waiting for the browser.
func openBrowser(url string) error {
	var cmd *exec.Cmd
	switch runtime.GOOS {
	case "darwin":
		cmd = exec.Command("open", url)
	case "windows":
		cmd = exec.Command("rundll32", "url.dll,FileProtocolHandler", url)
	default:
		cmd = exec.Command("xdg-open", url)
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	go cmd.Wait() // reap it
	return nil
}
