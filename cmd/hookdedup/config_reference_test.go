package main

import (
	"bytes"
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver"
	"github.com/hookdedup/hookdedup/receiver/signature"
)

// referenceSection returns the rows of the README's tables under "Configuration
// reference", each split into its cells, and its TOML block of every top-level setting
// at its default.
func referenceSection(t *testing.T) (rows [][]string, defaults string) {
	t.Helper()
	blocks, prose := parseReadme(t)
	in := false
	for _, line := range prose {
		switch {
		case strings.HasPrefix(line, "## "):
			in = line == "## Configuration reference"
		case in && strings.HasPrefix(line, "| `"):
			cells := strings.Split(strings.Trim(line, "| "), " | ")
			rows = append(rows, cells)
		}
	}
	for _, b := range blocks {
		if b.lang == "toml" && strings.HasPrefix(b.text, "# hookdedup.toml: every top-level setting at its default") {
			defaults = b.text
		}
	}
	if len(rows) == 0 || defaults == "" {
		t.Fatal("README.md: no configuration reference, or no block of the defaults in it")
	}
	return rows, defaults
}

// code returns what cell holds when it is one `code` span, and false otherwise ("none",
// "`:80` with HTTPS").
func code(cell string) (string, bool) {
	s, ok := strings.CutPrefix(cell, "`")
	if !ok {
		return "", false
	}
	s, ok = strings.CutSuffix(s, "`")
	return s, ok && !strings.Contains(s, "`")
}

// TestConfig_ReferenceTopLevel: each row of the README's table of top-level settings
// names a setting that its HOOKDEDUP_ variable and its flag (--name, - for _) set, every
// such setting has a row, the default the row gives is what the block "every top-level
// setting at its default" writes, and that block loads to the configuration of no file
// at all.
func TestConfig_ReferenceTopLevel(t *testing.T) {
	rows, block := referenceSection(t)
	flags := newFlags("serve", env{getenv: func(string) string { return "" }, stderr: &bytes.Buffer{}})
	var c config
	settings := map[string]bool{}
	for _, s := range c.settings() {
		settings[s.name] = true
	}
	written := map[string]string{} // the block's top-level lines, name = value
	for _, line := range strings.Split(block, "\n") {
		if strings.HasPrefix(line, "[") {
			break
		}
		if name, value, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			written[strings.TrimSpace(name)] = strings.TrimSpace(value)
		}
	}
	rowed := map[string]bool{}
	for _, cells := range rows {
		if len(cells) < 4 {
			continue
		}
		variable, ok := code(cells[2])
		if !ok || !strings.HasPrefix(variable, "HOOKDEDUP_") {
			continue // a source's field, or a scheme
		}
		name, _ := code(cells[0])
		rowed[name] = true
		if !settings[name] {
			t.Errorf("README: %s is in the table but is no setting the environment or a flag sets", name)
			continue
		}
		if want := "HOOKDEDUP_" + strings.ToUpper(name); variable != want {
			t.Errorf("README: %s is set by %s, says the table; it is %s", name, variable, want)
		}
		if flags.fs.Lookup(strings.ReplaceAll(name, "_", "-")) == nil {
			t.Errorf("%s has no flag --%s", name, strings.ReplaceAll(name, "_", "-"))
		}
		if def, ok := code(cells[1]); ok {
			value, inBlock := written[name]
			if unquoted, err := strconv.Unquote(value); err == nil {
				value = unquoted
			}
			if !inBlock || value != def {
				t.Errorf("README: the table's default of %s is %q; the block of defaults writes %q", name, def, written[name])
			}
		}
	}
	for name := range settings {
		if !rowed[name] {
			t.Errorf("README: setting %s has no row in the configuration reference", name)
		}
	}

	path := filepath.Join(t.TempDir(), "hookdedup.toml")
	writeFile(t, path, []byte(block))
	getenv := func(string) string { return "" }
	got, err := loadConfig(path, true, getenv)
	if err != nil {
		t.Fatalf("the block of defaults: %v", err)
	}
	want, err := loadConfig(filepath.Join(t.TempDir(), "none.toml"), false, getenv)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []*config{&got, &want} {
		c.File, c.origin, c.Sources = "", nil, nil
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the block of defaults loads to\n%+v\nno file to\n%+v", got, want)
	}
}

