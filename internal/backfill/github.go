package backfill

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

// GitHubBase is GitHub's API root.
const GitHubBase = "https://api.github.com"

// Redeliverer is a provider that cannot hand out missed events, only send
// them again (GitHub): a backfill lists the hook's deliveries and asks for
// each one the gateway does not have to be redelivered; it then arrives
// through the normal signed path, where dedup does the rest.
type Redeliverer interface {
	// Deliveries calls page with each page of the hook's deliveries made
	// in [from, to], newest first.
	Deliveries(ctx context.Context, from, to time.Time, page func([]HookDelivery) error) error
	// Redeliver asks for delivery d to be sent again.
	Redeliver(ctx context.Context, d HookDelivery) error
	// DedupKey is the dedup key the event of d has when it arrives.
	DedupKey(d HookDelivery) string
}

// HookDelivery is one delivery (attempt) of a webhook, as GitHub lists it.
type HookDelivery struct {
	ID          int64     `json:"id"`
	GUID        string    `json:"guid"`
	DeliveredAt time.Time `json:"delivered_at"`
	Redelivery  bool      `json:"redelivery"`
	StatusCode  int       `json:"status_code"`
	Event       string    `json:"event"`
}

// GitHub lists a repository's or organization's hook deliveries
// (GET /repos/{owner}/{repo}/hooks/{hook_id}/deliveries, or /orgs/{org}/…;
// per_page=100, paged by the cursor of the Link header's rel="next") and
// redelivers one with POST …/deliveries/{delivery_id}/attempts.
type GitHub struct {
	Client
	Repo   string // owner/name; or
	Org    string
	HookID int64
}

func (g *GitHub) hookPath() string {
	if g.Repo != "" {
		owner, name, _ := strings.Cut(g.Repo, "/")
		return "/repos/" + url.PathEscape(owner) + "/" + url.PathEscape(name) + "/hooks/" + strconv.FormatInt(g.HookID, 10)
	}
	return "/orgs/" + url.PathEscape(g.Org) + "/hooks/" + strconv.FormatInt(g.HookID, 10)
}

func (g *GitHub) request(method, u string) func() (*http.Request, error) {
	return func() (*http.Request, error) {
		req, err := http.NewRequest(method, u, nil)
		if err != nil {
			return nil, fmt.Errorf("github API: api_base: %w", err)
		}
		req.Header.Set("Authorization", "Bearer "+g.Key)
		req.Header.Set("Accept", "application/vnd.github+json")
		req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
		return req, nil
	}
}

func (g *GitHub) base() string {
	if g.Base == "" {
		return GitHubBase
	}
	return strings.TrimSuffix(g.Base, "/")
}

// githubRateLimit reads GitHub's rate-limit headers: with
// x-ratelimit-remaining 0, wait until x-ratelimit-reset (Unix seconds).
func githubRateLimit(h http.Header, now time.Time) (time.Duration, bool) {
	if h.Get("X-Ratelimit-Remaining") != "0" {
		return 0, false
	}
	reset, err := strconv.ParseInt(h.Get("X-Ratelimit-Reset"), 10, 64)
	if err != nil {
		return 0, false
	}
	return max(time.Unix(reset, 0).Sub(now), 0), true
}

// Deliveries implements Redeliverer.
func (g *GitHub) Deliveries(ctx context.Context, from, to time.Time, page func([]HookDelivery) error) error {
	next := g.base() + g.hookPath() + "/deliveries?per_page=100"
	seen := cursors{}
	for next != "" {
		if err := seen.next("github", next); err != nil {
			return err
		}
		resp, err := g.do(ctx, "GitHub", g.request(http.MethodGet, next), githubRateLimit, errorMessage)
		if err != nil {
			return err
		}
		var ds []HookDelivery
		err = g.decode(resp, &ds)
		if err != nil {
			return fmt.Errorf("github API: the hook's deliveries are not a list of deliveries: %v", err)
		}
		var in []HookDelivery
		older := false
		for _, d := range ds {
			if d.GUID == "" || d.DeliveredAt.IsZero() {
				return fmt.Errorf("github API: a delivery (id %d) without a guid or delivered_at", d.ID)
			}
			// Its dedup key is looked up in the store, which holds no
			// key a webhook could not have (PostgreSQL fails the lookup).
			if err := store.CheckEvent(&store.NewEvent{Event: anyhook.Event{DedupKey: g.DedupKey(d)}}); err != nil {
				return fmt.Errorf("github API: a delivery (id %d) whose guid makes a dedup key no webhook has: %w", d.ID, err)
			}
			switch {
			case d.DeliveredAt.Before(from):
				older = true
			case to.IsZero() || !d.DeliveredAt.After(to):
				in = append(in, d)
			}
		}
		if err := page(in); err != nil {
			return err
		}
		if older {
			return nil // newest first: the rest is older still
		}
		next = nextLink(resp.Header.Get("Link"))
		// The key goes only to api_base: a next page elsewhere is refused.
		if next != "" && !under(next, g.base()) {
			return fmt.Errorf("github API: the next page is not under the API's base %s; not sending the key there", g.base())
		}
	}
	return nil
}

// DedupKey implements Redeliverer: X-GitHub-Hook-ID, a colon, and
// X-GitHub-Delivery (the GUID), as the github provider derives it.
func (g *GitHub) DedupKey(d HookDelivery) string {
	return strconv.FormatInt(g.HookID, 10) + ":" + d.GUID
}

// Redeliver implements Redeliverer.
func (g *GitHub) Redeliver(ctx context.Context, d HookDelivery) error {
	u := g.base() + g.hookPath() + "/deliveries/" + strconv.FormatInt(d.ID, 10) + "/attempts"
	resp, err := g.do(ctx, "GitHub", g.request(http.MethodPost, u), githubRateLimit, errorMessage)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// under reports whether URL u is under base: the same scheme and host
// (and port), case-insensitively as URLs compare them (an api_base
// written HTTPS://GHE.EXAMPLE pages through GitHub's lower-case links),
// no user name, and a path below base's.
func under(u, base string) bool {
	pu, err := url.Parse(u)
	if err != nil {
		return false
	}
	pb, err := url.Parse(base)
	if err != nil {
		return false
	}
	return pu.User == nil && strings.EqualFold(pu.Scheme, pb.Scheme) && strings.EqualFold(pu.Host, pb.Host) &&
		strings.HasPrefix(pu.EscapedPath(), strings.TrimSuffix(pb.EscapedPath(), "/")+"/")
}

// nextLink is the URL of the rel="next" link of a Link header, "" for
// none.
func nextLink(h string) string {
	for _, part := range strings.Split(h, ",") {
		target, params, ok := strings.Cut(strings.TrimSpace(part), ";")
		if !ok || !strings.Contains(params, `rel="next"`) {
			continue
		}
		return strings.Trim(strings.TrimSpace(target), "<>")
	}
	return ""
}
