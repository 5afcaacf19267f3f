package main

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/hookdedup/hookdedup/receiver"
	"github.com/hookdedup/hookdedup/receiver/signature"
	"github.com/hookdedup/hookdedup/storage"
)

// config is the whole configuration after defaults, the file, the environment and the
// flags have been applied, in that order.
type config struct {
	File       string // the file it came from, "" when none
	Addr       string
	Database   string
	Retention  time.Duration
	StuckAfter time.Duration
	// SessionIdle and SessionMax end a console session after that long without a
	// request, and that long after sign-in.
	SessionIdle, SessionMax time.Duration
	MaxBody                 int64
	Sync                    string
	LogLevel                string
	Sources                 []sourceConfig

	// TrustedProxies are the peers whose forwarding headers (X-Forwarded-For,
	// Forwarded, X-Forwarded-Proto) are believed; see web.TrustedProxies.
	TrustedProxies []netip.Prefix
}

// sourceConfig is one [[source]] table as written in the file.
type sourceConfig struct {
	Name              string   `toml:"name"`
	Signature         string   `toml:"signature"`
	Secret            secrets  `toml:"secret"`
	SecretEnv         string   `toml:"secret_env"`
	SignatureHeader   string   `toml:"signature_header"`
	SignatureEncoding string   `toml:"signature_encoding"`
	SignaturePrefix   string   `toml:"signature_prefix"`
	BasicUser         string   `toml:"basic_user"`
	TokenHeader       string   `toml:"token_header"`
	TokenQuery        string   `toml:"token_query"`
	Tolerance         string   `toml:"tolerance"`
	EventID           *string  `toml:"event_id"`
	KeyFields         []string `toml:"key_fields"`
	TTL               string   `toml:"ttl"`
	ForwardURL        string   `toml:"forward_url"`
	MaxAttempts       int      `toml:"max_attempts"`
	AttemptTimeout    string   `toml:"attempt_timeout"`
	MaxBackoff        string   `toml:"max_backoff"`
	AmountField       string   `toml:"amount_field"`
	PropertyField     *string  `toml:"property_field"`
	BookingField      *string  `toml:"booking_field"`
	StatusField       *string  `toml:"status_field"`

	// generated marks the zero-config source whose secret lives in the database.
	generated bool
}

// fileConfig is the TOML file's shape.
type fileConfig struct {
	Addr        string         `toml:"addr"`
	Database    string         `toml:"database"`
	Retention   string         `toml:"retention"`
	StuckAfter  string         `toml:"stuck_after"`
	SessionIdle string         `toml:"session_idle"`
	SessionMax  string         `toml:"session_max"`
	MaxBody     int64          `toml:"max_body"`
	Sync        string         `toml:"synchronous"`
	LogLevel    string         `toml:"log_level"`
	Sources     []sourceConfig `toml:"source"`

	TrustedProxies []string `toml:"trusted_proxies"`
}

// parseDuration reads a Go duration string ("90s", "10m", "24h"); "" keeps def.
func parseDuration(s string, def time.Duration) (time.Duration, error) {
	if s == "" {
		return def, nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration (write it like \"90s\", \"10m\" or \"24h\")", s)
	}
	if v <= 0 {
		return 0, fmt.Errorf("%q must be positive", s)
	}
	return v, nil
}

// secrets accepts a single string or an array of strings (rotation).
type secrets []string

func (s *secrets) UnmarshalTOML(v any) error {
	switch v := v.(type) {
	case string:
		*s = secrets{v}
	case []any:
		out := make(secrets, 0, len(v))
		for _, e := range v {
			str, ok := e.(string)
			if !ok {
				return errors.New("must be a string or an array of strings")
			}
			out = append(out, str)
		}
		*s = out
	default:
		return errors.New("must be a string or an array of strings")
	}
	return nil
}

const (
	defaultConfigFile = "hookdedup.toml"
	defaultSourceName = "ota"
)

func defaultConfig() config {
	return config{
		Addr:        "127.0.0.1:8080",
		Database:    "hookdedup.db",
		Retention:   720 * time.Hour,
		StuckAfter:  10 * time.Minute,
		SessionIdle: 2 * time.Hour,
		SessionMax:  12 * time.Hour,
		MaxBody:     1 << 20,
		Sync:        "FULL",
		LogLevel:    "info",
	}
}