// TestConfig_ReferenceSourceDefaults: each default the README's table of a source's
// fields gives in code is the one a source that leaves the field unset runs with.
func TestConfig_ReferenceSourceDefaults(t *testing.T) {
	rows, _ := referenceSection(t)
	s, err := sourceConfig{Name: "s", Signature: "stripe"}.settle()
	if err != nil {
		t.Fatal(err)
	}
	read := map[string]string{
		"tolerance":           signature.DefaultTolerance.String(),
		"ttl":                 s.TTL.String(),
		"max_attempts":        strconv.Itoa(*s.MaxAttempts),
		"attempt_timeout":     s.AttemptTimeout.String(),
		"max_backoff":         s.MaxBackoff.String(),
		"max_batch_items":     strconv.Itoa(cmp.Or(s.MaxBatchItems, receiver.DefaultMaxBatchItems)),
		"answer":              s.Answer,
		"amount_minor_units":  strconv.FormatBool(*s.AmountMinorUnits),
		"form_encoded":        strconv.FormatBool(*s.FormEncoded),
		"business_window":     s.BusinessWindow.String(),
		"business_key_blocks": strconv.FormatBool(*s.BusinessKeyBlocks),
		"property_field":      *s.PropertyField,
		"booking_field":       *s.BookingField,
		"status_field":        *s.StatusField,
		// The hmac-sha256 verifier's own default, where SignatureEncoding is "".
		"signature_encoding": "hex",
	}
	checked := 0
	for _, cells := range rows {
		if len(cells) != 3 || strings.HasPrefix(cells[1], "`HOOKDEDUP_") {
			continue
		}
		names, defaults := strings.Split(cells[0], ", "), strings.Split(cells[1], ", ")
		if len(names) != len(defaults) {
			continue
		}
		for i, n := range names {
			name, ok := code(n)
			def, hasDefault := code(defaults[i])
			if !ok || !hasDefault {
				continue
			}
			got, known := read[name]
			if !known {
				t.Errorf("README: %s's default %q: this test does not read it; add it", name, def)
				continue
			}
			if d, err := time.ParseDuration(def); err == nil {
				def = d.String()
			}
			if got != def {
				t.Errorf("README: a source's %s is %q by default, says the table; it is %q", name, def, got)
			}
			checked++
		}
	}
	if checked < 10 {
		t.Errorf("%d defaults checked: the table is not read as it is written", checked)
	}
}

// TestConfig_FileFromEnvironment: the configuration file is --config's, else
// $HOOKDEDUP_CONFIG's, else hookdedup.toml in the working directory if it is there, else
// none; a file the variable names that is missing is an error, not the defaults.
func TestConfig_FileFromEnvironment(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	writeFile(t, "hookdedup.toml", []byte("retention = \"1h\"\n"))
	writeFile(t, "env.toml", []byte("retention = \"2h\"\n"))
	writeFile(t, "flag.toml", []byte("retention = \"3h\"\n"))
	load := func(vars map[string]string, args ...string) (config, error) {
		t.Helper()
		e := env{getenv: func(k string) string { return vars[k] }, stderr: &bytes.Buffer{}}
		f := newFlags("keys", e)
		if _, err := f.parse(args); err != nil {
			t.Fatal(err)
		}
		return f.load(e)
	}
	for _, tc := range []struct {
		name string
		vars map[string]string
		args []string
		file string
		want time.Duration
	}{
		{"WorkingDirectory", nil, nil, "hookdedup.toml", time.Hour},
		{"Variable", map[string]string{"HOOKDEDUP_CONFIG": "env.toml"}, nil, "env.toml", 2 * time.Hour},
		{"FlagOverVariable", map[string]string{"HOOKDEDUP_CONFIG": "env.toml"}, []string{"--config", "flag.toml"}, "flag.toml", 3 * time.Hour},
	} {
		cfg, err := load(tc.vars, tc.args...)
		if err != nil || cfg.File != tc.file || cfg.Retention != tc.want {
			t.Errorf("%s: file %q, retention %s, %v; want %s's %s", tc.name, cfg.File, cfg.Retention, err, tc.file, tc.want)
		}
	}
	if _, err := load(map[string]string{"HOOKDEDUP_CONFIG": "missing.toml"}); err == nil || !strings.Contains(err.Error(), "missing.toml") {
		t.Errorf("HOOKDEDUP_CONFIG naming a missing file: %v; want it refused, naming the file", err)
	}
	if err := os.Remove("hookdedup.toml"); err != nil {
		t.Fatal(err)
	}
	if cfg, err := load(nil); err != nil || cfg.File != "" || cfg.Retention != 720*time.Hour {
		t.Errorf("no file: file %q, retention %s, %v; want the defaults", cfg.File, cfg.Retention, err)
	}
}

