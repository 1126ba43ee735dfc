package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/anyhook/anyhook/internal/provider"
)

const sinkUsage = `usage: anyhook sink [--listen ADDR] [--status N] [--signing-secret S]

A destination to try the gateway with: prints one line per delivery it
receives (its event id, attempt, source, provider event id and, when the
source has ordering rules, object=… version=…, stale=true on a stale
event, and backfill=true on an event a backfill read from the provider's
API; as an alert channel's webhook, alert=KIND text="…") and answers
--status (400 when --signing-secret is given and the signature does not
match).`

// alertLine renders an alert webhook's body (kind and text) for a sink's
// line, or "" when body is not one.
func alertLine(body []byte) string {
	var a struct{ Kind, Text string }
	if json.Unmarshal(body, &a) != nil || a.Kind == "" {
		return ""
	}
	return fmt.Sprintf("alert=%s text=%q", a.Kind, a.Text)
}

// sink runs `anyhook sink`: a destination to try the gateway with. It
// prints one line per delivery it receives and answers --status; with
// --signing-secret it checks AnyHook's Standard Webhooks signature first
// and answers 400 when it does not match.
func sink(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("sink")
	listen := fs.String("listen", "127.0.0.1:9000", "`address` to listen on")
	status := fs.Int("status", http.StatusOK, "HTTP `status` code to answer")
	secret := fs.String("signing-secret", "", "the destination's signing_secret, a whsec_… `secret`: verify each delivery's signature")
	if code := parse(fs, args, stdout, stderr, sinkUsage); code >= 0 {
		return code
	}
	if *status < 100 || *status > 599 {
		return fail(stderr, exitUsage, fmt.Errorf("sink: --status %d is not an HTTP status", *status))
	}
	var verifier provider.Provider
	if *secret != "" {
		v, err := provider.New(provider.Settings{Provider: "standard", Secrets: []string{*secret}})
		if err != nil {
			return fail(stderr, exitUsage, fmt.Errorf("sink: --signing-secret: %w", err))
		}
		verifier = v
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fail(stderr, exitUsage, fmt.Errorf("sink: %w", err))
	}
	var mu sync.Mutex // one line at a time
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 32<<20))
		if err != nil {
			http.Error(w, "cannot read the body", http.StatusBadRequest)
			return
		}
		code, note := *status, ""
		if verifier != nil {
			if _, err := verifier.Verify(&provider.Request{Method: r.Method, Header: r.Header, Body: body}, time.Now()); err != nil {
				code, note = http.StatusBadRequest, " signature: "+err.Error()
			} else {
				note = " signature: ok"
			}
		}
		h := r.Header
		if o := h.Get("X-AnyHook-Object"); o != "" {
			// The ordering object and version: how order: per_object
			// and the stale flag can be checked from these lines.
			note = " object=" + o + " version=" + h.Get("X-AnyHook-Version") + note
		}
		if h.Get("X-AnyHook-Stale") == "true" {
			note = " stale=true" + note
		}
		if h.Get("X-AnyHook-Backfill") == "true" {
			// Read from the provider's API after an outage (anyhook
			// backfill), not pushed by the provider.
			note = " backfill=true" + note
		}
		if h.Get("X-AnyHook-Delivery") == "" {
			// Not a delivery: an alert channel's webhook, whose words
			// are the point.
			if a := alertLine(body); a != "" {
				note = " " + a + note
			}
		}
		mu.Lock()
		// The same id names as the gateway's logs: event_id is the
		// X-AnyHook-Delivery value (the AnyHook event id).
		fmt.Fprintf(stdout, "%s %s %s event_id=%s attempt=%s replay=%s source=%s provider_event_id=%s bytes=%d -> %d%s\n",
			time.Now().Format(time.TimeOnly), r.Method, r.URL.Path, h.Get("X-AnyHook-Delivery"), h.Get("X-AnyHook-Attempt"),
			h.Get("X-AnyHook-Replay"), h.Get("X-AnyHook-Source"), h.Get("X-AnyHook-Event-Id"), len(body), code, note)
		mu.Unlock()
		w.WriteHeader(code)
	})}
	fmt.Fprintf(stdout, "anyhook sink listening on http://%s, answering %d\n", ln.Addr(), *status)
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(shut)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fail(stderr, exitFail, fmt.Errorf("sink: %w", err))
	}
	return exitOK
}
