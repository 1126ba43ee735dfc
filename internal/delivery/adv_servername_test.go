package delivery_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
)

// selfSigned is a server certificate for name only.
func selfSigned(t *testing.T, name string) (tls.Certificate, *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, c
}

// ADVERSARY (issue 35, mTLS + OAuth2): tls.server_name is "the name the
// destination's certificate must bear", but the token endpoint is reached
// with the destination's whole tls.Config, ServerName included, so a
// token_url on another host (docs/destinations.md's own example:
// idp.example.com with server_name: api.internal) is verified against the
// destination's name and never yields a token. Both certificates are
// trusted here (the CAs are shared, as documented); only the name is
// wrong.
func TestAdvServerNameIsTheDestinationsOnly(t *testing.T) {
	t.Parallel()
	cert, leaf := selfSigned(t, "api.internal")
	dest := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	dest.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	dest.StartTLS()
	t.Cleanup(dest.Close)
	ts := newTokenServer(t, 3600)
	ts.Close() // again over TLS: its certificate names 127.0.0.1 and example.com
	ts.Server = httptest.NewUnstartedServer(ts.Config.Handler)
	ts.StartTLS()
	t.Cleanup(ts.Close)
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	pool.AddCert(ts.Certificate())
	d := withDefaults(oauthDest(dest.URL, ts.URL))
	d.TLS = &tls.Config{RootCAs: pool, ServerName: "api.internal"}
	if o := attempt(t, d, nil); o.Status != anyhook.StatusDelivered {
		t.Fatalf("%s %q", o.Status, o.Result.Error)
	}
}
