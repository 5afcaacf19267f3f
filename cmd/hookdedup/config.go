package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/hookdedup/hookdedup/receiver"
	"github.com/hookdedup/hookdedup/receiver/alert"
	"github.com/hookdedup/hookdedup/receiver/provider"
	"github.com/hookdedup/hookdedup/receiver/signature"
	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/postgres"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/web"
)

// config is the whole configuration after defaults, the file, the environment and the
// flags have been applied, in that order.
type config struct {
	File string // the file it came from, "" when none
	// origin says where each top-level setting that is not a default came from: the
	// file's path, its HOOKDEDUP_* variable or its flag, for the errors of the checks
	// that read several settings together.
	origin map[string]string
	// Addr is where the webhooks are received. Without ConsoleAddr the console, the
	// JSON API and /metrics are served there too; with it, they are served only there.
	Addr, ConsoleAddr string
	// MetricsToken, when set, is the bearer token /metrics requires. A secret: never
	// logged. Without it /metrics is open on ConsoleAddr and off on a shared Addr.
	MetricsToken string
	Database     string
	Retention    time.Duration
	StuckAfter   time.Duration
	// SessionIdle and SessionMax end a console session after that long without a
	// request, and that long after sign-in.
	SessionIdle, SessionMax time.Duration
	MaxBody                 int64
	Sync                    string
	LogLevel                string
	Sources                 []sourceConfig
	// Alerts are the [[alert]] rules, AlertChannels the [[alert_channel]] tables they
	// name (alerts.go).
	Alerts        []alertConfig
	AlertChannels []alertChannelConfig

	// CacheSize and MmapSize are sqlite.Options' of the same names, in bytes; an
	// MmapSize of 0 turns the memory map off.
	CacheSize, MmapSize int64
	// Remember is how long traces of expired keys are kept; Correlations are the
	// [[correlation]] rules (forensics.go).
	Remember     time.Duration
	Correlations []correlationConfig

	// IgnoredEnv says which HOOKDEDUP_ variables were set but name no setting
	// (unknownEnv): serve logs them, the other commands print them.
	IgnoredEnv []string

	// ReadHeaderTimeout, ReadTimeout, WriteTimeout and IdleTimeout bound one
	// connection's requests, as the fields of net/http.Server of the same names do.
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration

	// TrustedProxies are the peers whose forwarding headers (X-Forwarded-For,
	// Forwarded, X-Forwarded-Proto) are believed; see web.TrustedProxies.
	TrustedProxies []netip.Prefix

	// ConsoleNames are the host names the console answers to over plain HTTP on a
	// loopback or private address besides addresses, localhost and names no public
	// site can have (web.HostServed): lower case, ASCII, no trailing dot.
	ConsoleNames []string

	// HTTPS on addr: a certificate from TLSCertFile and TLSKeyFile, or from an ACME CA
	// for ACMEDomains. HTTPAddr is the plain-HTTP listener that then answers ACME's
	// HTTP-01 challenges and sends browsers to https; see tlsSettings.
	TLSCertFile, TLSKeyFile  string
	ACMEDomains              []string
	ACMEEmail, ACMEDirectory string
	HTTPAddr                 string

	// ApprovalThreshold is, per currency, the money above which a bulk reprocess waits
	// for a second operator's approval; empty: none does.
	ApprovalThreshold storage.ApprovalThresholds
	// fileToken and fileDatabasePassword say that the file, not the environment, set
	// the metrics token, and a database URL that holds a password (postgres.HoldsSecret).
	fileToken, fileDatabasePassword bool
}

// sourceConfig is one [[source]] table as written in the file. A setting the table
// leaves unset is "", 0 or nil, so that defaults can be told from choices (a nil
// property_field takes the default, "" turns the label off).
type sourceConfig struct {
	Name              string             `toml:"name"`
	Provider          string             `toml:"provider"`
	Signature         string             `toml:"signature"`
	Secret            secrets            `toml:"secret"`
	SecretEnv         string             `toml:"secret_env"`
	SignatureHeader   string             `toml:"signature_header"`
	SignatureEncoding string             `toml:"signature_encoding"`
	SignaturePrefix   string             `toml:"signature_prefix"`
	BasicUser         string             `toml:"basic_user"`
	TokenHeader       string             `toml:"token_header"`
	TokenQuery        string             `toml:"token_query"`
	Tolerance         *time.Duration     `toml:"tolerance"`
	EventID           *provider.EventIDs `toml:"event_id"`
	KeyFields         []string           `toml:"key_fields"`
	TTL               *time.Duration     `toml:"ttl"`
	ForwardURL        string             `toml:"forward_url"`
	MaxAttempts       *int               `toml:"max_attempts"` // nil when unset: 0 written out is refused, not defaulted
	AttemptTimeout    *time.Duration     `toml:"attempt_timeout"`
	MaxBackoff        *time.Duration     `toml:"max_backoff"`
	AmountField       *provider.Places   `toml:"amount_field"`
	CurrencyField     *string            `toml:"currency_field"`
	AmountMinorUnits  *bool              `toml:"amount_minor_units"`
	PropertyField     *string            `toml:"property_field"`
	BookingField      *string            `toml:"booking_field"`
	StatusField       *string            `toml:"status_field"`
	Batch             *string            `toml:"batch"`
	Item              *string            `toml:"item"`
	Answer            string             `toml:"answer"`
	FormEncoded       *bool              `toml:"form_encoded"`
	MaxBatchItems     int                `toml:"max_batch_items"` // items one request may carry; 0: receiver's default
	BusinessKey       []string           `toml:"business_key"`
	BusinessWindow    *time.Duration     `toml:"business_window"`
	BusinessKeyBlocks *bool              `toml:"business_key_blocks"`
	NoMoney           []string           `toml:"no_money"`

	// generated marks the zero-config source whose secret lives in the database.
	generated bool
}

// fileConfig is the TOML file's shape. The sources are decoded one table at a time
// (decodeSource), so that an error in one can name it.
type fileConfig struct {
	Addr         string         `toml:"addr"`
	ConsoleAddr  string         `toml:"console_addr"`
	MetricsToken string         `toml:"metrics_token"`
	Database     string         `toml:"database"`
	Retention    *time.Duration `toml:"retention"`
	StuckAfter   *time.Duration `toml:"stuck_after"`
	SessionIdle  *time.Duration `toml:"session_idle"`
	SessionMax   *time.Duration `toml:"session_max"`

	ReadHeaderTimeout *time.Duration `toml:"read_header_timeout"`
	ReadTimeout       *time.Duration `toml:"read_timeout"`
	WriteTimeout      *time.Duration `toml:"write_timeout"`
	IdleTimeout       *time.Duration `toml:"idle_timeout"`

	MaxBody  int64            `toml:"max_body"`
	Sync     string           `toml:"synchronous"`
	Cache    *int64           `toml:"cache_size"`
	Mmap     *int64           `toml:"mmap_size"`
	LogLevel string           `toml:"log_level"`
	Sources  []toml.Primitive `toml:"source"`

	Alerts        []toml.Primitive  `toml:"alert"`
	AlertChannels []toml.Primitive  `toml:"alert_channel"`
	Remember      *time.Duration    `toml:"remember"`
	Correlations  []correlationFile `toml:"correlation"`

	TrustedProxies []string `toml:"trusted_proxies"`
	ConsoleNames   []string `toml:"console_names"`

	TLSCertFile   string   `toml:"tls_cert_file"`
	TLSKeyFile    string   `toml:"tls_key_file"`
	ACMEDomains   []string `toml:"acme_domains"`
	ACMEEmail     string   `toml:"acme_email"`
	ACMEDirectory string   `toml:"acme_directory"`
	HTTPAddr      string   `toml:"http_addr"`

	ApprovalThreshold map[string]any `toml:"approval_threshold"`
}

// durationHint ends every message about a duration that could not be read.
const durationHint = `(write it like "90s", "10m" or "24h")`

// parseDuration reads a duration given in the environment or as a flag. The file's
// durations are read by the TOML decoder; fileDuration and durationError word its
// verdicts the same way.
func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration %s", s, durationHint)
	}
	if d <= 0 {
		return 0, fmt.Errorf("%q must be positive", s)
	}
	return d, nil
}

// fileDuration checks a duration the TOML decoder read. bare says the file wrote it as
// a number, which TOML reads as nanoseconds: "ttl = 86400" would be 86 µs, so it is
// refused rather than taken at its word.
func fileDuration(d time.Duration, bare bool) error {
	if bare {
		return fmt.Errorf("%d is not a duration: a bare number counts nanoseconds %s", int64(d), durationHint)
	}
	if d <= 0 {
		return fmt.Errorf("%s must be positive", d)
	}
	return nil
}

