package auth

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// memStore is a credential lookup over a map, as the metadata FSM is.
type memStore map[string]map[Mechanism]Credential

func (s memStore) add(t *testing.T, user, password string, ms ...Mechanism) {
	t.Helper()
	for _, m := range ms {
		c, err := CredentialFromPassword(m, password, MinIterations)
		if err != nil {
			t.Fatal(err)
		}
		if s[user] == nil {
			s[user] = make(map[Mechanism]Credential)
		}
		s[user][m] = c
	}
}

func (s memStore) lookup(user string, m Mechanism, _ time.Time) (Credential, bool, error) {
	c, ok := s[user][m]
	return c, ok, nil
}

// run drives a franz-go client mechanism against an exchange of the
// authenticator, as transport does over SaslAuthenticate.
func run(t *testing.T, a *Authenticator, mech sasl.Mechanism) (Principal, error) {
	t.Helper()
	sess, token, err := mech.Authenticate(context.Background(), "kcoord:9092")
	if err != nil {
		t.Fatal(err)
	}
	ex, err := a.Start(mech.Name())
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		challenge, done, err := ex.Step(token)
		if err != nil {
			return Principal{}, err
		}
		clientDone, next, err := sess.Challenge(challenge)
		if err != nil {
			t.Fatalf("the client refused the server's answer: %v", err)
		}
		if done {
			if !clientDone {
				t.Fatal("the server finished before the client")
			}
			return ex.Principal(), nil
		}
		token = next
	}
	t.Fatal("the exchange did not finish")
	return Principal{}, nil
}

func TestScramLoginsProveTheUser(t *testing.T) {
	store := memStore{}
	store.add(t, "alice", "s3cret", ScramSHA256, ScramSHA512)
	a, err := New(Config{Mechanisms: []string{MechanismSHA256, MechanismSHA512}, Lookup: store.lookup})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		mech sasl.Mechanism
		ok   bool
	}{
		{"sha256", scram.Auth{User: "alice", Pass: "s3cret"}.AsSha256Mechanism(), true},
		{"sha512", scram.Auth{User: "alice", Pass: "s3cret"}.AsSha512Mechanism(), true},
		{"wrong password", scram.Auth{User: "alice", Pass: "guess"}.AsSha256Mechanism(), false},
		{"unknown user", scram.Auth{User: "mallory", Pass: "s3cret"}.AsSha512Mechanism(), false},
		{"other authzid", scram.Auth{User: "alice", Pass: "s3cret", Zid: "bob"}.AsSha256Mechanism(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := run(t, a, tc.mech)
			if tc.ok {
				if err != nil || p != User("alice") {
					t.Fatalf("got %v, %v; want User:alice", p, err)
				}
				return
			}
			if !errors.Is(err, ErrAuthenticationFailed) {
				t.Fatalf("got %v, %v; want ErrAuthenticationFailed", p, err)
			}
			if tc.name != "other authzid" && !strings.HasSuffix(err.Error(), "due to invalid credentials with SASL mechanism "+tc.mech.Name()) {
				t.Fatalf("message %q is not Kafka's", err)
			}
		})
	}
}

func TestPlainIsCheckedAgainstTheScramCredential(t *testing.T) {
	store := memStore{}
	store.add(t, "alice", "s3cret", ScramSHA256)
	store.add(t, "bob", "hunter2", ScramSHA512)
	a, err := New(Config{Mechanisms: []string{MechanismPlain}, Lookup: store.lookup})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		user, pass, zid string
		want            string // "" when it succeeds
	}{
		{"alice", "s3cret", "", ""},
		{"bob", "hunter2", "bob", ""},
		{"alice", "hunter2", "", "Authentication failed: Invalid username or password"},
		{"nobody", "s3cret", "", "Authentication failed: Invalid username or password"},
		{"alice", "s3cret", "bob", "Authentication failed: Client requested an authorization id that is different from username"},
	} {
		p, err := run(t, a, plain.Auth{User: tc.user, Pass: tc.pass, Zid: tc.zid}.AsMechanism())
		switch {
		case tc.want == "" && (err != nil || p != User(tc.user)):
			t.Errorf("%s/%s: got %v, %v", tc.user, tc.pass, p, err)
		case tc.want != "" && (err == nil || err.Error() != tc.want):
			t.Errorf("%s/%s: got %v, %v; want %q", tc.user, tc.pass, p, err, tc.want)
		}
	}
	ex, _ := a.Start(MechanismPlain)
	if _, _, err := ex.Step([]byte("only\x00two")); !errors.Is(err, ErrAuthenticationFailed) {
		t.Fatalf("a malformed PLAIN message: %v", err)
	}
}

