package api

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kcoord/kcoord/transport"
)

// Versions is the ApiVersions table a node serves (SASL's keys, which the
// transport adds when SASL is on, aside), for `kcoord version`: the same
// Register builds, with every optional API on. It serves nothing.
func Versions() []kmsg.ApiVersionsResponseApiKey {
	mux := transport.NewMux()
	(&Handlers{}).registerAll(mux, true)
	return mux.Versions()
}
