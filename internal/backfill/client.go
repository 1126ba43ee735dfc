package backfill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/anyhook/anyhook/internal/loopback"
	"github.com/anyhook/anyhook/internal/redirect"
)

// Client is what the listers share: an HTTP client for one provider's
// API, with the source's key, that waits out rate limits.
type Client struct {
	// Base is the API's root URL (the source's api_base, or the
	// provider's own).
	Base string
	// Key is the source's api_key. It is sent only to Base and never
	// written into an error or a log.
	Key string
	// HTTP sends the requests; default: a 30s timeout. Its redirect
	// policy is replaced: a redirect is followed only to the same scheme
	// and host, and only when it keeps the method.
	HTTP *http.Client
	// Sleep waits d or until ctx is done; default a timer. Tests inject
	// one that does not wait.
	Sleep func(ctx context.Context, d time.Duration) error
	// MaxRetries bounds the retries of one request after a 429 or a 5xx;
	// default 8.
	MaxRetries int
	// UserAgent is sent with every request.
	UserAgent string
	// MaxPage bounds the bytes of one page the API answers; default
	// 64 MiB.
	MaxPage int64

	onRateLimit func()
}

// OnRateLimit registers f, called at every 429 waited out.
func (c *Client) OnRateLimit(f func()) { c.onRateLimit = f }

// APIError is a provider's API refusing a request: its status and the
// message it gave (with the key, should the provider echo it, removed).
type APIError struct {
	Provider string
	Status   int
	Message  string
}

func (e *APIError) Error() string {
	msg := fmt.Sprintf("%s API answered %d %s", e.Provider, e.Status, http.StatusText(e.Status))
	if e.Message != "" {
		msg += ": " + e.Message
	}
	switch e.Status {
	case http.StatusUnauthorized, http.StatusForbidden:
		msg += " (check the source's api_key)"
	}
	return msg
}

// backoff is the wait before retry n (0-based) when the API gave no hint.
func backoff(n int) time.Duration {
	return min(time.Second<<n, 30*time.Second)
}

