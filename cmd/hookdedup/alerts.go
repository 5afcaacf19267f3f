package main

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/hookdedup/hookdedup/receiver/alert"
	"github.com/hookdedup/hookdedup/web"
)

// alertConfig is one [[alert]] table as written in the file: a rule.
type alertConfig struct {
	Name      string         `toml:"name"`
	Kind      string         `toml:"kind"`
	Source    string         `toml:"source"`
	Threshold int64          `toml:"threshold"`
	Times     *int           `toml:"times"` // nil when unset: 0 written out is refused, not defaulted
	Window    *time.Duration `toml:"window"`
	For       *time.Duration `toml:"for"`
	ClearFor  *time.Duration `toml:"clear_for"`
	MinFree   string         `toml:"min_free"`
	MaxSkew   *time.Duration `toml:"max_skew"`
	Channels  []string       `toml:"channels"`
}

// alertChannelConfig is one [[alert_channel]] table as written in the file. Its secret
// (a webhook's signing secret, a slack URL, an SMTP password) comes from secret or from
// the environment variable secret_env names.
type alertChannelConfig struct {
	Name        string         `toml:"name"`
	Type        string         `toml:"type"`
	URL         string         `toml:"url"`
	Secret      secrets        `toml:"secret"`
	SecretEnv   string         `toml:"secret_env"`
	SMTPAddr    string         `toml:"smtp_addr"`
	Username    string         `toml:"username"`
	From        string         `toml:"from"`
	To          []string       `toml:"to"`
	CAFile      string         `toml:"ca_file"`
	Timeout     *time.Duration `toml:"timeout"`
	MaxAttempts *int           `toml:"max_attempts"` // nil when unset: 0 written out is refused, not defaulted
	MaxBackoff  *time.Duration `toml:"max_backoff"`
}

// decodeAlerts decodes the [[alert]] and [[alert_channel]] tables. Errors name the table
// and the setting.
func decodeAlerts(md toml.MetaData, rules, channels []toml.Primitive) ([]alertConfig, []alertChannelConfig, error) {
	var outR []alertConfig
	for i, p := range rules {
		// The name, and the durations as written: TOML reads a bare number as nanoseconds.
		var written struct {
			Name     any `toml:"name"`
			Window   any `toml:"window"`
			For      any `toml:"for"`
			ClearFor any `toml:"clear_for"`
			MaxSkew  any `toml:"max_skew"`
		}
		var ac alertConfig
		err := md.PrimitiveDecode(p, &written)
		ac.Name, _ = written.Name.(string)
		if err == nil {
			err = decodeTable(md, p, &ac, map[string]any{"window": written.Window, "for": written.For,
				"clear_for": written.ClearFor, "max_skew": written.MaxSkew})
		}
		if err != nil {
			return nil, nil, fmt.Errorf("alert %q: %w", sourceLabel(i, ac.Name), err)
		}
		outR = append(outR, ac)
	}
	var outC []alertChannelConfig
	for i, p := range channels {
		var written struct {
			Name       any `toml:"name"`
			Timeout    any `toml:"timeout"`
			MaxBackoff any `toml:"max_backoff"`
		}
		var cc alertChannelConfig
		err := md.PrimitiveDecode(p, &written)
		cc.Name, _ = written.Name.(string)
		if err == nil {
			err = decodeTable(md, p, &cc, map[string]any{"timeout": written.Timeout, "max_backoff": written.MaxBackoff})
		}
		if err == nil {
			err = checkSecretEnv(cc.SecretEnv)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("alert_channel %q: %w", sourceLabel(i, cc.Name), err)
		}
		outC = append(outC, cc)
	}
	return outR, outC, nil
}

// decodeTable decodes table p into dst, refusing a duration the file wrote as a bare
// number (TOML reads those as nanoseconds) or that is not positive; durations holds
// each duration's setting as written.
func decodeTable(md toml.MetaData, p toml.Primitive, dst any, durations map[string]any) error {
	if err := md.PrimitiveDecode(p, dst); err != nil {
		return durationError(err)
	}
	for _, key := range []string{"window", "for", "clear_for", "max_skew", "timeout", "max_backoff"} {
		switch v := durations[key].(type) {
		case int64:
			return fmt.Errorf("%s: %w", key, fileDuration(time.Duration(v), true))
		case string:
			if d, err := time.ParseDuration(v); err == nil {
				if err := fileDuration(d, false); err != nil {
					return fmt.Errorf("%s: %w", key, err)
				}
			}
		}
	}
	return nil
}

// alerting builds the alert rules and channels of the configuration, reading the
// channels' secrets. sources are the configured sources' names. Errors name the table
// and the setting, never a secret.
func (c config) alerting(getenv func(string) string, sources []string) ([]alert.Rule, []*alert.Channel, error) {
	var channels []*alert.Channel
	var names []string
	for i, cc := range c.AlertChannels {
		label := sourceLabel(i, cc.Name)
		ch, err := cc.build(getenv)
		if err != nil {
			return nil, nil, fmt.Errorf("alert_channel %q: %w", label, err)
		}
		for _, n := range names {
			if n == ch.Name() {
				return nil, nil, fmt.Errorf("alert_channel %q: name: is used by another channel", label)
			}
		}
		names = append(names, ch.Name())
		channels = append(channels, ch)
	}
	var rules []alert.Rule
	for i, ac := range c.Alerts {
		r, err := ac.rule()
		if err != nil {
			return nil, nil, fmt.Errorf("alert %q: %w", sourceLabel(i, ac.Name), err)
		}
		if r.Kind == alert.KindDiskSpace && isPostgres(c.Database) {
			// It could never fire, and would log that it cannot every evaluation.
			return nil, nil, fmt.Errorf("alert %q: kind disk_space watches the file system of a SQLite database, and the database is PostgreSQL: "+
				"watch the PostgreSQL server's disk where it runs", sourceLabel(i, ac.Name))
		}
		rules = append(rules, r.WithDefaults())
	}
	if err := alert.CheckRules(rules, sources, names); err != nil {
		return nil, nil, err
	}
	return rules, channels, nil
}

