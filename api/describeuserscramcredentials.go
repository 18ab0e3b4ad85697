package api

// DescribeUserScramCredentials (key 50), version 0 (KIP-554): the SCRAM
// mechanisms and iteration counts of users, never their keys. No users
// (null or empty) describes every user with a credential, sorted by name.
// A user named twice is DUPLICATE_RESOURCE and one without a credential
// RESOURCE_NOT_FOUND, with Kafka's messages. It needs Cluster DESCRIBE
// (authorize.go), else the whole request is CLUSTER_AUTHORIZATION_FAILED.
// Read from this node's replica of the metadata group, as a Kafka broker
// reads its metadata image, once a read barrier brought it up to the
// leader's: a user created through another node just before is listed.

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kcoord/kcoord/auth"
	"github.com/kcoord/kcoord/fsm"
	"github.com/kcoord/kcoord/transport"
)

func (h *Handlers) describeUserScramCredentials(ctx context.Context, rc *transport.RequestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req, err := typed[*kmsg.DescribeUserSCRAMCredentialsRequest](kreq)
	if err != nil {
		return nil, err
	}
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	if err := h.clusterDenied(rc, auth.OpDescribe); err != nil {
		resp.ErrorCode, resp.ErrorMessage = h.errorCode(err), errMessage(err)
		return resp, nil
	}
	byUser := make(map[string][]fsm.ScramCredential)
	var all []string
	h.syncMetadata(ctx, rc) // if it fails, this replica's credentials
	for _, c := range h.credentials.ScramCredentials() {
		if _, ok := byUser[c.User]; !ok {
			all = append(all, c.User)
		}
		byUser[c.User] = append(byUser[c.User], c)
	}
	users, named := all, make(map[string]int)
	if len(req.Users) > 0 {
		users = nil
		for _, u := range req.Users {
			if named[u.Name]++; named[u.Name] == 1 {
				users = append(users, u.Name)
			}
		}
	}
	slices.Sort(users)
	for _, user := range users {
		r := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		r.User = user
		switch creds := byUser[user]; {
		case named[user] > 1:
			r.ErrorCode = kerr.DuplicateResource.Code
			r.ErrorMessage = kmsg.StringPtr("Cannot describe SCRAM credentials for the same user twice in a single request: " + user)
		case len(creds) == 0:
			r.ErrorCode = kerr.ResourceNotFound.Code
			r.ErrorMessage = kmsg.StringPtr("Attempt to describe a user credential that does not exist: " + user)
		default:
			for _, c := range creds {
				info := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
				info.Mechanism, info.Iterations = c.Mechanism, c.Iterations
				r.CredentialInfos = append(r.CredentialInfos, info)
			}
		}
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}
