package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/hookdedup/hookdedup/receiver"
	"github.com/hookdedup/hookdedup/receiver/alert"
	"github.com/hookdedup/hookdedup/receiver/signature"
	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/outage"
	"github.com/hookdedup/hookdedup/web"
)

func newLogger(level string, e env) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log_level: %q is not one of debug, info, warn, error", level)
	}
	return slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: l})), nil
}

// checkServe builds the sources with a stand-in for each secret kept in the database,
// then the alert rules and channels, which name the sources, so that a start that
// cannot serve (a misspelt scheme, two sources of one name, a mistake in the alerting)
// is refused before anything is made for it: the database, which it may make or
// upgrade, or the ACME cache. On PostgreSQL an upgrade that a mistake in the alerting
// then left without a replica stopped the earlier version's replicas too.
func checkServe(cfg config, e env) error {
	sources, err := cfg.sources(e.getenv, func(name string) (string, error) { return standInSecret(cfg, name), nil })
	if err != nil {
		return err
	}
	names := make([]string, len(sources))
	for i, s := range sources {
		names[i] = s.Name
	}
	_, _, err = cfg.checkedAlerting(e.getenv, names)
	return err
}

// openStore opens the configured database and builds the sources, whose generated
// secrets live in it. log is storage's, as for openDB. serve has checked them first
// (checkServe).
func openStore(ctx context.Context, cfg config, e env, log *slog.Logger) (storage.Store, []receiver.Source, error) {
	db, err := cfg.openDB(ctx, log, false, true)
	if err != nil {
		return nil, nil, err
	}
	sources, err := cfg.sources(e.getenv, storedSecrets(ctx, db))
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	return db, sources, nil
}

// standInSecret is a secret of the scheme of source name that its verifier takes, for
// checking the sources before the database that keeps the real one is opened.
func standInSecret(cfg config, name string) string {
	for _, sc := range cfg.Sources {
		if sc.Name != name {
			continue
		}
		if s, err := sc.settle(); err == nil {
			return signature.Placeholder(s.Signature)
		}
	}
	return signature.Placeholder("standard-webhooks")
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
// no user at all, and returns that password ("" when users exist). Printed to stdout, it
// lands in the service's journal: the console makes its user choose their own at the
// first sign-in, after which it no longer works.
func ensureAdmin(ctx context.Context, db storage.Store) (string, error) {
	n, err := db.CountUsers(ctx)
	if err != nil || n > 0 {
		return "", err
	}
	pw := newPassword()
	hash, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.DefaultCost)
	if err != nil {
		return "", err
	}
	u := storage.User{Name: "admin", Role: storage.RoleAdmin, PasswordHash: string(hash), MustChangePassword: true}
	if _, err := db.CreateUser(ctx, u, "serve (first start)"); err != nil {
		if errors.Is(err, storage.ErrExists) {
			return "", nil // another process made it first
		}
		return "", err
	}
	return pw, nil
}

func runServe(ctx context.Context, args []string, e env) error {
	flags := newFlags("serve", e)
	browse := flags.fs.Bool("open", false, "open the console in the default browser once the server listens")
	pos, err := flags.parse(args)
	if err != nil {
		return err
	}
	if err := noArguments("serve", pos, "--addr"); err != nil {
		return err
	}
	cfg, err := flags.load(e)
	if err != nil {
		return err
	}
	p, err := openProgram(ctx, cfg, e)
	if err != nil {
		return err
	}
	defer p.close()
	p.browse = *browse
	return p.run(ctx)
}

// serveGCPercent is serve's garbage collection target unless GOGC sets one. serve's live
// heap is a few MB (SQLite's page cache is C memory, outside it), so at Go's default of
// 100 the collector runs every few hundred deliveries under load, and intake spends a
// share of its CPU on it. At 400 the heap grows to five times what is live (at least
// 16 MB) between collections: some MB more for a fraction of the collector's work.
const serveGCPercent = 400

// serveMemoryLimit is serve's soft memory limit unless GOMEMLIMIT sets one. A burst of
// large bodies (64 senders of 1 MiB each) makes the live heap a hundred times its usual
// size, and five times that would be more than Go's default target would let it reach:
// past this limit the collector runs as often as it must, so the target above costs
// memory only while there is little of it in use.
const serveMemoryLimit = 512 << 20

