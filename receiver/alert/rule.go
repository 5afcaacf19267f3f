package alert

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// The kinds of rule, as the config's `kind` names them.
const (
	// KindStuckKeys: more than Threshold keys of a source are stuck (failed, or
	// processing for longer than stuck_after).
	KindStuckKeys = "stuck_keys"
	// KindMoneyMismatch: more than Threshold duplicates of a source in the last Window
	// differ from their first delivery in amount, currency or status.
	KindMoneyMismatch = "money_mismatch"
	// KindSuspectedDouble: more than Threshold suspected doubles of a source wait for a
	// review.
	KindSuspectedDouble = "suspected_double"
	// KindSignatureFailures: more than Threshold deliveries of a source in the last
	// Window were refused for a bad or missing signature.
	KindSignatureFailures = "signature_failures"
	// KindDownstreamFailing: the last Times attempts to hand a source's events
	// downstream all failed.
	KindDownstreamFailing = "downstream_failing"
	// KindDatabaseNotReady: the database cannot commit a write (what /readyz says).
	KindDatabaseNotReady = "database_not_ready"
	// KindDiskSpace: the file system of the database has less than MinFree bytes free.
	KindDiskSpace = "disk_space"
	// KindClockSkew: the senders' signed timestamps are, in the median of the last
	// hour, more than MaxSkew away from this machine's clock.
	KindClockSkew = "clock_skew"
)

// Kinds lists the kinds of rule, for messages and docs.
var Kinds = []string{KindStuckKeys, KindMoneyMismatch, KindSuspectedDouble, KindSignatureFailures,
	KindDownstreamFailing, KindDatabaseNotReady, KindDiskSpace, KindClockSkew}

// perSource reports whether a kind's alerts are about one source each.
func perSource(kind string) bool {
	switch kind {
	case KindStuckKeys, KindMoneyMismatch, KindSuspectedDouble, KindSignatureFailures, KindDownstreamFailing:
		return true
	}
	return false
}

// Defaults of the rules' settings.
const (
	DefaultSignatureWindow = 5 * time.Minute
	DefaultMismatchWindow  = 24 * time.Hour
	DefaultTimes           = 3
	DefaultMaxSkew         = time.Minute
	// DefaultClearFor is how long a condition must stay clear before its alert
	// resolves by itself: many evaluations (every 5 s), so that a condition hovering
	// at its threshold keeps one alert open instead of opening and resolving it at
	// every other evaluation.
	DefaultClearFor = 2 * time.Minute
	// MaxClearFor bounds ClearFor: beyond it an alert would outlive its cause by
	// more than a day.
	MaxClearFor = 24 * time.Hour
	// MaxFor bounds For: a condition that must hold for longer before anyone is told
	// is one no one hears of, and "10000h" for "10m" would keep the rule silent for a
	// year with nothing to say so.
	MaxFor = 24 * time.Hour
	// MaxWindow bounds Window: a year, as long as any retention that keeps the
	// deliveries it counts, where "10000h" for "10m" is a slip.
	MaxWindow = 365 * 24 * time.Hour
	// MaxMaxSkew bounds MaxSkew: a clock a day off is wrong whatever the senders'.
	MaxMaxSkew = 24 * time.Hour
)

// Rule is one [[alert]] table: a condition, and the channels told when an alert of it
// opens and resolves.
type Rule struct {
	Name string
	Kind string
	// Source, if set, limits a per-source kind to that source; "" watches every source.
	Source string
	// Threshold: an alert opens when the count is above it (stuck_keys,
	// money_mismatch, suspected_double, signature_failures). Default 0: any.
	Threshold int64
	// Times is how many attempts in a row must fail (downstream_failing).
	Times int
	// Window is how far back is counted (signature_failures, money_mismatch).
	Window time.Duration
	// For is how long the condition must hold before an alert opens; 0: at once.
	For time.Duration
	// ClearFor is how long the condition must stay clear before an open alert
	// resolves by itself; the condition holding again within it keeps the same alert,
	// with no new notification. Default DefaultClearFor.
	ClearFor time.Duration
	// MinFree is the free space, in bytes, below which disk_space fires.
	MinFree uint64
	// MaxSkew is the clock skew beyond which clock_skew fires.
	MaxSkew time.Duration
	// Channels name the [[alert_channel]] tables told of each transition.
	Channels []string
}