// defaultSource is the zero-config source: standard-webhooks signed with a secret
// generated on first start and kept in the database.
func defaultSource() sourceConfig {
	id := "header:webhook-id"
	return sourceConfig{
		Name:        defaultSourceName,
		Signature:   "standard-webhooks",
		EventID:     &id,
		KeyFields:   []string{"/property_id", "/booking_id", "/status", "/effective_date"},
		AmountField: "/refund/amount",
		generated:   true,
	}
}

// loadConfig reads the file at path (when explicit is false a missing file means "run on
// the defaults"), then applies the HOOKDEDUP_* variables. Flags are applied by the caller.
func loadConfig(path string, explicit bool, getenv func(string) string) (config, error) {
	cfg := defaultConfig()
	var fc fileConfig
	md, err := toml.DecodeFile(path, &fc)
	switch {
	case err == nil:
		cfg.File = path
		if undecoded := md.Undecoded(); len(undecoded) > 0 {
			return config{}, fmt.Errorf("%s: unknown setting %q", path, undecoded[0].String())
		}
	case errors.Is(err, os.ErrNotExist) && !explicit:
		// No file: the defaults, secure as they are.
	default:
		return config{}, fmt.Errorf("%s: %w", path, err)
	}
	if fc.Addr != "" {
		cfg.Addr = fc.Addr
	}
	if fc.Database != "" {
		cfg.Database = fc.Database
	}
	if cfg.Retention, err = parseDuration(fc.Retention, cfg.Retention); err != nil {
		return config{}, fmt.Errorf("%s: retention: %w", path, err)
	}
	if cfg.StuckAfter, err = parseDuration(fc.StuckAfter, cfg.StuckAfter); err != nil {
		return config{}, fmt.Errorf("%s: stuck_after: %w", path, err)
	}
	if cfg.SessionIdle, err = parseDuration(fc.SessionIdle, cfg.SessionIdle); err != nil {
		return config{}, fmt.Errorf("%s: session_idle: %w", path, err)
	}
	if cfg.SessionMax, err = parseDuration(fc.SessionMax, cfg.SessionMax); err != nil {
		return config{}, fmt.Errorf("%s: session_max: %w", path, err)
	}
	if fc.MaxBody != 0 {
		cfg.MaxBody = fc.MaxBody
	}
	if fc.Sync != "" {
		cfg.Sync = fc.Sync
	}
	if fc.LogLevel != "" {
		cfg.LogLevel = fc.LogLevel
	}
	if cfg.TrustedProxies, err = parseCIDRs(fc.TrustedProxies); err != nil {
		return config{}, fmt.Errorf("%s: trusted_proxies: %w", path, err)
	}
	cfg.Sources = fc.Sources
	if err := cfg.applyEnv(getenv); err != nil {
		return config{}, err
	}
	if len(cfg.Sources) == 0 {
		cfg.Sources = []sourceConfig{defaultSource()}
	}
	return cfg, nil
}

// applyEnv applies the HOOKDEDUP_<NAME> variables that are set.
func (c *config) applyEnv(getenv func(string) string) error {
	for _, s := range c.settings() {
		if v := getenv("HOOKDEDUP_" + strings.ToUpper(s.name)); v != "" {
			if err := s.set(v); err != nil {
				return fmt.Errorf("HOOKDEDUP_%s: %w", strings.ToUpper(s.name), err)
			}
		}
	}
	return nil
}

// setting is one top-level setting that the environment and flags may override.
type setting struct {
	name, usage string
	set         func(string) error
}

