package server

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kcoord/kcoord/release"
)

// Kafka's tools see kcoord.version as they see metadata.version: ApiVersions
// v3 lists what the broker supports and what the cluster finalized
// (kafka-features.sh describe), and UpdateFeatures finalizes it
// (kafka-features.sh upgrade), refusing what Kafka's controller refuses.
func TestKafkaToolsDescribeAndFinalizeKcoordVersion(t *testing.T) {
	cfg := TestConfig(t.TempDir())
	cfg.FeaturesAutoFinalize = false
	s := StartTestServer(t, cfg)
	ctx := testCtx(t, 30*time.Second)
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.KafkaAddr().String()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	adm := kadm.NewClient(cl)

	describe := func() (*kmsg.ApiVersionsResponse, int16) {
		t.Helper()
		req := kmsg.NewPtrApiVersionsRequest()
		req.ClientSoftwareName, req.ClientSoftwareVersion = "kcoord-test", "1"
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.SupportedFeatures) != 1 || resp.SupportedFeatures[0].Name != release.Feature ||
			resp.SupportedFeatures[0].MinVersion != 1 || resp.SupportedFeatures[0].MaxVersion != int16(release.MaxLevel) {
			t.Fatalf("supported features %+v", resp.SupportedFeatures)
		}
		if len(resp.FinalizedFeatures) != 1 || resp.FinalizedFeatures[0].Name != release.Feature ||
			resp.FinalizedFeatures[0].MinVersionLevel != resp.FinalizedFeatures[0].MaxVersionLevel {
			t.Fatalf("finalized features %+v", resp.FinalizedFeatures)
		}
		return resp, resp.FinalizedFeatures[0].MaxVersionLevel
	}
	before, level := describe()
	if level != 1 || before.FinalizedFeaturesEpoch <= 0 {
		t.Fatalf("before finalizing: level %d, epoch %d", level, before.FinalizedFeaturesEpoch)
	}

	update := func(validate bool, u kadm.FeatureUpdate) error {
		t.Helper()
		res, err := adm.UpdateFeatures(ctx, validate, u)
		if err != nil {
			t.Fatal(err)
		}
		return res[u.Feature].Err
	}
	for _, tc := range []struct {
		name string
		u    kadm.FeatureUpdate
	}{
		{"an unknown feature", kadm.FeatureUpdate{Feature: "metadata.version", MaxVersionLevel: 20, UpgradeType: 1}},
		{"a level no node supports", kadm.FeatureUpdate{Feature: release.Feature, MaxVersionLevel: int16(release.MaxLevel) + 1, UpgradeType: 1}},
		{"disabling it", kadm.FeatureUpdate{Feature: release.Feature, MaxVersionLevel: 0, UpgradeType: 3}},
	} {
		if err := update(false, tc.u); !errors.Is(err, kerr.InvalidUpdateVersion) {
			t.Errorf("%s: %v, want INVALID_UPDATE_VERSION", tc.name, err)
		}
	}
	if err := update(true, kadm.FeatureUpdate{Feature: release.Feature, MaxVersionLevel: 2, UpgradeType: 1}); err != nil {
		t.Fatalf("validating level 2: %v", err)
	}
	if _, level := describe(); level != 1 {
		t.Fatalf("a validate-only update finalized level %d", level)
	}
	if err := update(false, kadm.FeatureUpdate{Feature: release.Feature, MaxVersionLevel: 2, UpgradeType: 1}); err != nil {
		t.Fatalf("finalizing level 2: %v", err)
	}
	after, level := describe()
	if level != 2 || after.FinalizedFeaturesEpoch <= before.FinalizedFeaturesEpoch {
		t.Fatalf("after finalizing: level %d, epoch %d (was %d)", level, after.FinalizedFeaturesEpoch, before.FinalizedFeaturesEpoch)
	}
	err = update(false, kadm.FeatureUpdate{Feature: release.Feature, MaxVersionLevel: 1, UpgradeType: 1})
	if !errors.Is(err, kerr.InvalidUpdateVersion) {
		t.Fatalf("lowering without a downgrade type: %v", err)
	}
	err = update(false, kadm.FeatureUpdate{Feature: release.Feature, MaxVersionLevel: 1, UpgradeType: 2})
	var ke *kerr.Error
	if !errors.As(err, &ke) || ke != kerr.InvalidUpdateVersion {
		t.Fatalf("a safe downgrade: %v", err)
	}
	if _, level := describe(); level != 2 {
		t.Fatalf("level %d after the refused downgrades", level)
	}
	if err := update(false, kadm.FeatureUpdate{Feature: release.Feature, MaxVersionLevel: 2, UpgradeType: 1}); err != nil {
		t.Fatalf("finalizing level 2 again: %v", err)
	}
}
