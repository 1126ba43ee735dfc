package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/anyhook/anyhook/internal/buildinfo"
)

const versionUsage = `usage: anyhook version [--json]

Prints the version, the commit the binary was built from and its date,
the Go version and the platform. A release build stamps them
(scripts/release.sh); a plain go build in a git clone takes them from the
repository; go run says dev.`

func version(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("version")
	asJSON := fs.Bool("json", false, `print {"version", "commit", "date", "modified", "go", "platform"} as JSON`)
	if code := parse(fs, args, stdout, stderr, versionUsage); code >= 0 {
		return code
	}
	in := buildinfo.Read()
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(in)
		return exitOK
	}
	commit, date := in.Commit, in.Date
	if commit == "" {
		commit = "unknown"
	} else if in.Modified {
		commit += " (modified)"
	}
	if date == "" {
		date = "unknown"
	}
	fmt.Fprintf(stdout, "anyhook %s\ncommit:   %s\ndate:     %s\ngo:       %s\nplatform: %s\n", in.Version, commit, date, in.GoVersion, in.Platform)
	return exitOK
}

const healthcheckUsage = `usage: anyhook healthcheck [--config FILE] [--url URL] [--timeout D]

Asks a running gateway's /healthz, for a container's HEALTHCHECK (the
image has no shell or curl) or a supervisor. The address is the config's
listen (0.0.0.0 and :: are asked on loopback; over https when the config
has tls:, without verifying the certificate, which names the public host),
or --url. Exit 0 when it
answers 200; exit 1 naming what went wrong; exit 2 for bad flags or
config.`

// healthcheck is `anyhook healthcheck`: GET /healthz of the gateway that
// the config describes.
func healthcheck(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("healthcheck")
	cfgPath := configFlag(fs)
	target := fs.String("url", "", "the `URL` to ask instead (default http://LISTEN/healthz)")
	timeout := fs.Duration("timeout", 5*time.Second, "give up after this `duration`")
	if code := parse(fs, args, stdout, stderr, healthcheckUsage); code >= 0 {
		return code
	}
	u := *target
	client := &http.Client{}
	if u == "" {
		cfg, err := loadConfig(*cfgPath, stderr, "healthcheck", "listen", "tls")
		if err != nil {
			return fail(stderr, exitUsage, err)
		}
		u = "http://" + loopbackFor(cfg.Listen) + "/healthz"
		if cfg.TLS != nil {
			// Its own process, on loopback, for liveness only (nothing
			// secret is sent): the certificate names the public host,
			// not 127.0.0.1, so it is not verified. With ACME the name
			// is sent so that the stored certificate is served.
			u = "https://" + loopbackFor(cfg.Listen) + "/healthz"
			tc := &tls.Config{InsecureSkipVerify: true}
			if cfg.TLS.ACME != nil {
				tc.ServerName = cfg.TLS.ACME.Domains[0]
			}
			tr := http.DefaultTransport.(*http.Transport).Clone()
			tr.TLSClientConfig = tc
			client.Transport = tr
		}
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fail(stderr, exitUsage, fmt.Errorf("healthcheck: --url: %w", err))
	}
	req.Header.Set("User-Agent", "anyhook-healthcheck")
	resp, err := client.Do(req)
	if err != nil {
		return fail(stderr, exitFail, fmt.Errorf("healthcheck: %w", err))
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fail(stderr, exitFail, fmt.Errorf("healthcheck: GET %s: %s", u, resp.Status))
	}
	fmt.Fprintf(stdout, "ok: GET %s: %s\n", u, resp.Status)
	return exitOK
}

// loopbackFor is the address to reach a server listening on listen from
// the same host: an unspecified host (":8080", "0.0.0.0:8080",
// "[::]:8080") is asked on 127.0.0.1 or [::1].
func loopbackFor(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	switch ip := net.ParseIP(host); {
	case host == "" || (ip != nil && ip.Equal(net.IPv4zero)):
		host = "127.0.0.1"
	case ip != nil && ip.Equal(net.IPv6unspecified):
		host = "::1"
	}
	return net.JoinHostPort(host, port)
}
