package auth

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzScramExchange feeds arbitrary client messages to a SCRAM exchange:
// it must never panic, never authenticate without the password's proof,
// and fail only with ErrAuthenticationFailed.
func FuzzScramExchange(f *testing.F) {
	f.Add([]byte("n,,n=alice,r=abc"), []byte("c=biws,r=abc,p=AAAA"))
	f.Add([]byte("n,a=bob,n=alice,r=x"), []byte("c=,r=,p="))
	f.Add([]byte("y,,n=alice,r=abc,e=x"), []byte(""))
	f.Add([]byte("p=tls-unique,,n==2C,r="), []byte("c=biws"))
	store := memStore{}
	store.add(&testing.T{}, "alice", "the password no fuzzer guesses", ScramSHA256, ScramSHA512)
	a, err := New(Config{Mechanisms: []string{MechanismSHA256, MechanismSHA512}, Lookup: store.lookup})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, first, final []byte) {
		for _, m := range []string{MechanismSHA256, MechanismSHA512} {
			ex, _ := a.Start(m)
			for _, token := range [][]byte{first, final, final} {
				_, done, err := ex.Step(token)
				if done {
					t.Fatalf("%s authenticated %q, %q", m, first, final)
				}
				if err != nil {
					if !errors.Is(err, ErrAuthenticationFailed) {
						t.Fatalf("%s failed with %v", m, err)
					}
					break
				}
			}
		}
	})
}

// FuzzPlainExchange feeds arbitrary PLAIN messages: only alice's exact
// password, with no authorization id or her own, authenticates, as her.
func FuzzPlainExchange(f *testing.F) {
	f.Add([]byte("\x00alice\x00s3cret"))
	f.Add([]byte("alice\x00alice\x00s3cret"))
	f.Add([]byte("bob\x00alice\x00s3cret"))
	f.Add([]byte("\x00alice\x00s3cret\x00"))
	f.Add([]byte(""))
	store := memStore{}
	store.add(&testing.T{}, "alice", "s3cret", ScramSHA512)
	a, err := New(Config{Mechanisms: []string{MechanismPlain}, Lookup: store.lookup})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, token []byte) {
		ex, _ := a.Start(MechanismPlain)
		_, done, err := ex.Step(token)
		want := bytes.Equal(token, []byte("\x00alice\x00s3cret")) || bytes.Equal(token, []byte("alice\x00alice\x00s3cret"))
		switch {
		case done != want:
			t.Fatalf("%q: done %v, want %v (%v)", token, done, want, err)
		case done && ex.Principal() != User("alice"):
			t.Fatalf("%q: authenticated as %v", token, ex.Principal())
		case !done && !errors.Is(err, ErrAuthenticationFailed):
			t.Fatalf("%q: failed with %v", token, err)
		}
		if _, again, _ := ex.Step(token); again {
			t.Fatal("a completed exchange authenticated twice")
		}
	})
}
