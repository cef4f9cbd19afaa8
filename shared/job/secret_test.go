package job

import (
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"testing"
)

func TestRewriteSecretsVisitsEverySecretAndNothingElse(t *testing.T) {
	d := secretDefinition(t)
	var paths []string
	err := d.Properties.Action.RewriteSecrets(func(path, v string) (string, error) {
		paths = append(paths, path)
		return "<" + strings.ToLower(v) + ">", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(paths)
	want := []string{
		"action.request.authentication.password",
		"action.request.authentication.pfx",
		"action.request.authentication.secret",
		"action.request.headers.api-key",
		"action.request.headers.authorization",
		"action.request.headers.x-functions-key",
		"action.request.uri.query.Sig",
		"action.request.uri.query.code",
		"action.serviceBusQueueMessage.authentication.sasKey",
		"errorAction.queueMessage.sasToken",
		"errorAction.request.authentication.password",
		"errorAction.request.uri.query.api-key",
		"errorAction.serviceBusTopicMessage.authentication.sasKey",
	}
	if !slices.Equal(paths, want) {
		t.Errorf("paths:\n got %q\nwant %q", paths, want)
	}
	out, _ := json.Marshal(d)
	for _, s := range secretValues {
		if strings.Contains(string(out), s) {
			t.Errorf("%s was not rewritten: %s", s, out)
		}
		if !strings.Contains(string(out), strings.ToLower(s)) {
			t.Errorf("the rewritten %s is not stored in its place", s)
		}
	}
	if !strings.Contains(string(out), `"username":"u"`) || !strings.Contains(string(out), `"Content-Type":"application/json"`) {
		t.Errorf("a field that is not secret changed: %s", out)
	}
	if !d.Properties.Action.HasSecrets() || (&Action{ActionSpec: ActionSpec{Type: ActionHTTP, Request: &HTTPRequest{URI: "http://x"}}}).HasSecrets() {
		t.Error("HasSecrets is wrong")
	}
}

func TestRewriteSecretsStopsAtTheFirstError(t *testing.T) {
	d := secretDefinition(t)
	calls := 0
	err := d.Properties.Action.RewriteSecrets(func(path, v string) (string, error) {
		calls++
		return "", &json.UnsupportedValueError{Str: path}
	})
	if err == nil || calls != 1 {
		t.Errorf("err %v after %d calls; want the first error after one call", err, calls)
	}
}

// IsSecretMember knows every member RewriteSecrets walks, and no other member of an action.
func TestIsSecretMemberNamesWhatRewriteSecretsWalks(t *testing.T) {
	d := secretDefinition(t)
	err := d.Properties.Action.RewriteSecrets(func(path, v string) (string, error) {
		parts := strings.Split(path, ".")
		if !IsSecretMember(parts[len(parts)-2], parts[len(parts)-1]) {
			t.Errorf("%s is walked by RewriteSecrets but not a secret member", path)
		}
		return v, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range [][2]string{{"authentication", "username"}, {"request", "uri"}, {"headers", "Content-Type"},
		{"authentication", "type"}, {"serviceBusQueueMessage", "message"}, {"authentication", "sasKeyName"}} {
		if IsSecretMember(m[0], m[1]) {
			t.Errorf("%s.%s taken for a secret", m[0], m[1])
		}
	}
}

// A query's secret values are rewritten as written, and nothing else of the URI moves.
func TestRewriteSecretsInAQuery(t *testing.T) {
	for _, c := range []struct{ uri, want string }{
		{"https://h/p?x=%2F&code=a%3D%3D&code=b&y#f?code=c", "https://h/p?x=%2F&code=<A%3D%3D>&code=<B>&y#f?code=c"},
		{"https://h/p?CODE=k&co%64e=k2&sig=&subscription-key=s", "https://h/p?CODE=<K>&co%64e=<K2>&sig=&subscription-key=<S>"},
		{"https://h/p?code", "https://h/p?code"},
		{"https://h/code=x", "https://h/code=x"},
		{"https://h/p#?code=x", "https://h/p#?code=x"}, // a fragment, not a query (found by FuzzRewriteQuery)
		{"https://h/p?a=b&access_token=t&apikey=k&api_key=k&API-KEY=k", "https://h/p?a=b&access_token=<T>&apikey=<K>&api_key=<K>&API-KEY=<K>"},
	} {
		a := &Action{ActionSpec: ActionSpec{Type: ActionHTTP, Request: &HTTPRequest{URI: c.uri}}}
		if err := a.RewriteSecrets(func(_, v string) (string, error) { return "<" + strings.ToUpper(v) + ">", nil }); err != nil {
			t.Fatal(err)
		}
		if a.Request.URI != c.want {
			t.Errorf("%s rewritten to %s, want %s", c.uri, a.Request.URI, c.want)
		}
		if r := a.Request.Redacted().URI; strings.Contains(r, "<") || !strings.HasPrefix(r, "https://h/") {
			t.Errorf("%s redacted to %s", c.uri, r)
		}
	}
}

// Rewriting a query's secrets touches nothing else: put back, the URI is as written, and a
// URI that parsed still parses, with the same host, path and other parameters.
func FuzzRewriteQuery(f *testing.F) {
	for _, s := range []string{"https://h/p?code=a&x=1#f", "https://h/p?co%64e=%ZZ&sig=1&&code", "http://h?a=b?code=c", "https://h/p#?code=x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, uri string) {
		a := &Action{ActionSpec: ActionSpec{Type: ActionHTTP, Request: &HTTPRequest{URI: uri}}}
		var values []string
		if err := a.RewriteSecrets(func(_, v string) (string, error) { values = append(values, v); return "SEALED", nil }); err != nil {
			t.Fatal(err)
		}
		sealed := a.Request.URI
		i := 0
		if err := a.RewriteSecrets(func(_, v string) (string, error) { i++; return values[i-1], nil }); err != nil {
			t.Fatal(err)
		}
		if a.Request.URI != uri || i != len(values) {
			t.Fatalf("%q sealed as %q opened as %q (%d of %d values)", uri, sealed, a.Request.URI, i, len(values))
		}
		before, err1 := url.Parse(uri)
		after, err2 := url.Parse(sealed)
		if err1 != nil {
			return
		}
		if err2 != nil || after.Host != before.Host || after.Path != before.Path || after.Fragment != before.Fragment {
			t.Fatalf("%q sealed as %q: %v", uri, sealed, err2)
		}
		for k, v := range before.Query() {
			if !isSecretQueryParameter(k) && !slices.Equal(after.Query()[k], v) {
				t.Fatalf("%q sealed as %q changed %s", uri, sealed, k)
			}
		}
	})
}
