package httpaction_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/resched/resched/services/worker/internal/action"
	"github.com/resched/resched/services/worker/internal/action/httpaction"
)

func TestParseNetworks(t *testing.T) {
	got, err := httpaction.ParseNetworks(" metadata, 10.1.2.3/8 ,192.0.2.7, ::ffff:198.51.100.1, fd00::/8")
	if err != nil {
		t.Fatal(err)
	}
	var s []string
	for _, p := range got {
		s = append(s, p.String())
	}
	want := "169.254.0.0/16 fe80::/10 fd00:ec2::254/128 168.63.129.16/32 100.100.100.200/32 10.0.0.0/8 192.0.2.7/32 198.51.100.1/32 fd00::/8"
	if strings.Join(s, " ") != want {
		t.Errorf("ParseNetworks = %v, want %s", s, want)
	}
	if none, err := httpaction.ParseNetworks("none"); err != nil || none == nil || len(none) != 0 {
		t.Errorf("none = %v (nil: %v), %v; want an empty list, not nil (nil is the default)", none, none == nil, err)
	}
	for _, bad := range []string{"10.0.0.0/33", "example.com", "private,10.0.0.0/x", " , "} {
		_, err := httpaction.ParseNetworks(bad)
		if err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func deny(t *testing.T, list string) httpaction.Options {
	t.Helper()
	n, err := httpaction.ParseNetworks(list)
	if err != nil {
		t.Fatal(err)
	}
	return httpaction.Options{DenyNetworks: n}
}

// deliverDenied delivers a GET of uri, which must be refused permanently, naming the address
// (unless addr is empty).
func deliverDenied(t *testing.T, o httpaction.Options, uri, addr string) {
	t.Helper()
	msg, err := httpaction.New(o).Deliver(context.Background(), httpAction(uri, "GET"), testMeta())
	var d *httpaction.DeniedError
	if !errors.As(err, &d) || !action.IsPermanent(err) {
		t.Fatalf("Deliver %s = %q, %v; want a permanent DeniedError", uri, msg, err)
	}
	if addr != "" && !strings.Contains(msg, "address "+addr+" ") {
		t.Errorf("message %q does not name %s", msg, addr)
	}
}

func TestADeniedAddressIsNeverCalled(t *testing.T) {
	tg := newTarget(t, 0)
	port := tg.Listener.Addr().(*net.TCPAddr).Port
	o := deny(t, "loopback")
	deliverDenied(t, o, tg.URL, "127.0.0.1")
	// A name is checked at the address it resolves to, and an IPv4 address written as IPv6
	// as the IPv4 one.
	deliverDenied(t, o, "http://localhost:"+strconv.Itoa(port)+"/", "")
	deliverDenied(t, o, "http://[::ffff:127.0.0.1]:"+strconv.Itoa(port)+"/", "127.0.0.1")
	if n := len(tg.requests()); n != 0 {
		t.Errorf("the denied target got %d requests", n)
	}
	// Allowed again, it is called.
	if _, err := httpaction.New(deny(t, "metadata")).Deliver(context.Background(), httpAction(tg.URL, "GET"), testMeta()); err != nil {
		t.Errorf("an allowed address: %v", err)
	}
}

func TestTheDefaultDeniesTheMetadataServices(t *testing.T) {
	// The guard refuses before the connection is attempted, so nothing need listen there.
	for _, uri := range []string{"http://169.254.169.254/latest/meta-data/", "http://[fd00:ec2::254]/", "http://168.63.129.16/machine?comp=goalstate"} {
		addr := strings.Trim(strings.Split(strings.TrimPrefix(uri, "http://"), "/")[0], "[]")
		deliverDenied(t, httpaction.Options{}, uri, addr)
	}
	// 0.0.0.0 reaches this host: never called, whatever the list.
	deliverDenied(t, deny(t, "none"), "http://0.0.0.0:1/", "0.0.0.0")
}

func TestARedirectToADeniedAddressIsNotFollowed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("no 127.0.0.2 on this host: %v", err)
	}
	denied := &target{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(denied.serve))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	from := redirector(t, func(*http.Request) string { return srv.URL + "/inside" })
	o := httpaction.Options{DenyNetworks: []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")}}
	deliverDenied(t, o, from.URL, "127.0.0.2")
	if n := len(denied.requests()); n != 0 {
		t.Errorf("the denied host got %d requests", n)
	}
}
