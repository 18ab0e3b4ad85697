package transport

import (
	"errors"
	"math"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Request error reasons that are not frame errors (see frame.go).
const (
	reasonHandlerError = "handler_error"
	reasonHandlerPanic = "handler_panic"
	reasonBadResponse  = "bad_response"
)

// metrics holds the server's collectors. A nil *metrics records nothing, so
// callers never check whether a Registerer was configured. Its methods are
// safe for concurrent use from any goroutine and never block.
type metrics struct {
	reg           prometheus.Registerer
	requests      *prometheus.CounterVec   // api, version
	errors        *prometheus.CounterVec   // api, reason
	latency       *prometheus.HistogramVec // api
	openConns     prometheus.Gauge
	acceptedConns prometheus.Counter
	rejectedConns *prometheus.CounterVec // reason: limitMaxConnections, limitMaxConnectionsPerIP, reasonStarting
	saslAuths     *prometheus.CounterVec // mechanism, outcome: saslSuccess, saslReauthenticated, saslFailure, saslExpired
	tlsFailures   prometheus.Counter
	// The request memory pool's, read from it at scrape time.
	poolUsed, poolAvailable, poolWaiting prometheus.GaugeFunc
	poolWait, poolCollections            prometheus.CounterFunc
}

// newMetrics registers the server's collectors, pool's included, with reg;
// nil reg yields a nil *metrics. On error nothing stays registered.
func newMetrics(reg prometheus.Registerer, pool *memoryPool) (*metrics, error) {
	if reg == nil {
		return nil, nil
	}
	const ns, sub = "kcoord", "transport"
	m := &metrics{
		reg: reg,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "requests_total",
			Help: "Kafka requests handled, by API name and version.",
		}, []string{"api", "version"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "request_errors_total",
			Help: "Requests that closed their connection, by API name (Unknown before the header is read) and reason.",
		}, []string{"api", "reason"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: sub, Name: "request_duration_seconds",
			Help: "Time from a request's frame being read to its response being ready to write, queueing included, by API name.",
			// 0.25 ms to about 9 minutes: JoinGroup waits out rebalances.
			Buckets: prometheus.ExponentialBuckets(0.00025, 2, 22),
		}, []string{"api"}),
		openConns: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "open_connections",
			Help: "Client connections currently open.",
		}),
		acceptedConns: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "connections_accepted_total",
			Help: "Client connections accepted.",
		}),
		rejectedConns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "connections_rejected_total",
			Help: "Client connections closed right after accept, by the limit they were over (max.connections, max.connections.per.ip).",
		}, []string{"reason"}),
		saslAuths: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "sasl_authentications_total",
			Help: "SASL exchanges by mechanism and outcome: success, reauthenticated, failure (the connection closed), expired (a session that ended without re-authentication, closed).",
		}, []string{"mechanism", "outcome"}),
		tlsFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "tls_handshake_failures_total",
			Help: "Connections closed because their TLS handshake failed: plaintext clients on a TLS listener, missing or untrusted client certificates.",
		}),
		poolUsed: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "memory_pool_used_bytes",
			Help: "Bytes of request frames held in memory now, over all connections (Kafka's MemoryPoolUsed).",
		}, func() float64 { return float64(pool.usedBytes.Load()) }),
		poolAvailable: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "memory_pool_available_bytes",
			Help: "Bytes of queued.max.request.bytes not held now; +Inf when unbounded (Kafka's MemoryPoolAvailable).",
		}, func() float64 {
			if !pool.bounded() {
				return math.Inf(1)
			}
			return float64(pool.availableBytes())
		}),
		poolWaiting: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "memory_pool_waiting_connections",
			Help: "Connections that stopped reading until queued.max.request.bytes can hold their next frame.",
		}, func() float64 { return float64(pool.waitingReaders.Load()) }),
		poolWait: prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "memory_pool_wait_seconds_total",
			Help: "Time connections spent waiting for queued.max.request.bytes to hold their next frame, summed over connections.",
		}, func() float64 { return time.Duration(pool.waitNanos.Load()).Seconds() }),
		poolCollections: prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "memory_pool_collections_total",
			Help: "Garbage collections a connection ran before allocating a granted frame, because frames released earlier might still occupy the heap.",
		}, func() float64 { return float64(pool.collections.Load()) }),
	}
	for _, reason := range []string{limitMaxConnections, limitMaxConnectionsPerIP, reasonStarting} {
		m.rejectedConns.WithLabelValues(reason)
	}
	var registered []prometheus.Collector
	for _, c := range m.collectors() {
		if err := reg.Register(c); err != nil {
			for _, r := range registered {
				reg.Unregister(r)
			}
			return nil, err
		}
		registered = append(registered, c)
	}
	return m, nil
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.requests, m.errors, m.latency, m.openConns, m.acceptedConns, m.rejectedConns,
		m.saslAuths, m.tlsFailures, m.poolUsed, m.poolAvailable, m.poolWaiting, m.poolWait, m.poolCollections}
}

// unregister removes the collectors, so a new server may register on the
// same Registerer.
func (m *metrics) unregister() {
	if m == nil {
		return
	}
	for _, c := range m.collectors() {
		m.reg.Unregister(c)
	}
}

// request records one request handled (or failed) with its latency.
func (m *metrics) request(key, version int16, received time.Time) {
	if m == nil {
		return
	}
	name := kmsg.NameForKey(key)
	m.requests.WithLabelValues(name, strconv.Itoa(int(version))).Inc()
	m.latency.WithLabelValues(name).Observe(time.Since(received).Seconds())
}

// requestError records a request or frame that closed its connection.
func (m *metrics) requestError(err error) {
	if m == nil {
		return
	}
	api := "Unknown"
	reason := reasonHandlerError
	var fe *frameError
	if errors.As(err, &fe) {
		reason = fe.reason
		if fe.hasHeader {
			api = kmsg.NameForKey(fe.key)
		}
	}
	var he *handlerError
	if errors.As(err, &he) {
		reason = he.reason
		api = kmsg.NameForKey(he.key)
	}
	m.errors.WithLabelValues(api, reason).Inc()
}

func (m *metrics) connOpened() {
	if m == nil {
		return
	}
	m.acceptedConns.Inc()
	m.openConns.Inc()
}

func (m *metrics) connClosed() {
	if m == nil {
		return
	}
	m.openConns.Dec()
}

// connRejected records a connection closed right after accept for being
// over limit (limitMaxConnections or limitMaxConnectionsPerIP) or before
// Open (reasonStarting).
func (m *metrics) connRejected(limit string) {
	if m == nil {
		return
	}
	m.acceptedConns.Inc()
	m.rejectedConns.WithLabelValues(limit).Inc()
}

// Outcomes of kcoord_transport_sasl_authentications_total.
const (
	saslSuccess         = "success"
	saslReauthenticated = "reauthenticated"
	saslFailure         = "failure"
	saslExpired         = "expired"
)

// saslAuthentication records the outcome of a SASL exchange.
func (m *metrics) saslAuthentication(mechanism, outcome string) {
	if m == nil {
		return
	}
	m.saslAuths.WithLabelValues(mechanism, outcome).Inc()
}

// tlsHandshakeFailed records a connection whose TLS handshake failed.
func (m *metrics) tlsHandshakeFailed() {
	if m == nil {
		return
	}
	m.tlsFailures.Inc()
}