// tomlError rewords the TOML decoder's refusals that would say less than they should,
// or more: of a setting that holds a secret, which the decoder would quote (an unquoted
// secret is text it cannot read, and its message shows that text); of a table written
// with one pair of brackets where a list of them is meant ([source] for [[source]]),
// which it words in Go's types; of a duration (durationError). Other errors are returned
// as they are.
func tomlError(err error) error {
	// The decoder words a type it cannot fill as text of its own, not a ParseError.
	if m := incompatibleTable.FindStringSubmatch(err.Error()); m != nil && tableLists[m[2]] {
		return fmt.Errorf("line %s: [%s] is written [[%s]], with two pairs of brackets: one such table for each %s",
			m[1], m[2], m[2], strings.ReplaceAll(m[2], "_", " "))
	}
	var pe toml.ParseError
	if !errors.As(err, &pe) {
		return err
	}
	key := pe.LastKey
	if i := strings.LastIndex(key, "."); i >= 0 {
		key = key[i+1:]
	}
	if strings.HasSuffix(pe.Message, "has already been defined.") && pe.LastKey != "" {
		return fmt.Errorf("line %d: %s is written twice; TOML takes each setting once in a table: keep one",
			pe.Position.Line, pe.LastKey)
	}
	if secretSettings[key] {
		return fmt.Errorf("line %d: %s: not a value TOML reads; write it as a quoted string, %s = \"…\" (the text is not shown: it may be a secret)",
			pe.Position.Line, pe.LastKey, key)
	}
	return durationError(err)
}

// incompatibleTable is the decoder's refusal of a table where a list of them is meant.
var incompatibleTable = regexp.MustCompile(`^toml: line ([0-9]+) \(last key "([a-z_]+)"\): incompatible types`)

// secretSettings are the settings whose values may hold a secret: a source's or alert
// channel's secret, the metrics token, and the URLs and database address that may carry
// credentials.
var secretSettings = map[string]bool{"secret": true, "metrics_token": true, "url": true, "forward_url": true, "database": true}

// tableLists are the settings written as lists of tables ([[source]]).
var tableLists = map[string]bool{"source": true, "alert": true, "alert_channel": true, "correlation": true}

// durationError rewords the TOML decoder's refusal of a duration so that it names the
// setting and shows how to write one; other errors are returned as they are.
func durationError(err error) error {
	var pe toml.ParseError
	if !errors.As(err, &pe) {
		return err
	}
	// The decoder's own wording: its error type is not exported. TestConfig_BadDurations
	// notices if a new version words it otherwise.
	bad, ok := strings.CutPrefix(pe.Message, "invalid duration: ")
	if !ok {
		return err
	}
	key := pe.LastKey
	if i := strings.LastIndex(key, "."); i >= 0 {
		key = key[i+1:] // "source.ttl": the source is named by the caller
	}
	return fmt.Errorf("%s: %s is not a duration %s", key, bad, durationHint)
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
		Addr:              "127.0.0.1:8080",
		Database:          "hookdedup.db",
		Retention:         720 * time.Hour,
		StuckAfter:        10 * time.Minute,
		SessionIdle:       2 * time.Hour,
		SessionMax:        12 * time.Hour,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second, // a slow-loris upload cannot hold a connection for long
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxBody:           1 << 20,
		Sync:              "FULL",
		CacheSize:         sqlite.DefaultCacheSize,
		MmapSize:          sqlite.DefaultMmapSize,
		LogLevel:          "info",
		Remember:          defaultRemember,
		origin:            map[string]string{},
	}
}

// defaultSource is the zero-config source: standard-webhooks signed with a secret
// generated on first start and kept in the database.
func defaultSource() sourceConfig {
	return sourceConfig{
		Name:          defaultSourceName,
		Signature:     "standard-webhooks",
		EventID:       &provider.EventIDs{"header:webhook-id"},
		KeyFields:     []string{"/property_id", "/booking_id", "/status", "/effective_date"},
		AmountField:   &provider.Places{"/refund/amount"},
		CurrencyField: new("/refund/currency"),
		generated:     true,
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
	case errors.Is(err, os.ErrNotExist) && !explicit:
		// No file: the defaults, secure as they are.
	default:
		return config{}, fmt.Errorf("%s: %w", path, tomlError(err))
	}
	if err := cfg.applyFile(fc, md); err != nil {
		return config{}, fmt.Errorf("%s: %w", path, err)
	}
	for _, s := range cfg.settings() {
		if md.IsDefined(s.name) {
			cfg.from(s.name, path)
		}
	}
	for i, p := range fc.Sources {
		sc, err := decodeSource(md, p)
		if err != nil {
			return config{}, fmt.Errorf("%s: source %q: %w", path, sourceLabel(i, sc.Name), err)
		}
		cfg.Sources = append(cfg.Sources, sc)
	}
	if cfg.Alerts, cfg.AlertChannels, err = decodeAlerts(md, fc.Alerts, fc.AlertChannels); err != nil {
		return config{}, fmt.Errorf("%s: %w", path, err)
	}
	// Only now: the keys of a source's table count as unknown until it is decoded. So
	// is a key written in another case than its setting's (ADDR, Max_Body): TOML's keys
	// are case-sensitive, yet the decoder fills a setting from it, past the checks
	// that look the setting up by its name, so that MAX_BODY = 0 kept the default and
	// Retention = 86400 was 86 µs, and the last of addr and ADDR won.
	if unknown := append(md.Undecoded(), otherCase(md)...); len(unknown) > 0 {
		key := unknown[0]
		var lower string
		if k := strings.ToLower(key[len(key)-1]); k != key[len(key)-1] {
			lower = fmt.Sprintf(" (settings are written in lower case: %s)", k)
		}
		if where, setting := placeOf(path, key); len(where) > 0 {
			return config{}, fmt.Errorf("%s: %s: unknown setting %q%s", path, strings.Join(where, ": "), setting.String(), lower)
		}
		return config{}, fmt.Errorf("%s: unknown setting %q%s", path, key.String(), lower)
	}
	if err := cfg.applyEnv(getenv); err != nil {
		return config{}, err
	}
	if len(cfg.Sources) == 0 {
		cfg.Sources = []sourceConfig{defaultSource()}
	}
	return cfg, nil
}

// applyFile applies the top-level settings the file sets. md says how each was written.
func (c *config) applyFile(fc fileConfig, md toml.MetaData) error {
	if fc.Addr != "" {
		c.Addr = fc.Addr
	}
	if fc.ConsoleAddr != "" {
		c.ConsoleAddr = fc.ConsoleAddr
	}
	if fc.MetricsToken != "" {
		if err := checkMetricsToken(fc.MetricsToken); err != nil {
			return fmt.Errorf("metrics_token: %w", err)
		}
		c.MetricsToken, c.fileToken = fc.MetricsToken, true
	}
	if fc.Database != "" {
		c.Database, c.fileDatabasePassword = fc.Database, isPostgres(fc.Database) && postgres.HoldsSecret(fc.Database)
	}
	durations := []struct {
		key  string
		file *time.Duration
		dst  *time.Duration
	}{
		{"retention", fc.Retention, &c.Retention},
		{"stuck_after", fc.StuckAfter, &c.StuckAfter},
		{"session_idle", fc.SessionIdle, &c.SessionIdle},
		{"session_max", fc.SessionMax, &c.SessionMax},
		{"read_header_timeout", fc.ReadHeaderTimeout, &c.ReadHeaderTimeout},
		{"read_timeout", fc.ReadTimeout, &c.ReadTimeout},
		{"write_timeout", fc.WriteTimeout, &c.WriteTimeout},
		{"idle_timeout", fc.IdleTimeout, &c.IdleTimeout},
		{"remember", fc.Remember, &c.Remember},
	}
	for _, d := range durations {
		if d.file == nil {
			continue
		}
		if err := fileDuration(*d.file, md.Type(d.key) == "Integer"); err != nil {
			return fmt.Errorf("%s: %w", d.key, err)
		}
		*d.dst = *d.file
	}
	// Defined rather than non-zero: "max_body = 0" or a negative one would otherwise
	// leave the default in place without a word, where the environment refuses them.
	if md.IsDefined("max_body") {
		if fc.MaxBody <= 0 {
			return fmt.Errorf("max_body: %d is not a positive number of bytes", fc.MaxBody)
		}
		c.MaxBody = fc.MaxBody
	}
	if fc.Sync != "" {
		if err := checkSynchronous(fc.Sync); err != nil {
			return fmt.Errorf("synchronous: %w", err)
		}
		c.Sync = fc.Sync
	}
	if fc.Cache != nil {
		if err := checkCacheSize(*fc.Cache); err != nil {
			return fmt.Errorf("cache_size: %w", err)
		}
		c.CacheSize = *fc.Cache
	}
	if fc.Mmap != nil {
		if *fc.Mmap < 0 {
			return fmt.Errorf("mmap_size: %d is not a number of bytes (0 turns the map off)", *fc.Mmap)
		}
		c.MmapSize = *fc.Mmap
	}
	if fc.LogLevel != "" {
		if err := checkLogLevel(fc.LogLevel); err != nil {
			return fmt.Errorf("log_level: %w", err)
		}
		c.LogLevel = fc.LogLevel
	}
	var err error
	if c.TrustedProxies, err = parseCIDRs(fc.TrustedProxies); err != nil {
		return fmt.Errorf("trusted_proxies: %w", err)
	}
	if fc.ConsoleNames != nil {
		if c.ConsoleNames, err = consoleNames(fc.ConsoleNames); err != nil {
			return fmt.Errorf("console_names: %w", err)
		}
	}
	c.TLSCertFile = cmp.Or(fc.TLSCertFile, c.TLSCertFile)
	c.TLSKeyFile = cmp.Or(fc.TLSKeyFile, c.TLSKeyFile)
	if fc.ACMEDomains != nil {
		c.ACMEDomains = fc.ACMEDomains
	}
	c.ACMEEmail = cmp.Or(fc.ACMEEmail, c.ACMEEmail)
	c.ACMEDirectory = cmp.Or(fc.ACMEDirectory, c.ACMEDirectory)
	c.HTTPAddr = cmp.Or(fc.HTTPAddr, c.HTTPAddr)
	// A value that is not a table would decode as no thresholds at all, and approval
	// would be off without a word.
	if t := md.Type("approval_threshold"); t != "" && t != "Hash" {
		return errors.New(`approval_threshold: write it as a table of amounts per currency, [approval_threshold] then EUR = "1000.00" on the next line`)
	}
	if c.ApprovalThreshold, err = approvalThresholds(fc.ApprovalThreshold); err != nil {
		return err
	}
	return c.applyCorrelations(fc.Correlations, md)
}