// setServeGC sets serve's collection target and soft memory limit, each unless the
// environment has set it.
func setServeGC(getenv func(string) string) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(serveGCPercent)
	}
	if getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(serveMemoryLimit)
	}
}

// program is `hookdedup serve`: openProgram builds it, run serves until the context
// ends, close releases the database. Building and running are apart so that what is
// built (the listeners, the HTTP servers) can be reached before it runs.
type program struct {
	// reload takes SIGHUP from the start, migrations included (reloadOnSignal): its
	// default action ends the process on the spot, requests in flight unanswered, and
	// operators send it out of habit (systemctl reload).
	reload chan os.Signal
	cfg    config
	log    *slog.Logger
	stdout io.Writer
	browse bool // open the console in a browser once listening

	db         storage.Store
	sources    []receiver.Source
	metrics    *receiver.Metrics
	dispatcher *receiver.Dispatcher
	intake     *receiver.Receiver
	alerts     *alert.Engine
	site       *web.Server // the console and the API
	// public listens on addr; console on console_addr, nil when that is unset (then
	// public serves the console too).
	public, console *endpoint
	// With HTTPS on: tls serves public's certificate, and plain is the plain-HTTP
	// listener on http_addr (ACME challenges, redirects to https). Both nil otherwise.
	tls   *tlsSetup
	plain *endpoint
}

// openProgram builds everything serve runs: the database and the sources, the first
// admin when there is no user, intake and dispatch, the console, and the HTTP servers
// on their listeners. On error, what was opened is closed again.
func openProgram(ctx context.Context, cfg config, e env) (_ *program, err error) {
	setServeGC(e.getenv)
	p := &program{cfg: cfg, stdout: e.stdout, reload: make(chan os.Signal, 1)}
	signal.Notify(p.reload, syscall.SIGHUP)
	defer func() {
		if err != nil {
			stopReload(p.reload)
		}
	}()
	if p.log, err = newLogger(cfg.LogLevel, e); err != nil {
		return nil, err
	}
	for _, line := range cfg.IgnoredEnv {
		p.log.Warn(line)
	}
	if shared := cfg.sharedSecretFile(); shared != "" {
		p.log.Warn(shared)
	}
	if writable := cfg.writableFile(); writable != "" {
		p.log.Warn(writable)
	}
	defer func() {
		if err != nil {
			p.close()
		}
	}()
	// Every address bound and HTTPS ready before the database: a port taken, an
	// address that clashes with another, or certificate files that cannot serve must
	// not leave a database made or migrated behind them. The sources first, as the
	// ACME cache is made beside the database.
	if err := checkServe(cfg, e); err != nil {
		return nil, err
	}
	if err := p.listen(); err != nil {
		return nil, err
	}
	if p.db, p.sources, err = openStore(ctx, cfg, e, p.log); err != nil {
		return nil, err
	}
	p.warnSourcelessKeys(ctx)
	p.metrics = receiver.NewMetrics(nil)
	p.dispatcher = receiver.NewDispatcher(receiver.DispatchConfig{
		Store:      p.db,
		Sources:    p.sources,
		StuckAfter: cfg.StuckAfter,
		Now:        p.db.Clock,
		Logger:     p.log,
		Metrics:    p.metrics,
	})
	p.intake = receiver.New(receiver.Config{
		Sources:    p.sources,
		Store:      p.db,
		MaxBody:    cfg.MaxBody,
		Clock:      p.db.Clock,
		Logger:     p.log,
		Metrics:    p.metrics,
		OnAccepted: p.dispatcher.Wake,
		// During a change of the sources one replica at a time, a source this one
		// records only may be forwarded by another: its deliveries wait for that one.
		ForwardedElsewhere: p.dispatcher.ForwardedElsewhere,
	})
	intake := http.NewServeMux()
	p.intake.Register(intake)
	showAlerts, err := p.openAlerts(e)
	if err != nil {
		return nil, err
	}
	consoleSrv, err := newConsole(ctx, p.db, p.sources, cfg, p.log, p.dispatcher.Wake, p.intake.ClockSkew, showAlerts)
	if err != nil {
		return nil, err
	}
	p.site = consoleSrv
	public, console := routes(intake, consoleSrv, p.metrics.Handler(), cfg)
	p.public.handle(p.intake.CleanPaths(public), cfg)
	if p.console != nil {
		// net/http answers "OPTIONS *" itself, 200 and nothing else, ahead of the
		// handler: the public address answers it as whatever else it does not serve.
		p.public.srv.DisableGeneralOptionsHandler = true
	}
	if p.console != nil {
		p.console.handle(console, cfg)
	}
	// Last, once every address is bound: a start that fails (a port taken, a typo in
	// addr) would print the one-time password beside its error, and the start that
	// then serves would print none.
	pw, err := ensureAdmin(ctx, p.db)
	if err != nil {
		return nil, fmt.Errorf("create admin user: %w", err)
	}
	if pw != "" {
		// Printed, never logged: it is shown once and only here. Lost (stdout on a full
		// disk), it is never printed again, as a user now exists: the log says how to set
		// one instead.
		if _, err := fmt.Fprintf(e.stdout, "created user admin with one-time password: %s\n", pw); err != nil {
			p.log.Warn("created user admin, but its one-time password could not be printed: set one with "+
				"`hookdedup user password admin` (the password on stdin) and this serve's --config or --database", "err", err)
		}
	}
	return p, nil
}