// TestConfig_EmptyOrPortlessListenAddress: --addr "$ADDR" with the variable unset is
// refused, naming the flag, as --database "" is: listening on "" is every interface, on
// a port the system picks, where no sender would find the webhooks and the console
// would be open to the network. A console_addr without its port is refused as addr's
// is, for the port the system would pick.
func TestConfig_EmptyOrPortlessListenAddress(t *testing.T) {
	for _, tc := range []struct {
		name, toml string
		env        map[string]string
		args       []string
		want       string
	}{
		{"AddrFlag", "", nil, []string{"--addr", ""}, "--addr: addr is empty (an unset variable?)"},
		{"AddrFlagOverFile", "addr = \"127.0.0.1:9000\"\n", nil, []string{"--addr", ""}, "--addr: addr is empty (an unset variable?)"},
		{"ConsoleAddrFile", "console_addr = \"127.0.0.1:\"\n", nil, nil, `hookdedup.toml: console_addr "127.0.0.1:" is not host:port`},
		{"ConsoleAddrVariable", "", map[string]string{"HOOKDEDUP_CONSOLE_ADDR": "10.8.0.1:"}, nil, `HOOKDEDUP_CONSOLE_ADDR: console_addr "10.8.0.1:" is not host:port`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := loadWith(t, tc.toml, tc.env, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("addr %q, console_addr %q, %v; want an error containing %q", cfg.Addr, cfg.ConsoleAddr, err, tc.want)
			}
		})
	}
	// Port 0 is still a free port.
	if _, err := loadWith(t, "console_addr = \"127.0.0.1:0\"\n", nil, "--addr", "127.0.0.1:0"); err != nil {
		t.Errorf("addr and console_addr on port 0: %v", err)
	}
}

// TestConfig_DatabaseURLWithBlankAfter: a postgres:// URL with a blank after it (the \r
// of an environment file written on Windows, a space pasted with it) is refused as one
// with a blank before it is, naming where it was set and not showing the password:
// taken as it is, the blank became part of the database's name, or no URL at all.
func TestConfig_DatabaseURLWithBlankAfter(t *testing.T) {
	for _, tc := range []struct {
		name, toml string
		env        map[string]string
		args       []string
		want       string
	}{
		{"File", "database = \"postgres://hook:S3CRETPW@127.0.0.1:1/hook \"\n", nil, nil, "hookdedup.toml: database: begins or ends with a blank"},
		{"Variable", "", map[string]string{"HOOKDEDUP_DATABASE": "postgresql://hook:S3CRETPW@127.0.0.1:1/hook\r"}, nil, "HOOKDEDUP_DATABASE: database: begins or ends with a blank"},
		{"Flag", "", nil, []string{"--database", "postgres://hook:S3CRETPW@127.0.0.1:1/hook\n"}, "--database: database: begins or ends with a blank"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadWith(t, tc.toml, tc.env, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%v; want an error containing %q", err, tc.want)
			}
			if strings.Contains(fmt.Sprint(err), "S3CRETPW") {
				t.Errorf("the error shows the password: %v", err)
			}
		})
	}
}

// TestConfig_MaxBatchItemsBelowOne: max_batch_items written as 0 or a negative number is
// refused, naming the source, the setting and the value: 0 was read as the default
// without a word (where max_attempts = 0 is refused), also on a source without batch,
// whose max_batch_items the README says is refused whatever it is.
func TestConfig_MaxBatchItemsBelowOne(t *testing.T) {
	const batched = "[[source]]\nname = \"mews\"\nsignature = \"none\"\nkey_fields = [\"/Value\"]\nbatch = \"/Events\"\n"
	const single = "[[source]]\nname = \"cm\"\nsignature = \"none\"\nevent_id = \"/id\"\n"
	for _, tc := range []struct{ name, toml, want string }{
		{"Zero", batched + "max_batch_items = 0\n", `source "mews": max_batch_items: 0 `},
		{"Negative", batched + "max_batch_items = -5\n", `source "mews": max_batch_items: -5 `},
		{"ZeroWithoutBatch", single + "max_batch_items = 0\n", `source "cm": max_batch_items: 0 `},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "hookdedup.toml")
			writeFile(t, path, []byte(tc.toml))
			getenv := func(string) string { return "" }
			cfg, err := loadConfig(path, true, getenv)
			if err == nil {
				_, err = cfg.sources(getenv, func(string) (string, error) { return "", nil })
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "hookdedup.toml") {
				t.Errorf("%v; want an error containing %q", err, tc.want)
			}
		})
	}
	path := filepath.Join(t.TempDir(), "hookdedup.toml")
	writeFile(t, path, []byte(batched+"max_batch_items = 1\n"))
	getenv := func(string) string { return "" }
	cfg, err := loadConfig(path, true, getenv)
	if err == nil {
		_, err = cfg.sources(getenv, func(string) (string, error) { return "", nil })
	}
	if err != nil {
		t.Errorf("max_batch_items = 1: %v", err)
	}
}

