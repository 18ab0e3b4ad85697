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
//
// # Identity
//
//   - principal.go: Principal ("User:alice"), ParsePrincipal, Anonymous,
//     and CertificatePrincipal, the principal of a verified client
//     certificate (its subject in RFC 2253 form, as Java writes it).
//   - superusers.go: Superusers, parsed from the super.users list.
//
// # Authentication
//
//   - sasl.go: Authenticator (New, from a Config with the enabled
//     mechanisms and the credential Lookup) and Exchange, one SASL
//     exchange, called from its connection's handler goroutine only.
//   - plain.go: the PLAIN exchange (RFC 4616); it checks the password
//     against the user's strongest SCRAM credential.
//   - scram.go: the server side of SCRAM (RFC 5802, RFC 7677) as Kafka's
//     ScramSaslServer runs it, for both mechanisms.
//   - mechanism.go: Mechanism (SCRAM-SHA-256, SCRAM-SHA-512, numbered as
//     Kafka's ScramMechanism), the SASL mechanism names and the iteration
//     bounds of a credential.
//   - credential.go: Credential, one user's SCRAM credential for one
//     mechanism as Kafka stores it (salt, iterations and the derived keys,
//     never the password), and NewCredential, CredentialFromPassword,
//     SaltPassword.
//
// # Authorization
//
//   - acl.go: the ACL and ACLFilter types and their enums (ResourceType,
//     PatternType, Operation, Permission), numbered as Kafka's.
//   - aclmatch.go: validation of ACLs and filters as CreateAcls,
//     DeleteAcls and DescribeAcls do (ErrInvalidACL), and ACLFilter.Matches.
//   - authorizer.go: ACLs (the index NewACLs builds) and Authorizer, which
//     the Kafka handlers' goroutines call concurrently.
//
// # Errors
//
//   - errors.go: the sentinel errors (ErrAuthenticationFailed,
//     ErrCredentialsUnavailable, ErrUnsupportedMechanism,
//     ErrUnacceptableCredential) that api turns into Kafka error codes and
//     transport into the answer to a failed SASL exchange.
package auth