// WithDefaults returns r with the defaults of its kind where it leaves a setting unset.
func (r Rule) WithDefaults() Rule {
	if r.ClearFor == 0 {
		r.ClearFor = DefaultClearFor
	}
	switch r.Kind {
	case KindSignatureFailures:
		if r.Window == 0 {
			r.Window = DefaultSignatureWindow
		}
	case KindMoneyMismatch:
		if r.Window == 0 {
			r.Window = DefaultMismatchWindow
		}
	case KindDownstreamFailing:
		if r.Times == 0 {
			r.Times = DefaultTimes
		}
	case KindClockSkew:
		if r.MaxSkew == 0 {
			r.MaxSkew = DefaultMaxSkew
		}
	}
	return r
}

// Check applies every rule to r's settings (after WithDefaults); sources and channels
// are the names configured. Errors name the setting at fault.
func (r Rule) Check(sources, channels []string) error {
	if err := checkName(r.Name); err != nil {
		return err
	}
	switch {
	case r.Kind == "":
		return fmt.Errorf("kind: is required (one of %s)", strings.Join(Kinds, ", "))
	case !slices.Contains(Kinds, r.Kind):
		return fmt.Errorf("kind: %q is not a kind of alert (want one of %s)", r.Kind, strings.Join(Kinds, ", "))
	}
	uses := map[string][]string{
		"threshold": {KindStuckKeys, KindMoneyMismatch, KindSuspectedDouble, KindSignatureFailures},
		"times":     {KindDownstreamFailing},
		"window":    {KindSignatureFailures, KindMoneyMismatch},
		"min_free":  {KindDiskSpace},
		"max_skew":  {KindClockSkew},
	}
	set := map[string]bool{
		"threshold": r.Threshold != 0, "times": r.Times != 0, "window": r.Window != 0,
		"min_free": r.MinFree != 0, "max_skew": r.MaxSkew != 0,
	}
	for _, name := range []string{"threshold", "times", "window", "min_free", "max_skew"} {
		if set[name] && !slices.Contains(uses[name], r.Kind) {
			return fmt.Errorf("%s: does not apply to kind %s (only to %s)", name, r.Kind, strings.Join(uses[name], ", "))
		}
	}
	switch {
	case r.Threshold < 0:
		return fmt.Errorf("threshold: %d must not be negative", r.Threshold)
	case r.Times < 0 || r.Kind == KindDownstreamFailing && r.Times < 1:
		return fmt.Errorf("times: %d must be at least 1", r.Times)
	case r.Times > 1000:
		return fmt.Errorf("times: %d is more than 1000", r.Times)
	case r.Window < 0 || slices.Contains(uses["window"], r.Kind) && r.Window <= 0:
		return fmt.Errorf("window: %s must be positive", r.Window)
	case r.Window > MaxWindow:
		return fmt.Errorf("window: %s is longer than %s", r.Window, MaxWindow)
	case r.For < 0:
		return fmt.Errorf("for: %s must not be negative", r.For)
	case r.For > MaxFor:
		return fmt.Errorf("for: %s is longer than %s", r.For, MaxFor)
	case r.ClearFor <= 0:
		return fmt.Errorf("clear_for: %s must be positive", r.ClearFor)
	case r.ClearFor > MaxClearFor:
		return fmt.Errorf("clear_for: %s is longer than %s", r.ClearFor, MaxClearFor)
	case r.Kind == KindDiskSpace && r.MinFree == 0:
		return errors.New(`min_free: is required for kind disk_space (write it like "1GiB" or "500MB")`)
	case r.Kind == KindClockSkew && r.MaxSkew <= 0:
		return fmt.Errorf("max_skew: %s must be positive", r.MaxSkew)
	case r.MaxSkew > MaxMaxSkew:
		return fmt.Errorf("max_skew: %s is longer than %s", r.MaxSkew, MaxMaxSkew)
	}
	if r.Source != "" {
		if !perSource(r.Kind) {
			return fmt.Errorf("source: does not apply to kind %s, which is about the whole server", r.Kind)
		}
		if !slices.Contains(sources, r.Source) {
			return fmt.Errorf("source: %q is not a configured source", r.Source)
		}
	}
	seen := map[string]bool{}
	for _, c := range r.Channels {
		if !slices.Contains(channels, c) {
			if len(channels) == 0 {
				return fmt.Errorf("channels: %q is not a configured channel (there is no [[alert_channel]])", c)
			}
			return fmt.Errorf("channels: %q is not a configured channel (want one of %s)", c, strings.Join(channels, ", "))
		}
		if seen[c] {
			return fmt.Errorf("channels: %q is named twice", c)
		}
		seen[c] = true
	}
	return nil
}