// approvalThresholds reads [approval_threshold]. Amounts are strings: a TOML number
// would pass through a float and could lose a cent.
func approvalThresholds(in map[string]any) (storage.ApprovalThresholds, error) {
	amounts := map[string]string{}
	for code, v := range in {
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("approval_threshold: %s = %v: write the amount as a string in major units, such as %s = \"1000.00\"", code, v, code)
		}
		amounts[code] = s
	}
	return storage.ParseApprovalThresholds(amounts)
}

// The most a source's attempt_timeout and max_backoff may be, and the least an
// attempt_timeout may be.
const (
	maxAttemptTimeout  = 10 * time.Minute
	maxDispatchBackoff = 24 * time.Hour
	// A shorter attempt cannot connect and be answered (TLS, the downstream's own
	// work), so that every hand-off would time out, the event perhaps taken all the same,
	// and every key fail after max_attempts; "10ms" is a slip for "10m".
	minAttemptTimeout = time.Second
)

// decodeSource decodes one [[source]] table. Its name is read first, so that an error in
// any other setting can name the source.
func decodeSource(md toml.MetaData, p toml.Primitive) (sourceConfig, error) {
	// The name, and the durations as written: TOML reads a bare number as nanoseconds.
	var written struct {
		Name           any `toml:"name"`
		Tolerance      any `toml:"tolerance"`
		TTL            any `toml:"ttl"`
		AttemptTimeout any `toml:"attempt_timeout"`
		MaxBackoff     any `toml:"max_backoff"`
		BusinessWindow any `toml:"business_window"`
		MaxBatchItems  any `toml:"max_batch_items"`
	}
	var sc sourceConfig
	if err := md.PrimitiveDecode(p, &written); err != nil {
		return sc, err
	}
	sc.Name, _ = written.Name.(string)
	if err := md.PrimitiveDecode(p, &sc); err != nil {
		return sc, durationError(err)
	}
	if err := checkSecretEnv(sc.SecretEnv); err != nil {
		return sc, err
	}
	// Unset is 0 in sourceConfig: written out, 0 would be read as the default without a
	// word, as max_attempts = 0 would, which is refused too.
	if n, ok := written.MaxBatchItems.(int64); ok && n < 1 {
		return sc, fmt.Errorf("max_batch_items: %d is not a number of items a batched request may carry: at least 1 (leave it out for %d)",
			n, receiver.DefaultMaxBatchItems)
	}
	durations := []struct {
		key     string
		value   *time.Duration
		written any
	}{
		{"tolerance", sc.Tolerance, written.Tolerance},
		{"ttl", sc.TTL, written.TTL},
		{"attempt_timeout", sc.AttemptTimeout, written.AttemptTimeout},
		{"max_backoff", sc.MaxBackoff, written.MaxBackoff},
		{"business_window", sc.BusinessWindow, written.BusinessWindow},
	}
	for _, d := range durations {
		if d.value == nil {
			continue
		}
		_, bare := d.written.(int64)
		if err := fileDuration(*d.value, bare); err != nil {
			return sc, fmt.Errorf("%s: %w", d.key, err)
		}
	}
	return sc, nil
}

// envName is what an environment variable's name is written as: letters, digits and _,
// not beginning with a digit (POSIX; systemd's environment files take no other).
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// checkSecretEnv refuses a secret_env that is no environment variable's name, such as
// a secret written there for secret's: it would be quoted as a variable's name in the
// error that it is unset, in hookdedup sources and in the unit hookdedup service
// writes. A standard-webhooks secret (whsec_…) reads as a name, and is refused too. The
// value is never quoted.
func checkSecretEnv(name string) error {
	if name == "" || envName.MatchString(name) && !strings.HasPrefix(name, "whsec_") {
		return nil
	}
	return errors.New("secret_env: is not the name of an environment variable (letters, digits and _, not beginning with a digit), " +
		"and is not shown, as it may be the secret itself: secret_env names the variable that holds the secret; a secret written in the file goes in secret")
}

// placeOf finds the tables of the file at path that write key, an unknown setting:
// TOML names it by its tables' names alone (correlation.source.bogus), whichever rule,
// source or alert it is in, and a file of many needs to say which one to fix. where
// names each table of an array of tables on the way by its name (#2 when it has none);
// setting is the rest of key. where is empty when key is in no array of tables.
func placeOf(path string, key toml.Key) (where []string, setting toml.Key) {
	var raw map[string]any
	if _, err := toml.DecodeFile(path, &raw); err != nil {
		return nil, key
	}
	if where, setting, ok := placeIn(raw, key); ok {
		return where, setting
	}
	return nil, key
}

func placeIn(t map[string]any, key toml.Key) (where []string, setting toml.Key, ok bool) {
	if len(key) == 1 {
		_, ok = t[key[0]]
		return nil, key, ok
	}
	switch next := t[key[0]].(type) {
	case map[string]any:
		where, setting, ok = placeIn(next, key[1:])
		if ok && len(where) == 0 {
			return nil, key, true
		}
		if ok {
			where[0] = key[0] + "." + where[0]
		}
		return where, setting, ok
	case []map[string]any:
		return placeInArray(next, key)
	case []any:
		// An inline array of tables (source = [{…}, {…}]) decodes as a plain array.
		tables := make([]map[string]any, 0, len(next))
		for _, e := range next {
			t, isTable := e.(map[string]any)
			if !isTable {
				return nil, nil, false
			}
			tables = append(tables, t)
		}
		return placeInArray(tables, key)
	}
	return nil, nil, false
}

// placeInArray is placeIn for the array of tables tables, called key[0].
func placeInArray(tables []map[string]any, key toml.Key) (where []string, setting toml.Key, ok bool) {
	// The first of the tables that writes the rest of key: the decoder stops at it.
	for i, e := range tables {
		if w, s, ok := placeIn(e, key[1:]); ok {
			name, _ := e["name"].(string)
			return append([]string{fmt.Sprintf("%s %q", key[0], sourceLabel(i, name))}, w...), s, true
		}
	}
	return nil, nil, false
}

// otherCase returns the keys of md that are not written in lower case, as every
// setting is named, but for the currencies of [approval_threshold], which are data.
func otherCase(md toml.MetaData) []toml.Key {
	var out []toml.Key
	for _, k := range md.Keys() {
		for i, part := range k {
			if i > 0 && k[0] == "approval_threshold" {
				break
			}
			if part != strings.ToLower(part) {
				out = append(out, k[:i+1])
				break
			}
		}
	}
	return out
}

// sourceLabel names the i-th source in errors: by its name, or by its place when it has
// none.
func sourceLabel(i int, name string) string {
	if name == "" {
		return fmt.Sprintf("#%d", i+1)
	}
	return name
}

// unknownEnv says, one line each, which of the HOOKDEDUP_ variables in environ (as
// os.Environ lists them) that getenv sees set is no setting: a misspelt
// HOOKDEDUP_DATABSE would otherwise leave serve on a new SQLite file without a word. They
// are warnings, not errors: a name a deployment sets for its own tools must not stop the
// service on an upgrade.
func unknownEnv(environ []string, getenv func(string) string) []string {
	known := []string{"HOOKDEDUP_CONFIG"}
	var c config
	for _, s := range c.settings() {
		known = append(known, "HOOKDEDUP_"+strings.ToUpper(s.name))
	}
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "HOOKDEDUP_") || slices.Contains(known, name) || getenv(name) == "" {
			continue
		}
		line := name + " is set but is no hookdedup setting: it is ignored"
		if near := nearest(name, known); near != "" {
			line += " (did you mean " + near + "?)"
		}
		out = append(out, line)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// nearest returns the name of names that is at most two edits (a letter added, dropped