func (c *config) settings() []setting {
	str := func(p *string) func(string) error { return func(v string) error { *p = v; return nil } }
	dur := func(p *time.Duration) func(string) error {
		return func(v string) error {
			d, err := parseDuration(v, 0)
			*p = d
			return err
		}
	}
	return []setting{
		{"addr", "listen address (host:port)", str(&c.Addr)},
		{"database", "path of the SQLite database file", str(&c.Database)},
		{"retention", "how long deliveries stay browsable", dur(&c.Retention)},
		{"stuck_after", "a key processing for longer is stuck", dur(&c.StuckAfter)},
		{"session_idle", "a console session ends after this long without a request", dur(&c.SessionIdle)},
		{"session_max", "a console session ends this long after sign-in", dur(&c.SessionMax)},
		{"max_body", "largest accepted body in bytes", func(v string) error {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n <= 0 {
				return fmt.Errorf("%q is not a positive number of bytes", v)
			}
			c.MaxBody = n
			return nil
		}},
		{"synchronous", "SQLite durability: FULL or NORMAL", str(&c.Sync)},
		{"log_level", "debug, info, warn or error", str(&c.LogLevel)},
		{"trusted_proxies", "comma-separated CIDRs of reverse proxies whose X-Forwarded-For, Forwarded and X-Forwarded-Proto are believed",
			func(v string) error {
				p, err := parseCIDRs(strings.Split(v, ","))
				c.TrustedProxies = p
				return err
			}},
	}
}

// replayMargin is the slack minReplayTTL adds beyond the window in which a signed
// timestamp stays acceptable. The key's expiry is counted from the claim's clock reading,
// taken just after the signature check (so a few milliseconds later in one process); a
// minute also covers a stalled goroutine and modest clock skew between the checking and
// the claiming host.
const replayMargin = time.Minute

// minReplayTTL is the shortest ttl that keeps a timestamped source safe from replays. A
// signed timestamp is accepted up to tol either side of now, so a first delivery received
// at t may carry a stamp up to t+tol, and a captured copy of it verifies until t+2·tol.
// The key, claimed at t, must still be held then: otherwise the copy wins a fresh claim
// and is handed downstream a second time.
func minReplayTTL(tol time.Duration) time.Duration {
	if tol > (math.MaxInt64-replayMargin)/2 {
		return math.MaxInt64 // no ttl is long enough; never let the sum wrap negative
	}
	return 2*tol + replayMargin
}

