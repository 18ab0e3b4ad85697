package api

// AlterUserScramCredentials (key 51), version 0 (KIP-554): upserts and
// deletes users' SCRAM credentials in the metadata group, as
// kafka-configs.sh --alter --entity-type users and kadm's AlterUserSCRAMs
// do. The client salts the password; kcoord stores the salt, the
// iteration count and the two keys derived from the salted password,
// never the password or its salted form. Checked as Kafka's
// ScramControlManager does, with its messages, one result per user:
//
//   - a user altered twice in one request (two deletions, two upsertions,
//     or one of each, whatever their mechanisms) is DUPLICATE_RESOURCE;
//   - an empty name is UNACCEPTABLE_CREDENTIAL, a mechanism other than
//     SCRAM-SHA-256 (1) and SCRAM-SHA-512 (2) UNSUPPORTED_SASL_MECHANISM;
//   - an upsertion of fewer than 4096 or more than 16384 iterations is
//     UNACCEPTABLE_CREDENTIAL, and so (kcoord's own check) is one with an
//     empty salt or salted password;
//   - deleting a credential that does not exist is RESOURCE_NOT_FOUND.
//
// kcoord also refuses to alter the bootstrap superuser
// (--sasl-superuser), whose password each node takes from its own
// configuration (UNACCEPTABLE_CREDENTIAL). It needs Cluster ALTER
// (authorize.go), else every user is CLUSTER_AUTHORIZATION_FAILED. Any
// node takes it and forwards each user's change to the metadata group's
// leader (NOT_CONTROLLER when none is reachable); each user's change is
// its own Raft entry, so one user's failure leaves the others applied.

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kcoord/kcoord/auth"
	"github.com/kcoord/kcoord/fsm"
	"github.com/kcoord/kcoord/transport"
)

// scramAlteration is one user's change in an AlterUserScramCredentials.
type scramAlteration struct {
	user      string
	mechanism int8
	upsert    *kmsg.AlterUserSCRAMCredentialsRequestUpsertion // nil for a deletion
	err       error
}

func (h *Handlers) alterUserScramCredentials(ctx context.Context, rc *transport.RequestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req, err := typed[*kmsg.AlterUserSCRAMCredentialsRequest](kreq)
	if err != nil {
		return nil, err
	}
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	alts := scramAlterations(req)
	denied := h.clusterDenied(rc, auth.OpAlter)
	for _, a := range alts {
		switch {
		case denied != nil:
			a.err = denied
		case a.err == nil:
			a.err = h.checkScramAlteration(a)
		}
		if a.err == nil {
			a.err = h.applyScramAlteration(ctx, a)
		}
		r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		r.User = a.user
		if a.err != nil {
			r.ErrorCode, r.ErrorMessage = h.controllerErrorCode(a.err), errMessage(a.err)
		}
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}

// scramAlterations lists the request's users in the order they first
// appear, deletions first, each marked DUPLICATE_RESOURCE when altered
// more than once.
func scramAlterations(req *kmsg.AlterUserSCRAMCredentialsRequest) []*scramAlteration {
	var out []*scramAlteration
	byUser := make(map[string]*scramAlteration)
	add := func(a *scramAlteration) {
		if prev, ok := byUser[a.user]; ok {
			prev.err = refuse(kerr.DuplicateResource, "A user credential cannot be altered twice in the same request")
			return
		}
		byUser[a.user] = a
		out = append(out, a)
	}
	for _, d := range req.Deletions {
		add(&scramAlteration{user: d.Name, mechanism: d.Mechanism})
	}
	for i := range req.Upsertions {
		u := &req.Upsertions[i]
		add(&scramAlteration{user: u.Name, mechanism: u.Mechanism, upsert: u})
	}
	return out
}

// checkScramAlteration validates one user's change before it is written.
func (h *Handlers) checkScramAlteration(a *scramAlteration) error {
	switch {
	case a.user == "":
		return refuse(kerr.UnacceptableCredential, "Username must not be empty")
	case !auth.Mechanism(a.mechanism).Valid():
		return refuse(kerr.UnsupportedSaslMechanism, "Unknown SCRAM mechanism")
	case h.cfg.BootstrapSuperuser != "" && a.user == h.cfg.BootstrapSuperuser:
		return refuse(kerr.UnacceptableCredential,
			"User %s is the bootstrap superuser (--sasl-superuser): its password comes from each node's KCOORD_SASL_SUPERUSER_PASSWORD or --sasl-superuser-password-file", a.user)
	case a.upsert == nil:
		return nil
	case a.upsert.Iterations < auth.MinIterations:
		return refuse(kerr.UnacceptableCredential, "Too few iterations")
	case a.upsert.Iterations > auth.MaxIterations:
		return refuse(kerr.UnacceptableCredential, "Too many iterations")
	case len(a.upsert.Salt) == 0 || len(a.upsert.SaltedPassword) == 0:
		return refuse(kerr.UnacceptableCredential, "The salt and the salted password must not be empty")
	}
	return nil
}

// applyScramAlteration writes one user's checked change through the
// metadata group.
func (h *Handlers) applyScramAlteration(ctx context.Context, a *scramAlteration) error {
	if a.upsert == nil {
		err := h.credentials.DeleteScram(ctx, a.user, a.mechanism)
		if errors.Is(err, fsm.ErrScramCredentialNotFound) {
			return refuse(kerr.ResourceNotFound, "Attempt to delete a user credential that does not exist")
		}
		return err
	}
	u := a.upsert
	c := auth.NewCredential(auth.Mechanism(u.Mechanism), u.Salt, u.SaltedPassword, u.Iterations)
	return h.credentials.SetScram(ctx, fsm.ScramCredential{User: u.Name, Mechanism: u.Mechanism,
		Salt: c.Salt, StoredKey: c.StoredKey, ServerKey: c.ServerKey, Iterations: c.Iterations})
}
