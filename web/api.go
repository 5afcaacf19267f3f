package web

import "net/http"

func (s *Server) registerAPI(mux *http.ServeMux) {}
