package server

import (
	"fmt"
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
//	/         a small status page with links to the others
//
// A nil gatherer serves no metrics but the endpoint still answers.
func NewHTTPHandler(ready func() bool, gatherer prometheus.Gatherer) http.Handler {
	if gatherer == nil {
		gatherer = prometheus.NewRegistry()
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeText(w, http.StatusOK, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if ready() {
			writeText(w, http.StatusOK, "ready")
		} else {
			writeText(w, http.StatusServiceUnavailable, "not ready")
		}
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		state := "not ready"
		if ready() {
			state = "ready"
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		fmt.Fprintf(w, statusPage, state)
	})
	return mux
}

const statusPage = `<!doctype html>
<html><head><meta charset="utf-8"><title>kcoord</title></head>
<body>
<h1>kcoord</h1>
<p>A Kafka-compatible consumer-group coordinator.</p>
<p>Node: <strong>%s</strong></p>
<ul>
<li><a href="/healthz">/healthz</a>: 200 while the process runs</li>
<li><a href="/readyz">/readyz</a>: 200 once every shard this node replicates has a leader</li>
<li><a href="/metrics">/metrics</a>: Prometheus metrics</li>
</ul>
</body></html>
`

func writeText(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	io.WriteString(w, body)
}