func TestBootstrapSuperuserLogsInWithoutAStoredCredential(t *testing.T) {
	store := memStore{}
	store.add(t, "admin", "stored-password", ScramSHA256)
	a, err := New(Config{Mechanisms: []string{MechanismSHA256, MechanismPlain}, Lookup: store.lookup,
		Superuser: "admin", SuperuserPassword: "flag-password"})
	if err != nil {
		t.Fatal(err)
	}
	if p, err := run(t, a, scram.Auth{User: "admin", Pass: "flag-password"}.AsSha256Mechanism()); err != nil || p != User("admin") {
		t.Fatalf("superuser: %v, %v", p, err)
	}
	if _, err := run(t, a, scram.Auth{User: "admin", Pass: "stored-password"}.AsSha256Mechanism()); err == nil {
		t.Fatal("a stored credential of the bootstrap superuser's name logged in")
	}
	if p, err := run(t, a, plain.Auth{User: "admin", Pass: "flag-password"}.AsMechanism()); err != nil || p != User("admin") {
		t.Fatalf("superuser over PLAIN: %v, %v", p, err)
	}
	if _, err := New(Config{Mechanisms: []string{MechanismPlain}, Superuser: "admin"}); !errors.Is(err, ErrUnacceptableCredential) {
		t.Fatalf("a superuser without a password: %v", err)
	}
}

// TestScramTakesKafkasLeniencies: a client-final nonce that only ends
// with the server's (librdkafka repeats the client nonce) and unknown
// extensions are accepted, as Kafka's ScramSaslServer accepts them.
func TestScramTakesKafkasLeniencies(t *testing.T) {
	salt, _ := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	salted, _ := SaltPassword(ScramSHA256, "pencil", salt, 4096)
	c := NewCredential(ScramSHA256, salt, salted, 4096)
	a, _ := New(Config{Mechanisms: []string{MechanismSHA256}, Lookup: func(string, Mechanism, time.Time) (Credential, bool, error) { return c, true, nil }})
	ex := newScramExchange(a, ScramSHA256)
	ex.nonce = func() string { return "SERVER" }
	first, _, err := ex.Step([]byte("n,,n=user,r=CLIENT,ext=1"))
	if err != nil || string(first) != "r=CLIENTSERVER,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096" {
		t.Fatalf("server-first %q, %v", first, err)
	}
	withoutProof := "c=biws,r=CLIENTCLIENTSERVER"
	authMessage := "n=user,r=CLIENT,ext=1," + string(first) + "," + withoutProof
	h := ScramSHA256.hash()
	clientKey := hmacOf(h, salted, "Client Key")
	proof := hmacOf(h, c.StoredKey, authMessage)
	for i := range proof {
		proof[i] ^= clientKey[i]
	}
	final, done, err := ex.Step([]byte(withoutProof + ",p=" + base64.StdEncoding.EncodeToString(proof)))
	if err != nil || !done || string(final) != "v="+base64.StdEncoding.EncodeToString(hmacOf(h, c.ServerKey, authMessage)) {
		t.Fatalf("server-final %q, %v, %v", final, done, err)
	}
}