// checkName applies the rule for a rule's or a channel's name. Both are stored (a
// channel's in a list with commas) and written into messages' subjects and texts, and
// PostgreSQL stores no NUL in text: a control character, invisible on the console
// and refused or changed by the database, would set apart a name that looks the
// same as the configured one.
func checkName(name string) error {
	switch {
	case name == "":
		return errors.New("name: is required")
	case !utf8.ValidString(name):
		return errors.New("name: is not valid UTF-8")
	case strings.ContainsFunc(name, func(r rune) bool { return r == ',' || unicode.IsControl(r) }):
		return errors.New("name: must not hold a comma or a control character (a line break, a tab, NUL)")
	}
	return nil
}

// Describe says in words when the rule fires, for the alerts page.
func (r Rule) Describe() string {
	where := "any source"
	if r.Source != "" {
		where = "source " + r.Source
	}
	var s string
	switch r.Kind {
	case KindStuckKeys:
		s = fmt.Sprintf("more than %d stuck keys on %s", r.Threshold, where)
	case KindMoneyMismatch:
		s = fmt.Sprintf("more than %d duplicates with a different amount, currency or status on %s within %s", r.Threshold, where, r.Window)
	case KindSuspectedDouble:
		s = fmt.Sprintf("more than %d suspected doubles waiting for a review on %s", r.Threshold, where)
	case KindSignatureFailures:
		s = fmt.Sprintf("more than %d deliveries refused for their signature on %s within %s", r.Threshold, where, r.Window)
	case KindDownstreamFailing:
		s = fmt.Sprintf("the last %d attempts to hand the events of %s downstream failed", r.Times, where)
	case KindDatabaseNotReady:
		s = "the database cannot commit a write"
	case KindDiskSpace:
		s = fmt.Sprintf("less than %s free on the database's file system", FormatBytes(r.MinFree))
	case KindClockSkew:
		s = fmt.Sprintf("signed timestamps more than %s from this machine's clock (median of the last hour)", r.MaxSkew)
	}
	if r.For > 0 {
		s += fmt.Sprintf(", for %s", r.For)
	}
	return s
}

// CheckRules checks each rule (after WithDefaults) and that no two share a name.
// Errors name the rule.
func CheckRules(rules []Rule, sources, channels []string) error {
	taken := map[string]bool{}
	for i, r := range rules {
		label := r.Name
		if label == "" {
			label = fmt.Sprintf("#%d", i+1)
		}
		if err := r.Check(sources, channels); err != nil {
			return fmt.Errorf("alert %q: %w", label, err)
		}
		if taken[r.Name] {
			return fmt.Errorf("alert %q: name: is used by another alert", label)
		}
		taken[r.Name] = true
	}
	return nil
}

// ParseBytes reads a size such as "500MB", "1GiB" or "1048576" (bytes).
func ParseBytes(s string) (uint64, error) {
	t := strings.TrimSpace(s)
	units := []struct {
		suffix string
		mult   uint64
	}{
		{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
		{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1},
	}
	mult := uint64(1)
	for _, u := range units {
		if n, ok := strings.CutSuffix(t, u.suffix); ok {
			t, mult = strings.TrimSpace(n), u.mult
			break
		}
	}
	var n uint64
	if _, err := fmt.Sscanf(t, "%d", &n); err != nil || fmt.Sprint(n) != t {
		return 0, fmt.Errorf("%q is not a size (write it like \"500MB\", \"1GiB\" or a number of bytes)", s)
	}
	if n > (1<<63)/mult {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return n * mult, nil
}

// FormatBytes writes a size in the largest binary unit that keeps it at least 1.
func FormatBytes(n uint64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	f := float64(n)
	i := 0
	for f >= 1024 && i < len(units)-1 {
		f /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%d B", n)
	}
	return fmt.Sprintf("%.1f %s", f, units[i])
}
