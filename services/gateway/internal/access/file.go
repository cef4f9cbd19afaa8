package access

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
)

// File is the access file (RESCHED_GATEWAY_ACCESS_FILE):
//
//	{
//	  "tokens": [{"name": "ci", "sha256": "<hex of the token's SHA-256>", "role": "operator",
//	              "scopes": ["/subscriptions/1111…"]}],
//	  "principals": [{"claim": "sub", "value": "…", "role": "reader", "scopes": ["*"]}]
//	}
//
// A static token is given by its SHA-256 (or, for tests and a first try, in clear as "token").
// A principal matches a JWT whose claim (a string, or a list of strings such as "groups" or
// "roles") holds value.
type File struct {
	Tokens     []Token     `json:"tokens"`
	Principals []Principal `json:"principals"`
}

// Token is a static bearer token and what it may do.
type Token struct {
	Name   string   `json:"name"`
	SHA256 string   `json:"sha256,omitempty"`
	Token  string   `json:"token,omitempty"`
	Role   Role     `json:"role"`
	Scopes []string `json:"scopes"`
}

// Principal maps the holders of a JWT claim value to a grant.
type Principal struct {
	Claim  string   `json:"claim"`
	Value  string   `json:"value"`
	Role   Role     `json:"role"`
	Scopes []string `json:"scopes"`
}

// Load reads and checks an access file.
func Load(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("access file: %w", err)
	}
	var f File
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("access file %s: %w", path, err)
	}
	return &f, f.check()
}

func (f *File) check() error {
	var errs []error
	for i, t := range f.Tokens {
		where := fmt.Sprintf("tokens[%d] (%s)", i, t.Name)
		if (t.SHA256 == "") == (t.Token == "") {
			errs = append(errs, fmt.Errorf("%s: give sha256 or token, one of them", where))
		}
		if t.SHA256 != "" {
			if b, err := hex.DecodeString(t.SHA256); err != nil || len(b) != sha256.Size {
				errs = append(errs, fmt.Errorf("%s: sha256 is not 64 hexadecimal digits", where))
			}
		}
		errs = append(errs, checkGrant(where, t.Role, t.Scopes)...)
	}
	for i, p := range f.Principals {
		where := fmt.Sprintf("principals[%d]", i)
		if p.Claim == "" || p.Value == "" {
			errs = append(errs, fmt.Errorf("%s: claim and value are required", where))
		}
		errs = append(errs, checkGrant(where, p.Role, p.Scopes)...)
	}
	return errors.Join(errs...)
}

func checkGrant(where string, role Role, scopes []string) []error {
	var errs []error
	if role != Reader && role != Operator {
		errs = append(errs, fmt.Errorf("%s: role %q: reader or operator", where, role))
	}
	if len(scopes) == 0 {
		errs = append(errs, fmt.Errorf("%s: no scopes: list subscriptions, resource groups or \"*\"", where))
	}
	for _, s := range scopes {
		if _, _, ok := parseScope(s); !ok && s != "*" {
			errs = append(errs, fmt.Errorf("%s: scope %q: /subscriptions/<id>[/resourceGroups/<name>] or \"*\"", where, s))
		}
	}
	return errs
}

// staticToken finds the grant of a static token, comparing in constant time.
func (f *File) staticToken(token string) (Grant, bool) {
	sum := sha256.Sum256([]byte(token))
	for _, t := range f.Tokens {
		want := t.SHA256
		if t.Token != "" {
			s := sha256.Sum256([]byte(t.Token))
			want = hex.EncodeToString(s[:])
		}
		w, _ := hex.DecodeString(want)
		if subtle.ConstantTimeCompare(w, sum[:]) == 1 {
			return Grant{Subject: "token " + t.Name, Role: t.Role, Scopes: t.Scopes}, true
		}
	}
	return Grant{}, false
}

// principal finds the grant of a JWT's claims: the first principal whose claim holds its value.
func (f *File) principal(subject string, claims map[string]any) (Grant, bool) {
	for _, p := range f.Principals {
		if holds(claims[p.Claim], p.Value) {
			return Grant{Subject: subject, Role: p.Role, Scopes: p.Scopes}, true
		}
	}
	return Grant{}, false
}

func holds(claim any, value string) bool {
	switch c := claim.(type) {
	case string:
		return c == value
	case []any:
		for _, v := range c {
			if s, ok := v.(string); ok && s == value {
				return true
			}
		}
	}
	return false
}