func (ac alertConfig) rule() (alert.Rule, error) {
	r := alert.Rule{Name: ac.Name, Kind: ac.Kind, Source: ac.Source, Threshold: ac.Threshold, Channels: ac.Channels}
	if ac.Times != nil {
		if *ac.Times < 1 {
			return r, fmt.Errorf("times: must be at least 1, not %d", *ac.Times)
		}
		r.Times = *ac.Times
	}
	for _, d := range []struct {
		file *time.Duration
		dst  *time.Duration
	}{{ac.Window, &r.Window}, {ac.For, &r.For}, {ac.ClearFor, &r.ClearFor}, {ac.MaxSkew, &r.MaxSkew}} {
		if d.file != nil {
			*d.dst = *d.file
		}
	}
	if ac.MinFree != "" {
		n, err := alert.ParseBytes(ac.MinFree)
		if err != nil {
			return r, fmt.Errorf("min_free: %w", err)
		}
		if n == 0 {
			return r, errors.New("min_free: must be more than 0")
		}
		r.MinFree = n
	}
	return r, nil
}

func (cc alertChannelConfig) build(getenv func(string) string) (*alert.Channel, error) {
	secrets := append([]string(nil), cc.Secret...)
	if cc.SecretEnv != "" {
		v := getenv(cc.SecretEnv)
		if v == "" {
			return nil, fmt.Errorf("secret_env: environment variable %s is empty or unset", cc.SecretEnv)
		}
		if cc.Type == alert.TypeWebhook {
			// Several signing secrets, comma-separated, as for sources (rotation).
			for _, s := range strings.Split(v, ",") {
				if s = strings.TrimSpace(s); s != "" {
					secrets = append(secrets, s)
				}
			}
		} else {
			secrets = append(secrets, strings.TrimSpace(v)) // a password may hold a comma
		}
	}
	cfg := alert.ChannelConfig{Name: cc.Name, Type: cc.Type, URL: cc.URL, Secrets: secrets, SMTPAddr: cc.SMTPAddr,
		Username: cc.Username, From: cc.From, To: cc.To, CAFile: cc.CAFile}
	if cc.MaxAttempts != nil {
		if *cc.MaxAttempts < 1 {
			return nil, fmt.Errorf("max_attempts: must be at least 1, not %d", *cc.MaxAttempts)
		}
		cfg.MaxAttempts = *cc.MaxAttempts
	}
	if cc.Timeout != nil {
		cfg.Timeout = *cc.Timeout
	}
	if cc.MaxBackoff != nil {
		cfg.MaxBackoff = *cc.MaxBackoff
	}
	return alert.NewChannel(cfg, nil)
}

// consoleAlerts describes the rules and channels for the alerts page: no secret, a
// channel only by its masked target.
func consoleAlerts(rules []alert.Rule, channels []*alert.Channel) ([]web.AlertRule, []web.AlertChannel) {
	var rs []web.AlertRule
	for _, r := range rules {
		rs = append(rs, web.AlertRule{Name: r.Name, Kind: r.Kind, Description: r.Describe(), Channels: r.Channels})
	}
	var cs []web.AlertChannel
	for _, c := range channels {
		cs = append(cs, web.AlertChannel{Name: c.Name(), Type: c.Type(), Target: c.Target()})
	}
	return rs, cs
}

// openAlerts builds the alert engine of the configuration's [[alert]] rules and
// [[alert_channel]] tables, and returns what the console shows of them.
func (p *program) openAlerts(e env) (func(*web.Config), error) {
	names := make([]string, len(p.sources))
	for i, s := range p.sources {
		names[i] = s.Name
	}
	rules, channels, err := p.cfg.checkedAlerting(e.getenv, names)
	if err != nil {
		return nil, err
	}
	p.alerts, err = alert.New(alert.Config{
		Store: p.db, Rules: rules, Channels: channels, Sources: names, StuckAfter: p.cfg.StuckAfter,
		ClockSkew: p.intake.ClockSkew, Machine: machineName(), Now: p.db.Clock, Logger: p.log,
		Notified: func(channel, result string) { p.metrics.AlertsNotified.WithLabelValues(channel, result).Inc() },
	})
	if err != nil {
		return nil, err
	}
	shownRules, shownChannels := consoleAlerts(rules, channels)
	return func(c *web.Config) {
		c.AlertRules, c.AlertChannels, c.AlertsChanged = shownRules, shownChannels, p.alerts.Wake
	}, nil
}

// checkedAlerting is alerting, its error naming the configuration file.
func (c config) checkedAlerting(getenv func(string) string, sources []string) ([]alert.Rule, []*alert.Channel, error) {
	rules, channels, err := c.alerting(getenv, sources)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", cmp.Or(c.File, "defaults"), err)
	}
	return rules, channels, nil
}

// machineName is this machine's host name, which a clock_skew alert names; "" when the
// system will not say.
func machineName() string {
	name, err := os.Hostname()
	if err != nil {
		return ""
	}
	return name
}