// TestConfig_SettingWrittenTwice: a setting written twice in one table (a pasted line,
// an old secret left above the new) is refused saying so, naming the setting and its
// table: a secret's was called "not a value TOML reads; write it as a quoted string",
// quoted though both were, and another's was the decoder's own message.
func TestConfig_SettingWrittenTwice(t *testing.T) {
	const source = "[[source]]\nname = \"ota\"\nsignature = \"hmac-sha256\"\nkey_fields = [\"/id\"]\n"
	for _, tc := range []struct{ name, toml, want string }{
		{"Secret", source + "secret = \"old-secret-1\"\nsecret = \"new-secret-2\"\n",
			`hookdedup.toml: line 6: source.secret is written twice; TOML takes each setting once in a table: keep one`},
		{"Addr", "addr = \":1\"\naddr = \":2\"\n",
			`hookdedup.toml: line 2: addr is written twice; TOML takes each setting once in a table: keep one`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "hookdedup.toml")
			writeFile(t, path, []byte(tc.toml))
			_, err := loadConfig(path, true, func(string) string { return "" })
			if err == nil || !strings.HasSuffix(err.Error(), "/"+tc.want) || strings.Contains(err.Error(), "secret-") {
				t.Errorf("%v\nwant %s", err, tc.want)
			}
		})
	}
}

// TestConfig_UnknownSettingNamesItsTable: an unknown setting in a table of an array of
// tables is refused naming the table it is in, by its name, down to the innermost: with
// several correlation rules, "correlation.source.bogus" alone left the operator to search
// every rule's every source for it.
func TestConfig_UnknownSettingNamesItsTable(t *testing.T) {
	const sources = "[[source]]\nname = \"ota\"\nsignature = \"none\"\nevent_id = \"/id\"\n" +
		"[[source]]\nname = \"psp\"\nsignature = \"none\"\nevent_id = \"/id\"\n"
	const rule = "[[correlation]]\nname = \"%s\"\nwindow = \"72h\"\n%s" +
		"[[correlation.source]]\nname = \"ota\"\nbooking = \"/b\"\namount = \"/a\"\n%s" +
		"[[correlation.source]]\nname = \"psp\"\nbooking = \"/b\"\namount = \"/a\"\ncurrency = \"/c\"\n%s"
	const cur = "currency = \"/c\"\n"
	for _, tc := range []struct{ name, toml, want string }{
		{"RuleSource", sources + fmt.Sprintf(rule, "first", "", cur, "") + fmt.Sprintf(rule, "second", "", cur, "bogus = 1\n"),
			`hookdedup.toml: correlation "second": source "psp": unknown setting "bogus"`},
		{"Rule", sources + fmt.Sprintf(rule, "first", "", cur, "") + fmt.Sprintf(rule, "second", "windw = \"1h\"\n", cur, ""),
			`hookdedup.toml: correlation "second": unknown setting "windw"`},
		{"OtherCase", sources + fmt.Sprintf(rule, "first", "", "Currency = \"/c\"\n", ""),
			`hookdedup.toml: correlation "first": source "ota": unknown setting "Currency" (settings are written in lower case: currency)`},
		{"Source", sources + "[[source]]\nname = \"pms\"\nsignature = \"none\"\nevent_id = \"/id\"\nttll = \"1h\"\n",
			`hookdedup.toml: source "pms": unknown setting "ttll"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "hookdedup.toml")
			writeFile(t, path, []byte(tc.toml))
			_, err := loadConfig(path, true, func(string) string { return "" })
			if err == nil || !strings.HasSuffix(err.Error(), "/"+tc.want) {
				t.Errorf("%v\nwant %s", err, tc.want)
			}
		})
	}
}

// TestConfig_SettingInAnotherCase: a key written in another case than its setting's
// (TOML's keys are case-sensitive) is refused as the unknown setting it is, saying how
// the setting is written. The decoder filled the setting from it past the checks that
// look a setting up by its name: MAX_BODY = 0 kept the default without a word,
// Retention = 86400 was 86 µs. The currencies of [approval_threshold] are data, and
// upper case.
func TestConfig_SettingInAnotherCase(t *testing.T) {
	const source = "[[source]]\nname = \"ota\"\nsignature = \"none\"\nevent_id = \"/id\"\n"
	for _, tc := range []struct{ name, toml, want string }{
		{"MaxBodyZero", "MAX_BODY = 0\n", `hookdedup.toml: unknown setting "MAX_BODY" (settings are written in lower case: max_body)`},
		{"BareRetention", "Retention = 86400\n", `hookdedup.toml: unknown setting "Retention" (settings are written in lower case: retention)`},
		{"Addr", "ADDR = \"0.0.0.0:8080\"\n", `unknown setting "ADDR"`},
		{"SourceSetting", source + "TTL = \"1h\"\n", `hookdedup.toml: source "ota": unknown setting "TTL" (settings are written in lower case: ttl)`},
		{"Table", "[[Source]]\nname = \"ota\"\nsignature = \"none\"\nevent_id = \"/id\"\n", `unknown setting "Source"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "hookdedup.toml")
			writeFile(t, path, []byte(tc.toml))
			cfg, err := loadConfig(path, true, func(string) string { return "" })
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("max_body %d, retention %s, addr %q, %v; want an error containing %q", cfg.MaxBody, cfg.Retention, cfg.Addr, err, tc.want)
			}
		})
	}
	path := filepath.Join(t.TempDir(), "hookdedup.toml")
	writeFile(t, path, []byte("[approval_threshold]\nEUR = \"1000.00\"\n"))
	if _, err := loadConfig(path, true, func(string) string { return "" }); err != nil {
		t.Errorf("[approval_threshold] EUR: %v", err)
	}
}

