package send

import (
	"crypto/tls"
	"encoding/json"
	"encoding/pem"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/anyhook/anyhook/internal/provider"
)

// TestTypeFlag: --type sends a realistic sample of each listed event
// type: it verifies with the real provider, is valid JSON, and the
// provider reads the type asked for (what a filter's type sees), and,
// where the sample has ordering fields, the object --object sets.
func TestTypeFlag(t *testing.T) {
	t.Parallel()
	for _, p := range provider.Names() {
		types := eventTypes(p)
		if samples[p].anyType {
			types = append(types, "refund.created")
		}
		for _, typ := range types {
			t.Run(p+"/"+typ, func(t *testing.T) {
				t.Parallel()
				src := provider.Settings{Provider: p, Secrets: []string{secretFor(p)}}
				args := []string{"--provider", p, "--secret", secretFor(p), "--type", typ}
				if p == "generic" {
					src.Signature = &provider.Signature{Header: "X-Signature"}
					src.ID, src.Type = "header:X-Request-Id", "json:type"
					src.Ordering = &provider.Ordering{Object: "json:order.id", Version: "json:order.updated_at"}
					args = append(args, "--signature-header", "X-Signature")
				}
				if p == "standard" { // no ordering of its own
					src.Ordering = &provider.Ordering{Object: "json:data.id", Version: "json:data.updated_at"}
				}
				rc := newReceiver(t, src)
				ordered := samples[p].object != nil
				if ordered {
					version := "1700000000"
					switch p {
					case "shopify", "paddle", "generic", "standard":
						version = "2026-01-02T03:04:05Z"
					}
					args = append(args, "--object", "42", "--version", version)
				}
				if code, out, stderr := run(t, append(args, "--url", rc.url())...); code != 0 {
					t.Fatalf("exit %d, %s %s", code, stderr, out)
				}
				if len(rc.events) == 0 {
					t.Fatal("no event")
				}
				e := rc.events[0]
				if e.Type != typ {
					t.Errorf("the provider reads type %q, want %q", e.Type, typ)
				}
				if ordered && !strings.Contains(e.Object, "42") {
					t.Errorf("ordering object %q, want the --object", e.Object)
				}
			})
		}
	}
	for _, p := range provider.Names() {
		for _, typ := range append(eventTypes(p), "x") {
			body, h, err := (&options{provider: p, typ: typ}).event(time.Now())
			if err != nil || h == nil {
				t.Fatalf("%s %s: %v", p, typ, err)
			}
			if strings.Contains(samples[p].contentType, "json") && !json.Valid(body) {
				t.Errorf("%s %s: the sample is not valid JSON:\n%s", p, typ, body)
			}
		}
	}
}

// An unknown type names the provider's; a type that starts one is it;
// Twilio's events have none.
func TestEventTypeRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ args, want string }{
		{"--provider stripe --type invoice.payed", `--type: stripe has no sample of type "invoice.payed" (did you mean invoice.paid?); its types: payment_intent.succeeded, checkout.session.completed, customer.subscription.updated, invoice.paid`},
		{"--provider twilio --type sms", "--type: twilio events carry no type"},
	} {
		code, _, stderr := run(t, append(strings.Fields(tc.args), "--secret", "whsec_x", "--url", "http://127.0.0.1:9/")...)
		if code != 2 || stderr != "anyhook send: "+tc.want+"\n" {
			t.Errorf("%s: exit %d, %q; want exit 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
	rc := newReceiver(t, provider.Settings{Provider: "github", Secrets: []string{"s"}})
	if code, out, _ := run(t, "--provider", "github", "--secret", "s", "--type", "pull_request", "--url", rc.url()); code != 0 || rc.events[0].Type != "pull_request.opened" {
		t.Errorf("--type pull_request: exit %d, %s", code, out)
	}
}

// --cacert trusts a private CA for an https:// URL (a gateway with a
// certificate of its own CA); without it the same request fails.
func TestCACert(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, provider.Settings{Provider: "stripe", Secrets: []string{secretFor("stripe")}})
	srv := httptest.NewUnstartedServer(rc.srv.Config.Handler)
	srv.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake below
	srv.StartTLS()
	t.Cleanup(srv.Close)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"--provider", "stripe", "--secret", secretFor("stripe"), "--url", srv.URL + "/webhooks/stripe"}
	if code, out, stderr := run(t, append(args, "--cacert", ca)...); code != 0 || !strings.Contains(out, "1 × 200 accepted") {
		t.Errorf("--cacert: exit %d, %s %s", code, out, stderr)
	}
	if code, out, _ := run(t, args...); code != 1 || !strings.Contains(out, "certificate signed by unknown authority") {
		t.Errorf("without --cacert: exit %d, %s; want the certificate refused", code, out)
	}
	bad := filepath.Join(t.TempDir(), "empty.pem")
	os.WriteFile(bad, []byte("not a certificate\n"), 0o600)
	if code, _, stderr := run(t, append(args, "--cacert", bad)...); code != 2 || !strings.Contains(stderr, "--cacert: "+bad+" holds no PEM certificate") {
		t.Errorf("--cacert without a certificate: exit %d, %q", code, stderr)
	}
}

// Every `anyhook send … --type T` in the README names a type of its
// provider.
func TestREADMETypes(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(readme), "\\\n", " ")
	found := 0
	for _, m := range regexp.MustCompile(`send --provider (\S+) [^\n]*?--type (\S+)`).FindAllStringSubmatch(text, -1) {
		found++
		if _, ok := pickType(m[1], m[2]); !ok {
			t.Errorf("README: anyhook send --provider %s --type %s: no such sample type (%s)", m[1], m[2], strings.Join(eventTypes(m[1]), ", "))
		}
	}
	if found == 0 {
		t.Error("README shows no anyhook send --type")
	}
}
