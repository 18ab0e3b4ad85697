package auth

import "errors"

// Sentinel errors of the auth package. The api package turns them into
// Kafka error codes; transport sends an authentication failure's message
// to the client as it is.
var (
	// ErrAuthenticationFailed is a SASL exchange that did not prove the
	// client's identity (SASL_AUTHENTICATION_FAILED). Its message never
	// says whether the user exists.
	ErrAuthenticationFailed = errors.New("Authentication failed")
	// ErrCredentialsUnavailable is a SASL exchange whose credential could
	// not be looked up now (Lookup failed): not an answer about the
	// client's identity, so the connection closes without one.
	ErrCredentialsUnavailable = errors.New("credentials unavailable")
	// ErrUnsupportedMechanism is a SASL or SCRAM mechanism kcoord does
	// not serve (UNSUPPORTED_SASL_MECHANISM).
	ErrUnsupportedMechanism = errors.New("unsupported SASL mechanism")
	// ErrUnacceptableCredential is a SCRAM credential kcoord will not
	// store: an empty user, too few or too many iterations
	// (UNACCEPTABLE_CREDENTIAL).
	ErrUnacceptableCredential = errors.New("unacceptable credential")
)
