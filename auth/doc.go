// Package auth is who a Kafka connection is and what it may do: the
// principal a connection acts as (principal.go), the SASL mechanisms that
// prove it (PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512; sasl.go, plain.go,
// scram.go) against SCRAM credentials (credential.go), the superusers
// (superusers.go), and Kafka's ACLs (acl.go, aclmatch.go) with the
// Authorizer that decides requests by them (authorizer.go). Credentials
// and ACLs are kept in the metadata Raft group.
//
// api asks the Authorizer before each request it serves on a node that
// authenticates its clients. transport drives the SASL exchanges of each connection
// (SaslHandshake, SaslAuthenticate) through an Authenticator; the
// Authenticator reads credentials through a lookup the server wires to
// the metadata FSM, and knows the bootstrap superuser's password, which
// never enters the Raft log. auth imports nothing of kcoord.
package auth
