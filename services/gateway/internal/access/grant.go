// Package access decides who may call the gateway and on what: a bearer token is either one of
// the static tokens of the access file or a JWT of the configured OpenID Connect issuer (its
// signature checked against the issuer's published keys), and maps to a Grant: a role and the
// subscriptions or resource groups it covers (docs/azure-migration.md, "Access").
package access

import (
	"strings"
)

// Role is what a caller may do.
type Role string

// The roles: a reader only reads; an operator also creates, changes, runs and deletes.
const (
	Reader   Role = "reader"
	Operator Role = "operator"
)

// Grant is what one caller may do, and where.
type Grant struct {
	Subject string   // who, for logs and error messages: the token's name or the JWT's subject
	Role    Role     // reader or operator
	Scopes  []string // "/subscriptions/<s>" or "/subscriptions/<s>/resourceGroups/<rg>"; "*" for all
}

// CanWrite reports whether the grant allows changes.
func (g Grant) CanWrite() bool { return g.Role == Operator }

// Covers reports whether the grant covers resource group rg of subscription sub; rg "" asks
// about the whole subscription.
func (g Grant) Covers(sub, rg string) bool {
	for _, s := range g.Scopes {
		if s == "*" {
			return true
		}
		gs, grg, ok := parseScope(s)
		if !ok || !strings.EqualFold(gs, sub) {
			continue
		}
		if grg == "" || (rg != "" && strings.EqualFold(grg, rg)) {
			return true
		}
	}
	return false
}

// Touches reports whether the grant covers some part of subscription sub: a listing of the
// subscription then shows what the grant covers.
func (g Grant) Touches(sub string) bool {
	for _, s := range g.Scopes {
		gs, _, ok := parseScope(s)
		if s == "*" || (ok && strings.EqualFold(gs, sub)) {
			return true
		}
	}
	return false
}

// parseScope reads "/subscriptions/<s>[/resourceGroups/<rg>]".
func parseScope(s string) (sub, rg string, ok bool) {
	parts := strings.Split(strings.Trim(s, "/"), "/")
	switch {
	case len(parts) == 2 && strings.EqualFold(parts[0], "subscriptions") && parts[1] != "":
		return parts[1], "", true
	case len(parts) == 4 && strings.EqualFold(parts[0], "subscriptions") && strings.EqualFold(parts[2], "resourceGroups") && parts[1] != "" && parts[3] != "":
		return parts[1], parts[3], true
	}
	return "", "", false
}