// listen binds addr, console_addr when set, and with HTTPS on, http_addr, and makes
// HTTPS ready (openHTTPS). The endpoints get their handlers later (handle).
func (p *program) listen() (err error) {
	if p.public, err = newEndpoint("addr", p.cfg.Addr, p.cfg, p.log); err != nil {
		return err
	}
	if p.cfg.ConsoleAddr != "" {
		if p.console, err = newEndpoint("console_addr", p.cfg.ConsoleAddr, p.cfg, p.log); err != nil {
			return err
		}
	}
	return p.openHTTPS()
}

// openHTTPS turns HTTPS on for the public address when the configuration asks for it,
// and listens on http_addr for plain HTTP. The console's own address stays plain HTTP:
// it is meant for loopback, reached through an SSH tunnel, or for a VPN address, and
// both already encrypt the way there; a certificate for the public names would not fit
// those addresses anyway. run warns when it is on a public address.
func (p *program) openHTTPS() error {
	s := p.cfg.tls()
	if !s.enabled() {
		return nil
	}
	// The bound address: the redirect to https names its port, chosen by the system
	// for ":0".
	s.Addr = p.public.ln.Addr().String()
	setup, err := newTLS(s, p.log)
	if err != nil {
		return err
	}
	plain, err := newEndpoint("http_addr", setup.HTTPAddr, p.cfg, p.log)
	if err != nil {
		return err
	}
	plain.handle(setup.HTTPHandler, p.cfg)
	p.tls, p.plain = setup, plain
	p.public.tls = setup.Config
	return nil
}

