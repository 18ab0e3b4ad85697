package conformance

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupAPIs are the group coordinator's APIs, whose every advertised
// version the scenarios must play. kcoord's other APIs (ApiVersions,
// Metadata, CreateTopics, DeleteTopics, and the empty ListOffsets and
// Fetch a data plane's clients need) are not the coordinator's answers
// to compare; the api package's fuzz test drives every served version of
// them and its wire tests check their answers.
var groupAPIs = []int16{
	kmsg.FindCoordinator.Int16(), kmsg.JoinGroup.Int16(), kmsg.SyncGroup.Int16(), kmsg.Heartbeat.Int16(),
	kmsg.LeaveGroup.Int16(), kmsg.OffsetCommit.Int16(), kmsg.OffsetFetch.Int16(), kmsg.DescribeGroups.Int16(),
	kmsg.ListGroups.Int16(), kmsg.DeleteGroups.Int16(), kmsg.OffsetDelete.Int16(),
	kmsg.ConsumerGroupHeartbeat.Int16(), kmsg.ConsumerGroupDescribe.Int16(),
}

// played collects the (API key, version) of every request in steps.
func played(steps []Step, into map[[2]int16]bool) {
	for _, s := range steps {
		if s.req != nil {
			into[[2]int16{s.req.Key(), s.req.GetVersion()}] = true
		}
		played(s.group, into)
	}
}

// Every version kcoord advertises for a group API is played by at least
// one scenario, so the suite says what each version answers.
func TestScenariosPlayEveryAdvertisedGroupAPIVersion(t *testing.T) {
	resp := roundTrip(t, startKcoord(t, Config{}.WithDefaults()), kmsg.NewPtrApiVersionsRequest())
	seen := map[[2]int16]bool{}
	for _, sc := range scenarios() {
		played(sc.Steps, seen)
	}
	var missing []string
	for _, k := range resp.(*kmsg.ApiVersionsResponse).ApiKeys {
		if !slices.Contains(groupAPIs, k.ApiKey) {
			continue
		}
		for v := k.MinVersion; v <= k.MaxVersion; v++ {
			if !seen[[2]int16{k.ApiKey, v}] {
				missing = append(missing, fmt.Sprintf("%s v%d", kmsg.NameForKey(k.ApiKey), v))
			}
		}
	}
	if len(missing) > 0 {
		t.Errorf("no scenario plays %d advertised versions: %s", len(missing), strings.Join(missing, ", "))
	}
}
