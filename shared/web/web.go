// Package web is the approvals page: one HTML document, one stylesheet and
// one script, embedded in the binary and served by the API handler at "/",
// so `fluidbox dev` and the control function serve the same page.
//
// What it guarantees:
//   - The page talks only to the public API of the origin it came from,
//     with a token the user types (kept in the tab's sessionStorage).
//   - It never turns API data into markup: the script sets textContent on
//     elements it creates (web_test.go checks the script for the HTML
//     sinks), and a strict Content-Security-Policy allows no inline script
//     or style, no other origin, no framing and no form posts.
package web

import (
	"embed"
	"net/http"
)

//go:embed static/index.html static/app.js static/app.css
var static embed.FS

// ContentSecurityPolicy is sent with every asset of the page.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; " +
	"img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Page serves the HTML document.
func Page() http.Handler { return asset("static/index.html", "text/html; charset=utf-8") }

// Script serves app.js.
func Script() http.Handler { return asset("static/app.js", "text/javascript; charset=utf-8") }

// Style serves app.css.
func Style() http.Handler { return asset("static/app.css", "text/css; charset=utf-8") }

func asset(name, contentType string) http.Handler {
	body, err := static.ReadFile(name)
	if err != nil {
		// The files are embedded at build time: a missing one is a build
		// that cannot have compiled, so this is unreachable.
		body = nil
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", contentType)
		h.Set("Content-Security-Policy", ContentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		// Small and versioned with the binary: always revalidate, so a new
		// deploy is picked up at once.
		h.Set("Cache-Control", "no-cache")
		if r.Method == http.MethodHead {
			return
		}
		_, _ = w.Write(body)
	})
}