// run starts the background loops (sweeps, dispatch, the dashboard's roll-up) and serves
// until ctx ends or serving fails, then stops everything but the database, in order.
func (p *program) run(ctx context.Context) error {
	names := make([]string, len(p.sources))
	for i, s := range p.sources {
		names[i] = s.Name
	}
	attrs := []any{logAddr, p.public.ln.Addr().String()}
	if p.console != nil {
		attrs = append(attrs, logConsoleAddr, p.console.ln.Addr().String())
	}
	if p.plain != nil {
		attrs = append(attrs, logHTTPAddr, p.plain.ln.Addr().String())
	}
	attrs = append(attrs, logMetrics, metricsMode(p.cfg), logDatabase, displayPath(p.cfg.Database), logConfig, p.cfg.File, logSources, strings.Join(names, ","))
	p.log.Info("serving", attrs...)
	p.tellConsoleNames()
	// A loopback addr with trusted_proxies is one a reverse proxy publishes: the console
	// is as exposed there, and every request from the proxy's address passes for the
	// proxy's, with any name as Host and any forwarded address (a browser's through an
	// SSH tunnel to that address too, which a page rebound to 127.0.0.1 can use).
	proxied := len(p.cfg.TrustedProxies) > 0
	if p.console == nil && (!loopback(p.public.ln.Addr()) || proxied) {
		exposed := "the console and the JSON API are"
		if p.cfg.MetricsToken != "" {
			exposed = "the console, the JSON API and /metrics are"
		}
		where := p.cfg.Addr
		if loopback(p.public.ln.Addr()) {
			where += " through the reverse proxies of trusted_proxies, which any client on their addresses passes for (an SSH tunnel's too)"
		}
		p.log.Warn(fmt.Sprintf("%s exposed on %s; set console_addr to serve them privately", exposed, where))
	}
	if p.console != nil && !privateAddr(p.console.ln.Addr()) {
		// With HTTPS on addr or without it: console_addr is plain HTTP either way, and
		// it serves /metrics without a token, as an address meant to be private.
		metrics := ""
		if p.cfg.MetricsToken == "" {
			metrics = ", and /metrics is open there to anyone who reaches it (set metrics_token)"
		}
		p.log.Warn(fmt.Sprintf("console_addr %s serves plain HTTP on an address that is neither loopback nor private: passwords and session cookies cross the network unencrypted%s; use 127.0.0.1 and an SSH tunnel, or a VPN address", p.cfg.ConsoleAddr, metrics))
	}
	fmt.Fprintf(p.stdout, "hookdedup listening on %s\n", p.public.url())
	consoleURL := p.public.url()
	if p.console != nil {
		consoleURL = p.console.url()
		fmt.Fprintf(p.stdout, "hookdedup console on %s\n", consoleURL)
	}
	if p.plain != nil {
		fmt.Fprintf(p.stdout, "hookdedup plain HTTP on %s (ACME challenges; redirects to https)\n", p.plain.url())
	}
	if p.browse {
		if err := openBrowser(consoleURL + "/"); err != nil {
			p.log.Warn("could not open a browser", logErr, err)
		}
	}

	business, correlation := longestWindows(p.sources)
	if business > p.cfg.Retention {
		// A business key outlives its delivery then: a late redelivery of a swept
		// delivery's event, under its own id, is taken for a double of it.
		p.log.Warn("retention is shorter than the longest business_window: a redelivery of an event whose delivery retention swept is flagged as a business-key double (or blocked, with business_key_blocks); keep retention at least as long",
			"retention", p.cfg.Retention, "business_window", business)
	}
	for _, s := range p.sources {
		// A timestamped scheme refuses a replay after its tolerance, and its event id
		// catches one within it (ttl outlasts the tolerance): not when that id is a
		// header the signature leaves out, which a replay may change.
		for _, from := range s.Keys.EventID {
			name, header := strings.CutPrefix(storage.PlacePointer(from), "header:")
			if header && s.Verifier.Timestamped() && !signature.SignsIDHeader(s.Verifier.Scheme(), name) {
				p.log.Warn(fmt.Sprintf("source %q: event_id %q is a header the %s signature does not cover: a captured delivery sent again within the tolerance under another id is taken as a new event; leave event_id out to key on %q, which it covers",
					s.Name, from, s.Verifier.Scheme(), s.Verifier.DefaultEventID()))
			}
		}
	}
	bg, stopBG := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		receiver.RunSweeps(bg, p.db, receiver.SweepConfig{Retention: p.cfg.Retention, Remember: p.cfg.Remember,
			BusinessWindow: business, CorrelationWindow: correlation, Now: p.db.Clock}, p.metrics, p.log)
	})
	p.dispatcher.Look(bg) // before intake serves: see ForwardedElsewhere
	wg.Go(func() { p.dispatcher.Run(bg) })
	wg.Go(func() { rollupStats(bg, p.db, p.log) })
	wg.Go(func() { p.alerts.Run(bg) })
	wg.Go(func() {
		p.db.RunBulkActions(bg, storage.BulkRunConfig{StuckAfter: p.cfg.StuckAfter, Wake: p.dispatcher.Wake, Logger: p.log})
	})
	// Ended as soon as serve stops serving, before the drain: a certificate that a SIGHUP
	// has ordered again (OrderAgain) is not ordered once the listeners the CA validates
	// through have closed.
	serving, stopServing := context.WithCancel(bg)
	wg.Go(func() { p.reloadOnSignal(serving, p.reload) })
	newerSchema := make(chan error, 1)
	wg.Go(func() { watchSchema(bg, p.db, p.log, newerSchema) })
	stopBackground := func() {
		stopBG()
		wg.Wait()
	}
	shutdown := func() error {
		stopServing()
		return p.shutdown(stopBackground)
	}

	endpoints := p.endpoints()
	serveErr := make(chan error, len(endpoints))
	for _, e := range endpoints {
		go func() {
			if err := e.serve(); !errors.Is(err, http.ErrServerClosed) {
				serveErr <- fmt.Errorf("serve %s: %w", e.setting, err)
			}
		}()
	}
	if p.tls != nil {
		// Once the listeners serve: under ACME the CA validates through them.
		wg.Go(func() { p.tls.Run(bg) })
	}
	select {
	case err := <-serveErr:
		// One address failed: stop the other too, as for a signal, and say why.
		return errors.Join(err, shutdown())
	case err := <-newerSchema:
		p.log.Error("a newer version migrated the database: stopping", logErr, err)
		return errors.Join(err, shutdown())
	case <-ctx.Done():
	}
	return shutdown()
}