func TestMechanismsAreKafkas(t *testing.T) {
	for _, bad := range [][]string{nil, {"GSSAPI"}, {"scram-sha-256"}, {MechanismPlain, MechanismPlain}} {
		if _, err := New(Config{Mechanisms: bad}); !errors.Is(err, ErrUnsupportedMechanism) {
			t.Errorf("%q: %v", bad, err)
		}
	}
	a, _ := New(Config{Mechanisms: []string{MechanismSHA512}})
	if _, err := a.Start(MechanismSHA256); !errors.Is(err, ErrUnsupportedMechanism) {
		t.Fatalf("a mechanism not enabled: %v", err)
	}
}

// RFC 7677's SCRAM-SHA-256 example: user "user", password "pencil", the
// salt and 4096 iterations below; its server-first and server-final
// messages follow from the stored credential.
func TestCredentialMatchesRFC7677(t *testing.T) {
	salt, _ := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	salted, err := SaltPassword(ScramSHA256, "pencil", salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	c := NewCredential(ScramSHA256, salt, salted, 4096)
	a, _ := New(Config{Mechanisms: []string{MechanismSHA256}, Lookup: func(u string, m Mechanism, _ time.Time) (Credential, bool, error) {
		return c, u == "user" && m == ScramSHA256, nil
	}})
	ex := newScramExchange(a, ScramSHA256)
	ex.nonce = func() string { return "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0" }
	first, done, err := ex.Step([]byte("n,,n=user,r=rOprNGfwEbeRWgbNEkqO"))
	if err != nil || done || string(first) != "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096" {
		t.Fatalf("server-first %q, %v, %v", first, done, err)
	}
	final, done, err := ex.Step([]byte("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="))
	if err != nil || !done || string(final) != "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=" {
		t.Fatalf("server-final %q, %v, %v", final, done, err)
	}
	if !c.Matches("pencil") || c.Matches("pencil ") {
		t.Fatal("Matches does not check the password")
	}
}

// TestPlainChecksRunAFewAtATime: however many clients try PLAIN at once,
// only a bounded number of password checks (PBKDF2, milliseconds of CPU
// each) run together, so logins cannot take the cores groups need.
func TestPlainChecksRunAFewAtATime(t *testing.T) {
	c, err := CredentialFromPassword(ScramSHA512, "s3cret", MinIterations)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	running, most := 0, 0
	a, err := New(Config{Mechanisms: []string{MechanismPlain}, Lookup: func(string, Mechanism, time.Time) (Credential, bool, error) {
		return c, true, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	a.inCheck = func() {
		mu.Lock()
		running++
		most = max(most, running)
		mu.Unlock()
		time.Sleep(10 * time.Millisecond)
		mu.Lock()
		running--
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			ex, _ := a.Start(MechanismPlain)
			if _, done, err := ex.Step([]byte("\x00alice\x00s3cret")); !done {
				t.Errorf("login: %v", err)
			}
		})
	}
	wg.Wait()
	if limit := cap(a.pbkdf2); most > limit {
		t.Fatalf("%d checks ran at once, above the limit of %d", most, limit)
	}
}

// A credential store that cannot answer (the node cannot reach the
// metadata leader) fails the exchange with ErrCredentialsUnavailable, not
// as a wrong password: a client must not take it for an answer about its
// identity.
func TestUnavailableCredentialsAreNoAnswer(t *testing.T) {
	down := errors.New("the metadata leader cannot be reached")
	lookup := func(string, Mechanism, time.Time) (Credential, bool, error) { return Credential{}, false, down }
	for _, mech := range []string{MechanismPlain, MechanismSHA256} {
		a, err := New(Config{Mechanisms: []string{mech}, Lookup: lookup})
		if err != nil {
			t.Fatal(err)
		}
		ex, err := a.Start(mech)
		if err != nil {
			t.Fatal(err)
		}
		token := []byte("\x00alice\x00s3cret")
		if mech != MechanismPlain {
			token = []byte("n,,n=alice,r=CLIENT")
		}
		_, _, err = ex.Step(token)
		if !errors.Is(err, ErrCredentialsUnavailable) || errors.Is(err, ErrAuthenticationFailed) {
			t.Errorf("%s with an unavailable store: %v, want ErrCredentialsUnavailable only", mech, err)
		}
	}
}
