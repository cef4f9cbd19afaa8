package job

import (
	"fmt"
	"net/url"
	"strings"
)

// SecretHeaders are the request headers whose values are secrets like passwords: each carries
// a credential to the target (Authorization, the keys of Azure Functions, API Management and
// of Azure OpenAI, AI Search and the other Cognitive Services (api-key), the common API-key
// and token headers, a session's cookies), so it is kept, sealed and redacted the way
// passwords are.
var SecretHeaders = []string{"Authorization", "Proxy-Authorization", "X-Functions-Key", "Ocp-Apim-Subscription-Key", "X-Api-Key",
	"Api-Key", "X-Auth-Token", "Cookie"}

// SecretQueryParameters are the parameters of a request URI's query whose values are keys: an
// Azure Function's code, the signature of a Logic App trigger's URL or of any SAS URL, API
// Management's subscription-key and the common API-key names. Each value is kept, sealed and
// redacted the way passwords are; the rest of the URI is not a secret.
var SecretQueryParameters = []string{"code", "sig", "subscription-key", "api-key", "apikey", "api_key", "access_token"}

// RewriteSecrets calls f with every non-empty secret of the action and its error action and
// stores what f returns in its place: the password, PFX and OAuth secret of an HTTP request,
// the values of its SecretHeaders and of its URI's SecretQueryParameters, the SAS token of a
// Storage Queue message and the
// shared access key of a Service Bus message. The path names the field the way an error
// about it should ("errorAction.request.authentication.password"); it is stable, so it may
// bind a sealed value to its field. The first error stops the walk and is returned.
func (a *Action) RewriteSecrets(f func(path, value string) (string, error)) error {
	if a == nil {
		return nil
	}
	if err := a.ActionSpec.rewriteSecrets("action", f); err != nil {
		return err
	}
	if a.ErrorAction != nil {
		return a.ErrorAction.ActionSpec.rewriteSecrets("errorAction", f)
	}
	return nil
}

// HasSecrets reports whether the action carries any secret.
func (a *Action) HasSecrets() bool {
	found := false
	_ = a.RewriteSecrets(func(_, v string) (string, error) { found = true; return v, nil })
	return found
}

// secretField is one secret of an action: where it is and how to name it.
type secretField struct {
	path string
	v    *string
}

func (s *ActionSpec) rewriteSecrets(at string, f func(path, value string) (string, error)) error {
	var fields []secretField
	add := func(path string, v *string) {
		if *v != "" {
			fields = append(fields, secretField{at + "." + path, v})
		}
	}
	if r := s.Request; r != nil && r.Authentication != nil {
		a := r.Authentication
		add("request.authentication.password", &a.Password)
		add("request.authentication.pfx", &a.Pfx)
		add("request.authentication.secret", &a.Secret)
	}
	if m := s.QueueMessage; m != nil {
		add("queueMessage.sasToken", &m.SASToken)
	}
	if m := s.ServiceBusQueueMessage; m != nil && m.Authentication != nil {
		add("serviceBusQueueMessage.authentication.sasKey", &m.Authentication.SASKey)
	}
	if m := s.ServiceBusTopicMessage; m != nil && m.Authentication != nil {
		add("serviceBusTopicMessage.authentication.sasKey", &m.Authentication.SASKey)
	}
	for _, fld := range fields {
		v, err := f(fld.path, *fld.v)
		if err != nil {
			return err
		}
		*fld.v = v
	}
	if s.Request != nil {
		if err := rewriteHeaders(at, s.Request.Headers, f); err != nil {
			return err
		}
		return rewriteQuery(at, &s.Request.URI, f)
	}
	return nil
}

// rewriteQuery rewrites the values of the SecretQueryParameters in the query of uri, as
// written (a value still percent-encoded is given to f so, and put back so), leaving every
// other byte of the URI as it was. The path of a value is <at>.request.uri.query.<name>.
func rewriteQuery(at string, uri *string, f func(path, value string) (string, error)) error {
	// A fragment starts at the first '#', and a query at the first '?' before it.
	rest, fragment, hasFragment := strings.Cut(*uri, "#")
	base, query, ok := strings.Cut(rest, "?")
	if !ok {
		return nil
	}
	params := strings.Split(query, "&")
	changed := false
	for i, p := range params {
		name, v, ok := strings.Cut(p, "=")
		if !ok || v == "" || !isSecretQueryParameter(name) {
			continue
		}
		nv, err := f(at+".request.uri.query."+name, v)
		if err != nil {
			return err
		}
		params[i], changed = name+"="+nv, true
	}
	if changed {
		*uri = base + "?" + strings.Join(params, "&")
		if hasFragment {
			*uri += "#" + fragment
		}
	}
	return nil
}

// isSecretQueryParameter compares a name as written in a query (perhaps percent-encoded) with
// the SecretQueryParameters, without case.
func isSecretQueryParameter(name string) bool {
	if n, err := url.QueryUnescape(name); err == nil {
		name = n
	}
	for _, p := range SecretQueryParameters {
		if strings.EqualFold(name, p) {
			return true
		}
	}
	return false
}

func rewriteHeaders(at string, h map[string]string, f func(path, value string) (string, error)) error {
	for k, v := range h {
		if v == "" || !isSecretHeader(k) {
			continue
		}
		nv, err := f(fmt.Sprintf("%s.request.headers.%s", at, k), v)
		if err != nil {
			return err
		}
		h[k] = nv
	}
	return nil
}

func isSecretHeader(name string) bool {
	name = strings.TrimSpace(name)
	for _, h := range SecretHeaders {
		if strings.EqualFold(name, h) {
			return true
		}
	}
	return false
}

// secretMembers are the names of the members rewriteSecrets walks, wherever they stand.
var secretMembers = []string{"password", "pfx", "secret", "sasToken", "sasKey"}

// IsSecretMember reports whether the member name, inside the member parent, holds a secret:
// one of the fields RewriteSecrets walks, or one of SecretHeaders in a headers object. An
// error about such a member must not quote its value.
func IsSecretMember(parent, name string) bool {
	switch {
	case strings.EqualFold(parent, "headers"):
		return isSecretHeader(name)
	case parent == "query": // only in RewriteSecrets' paths: no JSON member of a job has this name
		return isSecretQueryParameter(name)
	}
	for _, m := range secretMembers {
		if strings.EqualFold(name, m) {
			return true
		}
	}
	return false
}