// tellConsoleNames logs, when the console is served over plain HTTP on an address a
// private network reaches, the names it answers to there (web.HostServed): a LAN's
// internal name (hookdedup.corp.example.com) gets 421 until console_names lists it, and
// the operator learns why at the start, not from a user's first try.
func (p *program) tellConsoleNames() {
	e := p.console
	if e == nil {
		e = p.public
	}
	tcp, ok := e.ln.Addr().(*net.TCPAddr)
	if e.tls != nil || !ok || (!tcp.IP.IsUnspecified() && !privateAddr(tcp)) {
		return
	}
	names := "none"
	if len(p.cfg.ConsoleNames) > 0 {
		names = strings.Join(p.cfg.ConsoleNames, ",")
	}
	p.log.Info("the console answers over plain HTTP, from a private network, to its addresses, localhost, "+
		"names without a dot or under .local, .lan, .internal or .home.arpa, and the names in console_names; "+
		"any other name gets 421: add the name users reach it by to console_names",
		logAddr, tcp.String(), logConsoleNames, names)
}

// warnSourcelessKeys logs each source that the database holds processing or failed keys
// of but the configuration does not have (renamed or removed with events still owed
// downstream): no dispatcher of this configuration sends them, and they wait for one
// that has the source. Not an error: during a change of the sources one replica at a
// time, another replica may still have it.
func (p *program) warnSourcelessKeys(ctx context.Context) {
	counts, err := p.db.StuckCounts(ctx, p.db.Clock().AddDate(100, 0, 0)) // every processing key
	if err != nil {
		p.log.Warn("could not count the keys of sources the configuration does not have", logErr, err)
		return
	}
	for _, name := range slices.Sorted(maps.Keys(counts)) {
		if slices.ContainsFunc(p.sources, func(s receiver.Source) bool { return s.Name == name }) {
			continue
		}
		p.log.Warn(fmt.Sprintf("source %q is not in the configuration, and %s processing or failed: "+
			"none of them is sent downstream until a replica that has the source runs; put the source back, "+
			"or release them (hookdedup keys --source %s)", name, count(counts[name], "of its keys is", "of its keys are"), name))
	}
}

// schemaCheckEvery is how often serve looks for migrations it does not know. Tests
// lower it.
var schemaCheckEvery = 5 * time.Second

// watchSchema sends an error on newer, once, when the database records migrations this
// build does not have: a newer version's serve, started on the same PostgreSQL database
// while this replica still runs, migrated it. This one would go on running on a schema
// it does not know, skipping the upkeep the new one asks for (a newer replica reads
// tables this one never writes): it stops instead, and a restart of it refuses the
// database with the same words. Until it looks, it runs for up to schemaCheckEvery on
// the new schema. A failed look (the database unreachable for a moment) is logged and
// tried again.
func watchSchema(ctx context.Context, db storage.Store, log *slog.Logger, newer chan<- error) {
	t := time.NewTicker(schemaCheckEvery)
	defer t.Stop()
	// While the database cannot be reached each look fails alike, every
	// schemaCheckEvery for as long as that lasts.
	fails := outage.New(log, slog.LevelWarn, "could not check the database's schema", "the database's schema checked again")
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		unknown, err := db.UnknownMigrations(ctx)
		if ctx.Err() == nil {
			fails.Note(time.Now(), err)
		}
		if err != nil {
			continue
		}
		if len(unknown) > 0 {
			newer <- storage.NewerSchemaError(unknown)
			return
		}
	}
}

// endpoints are the addresses the program listens on: the public one, then the
// console's and the plain-HTTP one beside HTTPS, where they are set.
func (p *program) endpoints() []*endpoint {
	out := []*endpoint{p.public}
	for _, e := range []*endpoint{p.console, p.plain} {
		if e != nil {
			out = append(out, e)
		}
	}
	return out
}

