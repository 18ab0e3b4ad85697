package transport

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Mux maps API keys to handlers and the version range each serves. It also
// yields the table ApiVersions advertises, so a client is offered exactly
// what is registered.
//
// Handle is normally called while wiring the server, before Serve; it is
// nevertheless safe to call concurrently with request dispatch.
type Mux struct {
	mu     sync.RWMutex
	routes map[int16]route
	// features answers ApiVersions' feature fields (SetFeatures); nil:
	// none advertised.
	features atomic.Pointer[func() Features]
}

type route struct {
	min, max int16
	fn       HandlerFunc
}

// NewMux returns a Mux that serves only ApiVersions.
func NewMux() *Mux {
	return &Mux{routes: make(map[int16]route)}
}

// Handle registers fn for key over the versions [minVersion, maxVersion].
// It panics when key is already registered (ApiVersions always is: transport
// serves it), when kmsg does not know key, when the range is empty or
// negative, when maxVersion is above kmsg's own maximum for key, or when fn
// is nil.
func (m *Mux) Handle(key int16, minVersion, maxVersion int16, fn HandlerFunc) {
	if fn == nil {
		panic(fmt.Sprintf("transport: nil handler for api key %d", key))
	}
	if key == apiVersionsKey || saslMaxVersion(key) >= 0 {
		panic(fmt.Sprintf("transport: %s (key %d) is served by transport itself", kmsg.NameForKey(key), key))
	}
	req := kmsg.RequestForKey(key)
	if req == nil {
		panic(fmt.Sprintf("transport: api key %d is unknown to kmsg", key))
	}
	if minVersion < 0 || minVersion > maxVersion {
		panic(fmt.Sprintf("transport: %s: invalid version range [%d, %d]", kmsg.NameForKey(key), minVersion, maxVersion))
	}
	if maxVersion > req.MaxVersion() {
		panic(fmt.Sprintf("transport: %s: max version %d is above kmsg's max %d",
			kmsg.NameForKey(key), maxVersion, req.MaxVersion()))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, dup := m.routes[key]; dup {
		panic(fmt.Sprintf("transport: %s (key %d) registered twice", kmsg.NameForKey(key), key))
	}
	m.routes[key] = route{min: minVersion, max: maxVersion, fn: fn}
}

// Versions returns the ApiVersions table served, ApiVersions itself
// included, sorted by key. The caller owns the returned slice. Connection
// handler goroutines call it for every ApiVersions request; it takes only a
// read lock.
func (m *Mux) Versions() []kmsg.ApiVersionsResponseApiKey {
	m.mu.RLock()
	out := make([]kmsg.ApiVersionsResponseApiKey, 0, len(m.routes)+1)
	for key, r := range m.routes {
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = key, r.min, r.max
		out = append(out, k)
	}
	m.mu.RUnlock()
	k := kmsg.NewApiVersionsResponseApiKey()
	k.ApiKey, k.MinVersion, k.MaxVersion = apiVersionsKey, 0, apiVersionsMaxVersion
	out = append(out, k)
	slices.SortFunc(out, func(a, b kmsg.ApiVersionsResponseApiKey) int { return int(a.ApiKey) - int(b.ApiKey) })
	return out
}

// lookup returns the route registered for key.
func (m *Mux) lookup(key int16) (route, bool) {
	m.mu.RLock()
	r, ok := m.routes[key]
	m.mu.RUnlock()
	return r, ok
}
