package server

import (
	"io"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// NewHTTPHandler serves a node's operational endpoints:
//
//	/healthz  200 "ok" while the process runs
//	/readyz   200 "ready" when ready() says so, else 503 "not ready"
//	/metrics  the gatherer's metrics in the Prometheus formats
//
// The status page (Server.StatusPage) and the admin API are the server's.
// A nil gatherer serves no metrics but the endpoint still answers.
func NewHTTPHandler(ready func() bool, gatherer prometheus.Gatherer) http.Handler {
	return newHTTPHandler(func() (bool, string) { return ready(), "" }, gatherer)
}

// newHTTPHandler is NewHTTPHandler with readiness that says why it is not
// ready: /readyz answers 503 "not ready: <why>".
func newHTTPHandler(ready func() (bool, string), gatherer prometheus.Gatherer) http.Handler {
	if gatherer == nil {
		gatherer = prometheus.NewRegistry()
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeText(w, http.StatusOK, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		switch ok, why := ready(); {
		case ok:
			writeText(w, http.StatusOK, "ready")
		case why != "":
			writeText(w, http.StatusServiceUnavailable, "not ready: "+why)
		default:
			writeText(w, http.StatusServiceUnavailable, "not ready")
		}
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	return mux
}

// HTTPHandler is the node's whole HTTP API, as kcoord serve serves it on
// --http-addr: NewHTTPHandler's endpoints with gatherer's metrics, the
// admin API under /v1/ and the status page (/ and /group).
func (s *Server) HTTPHandler(gatherer prometheus.Gatherer) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/", newHTTPHandler(s.readiness, gatherer))
	mux.Handle("/v1/", s.AdminHandler())
	page := s.StatusPage()
	mux.Handle("GET /{$}", page)
	mux.Handle("GET /group", page)
	return mux
}

func writeText(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	io.WriteString(w, body)
}