// reloadOnSignal reloads the certificate files at each signal on sig until ctx ends: an
// operator or a certificate tool's hook sends SIGHUP after replacing them. A failed
// reload keeps the previous certificate and is logged by Reload itself. Without
// certificate files it says that nothing is reloaded.
func (p *program) reloadOnSignal(ctx context.Context, sig <-chan os.Signal) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-sig:
			if p.tls == nil {
				p.log.Info("SIGHUP: nothing to reload: serve reads its configuration at start; restart it to apply a change")
				continue
			}
			if p.tls.files == nil {
				ordering := p.tls.OrderAgain(ctx)
				if len(ordering) == 0 {
					p.log.Info("SIGHUP: nothing to reload, ACME renews the certificates by itself")
				} else {
					p.log.Info("SIGHUP: ordering the certificates not obtained yet at once", logDomains, strings.Join(ordering, ","))
				}
				continue
			}
			p.log.Info("SIGHUP: reloading the certificate files")
			p.tls.Reload()
		}
	}
}

// shutdown stops a running program in order: the servers take no new request and
// finish those in flight (for up to drainTimeout), the last rejection counts are
// stored, then the background loops end. The database stays open for close.
func (p *program) shutdown(stopBackground func()) error {
	drain := drainTimeout(p.cfg)
	p.log.Info("shutting down: finishing requests in flight", logWithin, drain)
	// A CSV export may run for 30 minutes: it is cut off, not waited for.
	p.site.EndLongResponses()
	// A SIGINT or SIGTERM during the stop cuts the requests still in flight: nothing
	// answered 200 is lost (a 200 follows the commit), and a cut sender retries.
	again := make(chan os.Signal, 1)
	signal.Notify(again, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(again)
	ctx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	var cut atomic.Bool
	go func() {
		select {
		case <-again:
			cut.Store(true)
			p.log.Warn("signal during the stop: cutting off the requests in flight")
			cancel()
		case <-ctx.Done():
		}
	}()
	var errs []error
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, e := range p.endpoints() {
		wg.Go(func() {
			if err := e.srv.Shutdown(ctx); err != nil {
				e.srv.Close()
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s: %w", e.setting, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	err := errors.Join(errs...)
	if cut.Load() {
		err = nil
	}
	// The last seconds' counts of rejections not stored individually, before the
	// database closes: with a time of their own, however long the drain took.
	fctx, fcancel := context.WithTimeout(context.Background(), flushTimeout)
	defer fcancel()
	if ferr := p.intake.FlushRejections(fctx); ferr != nil {
		p.log.Warn("rejection counts not stored", logErr, ferr)
	}
	stopBackground()
	if err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	p.log.Info("stopped")
	return nil
}

// drainTimeout is how long shutdown waits for the requests in flight: as long as one
// may take under the server's timeouts. Its headers arrive within read_header_timeout;
// then its body may take until read_timeout (counted from the start of the request) and
// its answer until write_timeout. A delivery whose body is still arriving when the
// signal comes is stored and answered, not cut off with a 503.
func drainTimeout(cfg config) time.Duration {
	return cfg.ReadHeaderTimeout + max(cfg.ReadTimeout, cfg.WriteTimeout)
}

// flushTimeout bounds the store of the last rejection counts at shutdown.
const flushTimeout = 10 * time.Second

// close releases what openProgram took: the listeners, if they never served, and the
// database, if it was opened. Call it once run has returned.
func (p *program) close() {
	stopReload(p.reload)
	for _, e := range []*endpoint{p.public, p.console, p.plain} {
		if e != nil {
			e.ln.Close() // already closed once served: the error says only that
		}
	}
	if p.db == nil {
		return // openProgram failed before it opened one
	}
	if err := p.db.Close(); err != nil {
		p.log.Error("closing database", logErr, err)
	}
}

// stopReload stops SIGHUP reaching reload and ignores it from then on: once serve no
// longer reloads, SIGHUP's default action would end the process with status 129 between
// "stopped" and its exit, and README promises that SIGHUP never stops serve (systemctl
// reload during a stop, or a terminal closed while it shuts down).
//
// Ignored first: stopped first, a SIGHUP arriving before the Ignore took the default
// action. Ignore takes SIGHUP off reload too, and Stop then leaves it ignored.
func stopReload(reload chan os.Signal) {
	signal.Ignore(syscall.SIGHUP)
	signal.Stop(reload)
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