// retryAfter reads a Retry-After header (seconds, or an HTTP date).
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	v := h.Get("Retry-After")
	if v == "" {
		return 0, false
	}
	// Seconds; more than a time.Duration holds is the longest wait.
	if s, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64); err == nil || errors.Is(err, strconv.ErrRange) {
		if err != nil || s > uint64(math.MaxInt64/int64(time.Second)) {
			return math.MaxInt64, true
		}
		return time.Duration(s) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// maxWait bounds a provider's wait hint: a longer one is an error rather
// than an hour of silence.
const maxWait = 5 * time.Minute

// do sends a request built by build (again for each retry) and returns the
// 2xx response, whose body the caller closes. A 429 or 5xx is retried
// after the provider's hint (hint, else Retry-After) or a growing back-off;
// any other status is an *APIError with the message msg reads from its
// body.
func (c *Client) do(ctx context.Context, provider string, build func() (*http.Request, error),
	hint func(h http.Header, now time.Time) (time.Duration, bool), msg func([]byte) string) (*http.Response, error) {
	hc := &http.Client{Timeout: 30 * time.Second}
	if c.HTTP != nil {
		*hc = *c.HTTP
	}
	hc.CheckRedirect = sameOrigin
	if hc.Transport == nil && loopback.Plain(c.Base) {
		hc.Transport = loopbackTransport
	}
	sleep := c.Sleep
	if sleep == nil {
		sleep = sleepCtx
	}
	retries := c.MaxRetries
	if retries == 0 {
		retries = 8
	}
	for n := 0; ; n++ {
		req, err := build()
		if err != nil {
			return nil, err
		}
		req = req.WithContext(ctx)
		if c.UserAgent != "" {
			req.Header.Set("User-Agent", c.UserAgent)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return nil, fmt.Errorf("%s API: %w", provider, scrub(err, c.Key))
		}
		if resp.StatusCode/100 == 2 {
			return resp, nil
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		// The key goes before the message is read (and maybe cut), so no
		// part of it is left.
		apiErr := &APIError{Provider: provider, Status: resp.StatusCode, Message: msg([]byte(redact(string(body), c.Key)))}
		wait, hinted := hint(resp.Header, time.Now())
		// A rate limit: 429, or what the provider's own headers say is one
		// (GitHub answers 403 with x-ratelimit-remaining: 0).
		limited := resp.StatusCode == http.StatusTooManyRequests || hinted
		retryable := limited || resp.StatusCode >= 500
		if !retryable || n >= retries || resp.Header.Get("Stripe-Should-Retry") == "false" {
			return nil, apiErr
		}
		ok := hinted
		if !ok {
			wait, ok = retryAfter(resp.Header, time.Now())
		}
		if !ok {
			wait = backoff(n)
		}
		if wait > maxWait {
			return nil, fmt.Errorf("%w; it asks to wait %s, longer than %s: run the backfill again later", apiErr, wait, maxWait)
		}
		if limited && c.onRateLimit != nil {
			c.onRateLimit()
		}
		if err := sleep(ctx, wait); err != nil {
			return nil, err
		}
	}
}

// loopbackTransport sends the requests of a plain-http api_base, which the
// configuration allows only to a loopback host: it connects only to a
// loopback address, whatever the host name resolved to (package
// loopback). Redirects keep the scheme and host: sameOrigin.
var loopbackTransport = loopback.Transport()

// sameOrigin is the redirect policy of requests that carry the key
// (package redirect): the error names why a redirect is not followed.
func sameOrigin(req *http.Request, via []*http.Request) error {
	if err := redirect.Check(req, via); err != nil {
		return fmt.Errorf("%w: not following it with the api_key", err)
	}
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// redact removes key from s.
func redact(s, key string) string {
	if key == "" {
		return s
	}
	return strings.ReplaceAll(s, key, "<api_key>")
}

// scrub is err with the key removed from its text.
func scrub(err error, key string) error {
	if key == "" || !strings.Contains(err.Error(), key) {
		return err
	}
	return fmt.Errorf("%s", redact(err.Error(), key))
}

// errorMessage reads the message of a JSON error body shaped
// {"error": {"message": …}} (Stripe), {"error": {"detail": …}} (Paddle)
// or {"message": …} (GitHub); else the start of the body.
func errorMessage(body []byte) string {
	var v struct {
		Message string `json:"message"`
		Error   struct {
			Message string `json:"message"`
			Detail  string `json:"detail"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &v) == nil {
		for _, m := range []string{v.Error.Message, v.Error.Detail, v.Message} {
			if m != "" {
				return m
			}
		}
	}
	s := strings.TrimSpace(string(body))
	if len(s) > 200 {
		n := 200
		for n > 0 && !utf8.RuneStart(s[n]) {
			n-- // not in the middle of a character
		}
		s = s[:n] + "…"
	}
	return s
}

// decode reads the JSON body of resp, at most MaxPage bytes of it, into v,
// and closes it.
func (c *Client) decode(resp *http.Response, v any) error {
	defer resp.Body.Close()
	limit := c.MaxPage
	if limit <= 0 {
		limit = 64 << 20
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return scrub(err, c.Key)
	}
	if int64(len(body)) > limit {
		return fmt.Errorf("the page is larger than %d bytes", limit)
	}
	return json.Unmarshal(body, v)
}

// cursors remembers the cursors a listing has paged with: an API that
// hands one out again would be paged forever.
type cursors map[string]bool

// next records cursor c, and is an error when it was seen before.
func (s cursors) next(provider, c string) error {
	if s[c] {
		return fmt.Errorf("%s API: the page cursor %q repeats (the API pages in a loop); stopping", provider, c)
	}
	s[c] = true
	return nil
}

func noHint(http.Header, time.Time) (time.Duration, bool) { return 0, false }
