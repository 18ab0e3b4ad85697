package transport

import (
	"regexp"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	// apiVersionsKey is ApiVersions' API key.
	apiVersionsKey int16 = 18
	// apiVersionsMaxVersion is the highest ApiVersions version transport
	// serves (kmsg knows later ones).
	apiVersionsMaxVersion int16 = 3
)

// softwareNameVersion is the pattern Kafka requires of ApiVersions v3+
// ClientSoftwareName and ClientSoftwareVersion (ApiVersionsRequest.isValid).
var softwareNameVersion = regexp.MustCompile(`^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$`)

// Features is what ApiVersions v3+ tells a client of the broker's feature
// flags (KIP-584): the levels it supports, the levels the cluster
// finalized (Kafka writes each as MinVersionLevel = MaxVersionLevel =
// the level) and the epoch of that state (the broker's metadata offset;
// -1 when it has none). Kafka's Admin.describeFeatures, and so
// kafka-features.sh describe, read them.
type Features struct {
	Supported []kmsg.ApiVersionsResponseSupportedFeature
	Finalized []kmsg.ApiVersionsResponseFinalizedFeature
	Epoch     int64
}

// SetFeatures makes ApiVersions v3+ advertise what fn answers. fn is
// called on the connections' handler goroutines for every such request:
// it must be quick and must not block. Safe to call at any time.
func (m *Mux) SetFeatures(fn func() Features) { m.features.Store(&fn) }

// apiVersionsResponse answers an ApiVersions request as Kafka does, from
// the mux table. It runs on the connection's handler goroutine; in.req is
// nil when the version is not served. The returned response has its
// version set.
func apiVersionsResponse(mux *Mux, in *inbound, sasl bool) kmsg.Response {
	resp := kmsg.NewPtrApiVersionsResponse() // FinalizedFeaturesEpoch -1: no features
	if in.version < 0 || in.version > apiVersionsMaxVersion {
		// KIP-511: answer at v0, with UNSUPPORTED_VERSION and only
		// ApiVersions' own range, so the client retries at a version we
		// serve.
		resp.SetVersion(0)
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = apiVersionsKey, 0, apiVersionsMaxVersion
		resp.ApiKeys = []kmsg.ApiVersionsResponseApiKey{k}
		return resp
	}
	resp.SetVersion(in.version)
	if req, ok := in.req.(*kmsg.ApiVersionsRequest); ok && in.version >= 3 &&
		(!softwareNameVersion.MatchString(req.ClientSoftwareName) ||
			!softwareNameVersion.MatchString(req.ClientSoftwareVersion)) {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp
	}
	resp.ApiKeys = mux.Versions()
	if fn := mux.features.Load(); fn != nil && in.version >= 3 {
		f := (*fn)()
		resp.SupportedFeatures, resp.FinalizedFeatures, resp.FinalizedFeaturesEpoch = f.Supported, f.Finalized, f.Epoch
	}
	if sasl {
		resp.ApiKeys = append(resp.ApiKeys, saslVersions()...)
		slices.SortFunc(resp.ApiKeys, func(a, b kmsg.ApiVersionsResponseApiKey) int { return int(a.ApiKey) - int(b.ApiKey) })
	}
	return resp
}
