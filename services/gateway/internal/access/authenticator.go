package access

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/coreos/go-oidc/v3/oidc"
)

// Errors of Authenticate; their text is safe to answer.
var (
	ErrNoToken      = errors.New("the Authorization header with a bearer token is missing")
	ErrInvalidToken = errors.New("the access token is invalid")
	ErrNoGrant      = errors.New("the access token is valid but grants nothing here")
)

// Authenticator checks bearer tokens.
type Authenticator struct {
	file     func() *File          // the access file as it stands (read again when it changes)
	verifier *oidc.IDTokenVerifier // nil without an issuer
}

// OIDC is the issuer whose JWTs are accepted: its discovery document and keys (JWKS) are
// fetched from Issuer, the keys cached and fetched again when a token names an unknown one.
type OIDC struct {
	Issuer   string // e.g. https://login.microsoftonline.com/<tenant>/v2.0
	Audience string // the "aud" every token must carry; required with an issuer
}

// New builds an authenticator over the access file, as file gives it at each request (a token
// taken out of it is refused from then on), and, when o.Issuer is set, the issuer. The
// issuer's discovery document is fetched now, so a wrong issuer fails the start.
func New(ctx context.Context, file func() *File, o OIDC) (*Authenticator, error) {
	a := &Authenticator{file: file}
	if o.Issuer == "" {
		return a, nil
	}
	if o.Audience == "" {
		return nil, fmt.Errorf("OpenID Connect issuer %s without an audience: the issuer's tokens for any application would be accepted", o.Issuer)
	}
	provider, err := oidc.NewProvider(ctx, o.Issuer)
	if err != nil {
		return nil, fmt.Errorf("OpenID Connect issuer %s: %w", o.Issuer, err)
	}
	a.verifier = provider.Verifier(&oidc.Config{ClientID: o.Audience})
	return a, nil
}

// Authenticate finds the grant of a request's bearer token.
func (a *Authenticator) Authenticate(r *http.Request) (Grant, error) {
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return Grant{}, ErrNoToken
	}
	token = strings.TrimSpace(token)
	file := a.file()
	if g, ok := file.staticToken(token); ok {
		return g, nil
	}
	if a.verifier == nil || strings.Count(token, ".") != 2 {
		return Grant{}, ErrInvalidToken
	}
	idt, err := a.verifier.Verify(r.Context(), token)
	if err != nil {
		return Grant{}, fmt.Errorf("%w: %s", ErrInvalidToken, reason(err))
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		return Grant{}, ErrInvalidToken
	}
	g, ok := file.principal(idt.Subject, claims)
	if !ok {
		return Grant{}, ErrNoGrant
	}
	return g, nil
}

// reason says why a JWT was refused, without echoing it.
func reason(err error) string {
	var expired *oidc.TokenExpiredError
	switch {
	case errors.As(err, &expired):
		return "it expired at " + expired.Expiry.UTC().Format("2006-01-02T15:04:05Z")
	case strings.Contains(err.Error(), "signature"):
		return "its signature does not verify"
	case strings.Contains(err.Error(), "audience"):
		return "it is for another audience"
	case strings.Contains(err.Error(), "issuer"):
		return "it is from another issuer"
	}
	return "it cannot be verified"
}
