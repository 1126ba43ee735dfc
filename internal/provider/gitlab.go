package provider

import (
	"strings"
	"time"

	"github.com/anyhook/anyhook"
)

// gitlab verifies either GitLab's plain X-Gitlab-Token (compared in
// constant time with each secret) or, when the request carries a
// webhook-signature, GitLab's Standard Webhooks signing token (a whsec_
// secret in the same secrets list).
type gitlab struct {
	tokens  []string
	signing [][]byte // per secret, its Standard Webhooks key; nil for one that does not decode
	tol     time.Duration
}

func buildGitLab(s *Settings, _ [][]byte, tol time.Duration) (Provider, error) {
	signing, _ := standardKeys(s.Secrets, false)
	return &gitlab{s.Secrets, signing, tol}, nil
}

func (p *gitlab) Verify(r *Request, now time.Time) (anyhook.Verification, error) {
	if _, _, _, sig := standardHeaders(r.Header); sig != "" {
		return verifyStandard("gitlab standard webhooks v1", p.signing, r.Header, r.Body, now, p.tol)
	}
	tok := r.Header.Get("X-Gitlab-Token")
	if tok == "" {
		return anyhook.Verification{}, missing("X-Gitlab-Token")
	}
	key := -1
	for i, s := range p.tokens {
		// No early exit: the same work for every secret. Which one
		// matched is kept (the first), never the token.
		if equalSecret(tok, s) && key < 0 {
			key = i
		}
	}
	if key < 0 {
		return anyhook.Verification{}, fail("no token matched")
	}
	return anyhook.Verification{Method: anyhook.VerifyToken, Scheme: "gitlab token", Secret: key}, nil
}

// Extract: a request signed with a signing token is keyed on its signed
// webhook-id (GitLab sets it to the Idempotency-Key), whatever its unsigned
// Idempotency-Key says. A token request signs nothing: its key is
// Idempotency-Key (GitLab 17.4+, stable across retries), else
// X-Gitlab-Event-UUID, and its content key is the body, so a resend under
// a fresh key is a duplicate (one event reaching the source through two
// hooks too). Events about an object (issues, merge requests, …) are
// ordered by object_attributes.updated_at per object_kind/id.
func (p *gitlab) Extract(r *Request) (Extracted, error) {
	var e Event
	if _, id, _, sig := standardHeaders(r.Header); sig != "" {
		e.DedupKey = id
	} else {
		e.DedupKey = firstHeader(r, "Idempotency-Key", "X-Gitlab-Event-UUID")
		e.ContentKey = p.contentKey(r)
	}
	v := jsonScalars(r.Body, []string{"object_kind"}, []string{"object_attributes", "id"}, []string{"object_attributes", "updated_at"})
	if v[0] != "" && v[1] != "" {
		e.Object, e.Version = order(v[0]+"/"+v[1], gitlabTime(v[2]))
	}
	return Extracted{Events: []Event{e}}, nil
}

// contentKey: a signed request's signed content; a token request's body
// (the token proves the sender, not the body).
func (p *gitlab) contentKey(r *Request) string {
	if _, id, ts, sig := standardHeaders(r.Header); sig != "" {
		return standardContent(id, ts, r.Body)
	}
	return contentKey("gitlab", r.Body)
}

func (p *gitlab) signsHeader(r *Request, name string) bool {
	if _, _, _, sig := standardHeaders(r.Header); sig == "" {
		return false
	}
	return standardSigns(r.Header, name)
}

// gitlabTime turns GitLab's "2006-01-02 15:04:05 UTC" timestamps into RFC
// 3339 so versions compare as times; other forms pass through.
func gitlabTime(s string) string {
	for _, layout := range []string{"2006-01-02 15:04:05 MST", "2006-01-02 15:04:05 -0700"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC().Format(time.RFC3339)
		}
	}
	return s
}

// signGitLab sends a whsec_ secret as a Standard Webhooks signature, any
// other secret as X-Gitlab-Token.
func signGitLab(secret string, r *Request, now time.Time) error {
	if key, err := standardKey(secret); err == nil && strings.HasPrefix(secret, "whsec_") {
		setStandard(key, r, now)
		return nil
	}
	r.Header.Set("X-Gitlab-Token", secret)
	return nil
}

// typeOfGitLab: X-Gitlab-Event (Push Hook).
func typeOfGitLab(r *Request, _ []byte) string { return r.Header.Get("X-Gitlab-Event") }
