package api

import "github.com/fluidbox/fluidbox/shared/web"

// webRoutes serves the approvals page. It needs no token to load: the page
// asks the user for one and calls the API with it like any other client.
func (s *Server) webRoutes() {
	s.mux.Handle("GET /{$}", web.Page())
	s.mux.Handle("GET /app.js", web.Script())
	s.mux.Handle("GET /app.css", web.Style())
}
