// Package web is the console's HTTP layer.
package web

// Server serves the console.
type Server struct{}