// TestConfig_SecretInSecretEnvNotShown: a secret written in secret_env, where the name
// of the variable that holds it goes, is refused without being shown, by every command:
// it was quoted as the name of an unset variable, and printed by hookdedup sources. A
// variable's name, in any case, is still one.
func TestConfig_SecretInSecretEnvNotShown(t *testing.T) {
	for _, secret := range []string{
		"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
		"S3CRET+b64/TOKEN==",
		"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		"tok-S3CRET-value",
	} {
		for _, conf := range []string{
			"[[source]]\nname = \"ota\"\nsignature = \"github\"\nsecret_env = " + strconv.Quote(secret) + "\n",
			"[[alert_channel]]\nname = \"ops\"\ntype = \"webhook\"\nurl = \"https://ops.example/hook\"\nsecret_env = " + strconv.Quote(secret) + "\n",
		} {
			for _, args := range [][]string{{"sources"}, {"key", "--source", "ota"}, {"demo", "--url", "http://127.0.0.1:9"}} {
				stdout, stderr, err := runIn(t, conf, nil, "", args...)
				if err == nil || !strings.Contains(err.Error(), "secret_env: is not the name of an environment variable") {
					t.Errorf("%s with secret_env %q: %v; want it refused as no variable's name", args[0], secret, err)
				}
				if strings.Contains(fmt.Sprint(err)+stdout+stderr, secret) {
					t.Errorf("%s shows the secret written in secret_env: %v\n%s%s", args[0], err, stdout, stderr)
				}
			}
		}
	}
	for _, name := range []string{"OTA_WEBHOOK_SECRET", "ota_secret", "_S1"} {
		path := filepath.Join(t.TempDir(), "hookdedup.toml")
		writeFile(t, path, []byte("[[source]]\nname = \"ota\"\nsignature = \"github\"\nsecret_env = "+strconv.Quote(name)+"\n"))
		getenv := func(k string) string { return map[string]string{name: "s3cr3t"}[k] }
		cfg, err := loadConfig(path, true, getenv)
		if err == nil {
			_, err = cfg.sources(getenv, func(string) (string, error) { return "", nil })
		}
		if err != nil {
			t.Errorf("secret_env %q: %v", name, err)
		}
	}
}

