package admin

import (
	"context"
	"net/http"
	"strings"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

// ActorAPI is the actor of a request when authentication is off (no
// token is configured): the API cannot tell its callers apart. With
// tokens, the actor is the name of the token the request came with
// ("admin" for admin_token).
const ActorAPI = "api"

type actorKey struct{}

// WithActor returns ctx carrying the actor in whose name the API records
// a replay or a resolve made with it, instead of the token's name. The
// dashboard calls the API in-process, as its session's principal, and
// names the token and the session; a request from the network cannot set
// it.
func WithActor(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, actorKey{}, name)
}

// actor is who r acts for, with reason.
func actor(r *http.Request, reason string) store.Actor {
	name, _ := r.Context().Value(actorKey{}).(string)
	if name == "" {
		name = principal(r).Name
	}
	if name == "" {
		name = ActorAPI
	}
	return store.Actor{Name: name, Reason: reason}
}

// checkReason validates the optional reason of a replay or resolve
// (store.CheckReason) and returns it trimmed.
func checkReason(s string) (string, error) {
	s, err := store.CheckReason(s)
	if err != nil {
		return "", badParam("reason", "%s", trimInvalid(err))
	}
	return s, nil
}

// trimInvalid is err's text without its ": invalid" suffix.
func trimInvalid(err error) string {
	return strings.TrimSuffix(err.Error(), ": "+anyhook.ErrInvalid.Error())
}