// or changed) from s, the closest first, or "" when none is.
func nearest(s string, names []string) string {
	best, bestD := "", 3
	for _, n := range names {
		if d := editDistance(s, n); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, byte by byte.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// applyEnv applies the HOOKDEDUP_<NAME> variables that are set.
func (c *config) applyEnv(getenv func(string) string) error {
	for _, s := range c.settings() {
		name := "HOOKDEDUP_" + strings.ToUpper(s.name)
		if v := getenv(name); v != "" {
			if err := s.set(v); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			c.from(s.name, name)
		}
	}
	return nil
}

// from records where the setting name came from: a file's path, a variable, a flag.
func (c *config) from(name, origin string) {
	if c.origin == nil {
		c.origin = map[string]string{}
	}
	c.origin[name] = origin
}

// placed prefixes err, the error of a check that reads the named settings together,
// with where those of them that are set came from (the file, a variable, a flag), as
// the errors of one setting are: "hookdedup.toml: session_idle (3h0m0s) is longer…".
func (c config) placed(err error, names ...string) error {
	if err == nil {
		return nil
	}
	var from []string
	for _, n := range names {
		if o := c.origin[n]; o != "" && !slices.Contains(from, o) {
			from = append(from, o)
		}
	}
	if len(from) == 0 {
		return err // every one a default
	}
	return fmt.Errorf("%s: %w", strings.Join(from, ", "), err)
}

// setting is one top-level setting that the environment and flags may override.
type setting struct {
	name, usage string
	set         func(string) error
}

func (c *config) settings() []setting {
	str := func(p *string) func(string) error { return func(v string) error { *p = v; return nil } }
	// kept reads a setting whose "" would turn off what the file sets. Only a flag gives
	// "" (an empty variable is unset): "$VAR" with the variable unset would do it without
	// a word, as a blank acme_domains would turn HTTPS off.
	kept := func(p *string, off string) func(string) error {
		return func(v string) error {
			if v == "" {
				return fmt.Errorf("is empty (an unset variable?): to keep the file's, leave it out; %s", off)
			}
			*p = v
			return nil
		}
	}
	const plain = "to serve plain HTTP, remove tls_cert_file and tls_key_file from the file"
	dur := func(p *time.Duration) func(string) error {
		return func(v string) error {
			d, err := parseDuration(v)
			if err != nil {
				return err
			}
			*p = d
			return nil
		}
	}
	return []setting{
		{"addr", "listen address (host:port) of the webhooks, and of everything else unless console_addr is set", str(&c.Addr)},
		{"console_addr", "private listen address (host:port) of the console, the JSON API and /metrics; addr then serves only webhooks, /healthz and /readyz", kept(&c.ConsoleAddr, "to serve the console on addr, remove console_addr from the file")},
		{"metrics_token", "bearer token that /metrics requires (a secret: prefer the environment to this flag)", func(v string) error {
			if v == "" {
				// Only a flag gives "" (an empty variable is unset): --metrics-token
				// "$TOKEN" with the variable unset would drop the file's token, and
				// /metrics would be open on console_addr without a word.
				return errors.New("is empty (an unset variable?): to keep the file's token, leave it out; to serve /metrics without one, remove metrics_token from the file")
			}
			if err := checkMetricsToken(v); err != nil {
				return err
			}
			c.MetricsToken = v
			return nil
		}},
		{"database", "path of the SQLite database file, or postgres:// URL of a PostgreSQL database", str(&c.Database)},
		{"retention", "how long deliveries stay browsable", dur(&c.Retention)},
		{"remember", "how long traces of expired keys are kept, to flag late duplicates", dur(&c.Remember)},
		{"stuck_after", "a key processing for longer is stuck", dur(&c.StuckAfter)},
		{"session_idle", "a console session ends after this long without a request", dur(&c.SessionIdle)},
		{"session_max", "a console session ends this long after sign-in", dur(&c.SessionMax)},
		{"read_header_timeout", "longest wait for a request's headers", dur(&c.ReadHeaderTimeout)},
		{"read_timeout", "longest wait for a whole request, body included", dur(&c.ReadTimeout)},
		{"write_timeout", "longest time to answer a request, counted from the end of its headers", dur(&c.WriteTimeout)},
		{"idle_timeout", "longest a kept-alive connection waits for its next request", dur(&c.IdleTimeout)},
		{"max_body", "largest accepted body in bytes", func(v string) error {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n <= 0 {
				return fmt.Errorf("%q is not a positive number of bytes", v)
			}
			c.MaxBody = n
			return nil
		}},
		{"synchronous", "SQLite durability: FULL or NORMAL", func(v string) error {
			if err := checkSynchronous(v); err != nil {
				return err
			}
			c.Sync = v
			return nil
		}},
		{"cache_size", "SQLite page cache of each database connection, in bytes (the writer's is 8 MiB at most below 1 GiB of file)", func(v string) error {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return fmt.Errorf("%q is not a number of bytes from %d to %d (2 TiB)", v, sqlite.MinCacheSize, sqlite.MaxCacheSize)
			}
			if err := checkCacheSize(n); err != nil {
				return err
			}
			c.CacheSize = n
			return nil
		}},
		{"mmap_size", "bytes of the SQLite database file read through a memory map; 0 turns it off", func(v string) error {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return fmt.Errorf("%q is not a number of bytes (0 turns the map off)", v)
			}
			c.MmapSize = n
			return nil
		}},
		{"log_level", "debug, info, warn or error", func(v string) error {
			if err := checkLogLevel(v); err != nil {
				return err
			}
			c.LogLevel = v
			return nil
		}},
		{"trusted_proxies", "comma-separated CIDRs of reverse proxies whose X-Forwarded-For, Forwarded and X-Forwarded-Proto are believed",
			func(v string) error {
				p, err := parseCIDRs(strings.Split(v, ","))
				c.TrustedProxies = p
				return err
			}},
		{"console_names", "comma-separated host names the console answers to over plain HTTP on a loopback or private address, besides its addresses and localhost",
			func(v string) error {
				names, err := consoleNames(strings.Split(v, ","))
				c.ConsoleNames = names
				return err
			}},
		{"tls_cert_file", "PEM certificate chain for HTTPS on addr, leaf first (with tls_key_file; reloaded when it changes or on SIGHUP)", kept(&c.TLSCertFile, plain)},
		{"tls_key_file", "PEM private key of tls_cert_file's certificate", kept(&c.TLSKeyFile, plain)},
		{"acme_domains", "comma-separated host names to obtain HTTPS certificates for from an ACME CA (Let's Encrypt by default)", func(v string) error {
			c.ACMEDomains = nil
			for _, d := range strings.Split(v, ",") {
				if d = strings.TrimSpace(d); d != "" {
					c.ACMEDomains = append(c.ACMEDomains, d)
				}
			}
			if len(c.ACMEDomains) == 0 {
				// A blank value (a templated environment file's) would turn off the HTTPS
				// the file asks for, and serve would answer in clear text without a word.
				return fmt.Errorf("%q names no domain: to keep the file's domains, leave it unset; to turn HTTPS off, remove acme_domains from the file", v)
			}
			return nil
		}},
		{"acme_email", "contact address the ACME CA may write to about the certificates (optional)", str(&c.ACMEEmail)},
		// Emptied, a staging or private CA in the file would quietly become Let's
		// Encrypt's production one, whose rate limits a test setup soon meets.
		{"acme_directory", "ACME directory URL (default: Let's Encrypt's production directory)",
			kept(&c.ACMEDirectory, "to use Let's Encrypt's production directory, remove acme_directory from the file")},
		{"http_addr", "with HTTPS on: plain-HTTP listen address (host:port) for ACME's HTTP-01 challenges and redirects to https (default :80)", str(&c.HTTPAddr)},
	}
}

// checkSynchronous, checkCacheSize and checkLogLevel refuse what the database and the
// logger would refuse only once in use: checked as the setting is read, the error names
// the file, the variable or the flag that set it, and every command refuses it alike,
// before serve creates or migrates the database.
func checkSynchronous(v string) error {
	if u := strings.ToUpper(v); u != "FULL" && u != "NORMAL" {
		return fmt.Errorf("%q is not FULL or NORMAL", v)
	}
	return nil
}

func checkCacheSize(n int64) error {
	if n < sqlite.MinCacheSize || n > sqlite.MaxCacheSize {
		return fmt.Errorf("%d is not a number of bytes from %d to %d (2 TiB)", n, sqlite.MinCacheSize, sqlite.MaxCacheSize)
	}
	return nil
}

func checkLogLevel(v string) error {
	var l slog.Level
	if err := l.UnmarshalText([]byte(v)); err != nil {
		return fmt.Errorf("%q is not one of debug, info, warn, error", v)
	}
	return nil
}

// tls is the HTTPS part of the configuration, for newTLS.
func (c config) tls() tlsSettings {
	return tlsSettings{
		CertFile:      c.TLSCertFile,
		KeyFile:       c.TLSKeyFile,
		ACMEDomains:   c.ACMEDomains,
		ACMEEmail:     c.ACMEEmail,
		ACMEDirectory: c.ACMEDirectory,
		CacheDir:      acmeCacheDir(c.Database),
		Addr:          c.Addr,
		HTTPAddr:      c.HTTPAddr,
	}
}

// checkHTTPS checks the HTTPS settings together with the addresses, once the file, the
// environment and the flags have all applied.
func (c config) checkHTTPS() error {
	s := c.tls()
	if err := s.validate(); err != nil {
		names := []string{"tls_cert_file", "tls_key_file", "acme_domains", "acme_email", "acme_directory", "http_addr"}
		if se := (settingsError{}); errors.As(err, &se) {
			names = se.names // where the settings at fault were set, not every HTTPS one
		}
		return c.placed(err, names...)
	}
	if !s.enabled() {
		if c.HTTPAddr != "" {
			return c.placed(errors.New("http_addr is set but HTTPS is not: it is the plain-HTTP listener beside HTTPS on addr; set tls_cert_file and tls_key_file, or acme_domains, or unset http_addr"), "http_addr")
		}
		return nil
	}
	for _, other := range []struct{ setting, addr string }{{"addr", c.Addr}, {"console_addr", c.ConsoleAddr}} {
		if other.addr != "" && sameListenAddr(s.httpAddr(), other.addr) {
			return c.placed(fmt.Errorf("http_addr %q is the same as %s: the plain-HTTP listener needs an address of its own (the default is :80)", s.httpAddr(), other.setting), "http_addr", other.setting)
		}
	}
	return nil
}

