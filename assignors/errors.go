package assignors

import "errors"

var (
	// ErrUnknownAssignor is returned by Registry.Lookup and
	// Registry.Strategy for a name nothing was registered under.
	ErrUnknownAssignor = errors.New("assignors: unknown assignor")

	// ErrUnknownServerAssignor is returned by ServerAssignorNamed for a
	// name that is not a built-in server assignor.
	ErrUnknownServerAssignor = errors.New("assignors: unknown server assignor")

	// ErrDuplicateAssignor is returned by Registry.Register for a name
	// that is already taken.
	ErrDuplicateAssignor = errors.New("assignors: assignor name already registered")

	// ErrInvalidName is returned by Registry.Register for an empty name or
	// one that cannot appear in a comma separated strategy list.
	ErrInvalidName = errors.New("assignors: invalid assignor name")

	// ErrDuplicateMember is returned by Assign when two members of the
	// group share a member id.
	ErrDuplicateMember = errors.New("assignors: duplicate member id")

	// ErrMalformedMetadata is returned when a subscription or assignment
	// cannot be decoded as the consumer protocol's wire format.
	ErrMalformedMetadata = errors.New("assignors: malformed consumer protocol metadata")

	// ErrInvalidPlan is returned by Balancer when a custom assignor returns
	// a plan that does not have one assignment per member.
	ErrInvalidPlan = errors.New("assignors: assignor returned an invalid plan")
)
