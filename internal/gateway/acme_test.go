package gateway_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/anyhook/anyhook/internal/certs/certstest"
	"github.com/anyhook/anyhook/internal/config"
	"github.com/anyhook/anyhook/internal/gateway"
)

// needPebble returns the path of Let's Encrypt's Pebble ACME server,
// built by scripts/pebble.sh (from its Go module, at a pinned version)
// when missing. Locally a machine that cannot build it skips the test;
// under CI=true it fails instead.
func needPebble(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("../../scripts/pebble.sh").Output()
	path := strings.TrimSpace(string(out))
	if err == nil {
		if _, serr := os.Stat(path); serr == nil {
			return path
		}
	}
	msg := fmt.Sprintf("the ACME test needs Pebble and scripts/pebble.sh could not build it: %v %s", err, out)
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// dnsServer answers every A query with 127.0.0.1 (and AAAA with no
// address), over TCP (as Pebble asks) and UDP on the same port, so that
// Pebble's validation of any name reaches the gateway.
func dnsServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				for {
					var n [2]byte
					if _, err := io.ReadFull(conn, n[:]); err != nil {
						return
					}
					q := make([]byte, binary.BigEndian.Uint16(n[:]))
					if _, err := io.ReadFull(conn, q); err != nil {
						return
					}
					if a := dnsAnswer(q); a != nil {
						conn.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(a))), a...))
					}
				}
			}()
		}
	}()
	if pc, err := net.ListenPacket("udp", ln.Addr().String()); err == nil {
		t.Cleanup(func() { pc.Close() })
		go func() {
			buf := make([]byte, 1500)
			for {
				n, addr, err := pc.ReadFrom(buf)
				if err != nil {
					return
				}
				if a := dnsAnswer(buf[:n]); a != nil {
					pc.WriteTo(a, addr)
				}
			}
		}()
	}
	return ln.Addr().String()
}

// dnsAnswer answers one DNS query: 127.0.0.1 for an A question, no
// address for any other.
func dnsAnswer(query []byte) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil {
		return nil
	}
	q, err := p.Question()
	if err != nil {
		return nil
	}
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired})
	b.StartQuestions()
	b.Question(q)
	b.StartAnswers()
	if q.Type == dnsmessage.TypeA {
		b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 60}, dnsmessage.AResource{A: [4]byte{127, 0, 0, 1}})
	}
	msg, err := b.Finish()
	if err != nil {
		return nil
	}
	return msg
}

// freePort returns a port nothing listens on at the moment.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// pebble runs Pebble with a certificate of ca for its own HTTPS, asking
// the TLS-ALPN-01 challenge on tlsPort and resolving names with dns. It
// returns the directory URL, the root that Pebble issues under, and a
// function that stops it.
func pebble(t *testing.T, bin, dir string, ca *certstest.CA, tlsPort int, dns string) (string, []byte, func()) {
	t.Helper()
	leaf := ca.Server(t)
	leaf.Write(t, dir, "pebble.crt", "pebble.key")
	acmeAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	mgmtAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	conf := map[string]any{"pebble": map[string]any{
		"listenAddress":                  acmeAddr,
		"managementListenAddress":        mgmtAddr,
		"certificate":                    filepath.Join(dir, "pebble.crt"),
		"privateKey":                     filepath.Join(dir, "pebble.key"),
		"httpPort":                       freePort(t),
		"tlsPort":                        tlsPort,
		"ocspResponderURL":               "",
		"externalAccountBindingRequired": false,
	}}
	data, _ := json.Marshal(conf)
	confPath := filepath.Join(dir, "pebble.json")
	if err := os.WriteFile(confPath, data, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-config", confPath, "-dnsserver", dns)
	// No random sleeps before validation, no random nonce rejections.
	cmd.Env = append(os.Environ(), "PEBBLE_VA_NOSLEEP=1", "PEBBLE_WFE_NONCEREJECT=0")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop := func() { once.Do(func() { cmd.Process.Kill(); cmd.Wait() }) }
	t.Cleanup(stop)
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		signalled := false
		for sc.Scan() {
			t.Log("pebble: " + sc.Text())
			if !signalled && strings.Contains(sc.Text(), "ACME directory available at") {
				close(ready)
				signalled = true
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(60 * time.Second):
		t.Fatal("pebble did not start")
	}
	// "available at" is printed just before it listens: wait for the
	// management interface to answer.
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}}}
	var root []byte
	for i := 0; ; i++ {
		resp, err := client.Get("https://" + mgmtAddr + "/roots/0")
		if err == nil {
			root, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if i == 200 {
			t.Fatalf("pebble's management interface: %v", err)
		}
		time.Sleep(50 * time.Millisecond) // a process we cannot signal: poll its port
	}
	return "https://" + acmeAddr + "/dir", root, stop
}

