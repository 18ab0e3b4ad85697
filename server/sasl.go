package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/kcoord/kcoord/auth"
	"github.com/kcoord/kcoord/cluster"
	"github.com/kcoord/kcoord/fsm"
)

// This file is SASL on the Kafka listener (sasl.enabled.mechanisms) and
// the SCRAM credentials it checks, stored in the metadata group, plus the
// superusers (super.users and --sasl-superuser).

// saslMechanisms is sasl.enabled.mechanisms as a list; nil when SASL is
// off.
func (c *Config) saslMechanisms() []string {
	var out []string
	for _, m := range strings.Split(c.SASLEnabledMechanisms, ",") {
		if m = strings.TrimSpace(m); m != "" {
			out = append(out, m)
		}
	}
	return out
}

// validateSASL checks the SASL settings with the rest of Config.
func (c *Config) validateSASL() error {
	mechs := c.saslMechanisms()
	if len(mechs) > 0 {
		if _, err := auth.New(auth.Config{Mechanisms: mechs}); err != nil {
			return fmt.Errorf("sasl.enabled.mechanisms: %w", err)
		}
	}
	switch {
	case c.SASLSuperuser != "" && len(mechs) == 0:
		return errors.New("sasl-superuser needs SASL: set -c sasl.enabled.mechanisms")
	case c.SASLSuperuser != "" && c.SASLSuperuserPassword == "":
		return errors.New("sasl-superuser needs a password: KCOORD_SASL_SUPERUSER_PASSWORD or --sasl-superuser-password-file")
	case c.SASLSuperuser == "" && c.SASLSuperuserPassword != "":
		return errors.New("a superuser password was given without --sasl-superuser")
	case c.SASLServerMaxReceiveSize < 0:
		return errors.New("sasl.server.max.receive.size must be positive")
	}
	_, err := auth.ParseSuperusers(c.SuperUsers)
	return err
}

// authenticates reports whether the node authenticates its clients
// (SASL, or mutual TLS), so that requests are authorized by principal.
func (c *Config) authenticates() bool {
	return len(c.saslMechanisms()) > 0 || c.TLSClientCAFile != ""
}

// superusers is super.users with the bootstrap superuser.
func (c *Config) superusers() auth.Superusers {
	s, _ := auth.ParseSuperusers(c.SuperUsers) // Validate checked it
	if c.SASLSuperuser != "" {
		s[auth.User(c.SASLSuperuser)] = struct{}{}
	}
	return s
}

// authenticator is the listener's SASL, nil when SASL is off. Logins are
// checked against meta, this node's replica of the metadata group, as
// reads consults it: a user it does not hold is looked up again after a
// read barrier, and a replica no barrier confirmed lately is brought up to
// date first; a login that cannot have its barrier closes its connection.
func (c *Config) authenticator(meta *fsm.MetaFSM, reads *metaReads) (*auth.Authenticator, error) {
	mechs := c.saslMechanisms()
	if len(mechs) == 0 {
		return nil, nil
	}
	return auth.New(auth.Config{
		Mechanisms: mechs,
		Lookup: func(user string, m auth.Mechanism, since time.Time) (auth.Credential, bool, error) {
			var sc fsm.ScramCredential
			found, err := reads.lookup(since, func() (ok bool) { sc, ok = meta.ScramCredential(user, int8(m)); return ok })
			if !found || err != nil {
				return auth.Credential{}, false, err
			}
			return auth.Credential{Mechanism: m, Salt: sc.Salt, StoredKey: sc.StoredKey, ServerKey: sc.ServerKey,
				Iterations: sc.Iterations}, true, nil
		},
		Superuser:         c.SASLSuperuser,
		SuperuserPassword: c.SASLSuperuserPassword,
		SessionLifetime:   c.ConnectionsMaxReauth,
	})
}

// credentialStore is the api.Credentials of a node: reads from the
// metadata FSM, writes through the metadata group, forwarded to its
// leader when this node does not lead it.
type credentialStore struct {
	node    *cluster.Node
	fsm     *fsm.MetaFSM
	timeout time.Duration
}

func (s *credentialStore) ScramCredentials() []fsm.ScramCredential { return s.fsm.ScramCredentials() }

func (s *credentialStore) SetScram(ctx context.Context, c fsm.ScramCredential) error {
	return s.apply(ctx, &fsm.ScramCredentialSet{Credential: c})
}

func (s *credentialStore) DeleteScram(ctx context.Context, user string, mechanism int8) error {
	return s.apply(ctx, &fsm.ScramCredentialDelete{User: user, Mechanism: mechanism})
}

func (s *credentialStore) apply(ctx context.Context, cmd fsm.Command) error {
	b, err := fsm.Encode(cmd)
	if err != nil {
		return err
	}
	return apiError(s.node.ApplyMetadataChange(ctx, b, s.timeout))
}
