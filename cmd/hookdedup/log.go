package main

// Log attribute keys. One meaning has one key, spelled the same in every package that
// logs it (web, receiver, cmd/hookdedup), so that a search of the log finds them all.
const (
	logErr          = "err"           // the error
	logAddr         = "addr"          // the address a server listens on
	logConsoleAddr  = "console_addr"  // the console's own address, when it has one
	logMetrics      = "metrics"       // how /metrics is served: open, token or off
	logDatabase     = "database"      // the database's path or URL
	logConfig       = "config"        // the configuration file
	logSources      = "sources"       // the sources' names
	logComponent    = "component"     // the part of the program that logs (tls here)
	logHTTPAddr     = "http_addr"     // the plain-HTTP listener's address beside HTTPS
	logDomain       = "domain"        // one host name a certificate is for
	logDomains      = "domains"       // every host name configured for ACME, comma-separated
	logDirectory    = "directory"     // an ACME CA's directory URL
	logCache        = "cache"         // the directory the ACME state is kept in
	logPrevious     = "previous"      // the ACME directory a cache set aside came from
	logSetAside     = "set_aside"     // where the ACME state of a previous directory was moved
	logCert         = "cert"          // a certificate file's path
	logNames        = "names"         // the names a certificate is good for, comma-separated
	logConsoleNames = "console_names" // the console_names setting, comma-separated
	logNotAfter     = "not_after"     // when a certificate expires (RFC 3339, UTC)
	logErrAt        = "err_at"        // when the error beside it happened (RFC 3339, UTC)
	logWithin       = "within"        // the longest a shutdown waits for requests in flight
	logUnlogged     = "unlogged"      // how many like it since the last line went without one
)
