package main

import (
	"net/http"
	"net/http/pprof"
)

// servePprof adds Go's profiler to mux under /debug/pprof/, as importing
// net/http/pprof adds it to http.DefaultServeMux (which kcoord does not
// serve): the index and the named profiles, the command line, CPU profiles,
// symbols and execution traces. serve calls it with --pprof.
func servePprof(mux *http.ServeMux) {
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
}