// sameListenAddr reports whether two listen addresses would bind the same port on a
// common interface: equal ports, and equal hosts or one of them every interface. Port 0
// asks the system for a free port, a different one each time.
func sameListenAddr(a, b string) bool {
	ha, pa, err := net.SplitHostPort(a)
	if err != nil {
		return false
	}
	hb, pb, err := net.SplitHostPort(b)
	if err != nil || pa != pb || pa == "0" {
		return false
	}
	every := func(h string) bool { return h == "" || h == "0.0.0.0" || h == "::" }
	return ha == hb || every(ha) || every(hb)
}

// minMetricsToken is the shortest metrics_token accepted: a scraper's token is a
// machine's secret, so nothing stands in the way of a long random one.
const minMetricsToken = 16

// checkMetricsToken refuses a token that is short, or that could not travel as the one
// word after "Bearer" in an Authorization header. Its errors never quote the token.
func checkMetricsToken(tok string) error {
	if len(tok) < minMetricsToken {
		return fmt.Errorf("is %s long, fewer than %d: use a long random one (openssl rand -hex 32)", count(len(tok), "character", "characters"), minMetricsToken)
	}
	for _, r := range tok {
		if r <= ' ' || r > '~' {
			return errors.New("holds a space, a control character or a character beyond ASCII: a bearer token is one word of printable ASCII (openssl rand -hex 32)")
		}
	}
	return nil
}

// sharedSecretFile says, when the configuration file holds a secret (a source's or an
// alert channel's, the metrics token, a database URL's password, a URL that the console
// would show masked) and other users of the machine can read it, how
// to make it private; "" otherwise. Its mode is left as it is: as the database's, it is
// its owner's decision.
func (c config) sharedSecretFile() string {
	if c.File == "" {
		return ""
	}
	fi, err := os.Stat(c.File)
	if err != nil || fi.Mode().Perm()&0o077 == 0 {
		return ""
	}
	held := c.fileToken || c.fileDatabasePassword // not from the environment
	for _, s := range c.Sources {                 // secret_env's are not in Secret
		held = held || len(s.Secret) > 0 || web.RedactURL(s.ForwardURL) != s.ForwardURL
	}
	for _, a := range c.AlertChannels {
		// A slack channel's URL is its credential whole (alert.TypeSlack), however
		// plain it looks.
		held = held || len(a.Secret) > 0 || web.RedactURL(a.URL) != a.URL || a.Type == alert.TypeSlack && a.URL != ""
	}
	if !held {
		return ""
	}
	return fmt.Sprintf("the configuration file %s (%#o) holds secrets and can be read by other users of this machine: make it private with chmod 600",
		c.File, uint32(fi.Mode().Perm()))
}

// writableFile says, when other users of the machine can write the configuration file,
// what they could do with it and how to stop them; "" otherwise. Whatever it holds:
// anyone who can change it can send every event elsewhere (forward_url) or put in a
// secret of their own, with which they can sign deliveries that intake then accepts.
// Its mode is left as it is, as in sharedSecretFile.
//
// The same holds of the directory that holds it, unless its sticky bit is set (as on
// /tmp): in a directory others can write, any of them can put another file in its place.
func (c config) writableFile() string {
	if c.File == "" {
		return ""
	}
	dir := filepath.Dir(c.File)
	if di, err := os.Stat(dir); err == nil && di.Mode().Perm()&0o022 != 0 && di.Mode()&os.ModeSticky == 0 {
		return fmt.Sprintf("the directory %s (%#o) of the configuration file %s can be written by other users of this machine, who could put a file "+
			"of their own in its place, to send the events elsewhere or set secrets of their own to sign deliveries with: make it writable by its owner alone with chmod go-w",
			dir, uint32(di.Mode().Perm()), c.File)
	}
	fi, err := os.Stat(c.File)
	if err != nil || fi.Mode().Perm()&0o022 == 0 {
		return ""
	}
	return fmt.Sprintf("the configuration file %s (%#o) can be changed by other users of this machine, who could send the events elsewhere "+
		"or set secrets of their own to sign deliveries with: make it writable by its owner alone with chmod go-w", c.File, uint32(fi.Mode().Perm()))
}

// checkDatabase refuses a database path that begins with ~: no shell reads the
// configuration, so it would name a directory called "~" where hookdedup runs. It also
// refuses what is meant for a database server rather than a file: anything but a
// postgres:// URL is taken for the path of a SQLite file, and a PostgreSQL connection
// string in libpq's keyword form, or a URL with its // mistyped, would become a file
// named after it, password and all, shown in every log line, and each replica given
// one would deduplicate on a database of its own. Such a value is never quoted back.
// A path with a NUL byte is refused too, quoted, as no file can be named by it, and
// so are a directory and SQLite's in-memory database.
func (c config) checkDatabase() error {
	if strings.TrimSpace(c.Database) != c.Database {
		// " postgres://…" is no URL, and would be a file named after it; in
		// "postgres://…/hook\r" the blank would be part of the database's name.
		return fmt.Errorf("database: begins or ends with a blank (not shown, as it may hold a password); write it without: a file's path, or a URL such as %s",
			postgresForm)
	}
	if isPostgres(c.Database) {
		return nil
	}
	if c.Database == "" {
		// --database "$DB" with the variable unset: SQLite would answer "empty path".
		return errors.New("database is empty (an unset variable?): give the database's file or URL, or leave it out for ./hookdedup.db")
	}
	if c.Database == ":memory:" {
		// A file of that name would surprise whoever wrote it, as much as a database that
		// no other process sees and that is gone at the exit.
		return errors.New("database :memory: is SQLite's in-memory database, which hookdedup cannot use: what it stores must outlive the process " +
			"and be seen by every command; name a file, such as hookdedup.db")
	}
	if c.Database == "~" || strings.HasPrefix(c.Database, "~/") {
		return fmt.Errorf("database %q: ~ is not expanded here (no shell reads the setting); write the whole path, such as %s",
			c.Database, filepath.Join("/home/you", strings.TrimPrefix(c.Database, "~")))
	}
	if what := serverForm(c.Database); what != "" {
		return fmt.Errorf("database: %s (not shown, as it may hold a password): hookdedup stores in a SQLite file, named by its path, or in PostgreSQL, named by a URL: %s",
			what, postgresForm)
	}
	if strings.ContainsRune(c.Database, 0) {
		// No file's name can hold one (open fails, "invalid argument"), and printed
		// raw it would cut the name short on a terminal.
		return fmt.Errorf("database %s: holds a NUL byte, which no file's name can", strconv.Quote(c.Database))
	}
	if fi, err := os.Stat(c.Database); err == nil && fi.IsDir() {
		// The directory meant to hold it (/var/lib/hookdedup), which SQLite would
		// answer with "disk I/O error" or "unable to open database file", blamed on
		// whatever the command was doing.
		return fmt.Errorf("database %s is a directory: name the database file, such as %s",
			displayPath(c.Database), displayPath(filepath.Join(c.Database, "hookdedup.db")))
	}
	return nil
}

// postgresForm is how a PostgreSQL database is named, as the messages show it.
const postgresForm = "postgres://USER:PASSWORD@HOST:5432/DBNAME"

// serverForm says what s is when it names a database server in a form hookdedup does
// not take ("a mysql:// URL"), and "" for anything else, a postgres:// URL or a path.
// Such a value may hold a password, and is never quoted.
func serverForm(s string) string {
	if isPostgres(s) {
		return ""
	}
	if scheme, _, ok := strings.Cut(s, ":"); ok && (strings.EqualFold(scheme, "postgres") || strings.EqualFold(scheme, "postgresql")) {
		return "a " + strings.ToLower(scheme) + ": URL without its // after the scheme"
	}
	s = strings.TrimSpace(s)
	if isPostgres(s) {
		return "a postgres:// URL with a blank around it"
	}
	if scheme, _, ok := strings.Cut(s, "://"); ok && schemeName(strings.ReplaceAll(scheme, ":", "")) {
		// jdbc:postgresql://… too: a scheme within a scheme.
		return "a " + strings.ToLower(scheme) + ":// URL"
	}
	if userAtHost.MatchString(s) {
		return "a URL's USER:PASSWORD@HOST without its scheme"
	}
	if libpqKeywords.MatchString(s) {
		return "a PostgreSQL connection string in keyword form (host=… dbname=…)"
	}
	return ""
}

// userAtHost matches the user, password and host of a URL written without its scheme
// (hook:secret@db/hook), which no sensible file name starts with.
var userAtHost = regexp.MustCompile(`^[^/\s:@]+:[^/\s@]*@[^/\s]`)

// libpqKeywords matches the keywords that begin the pairs of a libpq connection string
// (host=db port=5432 …), which no sensible file name starts a word with.
var libpqKeywords = regexp.MustCompile(`(?i)(^|\s)(host|hostaddr|port|dbname|user|password|passfile|sslmode|service|connect_timeout|application_name|options|target_session_attrs)\s*=`)

