package server

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func get(t *testing.T, h http.Handler, method, path string) (int, string, http.Header) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	body, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(body), rec.Result().Header
}

func TestHTTPHandler(t *testing.T) {
	var ready atomic.Bool
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "kcoord_test_total", Help: "test counter"})
	reg.MustRegister(c)
	c.Add(3)
	h := NewHTTPHandler(ready.Load, reg)

	tests := []struct {
		name, method, path string
		ready              bool
		code               int
		body               string // exact unless contains is set
		contains           bool
	}{
		{"healthz", "GET", "/healthz", false, 200, "ok", false},
		{"healthz ready", "GET", "/healthz", true, 200, "ok", false},
		{"readyz not ready", "GET", "/readyz", false, 503, "not ready", false},
		{"readyz ready", "GET", "/readyz", true, 200, "ready", false},
		{"readyz head", "HEAD", "/readyz", true, 200, "", true},
		{"metrics", "GET", "/metrics", false, 200, "kcoord_test_total 3", true},
		{"unknown path", "GET", "/nope", true, 404, "", true},
		{"post", "POST", "/readyz", true, 405, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ready.Store(tt.ready)
			code, body, _ := get(t, h, tt.method, tt.path)
			if code != tt.code {
				t.Errorf("%s %s: code %d, want %d", tt.method, tt.path, code, tt.code)
			}
			if tt.contains && !strings.Contains(body, tt.body) {
				t.Errorf("%s %s: body %q does not contain %q", tt.method, tt.path, body, tt.body)
			}
			if !tt.contains && body != tt.body {
				t.Errorf("%s %s: body %q, want %q", tt.method, tt.path, body, tt.body)
			}
		})
	}
}

func TestHTTPHandlerNilGatherer(t *testing.T) {
	h := NewHTTPHandler(func() bool { return true }, nil)
	if code, _, _ := get(t, h, "GET", "/metrics"); code != 200 {
		t.Fatalf("/metrics with a nil gatherer: %d", code)
	}
}

func TestHTTPHandlerOverTCP(t *testing.T) {
	srv := httptest.NewServer(NewHTTPHandler(func() bool { return true }, prometheus.NewRegistry()))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(body) != "ready" {
		t.Fatalf("got %d %q", resp.StatusCode, body)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("Content-Type %q", ct)
	}
}
