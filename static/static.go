// Package static holds the console's CSS, script and icons, embedded in the binary so
// that the console works offline: no CDN.
package static

import "embed"

// FS holds the assets at its root: style.css, app.js, icon.svg.
//
//go:embed *.css *.js *.svg
var FS embed.FS
