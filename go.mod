module github.com/hookdedup/hookdedup

go 1.26.8

require (
	github.com/BurntSushi/toml v1.6.0 // indirect
	github.com/a-h/templ v0.3.1100 // indirect
	github.com/gorilla/securecookie v1.1.2 // indirect
	github.com/gorilla/sessions v1.4.0 // indirect
	github.com/gowebpki/jcs v1.0.2 // indirect
	github.com/mattn/go-sqlite3 v1.14.53 // indirect
	github.com/prometheus/client_golang v1.25.0 // indirect
	golang.org/x/crypto v0.59.0 // indirect
)
