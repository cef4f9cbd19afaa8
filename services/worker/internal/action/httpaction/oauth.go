package httpaction

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/resched/resched/services/worker/internal/action"
	"github.com/resched/resched/shared/job"
)

// tokenCache fetches ActiveDirectoryOAuth tokens with the client-credentials grant (Azure AD
// v1 endpoint: <authority>/<tenant>/oauth2/token, resource = the audience) and keeps each
// until shortly before it expires. It is a cache (per-process state) because a token serves
// every delivery of every job with the same credentials for an hour, and the identity
// provider throttles clients that ask for one per request. Concurrent deliveries with the
// same credentials wait for one fetch.
type tokenCache struct {
	client    *http.Client
	authority string
	now       func() time.Time

	mu      sync.Mutex
	entries map[tokenKey]*tokenEntry
}

// tokenKey names a token by its credentials. The secret is part of the key, as a digest:
// a job with a wrong secret must not ride on a token another job fetched with the right one.
type tokenKey struct {
	tenant, clientID, audience string
	secret                     [sha256.Size]byte
}

// tokenEntry holds one token. lock (a one-slot channel, so waiting honours the context)
// serialises fetches of the same token.
type tokenEntry struct {
	lock      chan struct{}
	token     string
	refreshAt time.Time // fetch a new one from then on
	expires   time.Time
}

// maxTokens is the number of entries above which expired ones are dropped.
const maxTokens = 1024

func newTokenCache(client *http.Client, authority string, now func() time.Time) *tokenCache {
	return &tokenCache{client: client, authority: strings.TrimRight(authority, "/"), now: now, entries: map[tokenKey]*tokenEntry{}}
}

// token returns a valid token for the credentials, fetching one when none is cached.
func (c *tokenCache) token(ctx context.Context, a *job.HTTPAuthentication) (string, error) {
	if a.Tenant == "" || a.ClientID == "" || a.Secret == "" || a.Audience == "" {
		return "", action.Permanent(errors.New("ActiveDirectoryOAuth authentication needs tenant, clientId, secret and audience"))
	}
	e := c.entry(tokenKey{tenant: a.Tenant, clientID: a.ClientID, audience: a.Audience, secret: sha256.Sum256([]byte(a.Secret))})
	select {
	case e.lock <- struct{}{}:
	case <-ctx.Done():
		return "", fmt.Errorf("waiting for an ActiveDirectoryOAuth token: %w", ctx.Err())
	}
	defer func() { <-e.lock }()
	if e.token != "" && c.now().Before(e.refreshAt) {
		return e.token, nil
	}
	token, expires, err := c.fetch(ctx, a)
	if err != nil {
		return "", err
	}
	now := c.now()
	e.token, e.expires = token, expires
	// Refresh five minutes early, or half way through a short-lived token, so a token never
	// expires on its way to the target.
	e.refreshAt = expires.Add(-min(5*time.Minute, expires.Sub(now)/2))
	return token, nil
}

// entry returns the entry of key, creating it, and drops expired entries when there are many.
func (c *tokenCache) entry(key tokenKey) *tokenEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[key]; ok {
		return e
	}
	if len(c.entries) >= maxTokens {
		now := c.now()
		for k, e := range c.entries {
			select {
			case e.lock <- struct{}{}: // not in use
				if !now.Before(e.expires) {
					delete(c.entries, k)
				}
				<-e.lock
			default:
			}
		}
	}
	e := &tokenEntry{lock: make(chan struct{}, 1)}
	c.entries[key] = e
	return e
}

// tokenResponse is the identity provider's answer; v1 sends the numbers as strings.
type tokenResponse struct {
	AccessToken string     `json:"access_token"`
	ExpiresIn   flexNumber `json:"expires_in"` // seconds from now
	ExpiresOn   flexNumber `json:"expires_on"` // Unix seconds
	Error       string     `json:"error"`
	Description string     `json:"error_description"`
}

// fetch asks the authority for a token. Any failure is retryable: a throttled or unreachable
// identity provider recovers, and a rejected secret may be rotated before the last retry.
func (c *tokenCache) fetch(ctx context.Context, a *job.HTTPAuthentication) (string, time.Time, error) {
	endpoint := c.authority + "/" + url.PathEscape(a.Tenant) + "/oauth2/token"
	form := url.Values{
		"grant_type":    {"client_credentials"},
		"client_id":     {a.ClientID},
		"client_secret": {a.Secret},
		"resource":      {a.Audience},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return "", time.Time{}, action.Permanent(fmt.Errorf("ActiveDirectoryOAuth token endpoint: %w", unwrapURLError(err)))
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", userAgent)
	resp, err := c.client.Do(req)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("ActiveDirectoryOAuth token request to %s: %w", req.URL.Host, transportError(ctx, err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", time.Time{}, fmt.Errorf("ActiveDirectoryOAuth token response from %s: %w", req.URL.Host, transportError(ctx, err))
	}
	var tr tokenResponse
	jsonErr := json.Unmarshal(body, &tr)
	if resp.StatusCode != http.StatusOK || tr.AccessToken == "" {
		reason := statusText(resp)
		if tr.Error != "" {
			reason += ": " + tr.Error
			if d := firstLine(tr.Description); d != "" {
				reason += ": " + d
			}
		} else if jsonErr != nil {
			reason += ": the answer is not a token response"
		}
		if len(a.Secret) >= minRedacted { // an identity provider that quotes the request
			reason = redactString(reason, []string{a.Secret})
		}
		return "", time.Time{}, fmt.Errorf("ActiveDirectoryOAuth token request to %s refused: %s", req.URL.Host, reason)
	}
	now := c.now()
	expires := now // no expiry given: use it once
	switch {
	case tr.ExpiresOn > 0:
		expires = time.Unix(int64(tr.ExpiresOn), 0)
	case tr.ExpiresIn > 0:
		expires = now.Add(time.Duration(tr.ExpiresIn) * time.Second)
	}
	return tr.AccessToken, expires, nil
}

// firstLine shortens an identity provider's description (Azure AD appends trace and
// correlation ids on further lines).
func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	s = strings.TrimSpace(s)
	if len(s) > 300 {
		s = s[:300]
	}
	return s
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// flexNumber reads a JSON number or a string holding one.
type flexNumber int64

func (n *flexNumber) UnmarshalJSON(b []byte) error {
	b = bytes.Trim(b, `"`)
	if len(b) == 0 || string(b) == "null" {
		return nil
	}
	v, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return fmt.Errorf("not a whole number: %s", b)
	}
	*n = flexNumber(v)
	return nil
}
