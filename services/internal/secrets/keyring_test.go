package secrets

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/resched/resched/shared/job"
)

func newKey(t testing.TB) string {
	t.Helper()
	b := make([]byte, KeySize)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b)
}

func ring(t testing.TB, entries ...string) *Keyring {
	t.Helper()
	k, err := ParseKeys(strings.Join(entries, ","))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestSealOpenRoundTripAndBinding(t *testing.T) {
	k := ring(t, "k1="+newKey(t))
	s, err := k.Seal("hunter2", "a")
	if err != nil {
		t.Fatal(err)
	}
	if !IsSealed(s) || KeyOf(s) != "k1" || strings.Contains(s, "hunter2") {
		t.Fatalf("sealed form %q", s)
	}
	s2, _ := k.Seal("hunter2", "a")
	if s == s2 {
		t.Error("two seals of one value are equal: the nonce is not random")
	}
	if got, err := k.Open(s, "a"); err != nil || got != "hunter2" {
		t.Errorf("Open = %q, %v", got, err)
	}
	if _, err := k.Open(s, "b"); err == nil {
		t.Error("a value opened under another binding")
	}
	tampered := s[:len(s)-2] + "AA"
	if tampered == s {
		tampered = s[:len(s)-2] + "BB"
	}
	if _, err := k.Open(tampered, "a"); err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("tampered value: %v", err)
	}
}

func TestRotationKeepsOldValuesOpen(t *testing.T) {
	old := "k1=" + newKey(t)
	k1 := ring(t, old)
	s1, _ := k1.Seal("v", "a")
	k2 := ring(t, "k2="+newKey(t), old)
	if k2.Newest() != "k2" {
		t.Fatalf("newest %q", k2.Newest())
	}
	if got, err := k2.Open(s1, "a"); err != nil || got != "v" {
		t.Errorf("old value after rotation: %q, %v", got, err)
	}
	s2, _ := k2.Seal("v", "a")
	if KeyOf(s2) != "k2" {
		t.Errorf("new value sealed with %q", KeyOf(s2))
	}
	_, err := k1.Open(s2, "a")
	if !errors.Is(err, ErrUnknownKey) || !strings.Contains(err.Error(), `"k2"`) {
		t.Errorf("open with a keyring lacking the key: %v", err)
	}
	var none *Keyring
	if _, err := none.Open(s2, "a"); !errors.Is(err, ErrNoKeys) {
		t.Errorf("open without keys: %v", err)
	}
}

func TestParseKeysErrorsNameTheEntryNotTheKey(t *testing.T) {
	short := base64.StdEncoding.EncodeToString([]byte("0123456789"))
	for _, text := range []string{"", "# only a comment\n", "k1", "k 1=" + newKey(t), "k1=" + short, "k1=not!base64", "k1=" + newKey(t) + ",k1=" + newKey(t)} {
		_, err := ParseKeys(text)
		if err == nil {
			t.Errorf("ParseKeys(%q) accepted", text)
			continue
		}
		if strings.Contains(err.Error(), short) {
			t.Errorf("error shows the key: %v", err)
		}
	}
	k := ring(t, "# rotated 2026-11\nnew="+newKey(t)+"\n\nold="+strings.TrimRight(base64.URLEncoding.EncodeToString(make([]byte, 32)), "=")+"\n")
	if got := k.IDs(); len(got) != 2 || got[0] != "new" || got[1] != "old" {
		t.Errorf("ids %v", got)
	}
}

func TestOptionsLoad(t *testing.T) {
	if k, err := (Options{}).Load(); k != nil || err != nil {
		t.Errorf("no options: %v, %v", k, err)
	}
	path := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(path, []byte("f1="+newKey(t)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if k, err := (Options{KeysFile: path}).Load(); err != nil || k.Newest() != "f1" {
		t.Errorf("file: %v, %v", k, err)
	}
	if _, err := (Options{KeysFile: path, Keys: "e1=" + newKey(t)}).Load(); err == nil {
		t.Error("both set: accepted")
	}
}

func secretAction() *job.Action {
	return &job.Action{
		ActionSpec: job.ActionSpec{Type: job.ActionHTTP, Request: &job.HTTPRequest{
			URI: "http://target/", Method: "GET", Headers: map[string]string{"Authorization": "Bearer TOKEN-1"},
			Authentication: &job.HTTPAuthentication{Type: job.AuthBasic, Username: "u", Password: "PASSWORD-1"},
		}},
		ErrorAction: &job.ErrorAction{ActionSpec: job.ActionSpec{Type: job.ActionStorageQueue,
			QueueMessage: &job.StorageQueueMessage{StorageAccount: "a", QueueName: "q", SASToken: "SAS-1", Message: "m"}}},
	}
}

func values(a *job.Action) []string {
	var v []string
	_ = a.RewriteSecrets(func(_, s string) (string, error) { v = append(v, s); return s, nil })
	return v
}

func TestSealActionOpenAction(t *testing.T) {
	k := ring(t, "k1="+newKey(t))
	a := secretAction()
	if !k.Stale(a) {
		t.Error("clear secrets with a key configured are not stale")
	}
	if err := k.SealAction(a, "c", "j"); err != nil {
		t.Fatal(err)
	}
	for _, v := range values(a) {
		if !IsSealed(v) {
			t.Errorf("not sealed: %q", v)
		}
	}
	if k.Stale(a) || a.Request.Authentication.Username != "u" {
		t.Error("sealed action is stale, or a field that is not secret changed")
	}
	if err := k.SealAction(a, "c", "j"); !errors.Is(err, ErrReserved) {
		t.Errorf("sealing a sealed value: %v", err)
	}
	moved := secretAction()
	_ = k.SealAction(moved, "c", "j")
	if err := k.OpenAction(moved, "c", "other"); err == nil || !strings.Contains(err.Error(), "action.") {
		t.Errorf("opened under another job's name: %v", err)
	}
	if err := k.OpenAction(a, "c", "j"); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(values(a), " ")
	for _, want := range []string{"Bearer TOKEN-1", "PASSWORD-1", "SAS-1"} {
		if !strings.Contains(got, want) {
			t.Errorf("opened values %q lack %q", got, want)
		}
	}
	var none *Keyring
	clear := secretAction()
	if err := none.SealAction(clear, "c", "j"); err != nil || strings.Join(values(clear), " ") != strings.Join(values(secretAction()), " ") || none.Stale(clear) {
		t.Errorf("a nil keyring changed the secrets: %v", err)
	}
	sealed := secretAction()
	_ = k.SealAction(sealed, "c", "j")
	err := none.OpenAction(sealed, "c", "j")
	var fe *FieldError
	if !errors.As(err, &fe) || !errors.Is(err, ErrNoKeys) || strings.Contains(err.Error(), "PASSWORD-1") {
		t.Errorf("open without keys: %v", err)
	}
	reserved := secretAction()
	reserved.Request.Authentication.Password = Prefix + "x:y"
	if err := none.SealAction(reserved, "c", "j"); !errors.Is(err, ErrReserved) || !strings.Contains(err.Error(), "action.request.authentication.password") {
		t.Errorf("reserved prefix without keys: %v", err)
	}
}
