package dashboard

import (
	"bufio"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/resched/resched/services/gateway/internal/access"
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/internal/natstest"
)

// switchAuth grants every request until refused is set.
type switchAuth struct {
	mu      sync.Mutex
	refused bool
	grant   access.Grant
}

func (a *switchAuth) Authenticate(*http.Request) (access.Grant, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.refused {
		return access.Grant{}, errors.New("token expired")
	}
	return a.grant, nil
}

func (a *switchAuth) set(refused bool, g access.Grant) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.refused, a.grant = refused, g
}

// A page's live stream ends when its token no longer holds (a JWT that expired), or gives
// another grant, rather than streaming on what the caller may no longer see.
func TestLiveStreamEndsWhenTheTokenNoLongerHolds(t *testing.T) {
	nc := natstest.Start(t).Connect(t)
	reader := access.Grant{Subject: "ops", Role: access.Reader, Scopes: []string{"*"}}
	for name, change := range map[string]func(*switchAuth){
		"refused": func(a *switchAuth) { a.set(true, access.Grant{}) },
		"another grant": func(a *switchAuth) {
			a.set(false, access.Grant{Subject: "ops", Role: access.Reader, Scopes: []string{"/subscriptions/s1"}})
		},
	} {
		t.Run(name, func(t *testing.T) {
			auth := &switchAuth{grant: reader}
			d, err := New(Config{NATS: nc, Subjects: bus.NewSubjects("resched"), Auth: auth})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			d.keepAlive = 20 * time.Millisecond
			srv := httptest.NewServer(d)
			defer srv.Close()
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/dashboard/api/live", nil)
			client := &http.Client{Timeout: 20 * time.Second} // a stream that never ends fails here
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			lines := bufio.NewReader(resp.Body)
			// While the token holds, the stream stays and says it is alive.
			for alive := 0; alive < 3; {
				line, err := lines.ReadString('\n')
				if err != nil {
					t.Fatalf("the stream ended while the token held: %v", err)
				}
				if strings.HasPrefix(line, ": alive") {
					alive++
				}
			}
			change(auth)
			rest, err := io.ReadAll(lines)
			if err != nil {
				t.Fatalf("the stream did not end when the token stopped holding: %v", err)
			}
			if n := strings.Count(string(rest), ": alive"); n > 1 {
				t.Fatalf("%d keep-alives after the change; want at most the one in flight", n)
			}
		})
	}
}
