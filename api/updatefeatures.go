package api

// UpdateFeatures (key 57), versions 0–1 (KIP-584; v1: upgrade types and
// validate-only, KIP-778), as Kafka's controller answers it for its own
// features: kcoord has one, kcoord.version (docs/compatibility.md), and
// kafka-features.sh upgrade --feature kcoord.version=N finalizes it as
// `kcoord cluster features --finalize --level N` does. Needs Cluster
// ALTER (else CLUSTER_AUTHORIZATION_FAILED for the request). Each update
// is checked first, and nothing is written unless all pass: a feature
// other than kcoord.version, a level of 0 (disabling it), a level below
// the finalized one (a finalized level is never lowered, whatever the
// upgrade type) or one some node does not support is
// INVALID_UPDATE_VERSION with a message naming why; the same level again
// changes nothing. The write goes to the metadata group's leader from any
// node (NOT_CONTROLLER without one).

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kcoord/kcoord/auth"
	"github.com/kcoord/kcoord/release"
	"github.com/kcoord/kcoord/transport"
)

// FeatureStore is the cluster's feature levels (cluster.Node, as the
// server adapts it). Its errors are api's sentinels (ErrFeatureUnsupported,
// ErrReplicaTooOld, ErrApplyTimeout) or fsm.ErrFeatureDowngrade.
type FeatureStore interface {
	// FinalizedLevel is the level this node's replica holds.
	FinalizedLevel() release.Level
	// CheckFinalize says what finalizing level would write, or why it
	// is refused, without writing.
	CheckFinalize(level release.Level) (release.Level, error)
	// FinalizeFeature finalizes level through the metadata leader and
	// waits for it.
	FinalizeFeature(ctx context.Context, level release.Level, timeout time.Duration) (release.Level, error)
}

// WithFeatures makes the handlers serve UpdateFeatures over f. Call it
// before Register.
func (h *Handlers) WithFeatures(f FeatureStore) *Handlers {
	h.features = f
	return h
}

// Kafka's UpdateFeatures upgrade types (KIP-778).
const (
	upgradeTypeUpgrade int8 = 1
)

func (h *Handlers) updateFeatures(ctx context.Context, rc *transport.RequestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req, err := typed[*kmsg.UpdateFeaturesRequest](kreq)
	if err != nil {
		return nil, err
	}
	resp := req.ResponseKind().(*kmsg.UpdateFeaturesResponse)
	if denied := h.clusterDenied(rc, auth.OpAlter); denied != nil {
		resp.ErrorCode, resp.ErrorMessage = h.controllerErrorCode(denied), errMessage(denied)
		return resp, nil
	}
	errs := make([]error, len(req.FeatureUpdates))
	var target release.Level
	seen := map[string]bool{}
	for i, u := range req.FeatureUpdates {
		if seen[u.Feature] {
			resp.ErrorCode, resp.ErrorMessage = kerr.InvalidRequest.Code, errMessage(refuse(kerr.InvalidRequest, "Feature %s was specified more than once.", u.Feature))
			return resp, nil
		}
		seen[u.Feature] = true
		errs[i] = h.checkFeatureUpdate(req.Version, u)
		if errs[i] == nil {
			target = release.Level(u.MaxVersionLevel)
		}
	}
	failed := errors.Join(errs...) != nil
	if !failed && target > 0 {
		if req.ValidateOnly {
			_, err = h.features.CheckFinalize(target)
		} else {
			timeout := time.Duration(req.TimeoutMillis) * time.Millisecond
			if timeout <= 0 {
				timeout = 30 * time.Second
			}
			_, err = h.features.FinalizeFeature(ctx, target, timeout)
		}
		for i := range errs {
			errs[i] = err
		}
		failed = err != nil
	}
	for i, u := range req.FeatureUpdates {
		r := kmsg.NewUpdateFeaturesResponseResult()
		r.Feature = u.Feature
		if errs[i] != nil {
			r.ErrorCode, r.ErrorMessage = h.controllerErrorCode(errs[i]), errMessage(errs[i])
		} else if failed {
			// Nothing was written: another update of the request failed.
			r.ErrorCode = kerr.FeatureUpdateFailed.Code
			r.ErrorMessage = errMessage(refuse(kerr.FeatureUpdateFailed, "Not finalized: another update in the request failed."))
		}
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}

// checkFeatureUpdate refuses an update kcoord cannot make, before anything
// is written: an unknown feature, a disabled one, a lowered level.
func (h *Handlers) checkFeatureUpdate(version int16, u kmsg.UpdateFeaturesRequestFeatureUpdate) error {
	downgrade := u.AllowDowngrade
	if version >= 1 {
		downgrade = u.UpgradeType > upgradeTypeUpgrade // 0, which kadm sends by default, as 1
	}
	fin := h.features.FinalizedLevel()
	switch {
	case u.Feature != release.Feature:
		return refuse(kerr.InvalidUpdateVersion, "Feature %s is not known to kcoord; its only feature is %s.", u.Feature, release.Feature)
	case u.MaxVersionLevel < 1:
		return refuse(kerr.InvalidUpdateVersion, "%s cannot be disabled: every cluster is at level 1 or above.", u.Feature)
	case release.Level(u.MaxVersionLevel) < fin && !downgrade:
		return refuse(kerr.InvalidUpdateVersion, "Can't downgrade the version of this feature without setting the upgrade type to either safe or unsafe downgrade.")
	case release.Level(u.MaxVersionLevel) < fin:
		return refuse(kerr.InvalidUpdateVersion, "%s is finalized at %d and is never lowered: roll back before finalizing (docs/upgrading.md).", u.Feature, fin)
	}
	return nil
}
