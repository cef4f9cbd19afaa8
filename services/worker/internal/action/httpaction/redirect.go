package httpaction

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/resched/resched/shared/job"
)

// maxRedirects is net/http's own limit.
const maxRedirects = 10

// errDowngrade is the failure of a redirect from https to http.
var errDowngrade = errors.New("redirected from https to http, which would send the request in clear: not followed")

// checkRedirect is the redirect policy of every client. It follows redirects as net/http does
// (the original service's .NET client did too), with three differences, each to keep an
// action's credentials with the host they were written for:
//   - a redirect from https to http is not followed (the attempt fails, saying so);
//   - no Referer is sent (the first URL's query may hold a key, as an Azure Function's code);
//   - once any hop leaves the first request's origin (scheme, host and port), the action's
//     secret headers (job.SecretHeaders: Authorization and the API-key headers) are not sent.
//     net/http drops only Authorization and cookies, and keeps them for subdomains, so a
//     target's redirect, or an open redirect on it, handed an x-functions-key to any host.
func checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= maxRedirects {
		return fmt.Errorf("stopped after %d redirects", maxRedirects)
	}
	if via[len(via)-1].URL.Scheme == "https" && req.URL.Scheme != "https" {
		return errDowngrade
	}
	req.Header.Del("Referer")
	if leftOrigin(via[0].URL, req, via) {
		for _, name := range job.SecretHeaders {
			req.Header.Del(name)
		}
	}
	return nil
}

// leftOrigin reports whether req or any hop before it is outside the origin of first: a
// chain that comes back to the first host after another has been through a host that may
// not see the secrets, and must not be handed them again on the way back.
func leftOrigin(first *url.URL, req *http.Request, via []*http.Request) bool {
	if !sameOrigin(first, req.URL) {
		return true
	}
	for _, hop := range via[1:] {
		if !sameOrigin(first, hop.URL) {
			return true
		}
	}
	return false
}

// sameOrigin compares scheme, host and port, the port written or the scheme's own.
func sameOrigin(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Hostname(), b.Hostname()) && port(a) == port(b)
}

func port(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if strings.EqualFold(u.Scheme, "https") {
		return "443"
	}
	return "80"
}