// schemeName reports whether s is a URL scheme (RFC 3986: a letter, then letters,
// digits, "+", "-" or ".").
func schemeName(s string) bool {
	for i, c := range s {
		letter := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
		if !letter && (i == 0 || !('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return false
		}
	}
	return s != ""
}

// checkListen checks the listening settings together, once the file, the environment
// and the flags have all applied.
func (c config) checkListen() error {
	// Checked before serve makes or migrates the database, not when it listens.
	if c.Addr == "" {
		// Only a flag empties it (--addr "$ADDR", the variable unset): the file's "" and
		// an empty variable leave the default. Listening on "" is every interface, on a
		// port the system picks.
		return c.placed(errors.New("addr is empty (an unset variable?): give the listen address as host:port, such as 0.0.0.0:8080, or leave it out for 127.0.0.1:8080"), "addr")
	}
	for _, a := range []struct{ name, addr, example string }{
		{"addr", c.Addr, "0.0.0.0:8080"}, {"http_addr", c.HTTPAddr, "0.0.0.0:80"},
	} {
		if a.addr == "" {
			continue
		}
		_, port, err := net.SplitHostPort(a.addr)
		if err != nil || port == "" {
			return c.placed(fmt.Errorf("%s %q is not host:port (e.g. %s)", a.name, a.addr, a.example), a.name)
		}
		if err := checkPort(port); err != nil {
			return c.placed(fmt.Errorf("%s %q: %w", a.name, a.addr, err), a.name)
		}
	}
	if c.ConsoleAddr == "" {
		return nil
	}
	// Without its port, as addr's: the system would pick one, and nobody could find the
	// console.
	_, port, err := net.SplitHostPort(c.ConsoleAddr)
	if err == nil && port == "" {
		err = errors.New("it has no port")
	}
	if err != nil {
		return c.placed(fmt.Errorf("console_addr %q is not host:port (e.g. 127.0.0.1:8081): %w", c.ConsoleAddr, err), "console_addr")
	}
	if err := checkPort(port); err != nil {
		return c.placed(fmt.Errorf("console_addr %q: %w", c.ConsoleAddr, err), "console_addr")
	}
	if sameListenAddr(c.ConsoleAddr, c.Addr) {
		return c.placed(fmt.Errorf("console_addr %q is the same as addr: give the console an address of its own (e.g. 127.0.0.1:8081), or leave console_addr unset to serve everything on addr", c.ConsoleAddr), "console_addr", "addr")
	}
	return nil
}

// checkPort refuses a port that listening would refuse, as listening reads it: a number
// from 0 to 65535, or a service name the system knows (/etc/services). SplitHostPort
// alone passes "99999" and "htp", which would fail only at listen, after serve has
// created or migrated the database. An empty port is left to the caller.
func checkPort(port string) error {
	if port == "" {
		return nil
	}
	if strings.Trim(port, "0123456789") == "" {
		if _, err := strconv.ParseUint(port, 10, 16); err != nil {
			return fmt.Errorf("port %s is out of range: a port is a number from 0 to 65535", port)
		}
		return nil
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return fmt.Errorf("port %q is neither a number from 0 to 65535 nor a service name this system knows", port)
	}
	return nil
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

// consoleNames checks console_names and returns them as a browser sends them in Host
// (hostName), without repeats. Blank items are skipped.
func consoleNames(list []string) ([]string, error) {
	var out []string
	for _, item := range list {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, err := hostName(item)
		if err != nil {
			return nil, fmt.Errorf("%q %w", item, err)
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out, nil
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
		if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
			// Peers are compared unmapped (web.TrustedProxies): ::ffff:10.0.0.0/104 is
			// 10.0.0.0/8, and as written it would match no peer.
			p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
		}
		if p.Bits() == 0 {
			// Every client would then name its own address in X-Forwarded-For: a new
			// one for each wrong password, past the sign-in throttle.
			return nil, fmt.Errorf("%q trusts every address as a proxy, so any client could name its own address; list the proxies' addresses (\"10.0.0.5/32\", \"172.16.0.0/12\")", item)
		}
		// Nor may a few wide prefixes do it together (0.0.0.0/1 and 128.0.0.0/1): no
		// network of proxies is wider than the widest private ones, 10.0.0.0/8 and
		// fc00::/7.
		if widest := map[bool]int{true: 8, false: 7}[p.Addr().Is4()]; p.Bits() < widest {
			return nil, fmt.Errorf("%q trusts more addresses than any network of proxies holds (wider than /%d), so a client among them could name its own address; list the proxies' networks (\"10.0.0.0/8\", \"172.16.0.0/12\", \"fd00::/8\")", item, widest)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// sources builds the receiver's sources, checking every setting. generatedSecret
// supplies the secret of the zero-config source, kept in the database.
func (c *config) sources(getenv func(string) string, generatedSecret func(name string) (string, error)) ([]receiver.Source, error) {
	where := cmp.Or(c.File, "defaults")
	taken := map[string]bool{}
	out := make([]receiver.Source, 0, len(c.Sources))
	for i, sc := range c.Sources {
		src, err := buildSource(sc, taken, getenv, generatedSecret)
		if err != nil {
			return nil, fmt.Errorf("%s: source %q: %w", where, sourceLabel(i, sc.Name), err)
		}
		taken[src.Name] = true
		out = append(out, src)
	}
	if err := attachCorrelations(c.Correlations, out); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	return out, nil
}

// buildSource makes one source from its table in three steps: read its settings, check
// them, build the receiver.Source they describe. taken holds the names of the sources
// built before it. Errors name the setting at fault.
func buildSource(sc sourceConfig, taken map[string]bool, getenv func(string) string, generatedSecret func(string) (string, error)) (receiver.Source, error) {
	s, err := readSource(sc, getenv, generatedSecret)
	if err != nil {
		return receiver.Source{}, err
	}
	v, err := s.check(taken)
	if err != nil {
		return receiver.Source{}, err
	}
	return s.source(v), nil
}

// checkBatchOff refuses a source that turns its preset's batch off (batch = "") while
// keeping the preset's key: the preset's key_fields point inside each event of a batch
// (Adyen's NotificationRequestItem, a Mews event), and its event_id is none, so on the
// whole request they find nothing and every genuine delivery would be refused 422. A key
// of the source's own, key_fields or an event_id, says where the request holds it.
func (s sourceSettings) checkBatchOff() error {
	if s.Provider == "" || *s.Batch != "" {
		return nil
	}
	p, err := provider.Resolve(s.Provider)
	if err != nil || p.Batch == "" {
		return nil // settle has refused an unknown provider already
	}
	ownFields := !slices.Contains(s.fromPreset, "key_fields")
	ownID := !slices.Contains(s.fromPreset, "event_id") && s.EventID != nil && len(*s.EventID) > 0
	if ownFields || ownID {
		return nil
	}
	quoted := make([]string, len(s.KeyFields))
	for i, f := range s.KeyFields {
		quoted[i] = strconv.Quote(f)
	}
	return fmt.Errorf("batch: \"\" turns off provider %q's batch (%q), yet the key is still the preset's, read inside each event (key_fields %s): "+
		"on the whole request it finds nothing, and every delivery would be refused 422; set key_fields or event_id to where the request holds its key, or leave batch out",
		s.Provider, p.Batch, strings.Join(quoted, ", "))
}

// sourceDefaults are the settings a source gets where its table leaves them unset. The
// scheme supplies the rest: the event id (Verifier.DefaultEventID) and the tolerance.
func sourceDefaults() sourceConfig {
	return sourceConfig{
		TTL:               new(24 * time.Hour),
		MaxAttempts:       new(10),
		AttemptTimeout:    new(10 * time.Second),
		MaxBackoff:        new(10 * time.Minute),
		PropertyField:     new("/property_id"),
		BookingField:      new("/booking_id"),
		StatusField:       new("/status"),
		AmountField:       &provider.Places{},
		CurrencyField:     new(""),
		AmountMinorUnits:  new(false),
		Batch:             new(""),
		Item:              new(""),
		Answer:            string(receiver.AnswerJSON),
		FormEncoded:       new(false),
		BusinessWindow:    new(receiver.DefaultBusinessWindow),
		BusinessKeyBlocks: new(false),
	}
}

// withDefaults returns sc with every setting it leaves unset taken from def, so that what
// the table says always wins. The name and the secrets are the source's own and never
// taken from def.
func (sc sourceConfig) withDefaults(def sourceConfig) sourceConfig {
	sc.Signature = cmp.Or(sc.Signature, def.Signature)
	sc.SignatureHeader = cmp.Or(sc.SignatureHeader, def.SignatureHeader)
	sc.SignatureEncoding = cmp.Or(sc.SignatureEncoding, def.SignatureEncoding)
	sc.SignaturePrefix = cmp.Or(sc.SignaturePrefix, def.SignaturePrefix)
	sc.BasicUser = cmp.Or(sc.BasicUser, def.BasicUser)
	sc.TokenHeader = cmp.Or(sc.TokenHeader, def.TokenHeader)
	sc.TokenQuery = cmp.Or(sc.TokenQuery, def.TokenQuery)
	sc.Tolerance = cmp.Or(sc.Tolerance, def.Tolerance)
	sc.EventID = cmp.Or(sc.EventID, def.EventID)
	if sc.KeyFields == nil {
		sc.KeyFields = def.KeyFields
	}
	sc.TTL = cmp.Or(sc.TTL, def.TTL)
	sc.ForwardURL = cmp.Or(sc.ForwardURL, def.ForwardURL)
	sc.MaxAttempts = cmp.Or(sc.MaxAttempts, def.MaxAttempts)
	sc.AttemptTimeout = cmp.Or(sc.AttemptTimeout, def.AttemptTimeout)
	sc.MaxBackoff = cmp.Or(sc.MaxBackoff, def.MaxBackoff)
	sc.AmountField = cmp.Or(sc.AmountField, def.AmountField)
	sc.CurrencyField = cmp.Or(sc.CurrencyField, def.CurrencyField)
	sc.AmountMinorUnits = cmp.Or(sc.AmountMinorUnits, def.AmountMinorUnits)
	sc.PropertyField = cmp.Or(sc.PropertyField, def.PropertyField)
	sc.BookingField = cmp.Or(sc.BookingField, def.BookingField)
	sc.StatusField = cmp.Or(sc.StatusField, def.StatusField)
	sc.Batch = cmp.Or(sc.Batch, def.Batch)
	sc.Item = cmp.Or(sc.Item, def.Item)
	sc.Answer = cmp.Or(sc.Answer, def.Answer)
	sc.FormEncoded = cmp.Or(sc.FormEncoded, def.FormEncoded)
	sc.MaxBatchItems = cmp.Or(sc.MaxBatchItems, def.MaxBatchItems)
	if sc.BusinessKey == nil {
		sc.BusinessKey = def.BusinessKey
	}
	if sc.NoMoney == nil {
		sc.NoMoney = def.NoMoney
	}
	sc.BusinessWindow = cmp.Or(sc.BusinessWindow, def.BusinessWindow)
	sc.BusinessKeyBlocks = cmp.Or(sc.BusinessKeyBlocks, def.BusinessKeyBlocks)
	return sc
}

// sourceSettings are one source's settings once read: every setting that has a default
// is set (TTL, AttemptTimeout, MaxBackoff, the label fields, batch and item and the
// other pointers are never nil), and the secrets are in hand once readSource has read
// them.
type sourceSettings struct {
	sourceConfig
	// fromPreset names the settings the provider's preset filled in, as the config
	// file names them.
	fromPreset []string
	secrets    []string
	// windowWritten says the table itself sets business_window, which the defaults
	// fill in otherwise and no preset sets.
	windowWritten bool
}

// settle returns a source's settings without its secrets: its table's, then its
// provider's preset for what the table leaves unset, then the defaults for the rest.
// It reads nothing but sc, so the console and `hookdedup sources` settle a table again
// to say where each setting came from.
func (sc sourceConfig) settle() (sourceSettings, error) {
	// The table's own settings win; the preset and the defaults fill only what it
	// leaves unset, the preset first.
	withPreset, fromPreset, err := sc.withPreset()
	if err != nil {
		return sourceSettings{}, err
	}
	return sourceSettings{sourceConfig: withPreset.withDefaults(sourceDefaults()), fromPreset: fromPreset,
		windowWritten: sc.BusinessWindow != nil}, nil
}

// readSource reads one source's settings (settle), then its secrets from the table,
// the environment variable it names, or (the zero-config source) the database.
func readSource(sc sourceConfig, getenv func(string) string, generatedSecret func(string) (string, error)) (sourceSettings, error) {
	s, err := sc.settle()
	if err != nil {
		return s, err
	}
	s.secrets = append([]string(nil), sc.Secret...)
	if sc.SecretEnv != "" {
		v := getenv(sc.SecretEnv)
		if v == "" {
			return s, fmt.Errorf("secret_env: environment variable %s is empty or unset", sc.SecretEnv)
		}
		n := len(s.secrets)
		for _, secret := range strings.Split(v, ",") {
			if secret = strings.TrimSpace(secret); secret != "" {
				s.secrets = append(s.secrets, secret)
			}
		}
		// Named here: the verifier would only say that a secret is required, and send
		// the operator to a table that does name one.
		if len(s.secrets) == n {
			return s, fmt.Errorf("secret_env: environment variable %s holds no secret, only commas and spaces", sc.SecretEnv)
		}
	}
	if sc.generated && len(s.secrets) == 0 {
		secret, err := generatedSecret(sc.Name)
		if err != nil {
			return s, fmt.Errorf("secret: %w", err)
		}
		s.secrets = []string{secret}
	}
	return s, nil
}

// check applies every rule to the settings of a source; taken holds the names already
// in use. It returns the verifier the signature settings make: making it is how those
// are checked.
func (s sourceSettings) check(taken map[string]bool) (signature.Verifier, error) {
	switch {
	case s.Name == "":
		return nil, errors.New("name: is required")
	case s.Name == "." || s.Name == "..":
		// The path /webhooks/.. is cleaned before it is routed: no delivery reaches it.
		return nil, fmt.Errorf("name: %q cannot be a URL path segment (/webhooks/%s is not a clean path): no delivery could reach the source", s.Name, s.Name)
	case url.PathEscape(s.Name) != s.Name:
		// What PathEscape leaves alone is what one path segment holds as it is. The
		// characters it keeps besides letters, digits and - _ . ~ (: @ & = + $) have
		// always been accepted, and configurations use them.
		return nil, errors.New("name: must be one URL path segment as it is: ASCII letters, digits and - _ . ~ : @ & = + $ only")
	case taken[s.Name]:
		return nil, errors.New("name: is used by another source")
	case s.Signature == "":
		return nil, fmt.Errorf("signature: is required (one of %s)", strings.Join(signature.Schemes, ", "))
	case s.Signature == "none" && (len(s.Secret) > 0 || s.SecretEnv != ""):
		// A secret beside "none" says the operator meant the source to be checked: it
		// would take every delivery unchecked without a word.
		return nil, errors.New(`signature: "none" checks nothing, yet a secret is set (secret or secret_env): name the scheme it is for, or remove it`)
	}
	v, err := signature.New(s.signatureConfig())
	if err != nil {
		return nil, err // the verifier's errors name their field
	}
	if err := s.checkSchemeSettings(); err != nil {
		return nil, err
	}
	if err := s.keySpec(v).Validate(); err != nil {
		return nil, fmt.Errorf("event_id/key_fields: %w", err)
	}
	if v.Timestamped() {
		tol := cmp.Or(s.tolerance(), signature.DefaultTolerance)
		if least := minReplayTTL(tol); *s.TTL < least {
			return nil, fmt.Errorf("ttl %s is too short for tolerance %s: a captured delivery could be replayed after its key expires; raise ttl to at least %s (twice the tolerance plus %s) or lower tolerance",
				*s.TTL, tol, least, replayMargin)
		}
	}
	if err := s.checkBatchOff(); err != nil {
		return nil, err
	}
	if *s.Batch != "" {
		if err := receiver.CheckBatch(*s.Batch, *s.Item, s.keySpec(v)); err != nil {
			// An event_id the table never set is named with where it came from: the
			// operator would look for it in the table in vain.
			switch {
			case !errors.Is(err, receiver.ErrBatchHeaderID):
			case s.EventID == nil:
				err = fmt.Errorf("%w (signature %q reads the event id there unless event_id is set)", err, v.Scheme())
			case slices.Contains(s.fromPreset, "event_id"):
				err = fmt.Errorf("%w (event_id from provider %q)", err, s.Provider)
			}
			return nil, err
		}
	}
	if _, perItem := v.(receiver.ItemVerifier); perItem && *s.Batch != "" && *s.Item == "" {
		// Its signatures sit inside the object each element of the batch wraps: checked
		// on the element, every genuine delivery would be refused as unsigned. (With no
		// batch, the whole body is one event and every item of it is checked.)
		p, _ := provider.Lookup(v.Scheme())
		return nil, fmt.Errorf("signature %q signs the object inside each element of the batch: set item (provider = %q sets batch %q and item %q)",
			v.Scheme(), v.Scheme(), p.Batch, p.Item)
	}
	if s.MaxBatchItems < 0 {
		return nil, fmt.Errorf("max_batch_items: %d must not be negative", s.MaxBatchItems)
	}
	if *s.MaxAttempts < 1 {
		return nil, fmt.Errorf("max_attempts: must be at least 1, not %d", *s.MaxAttempts)
	}
	// A key is leased for attempt_timeout and 10 s more, and waits that long when the
	// process handing it off dies; a slip ("10000h" for "10m") would hold such keys,
	// and a stop that waits for an attempt under way, for months.
	if *s.AttemptTimeout > maxAttemptTimeout {
		return nil, fmt.Errorf("attempt_timeout: %s is longer than the most one attempt may take, %s", *s.AttemptTimeout, maxAttemptTimeout)
	}
	if *s.AttemptTimeout < minAttemptTimeout {
		return nil, fmt.Errorf("attempt_timeout: %s is shorter than %s: no hand-off could be answered within it", *s.AttemptTimeout, minAttemptTimeout)
	}
	// A retry planned further out than a day would leave the downstream's outage
	// long over while its keys still wait, out of sight of stuck_keys.
	if *s.MaxBackoff > maxDispatchBackoff {
		return nil, fmt.Errorf("max_backoff: %s is longer than the longest wait between attempts, %s", *s.MaxBackoff, maxDispatchBackoff)
	}
	if s.ForwardURL != "" {
		if why := alert.URLProblem(s.ForwardURL, false); why != "" {
			return nil, fmt.Errorf("forward_url: is not an http(s) URL: %s (write it like https://host/path)", why)
		}
	}
	switch receiver.Answer(s.Answer) {
	case receiver.AnswerJSON, receiver.AnswerAccepted:
	default:
		return nil, fmt.Errorf("answer: %q is not an answer hookdedup gives (want %q or %q)", s.Answer, receiver.AnswerJSON, receiver.AnswerAccepted)
	}
	if *s.FormEncoded && *s.Batch != "" {
		// A batch is split from the JSON body; a form's payload field would never be.
		return nil, fmt.Errorf("form_encoded: a batched source (batch %q) reads its events from a JSON body, not from a form's payload field: set one or the other", *s.Batch)
	}
	if *s.Item != "" && *s.Batch == "" {
		return nil, fmt.Errorf("item: %q is set without batch (it points inside the elements of a batch)", *s.Item)
	}
	if s.MaxBatchItems != 0 && *s.Batch == "" {
		// Read only where a batch is split: without one it would bound nothing, while the
		// operator took the source's requests to be bounded by it.
		return nil, fmt.Errorf("max_batch_items: %d is set without batch (it bounds the events of one batched request)", s.MaxBatchItems)
	}
	labels := []struct{ field, pointer string }{
		{"property_field", *s.PropertyField},
		{"booking_field", *s.BookingField},
		{"status_field", *s.StatusField},
		{"currency_field", *s.CurrencyField},
		{"item", *s.Item}, // batch is CheckBatch's, which takes the whole body too
	}
	for _, l := range labels {
		if l.pointer == "" {
			continue
		}
		// A pointer no document can match (a "~" not followed by 0 or 1) would leave its
		// label empty on every delivery, without a word.
		if err := receiver.CheckPointer(l.pointer); err != nil {
			return nil, fmt.Errorf("%s: %w", l.field, err)
		}
	}
	if err := receiver.CheckAmountField(*s.AmountField); err != nil {
		return nil, err
	}
	if len(*s.AmountField) == 0 {
		// Each qualifies the amount and is read only with one: the operator took the
		// source's money to be kept, and no delivery of it would carry any. A preset's
		// whose amount the table turned off goes unread with it.
		switch {
		case *s.CurrencyField != "" && !slices.Contains(s.fromPreset, "currency_field"):
			return nil, fmt.Errorf("currency_field: %q is set without amount_field (it is the currency of that amount, kept only with one)", *s.CurrencyField)
		case *s.AmountMinorUnits && !slices.Contains(s.fromPreset, "amount_minor_units"):
			return nil, errors.New("amount_minor_units: is set without amount_field (it says how that amount is counted)")
		}
	}
	if err := receiver.CheckBusinessKey(s.BusinessKey); err != nil {
		return nil, err
	}
	if err := receiver.CheckNoMoney(s.NoMoney); err != nil {
		return nil, err
	}
	if *s.BusinessKeyBlocks && len(s.BusinessKey) == 0 {
		return nil, errors.New("business_key_blocks: is set without business_key (it blocks deliveries whose business key was seen)")
	}
	if s.windowWritten && len(s.BusinessKey) == 0 {
		// It would bound a look-up that is never made, while the operator took re-sends
		// under a new id to be flagged within it.
		return nil, fmt.Errorf("business_window: %s is set without business_key (it bounds how far back a business key is looked for)", *s.BusinessWindow)
	}
	return v, nil
}

// schemeSettings are the signature settings that some schemes read, each with those
// schemes; every other scheme ignores it.
var schemeSettings = []struct {
	setting string
	schemes []string
}{
	{"tolerance", []string{"standard-webhooks", "stripe"}},
	{"signature_header", []string{"hmac-sha256"}},
	{"signature_encoding", []string{"hmac-sha256"}},
	{"signature_prefix", []string{"hmac-sha256"}},
	{"basic_user", []string{"basic-auth"}},
	{"token_header", []string{"token"}},
	{"token_query", []string{"token"}},
}

// checkSchemeSettings refuses a signature setting that the table sets (not its
// provider's preset) and its scheme does not read: it would do nothing, and read as if
// it did, as tolerance on github promises a replay window that GitHub's signature,
// which covers no timestamp, cannot give.
func (s sourceSettings) checkSchemeSettings() error {
	set := map[string]bool{
		"tolerance":          s.Tolerance != nil,
		"signature_header":   s.SignatureHeader != "",
		"signature_encoding": s.SignatureEncoding != "",
		"signature_prefix":   s.SignaturePrefix != "",
		"basic_user":         s.BasicUser != "",
		"token_header":       s.TokenHeader != "",
		"token_query":        s.TokenQuery != "",
	}
	for _, ss := range schemeSettings {
		if !set[ss.setting] || slices.Contains(ss.schemes, s.Signature) || slices.Contains(s.fromPreset, ss.setting) {
			continue
		}
		if ss.setting == "tolerance" {
			return fmt.Errorf("tolerance: signature %q signs no timestamp, so it has no tolerance (only %s do): remove it",
				s.Signature, strings.Join(ss.schemes, " and "))
		}
		return fmt.Errorf("%s: signature %q does not read it (only %s does): remove it, or set the signature it is for",
			ss.setting, s.Signature, strings.Join(ss.schemes, " and "))
	}
	return nil
}

// currencyExponents are the exponents of the source's provider where they differ from
// ISO 4217's: the sender counts minor units by its own table, whatever field it is read
// from.
func (s sourceSettings) currencyExponents() map[string]int {
	p, ok := provider.Lookup(s.Provider)
	if !ok {
		return nil
	}
	return p.CurrencyExponents
}

// redactFields are the credentials the source's provider says its bodies may carry.
func (s sourceSettings) redactFields() []string {
	p, ok := provider.Lookup(s.Provider)
	if !ok {
		return nil
	}
	return p.RedactFields
}

// tolerance is the tolerance the settings give, 0 for the scheme's default.
func (s sourceSettings) tolerance() time.Duration {
	if s.Tolerance == nil {
		return 0
	}
	return *s.Tolerance
}

// signatureConfig is what the signature scheme is built from.
func (s sourceSettings) signatureConfig() signature.Config {
	return signature.Config{
		Scheme:      s.Signature,
		Secrets:     s.secrets,
		Tolerance:   s.tolerance(),
		Header:      s.SignatureHeader,
		Encoding:    s.SignatureEncoding,
		Prefix:      s.SignaturePrefix,
		BasicUser:   s.BasicUser,
		TokenHeader: s.TokenHeader,
		TokenQuery:  s.TokenQuery,
	}
}

// keySpec says how a delivery's key is derived; the scheme names the event id unless
// the settings do.
func (s sourceSettings) keySpec(v signature.Verifier) receiver.KeySpec {
	spec := receiver.KeySpec{KeyFields: s.KeyFields, Scheme: v.Scheme()}
	if def := v.DefaultEventID(); def != "" {
		spec.EventID = []string{def}
	}
	if s.EventID != nil {
		spec.EventID = slices.Clone(*s.EventID)
	}
	return spec
}

// source is the receiver.Source that checked settings describe, verified by v.
func (s sourceSettings) source(v signature.Verifier) receiver.Source {
	src := receiver.Source{
		Name:           s.Name,
		Verifier:       v,
		Keys:           s.keySpec(v),
		TTL:            *s.TTL,
		ForwardURL:     s.ForwardURL,
		MaxAttempts:    *s.MaxAttempts,
		AttemptTimeout: *s.AttemptTimeout,
		MaxBackoff:     *s.MaxBackoff,
		AmountField:    slices.Clone(*s.AmountField),
		PropertyField:  *s.PropertyField,
		BookingField:   *s.BookingField,
		StatusField:    *s.StatusField,

		CurrencyField:     *s.CurrencyField,
		AmountMinorUnits:  *s.AmountMinorUnits,
		CurrencyExponents: s.currencyExponents(),
		RedactFields:      s.redactFields(),
		Batch:             *s.Batch,
		Item:              *s.Item,
		Answer:            receiver.Answer(s.Answer),
		FormEncoded:       *s.FormEncoded,
		MaxBatchItems:     s.MaxBatchItems,

		BusinessKey:       s.BusinessKey,
		BusinessWindow:    *s.BusinessWindow,
		BusinessKeyBlocks: *s.BusinessKeyBlocks,
		NoMoney:           s.NoMoney,
	}
	if s.TokenHeader != "" {
		src.RedactHeaders = []string{s.TokenHeader}
	}
	return src
}

// openDB opens the configured database with the configured durability. log receives
// what storage has to say by itself (nil: nothing), such as its file leaving its path.
// With mustExist it creates nothing and returns an error wrapping storage.ErrNoDatabase
// when there is no database; commands call it through openExisting. Only serving (serve)
// reads a large SQLite file's key index ahead of deliveries, and upgrades a PostgreSQL
// schema an earlier version set up, which that version's replicas may be running on.
func (c config) openDB(ctx context.Context, log *slog.Logger, mustExist, serving bool) (storage.Store, error) {
	if isPostgres(c.Database) {
		return postgres.Open(ctx, c.Database, postgres.Options{Logger: log, MustExist: mustExist, NoUpgrade: !serving})
	}
	mmap := c.MmapSize
	if mmap == 0 {
		mmap = -1 // off: storage's zero value is its default
	}
	return sqlite.Open(c.Database, sqlite.Options{Synchronous: c.Sync, CacheSize: c.CacheSize, MmapSize: mmap,
		Logger: log, MustExist: mustExist, NoReadAhead: !serving, ServeLock: serving})
}