// TestConfig_EmptyMetricsTokenFlag: --metrics-token "$TOKEN" with the variable unset is
// refused, naming the flag, rather than dropping the file's token, which opened
// /metrics to anyone who reaches console_addr; as a blank --acme-domains is refused
// rather than turning HTTPS off.
func TestConfig_EmptyMetricsTokenFlag(t *testing.T) {
	const file = "console_addr = \"127.0.0.1:8081\"\nmetrics_token = \"0123456789abcdef0123\"\n"
	cfg, err := loadWith(t, file, nil, "--metrics-token", "")
	if err == nil || !strings.Contains(err.Error(), "--metrics-token: is empty (an unset variable?)") {
		t.Errorf("metrics %s, %v; want --metrics-token \"\" refused", metricsMode(cfg), err)
	}
	// An empty variable is unset, and leaves the file's token.
	if cfg, err := loadWith(t, file, map[string]string{"HOOKDEDUP_METRICS_TOKEN": ""}); err != nil || cfg.MetricsToken != "0123456789abcdef0123" {
		t.Errorf("an empty HOOKDEDUP_METRICS_TOKEN: token %q, %v; want the file's", cfg.MetricsToken, err)
	}
}

// TestConfig_EmptyFlagKeepsWhatTheFileSets: --console-addr, --tls-cert-file or
// --tls-key-file given "$VAR" with the variable unset is refused, naming the flag,
// rather than turning off what the file sets: the console moved onto addr, or serve
// answered in plain HTTP where the file asks for HTTPS, each without a word, where an
// empty --acme-domains is refused for that reason. An empty variable is unset.
func TestConfig_EmptyFlagKeepsWhatTheFileSets(t *testing.T) {
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	file := fmt.Sprintf("console_addr = \"127.0.0.1:8081\"\ntls_cert_file = %q\ntls_key_file = %q\n", cert, key)
	for _, args := range [][]string{
		{"--console-addr", ""},
		{"--tls-cert-file", "", "--tls-key-file", ""},
		{"--tls-key-file", ""},
		// A staging or private CA would quietly become Let's Encrypt's production one.
		{"--acme-directory", ""},
	} {
		cfg, err := loadWith(t, file, nil, args...)
		if want := args[0] + ": is empty (an unset variable?)"; err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%q: console_addr %q, HTTPS %v, %v; want an error beginning %q", args, cfg.ConsoleAddr, cfg.tls().enabled(), err, want)
		}
	}
	vars := map[string]string{"HOOKDEDUP_CONSOLE_ADDR": "", "HOOKDEDUP_TLS_CERT_FILE": "", "HOOKDEDUP_TLS_KEY_FILE": ""}
	if cfg, err := loadWith(t, file, vars); err != nil || cfg.ConsoleAddr != "127.0.0.1:8081" || cfg.TLSCertFile != cert || cfg.TLSKeyFile != key {
		t.Errorf("empty variables: %+v, %v; want the file's settings", cfg.tls(), err)
	}
}

// TestConfig_UnknownSettingInInlineTables: sources and a rule's sources written as an
// inline array of tables (source = [{…}, {…}]), which TOML allows as well as [[source]],
// are named as their tables are when one holds an unknown setting.
func TestConfig_UnknownSettingInInlineTables(t *testing.T) {
	const sources = `source = [{name = "ota", signature = "none", event_id = "/id"}, {name = "psp", signature = "none", event_id = "/id", ttll = "1h"}]` + "\n"
	const rule = "[[correlation]]\nname = \"r\"\nwindow = \"72h\"\n" +
		`source = [{name = "ota", booking = "/b", amount = "/a", currency = "/c"}, {name = "psp", booking = "/b", amount = "/a", currency = "/c", bogus = 1}]` + "\n"
	const okSources = "[[source]]\nname = \"ota\"\nsignature = \"none\"\nevent_id = \"/id\"\n" +
		"[[source]]\nname = \"psp\"\nsignature = \"none\"\nevent_id = \"/id\"\n"
	for _, tc := range []struct{ name, toml, want string }{
		{"Source", sources, `hookdedup.toml: source "psp": unknown setting "ttll"`},
		{"RuleSource", okSources + rule, `hookdedup.toml: correlation "r": source "psp": unknown setting "bogus"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "hookdedup.toml")
			writeFile(t, path, []byte(tc.toml))
			_, err := loadConfig(path, true, func(string) string { return "" })
			if err == nil || !strings.HasSuffix(err.Error(), "/"+tc.want) {
				t.Errorf("%v\nwant %s", err, tc.want)
			}
		})
	}
}