// parseCIDRs reads a list of CIDRs ("10.0.0.0/8", "2001:db8::/32"); a bare address
// means that address alone. Blank items are skipped, so "" is an empty list.
func parseCIDRs(list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, item := range list {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		p, err := netip.ParsePrefix(item)
		if err != nil {
			a, aerr := netip.ParseAddr(item)
			if aerr != nil || a.Zone() != "" {
				return nil, fmt.Errorf("%q is not a CIDR (write it like \"10.0.0.0/8\", \"192.168.1.10/32\" or \"fd00::/8\")", item)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// sources builds the receiver's sources, checking every field. secretOf supplies the
// generated secret of the zero-config source.
func (c *config) sources(getenv func(string) string, generatedSecret func(name string) (string, error)) ([]receiver.Source, error) {
	where := c.File
	if where == "" {
		where = "defaults"
	}
	seen := map[string]bool{}
	var out []receiver.Source
	for i, sc := range c.Sources {
		fail := func(field string, err error) error {
			name := sc.Name
			if name == "" {
				name = fmt.Sprintf("#%d", i+1)
			}
			if field == "" {
				return fmt.Errorf("%s: source %q: %w", where, name, err)
			}
			return fmt.Errorf("%s: source %q: %s: %w", where, name, field, err)
		}
		if sc.Name == "" {
			return nil, fail("name", errors.New("is required"))
		}
		if url.PathEscape(sc.Name) != sc.Name || strings.Contains(sc.Name, "/") {
			return nil, fail("name", errors.New("must be usable in a URL path (letters, digits, - _ .)"))
		}
		if seen[sc.Name] {
			return nil, fail("name", errors.New("is used by another source"))
		}
		seen[sc.Name] = true

		list := append([]string(nil), sc.Secret...)
		if sc.SecretEnv != "" {
			v := getenv(sc.SecretEnv)
			if v == "" {
				return nil, fail("secret_env", fmt.Errorf("environment variable %s is empty or unset", sc.SecretEnv))
			}
			for _, s := range strings.Split(v, ",") {
				if s = strings.TrimSpace(s); s != "" {
					list = append(list, s)
				}
			}
		}
		if sc.generated && len(list) == 0 {
			s, err := generatedSecret(sc.Name)
			if err != nil {
				return nil, fail("secret", err)
			}
			list = []string{s}
		}
		if sc.Signature == "" {
			return nil, fail("signature", fmt.Errorf("is required (one of %s)", strings.Join(signature.Schemes, ", ")))
		}
		tolerance, err := parseDuration(sc.Tolerance, 0)
		if err != nil {
			return nil, fail("tolerance", err)
		}
		v, err := signature.New(signature.Config{
			Scheme:      sc.Signature,
			Secrets:     list,
			Tolerance:   tolerance,
			Header:      sc.SignatureHeader,
			Encoding:    sc.SignatureEncoding,
			Prefix:      sc.SignaturePrefix,
			BasicUser:   sc.BasicUser,
			TokenHeader: sc.TokenHeader,
			TokenQuery:  sc.TokenQuery,
		})
		if err != nil {
			return nil, fail("", err) // the verifier's errors name their field
		}
		spec := receiver.KeySpec{KeyFields: sc.KeyFields}
		if sc.EventID != nil {
			spec.EventID = *sc.EventID
		} else {
			spec.EventID = v.DefaultEventID()
		}
		if err := spec.Validate(); err != nil {
			return nil, fail("event_id/key_fields", err)
		}
		src := receiver.Source{
			Name:           sc.Name,
			Verifier:       v,
			Keys:           spec,
			TTL:            24 * time.Hour,
			ForwardURL:     sc.ForwardURL,
			MaxAttempts:    10,
			AttemptTimeout: 10 * time.Second,
			MaxBackoff:     10 * time.Minute,
		}
		if src.TTL, err = parseDuration(sc.TTL, src.TTL); err != nil {
			return nil, fail("ttl", err)
		}
		if v.Timestamped() {
			tol := tolerance
			if tol == 0 {
				tol = signature.DefaultTolerance
			}
			if least := minReplayTTL(tol); src.TTL < least {
				return nil, fail("", fmt.Errorf("ttl %s is too short for tolerance %s: a captured delivery could be replayed after its key expires; raise ttl to at least %s (twice the tolerance plus %s) or lower tolerance",
					src.TTL, tol, least, replayMargin))
			}
		}
		if src.AttemptTimeout, err = parseDuration(sc.AttemptTimeout, src.AttemptTimeout); err != nil {
			return nil, fail("attempt_timeout", err)
		}
		if src.MaxBackoff, err = parseDuration(sc.MaxBackoff, src.MaxBackoff); err != nil {
			return nil, fail("max_backoff", err)
		}
		if sc.MaxAttempts < 0 {
			return nil, fail("max_attempts", errors.New("must be at least 1"))
		} else if sc.MaxAttempts > 0 {
			src.MaxAttempts = sc.MaxAttempts
		}
		if sc.ForwardURL != "" {
			u, err := url.Parse(sc.ForwardURL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return nil, fail("forward_url", fmt.Errorf("%q is not an http(s) URL", sc.ForwardURL))
			}
		}
		labels := []struct {
			field string
			set   *string
			def   string
			dst   *string
		}{
			{"property_field", sc.PropertyField, "/property_id", &src.PropertyField},
			{"booking_field", sc.BookingField, "/booking_id", &src.BookingField},
			{"status_field", sc.StatusField, "/status", &src.StatusField},
			{"amount_field", &sc.AmountField, "", &src.AmountField},
		}
		for _, l := range labels {
			*l.dst = l.def
			if l.set != nil {
				*l.dst = *l.set
			}
			if *l.dst != "" && !strings.HasPrefix(*l.dst, "/") {
				return nil, fail(l.field, fmt.Errorf("%q is not a JSON pointer (it must start with \"/\")", *l.dst))
			}
		}
		if sc.TokenHeader != "" {
			src.RedactHeaders = []string{sc.TokenHeader}
		}
		out = append(out, src)
	}
	return out, nil
}

// openDB opens the configured database with the configured durability. log receives
// what storage has to say by itself (nil: nothing), such as its file leaving its path.
// With mustExist it creates nothing and returns an error wrapping storage.ErrNoDatabase
// when there is no database; commands call it through openExisting.
func (c config) openDB(log *slog.Logger, mustExist bool) (*storage.DB, error) {
	return storage.Open(c.Database, storage.Options{Synchronous: c.Sync, Logger: log, MustExist: mustExist})
}
