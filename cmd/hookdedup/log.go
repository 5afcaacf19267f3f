package main

// Log attribute keys. One meaning has one key, spelled the same in every package that
// logs it (web, receiver, cmd/hookdedup), so that a search of the log finds them all.
const (
	logErr         = "err"          // the error
	logAddr        = "addr"         // the address a server listens on
	logConsoleAddr = "console_addr" // the console's own address, when it has one
	logMetrics     = "metrics"      // how /metrics is served: open, token or off
	logDatabase    = "database"     // the database's path or URL
	logConfig      = "config"       // the configuration file
	logSources     = "sources"      // the sources' names
)