// TestACME obtains the ingest listener's certificate from a real ACME
// server running locally (Let's Encrypt's Pebble), with the TLS-ALPN-01
// challenge answered by the gateway itself; a client trusting Pebble's
// root only sends a Stripe event over HTTPS, verified and recorded. The
// certificate is kept in tls.acme.storage: a restarted gateway serves it
// with Pebble gone.
func TestACME(t *testing.T) {
	t.Parallel()
	bin := needPebble(t)
	dir := t.TempDir()
	serverCA := certstest.NewCA(t, "pebble's HTTPS")
	certstest.WriteFile(t, filepath.Join(dir, "pebble-ca.pem"), serverCA.PEM)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	directory, root, stopPebble := pebble(t, bin, dir, serverCA, port, dnsServer(t))
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(root) {
		t.Fatalf("pebble's root: %q", root)
	}

	const domain = "hooks.anyhook.test"
	yaml := fmt.Sprintf(`
listen: 127.0.0.1:%d
database: sqlite:anyhook.db
admin_token: test-token
tls:
  acme:
    domains: [%s]
    email: ops@anyhook.test
    ca: %s
    ca_root: pebble-ca.pem
sources:
  stripe:
    provider: stripe
    secrets: [%s]
`, port, domain, directory, stripeSecret)
	cfg, err := config.Parse(filepath.Join(dir, "anyhook.yaml"), []byte(yaml), nil)
	if err != nil {
		t.Fatal(err)
	}
	start := func(ln net.Listener) *gateway.Gateway {
		g, err := gateway.New(t.Context(), gateway.Options{Config: cfg, Logger: slog.New(slog.NewTextHandler(logWriter{t}, nil))})
		if err != nil {
			t.Fatal(err)
		}
		g.Start(context.Background(), ln)
		return g
	}
	g := start(ln)

	// The client trusts Pebble's root only and asks for the domain, which
	// it dials at the gateway's address.
	addr := ln.Addr().String()
	tr := &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: roots},
		ForceAttemptHTTP2: true,
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}
	client := &http.Client{Transport: tr, Timeout: 2 * time.Minute}
	body := []byte(`{"id":"evt_acme_1","object":"event","type":"charge.succeeded","created":1700000000,"data":{"object":{"id":"ch_1"}}}`)
	resp, err := client.Do(stripeRequest(t, "https://"+domain+"/webhooks/stripe", stripeSecret, body, time.Now()))
	if err != nil {
		t.Fatalf("HTTPS with the ACME certificate: %v", err)
	}
	var a answer
	json.NewDecoder(resp.Body).Decode(&a)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || a.Status != "accepted" {
		t.Fatalf("over HTTPS: %d %+v, want 200 accepted", resp.StatusCode, a)
	}
	leaf := resp.TLS.PeerCertificates[0]
	if resp.Proto != "HTTP/2.0" || !slices.Contains(leaf.DNSNames, domain) {
		t.Errorf("protocol %s, certificate for %v; want HTTP/2 and %s", resp.Proto, leaf.DNSNames, domain)
	}
	if ev, err := g.Store().Event(t.Context(), a.ID); err != nil || ev.DedupKey != "evt_acme_1" {
		t.Fatalf("recorded event: %+v, %v", ev, err)
	}
	// A client that does not trust Pebble's root refuses the certificate.
	if _, err := (&http.Client{Transport: &http.Transport{DialContext: tr.DialContext}}).Get("https://" + domain + "/healthz"); err == nil {
		t.Error("a client with the system roots accepted Pebble's certificate")
	}
	// The certificate is stored beside the database.
	if _, err := os.Stat(filepath.Join(dir, "anyhook-acme", domain)); err != nil {
		t.Errorf("the certificate is not in the storage directory: %v", err)
	}
	if err := g.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}

	// Restarted, with no ACME server to ask: the stored certificate.
	stopPebble()
	ln2, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	g2 := start(ln2)
	defer g2.Stop(context.Background())
	tr.CloseIdleConnections()
	resp, err = client.Get("https://" + domain + "/healthz")
	if err != nil {
		t.Fatalf("after a restart: %v", err)
	}
	resp.Body.Close()
	if got := resp.TLS.PeerCertificates[0].SerialNumber; got.Cmp(leaf.SerialNumber) != 0 {
		t.Errorf("after a restart: serial %s, want the stored %s", got, leaf.SerialNumber)
	}
}

// logWriter writes a gateway's log to the test's.
type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}
