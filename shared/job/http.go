package job

import (
	"log/slog"
	"maps"
)

// HTTPRequest is the payload of an Http or Https action (Azure's HttpRequest).
type HTTPRequest struct {
	URI            string              `json:"uri"`
	Method         string              `json:"method"`
	Headers        map[string]string   `json:"headers,omitempty"`
	Body           string              `json:"body,omitempty"`
	Authentication *HTTPAuthentication `json:"authentication,omitempty"`
}

// AuthType says how an HTTP action authenticates.
type AuthType string

// The HTTP authentication types.
const (
	AuthNotSpecified         AuthType = "NotSpecified"
	AuthBasic                AuthType = "Basic"
	AuthClientCertificate    AuthType = "ClientCertificate"
	AuthActiveDirectoryOAuth AuthType = "ActiveDirectoryOAuth"
)

var authTypes = []AuthType{AuthNotSpecified, AuthBasic, AuthClientCertificate, AuthActiveDirectoryOAuth}

// ParseAuthType matches an authentication type case-insensitively.
func ParseAuthType(s string) (AuthType, error) {
	return parseName("authentication type", s, authTypes)
}

// UnmarshalJSON reads an authentication type case-insensitively.
func (t *AuthType) UnmarshalJSON(b []byte) error { return unmarshalEnum(b, ParseAuthType, t) }

// HTTPAuthentication is one struct for the three variants Azure discriminates by Type; the
// wire form is flat, and the fields a variant does not use stay empty:
//   - Basic: Username, Password.
//   - ClientCertificate: Pfx (base64 PFX), Password; the certificate fields are read-only,
//     filled in by the service from the PFX.
//   - ActiveDirectoryOAuth: Tenant, Audience, ClientID, Secret.
type HTTPAuthentication struct {
	Type AuthType `json:"type"`

	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"` // secret (Basic and ClientCertificate)

	Pfx                    string `json:"pfx,omitempty"`                       // secret
	CertificateThumbprint  string `json:"certificateThumbprint,omitempty"`     // read-only
	CertificateSubjectName string `json:"certificateSubjectName,omitempty"`    // read-only
	CertificateExpiration  string `json:"certificateExpirationDate,omitempty"` // read-only, RFC 3339 (the 2016-03-01 name)

	Tenant   string `json:"tenant,omitempty"`
	Audience string `json:"audience,omitempty"`
	ClientID string `json:"clientId,omitempty"`
	Secret   string `json:"secret,omitempty"` // secret
}

// Redacted returns a deep copy with every secret cleared: the authentication's, the values of
// the SecretHeaders and of the URI's SecretQueryParameters (their names stay, to show that one
// is set).
func (r *HTTPRequest) Redacted() *HTTPRequest {
	if r == nil {
		return nil
	}
	c := *r
	c.Headers = maps.Clone(r.Headers)
	for k := range c.Headers {
		if isSecretHeader(k) {
			c.Headers[k] = ""
		}
	}
	_ = rewriteQuery("", &c.URI, func(string, string) (string, error) { return "", nil })
	c.Authentication = r.Authentication.Redacted()
	return &c
}

// Redacted returns a copy without the password, the PFX and the OAuth secret.
func (a *HTTPAuthentication) Redacted() *HTTPAuthentication {
	if a == nil {
		return nil
	}
	c := *a
	c.Password, c.Pfx, c.Secret = "", "", ""
	return &c
}

// String returns the JSON of the redacted request.
func (r HTTPRequest) String() string { return redactedJSON(r.Redacted()) }

// LogValue logs the redacted request as JSON.
func (r HTTPRequest) LogValue() slog.Value { return jsonLogValue(r.Redacted()) }

// String returns the JSON of the redacted authentication.
func (a HTTPAuthentication) String() string { return redactedJSON(a.Redacted()) }

// LogValue logs the redacted authentication as JSON.
func (a HTTPAuthentication) LogValue() slog.Value { return jsonLogValue(a.Redacted()) }
