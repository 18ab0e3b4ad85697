package auth

import (
	"fmt"
	"strings"
)

// Superusers is super.users: principals every authorization allows.
type Superusers map[Principal]struct{}

// ParseSuperusers parses super.users as Kafka does: principals separated
// by semicolons ("User:alice;User:bob"), blanks around each trimmed and
// empty entries skipped.
func ParseSuperusers(s string) (Superusers, error) {
	out := make(Superusers)
	for _, entry := range strings.Split(s, ";") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		p, err := ParsePrincipal(entry)
		if err != nil {
			return nil, fmt.Errorf("super.users: %w", err)
		}
		out[p] = struct{}{}
	}
	return out, nil
}

// Contains reports whether p is a superuser.
func (s Superusers) Contains(p Principal) bool {
	_, ok := s[p]
	return ok
}
