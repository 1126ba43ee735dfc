package provider

import (
	"net/http"
	"slices"
	"strings"

	"github.com/anyhook/anyhook"
)

// idSpec is one place a request names itself without a secret: a header,
// one parameter of a header (the t= of Stripe-Signature, never its v1),
// or a field of the body.
type idSpec struct {
	header     string // canonical form
	param, sep string // a parameter of header, its parts split by sep
	path       []string
}

func headerIDs(names ...string) []idSpec {
	out := make([]idSpec, len(names))
	for i, n := range names {
		out[i] = idSpec{header: http.CanonicalHeaderKey(n)}
	}
	return out
}

// name is how a value read by s is labelled.
func (s idSpec) name() string {
	switch {
	case s.path != nil:
		return "body " + strings.Join(s.path, ".")
	case s.param != "":
		return s.header + " " + s.param
	}
	return s.header
}

// neverID are headers no id rule may have the rejection log keep: they
// carry credentials.
var neverID = []string{"Authorization", "Cookie", "Proxy-Authorization"}

// Identifier returns, for a source with settings s, the function that
// reads the values a request to it names itself by without a secret: the
// provider's id headers, the timestamp parameter of its signature header
// (never the signature), the event id in its body, and the source's own
// id rule. The rejection log keeps them so that a refused request can be
// found by the id its sender logged. body is nil when the body was not
// read: then nothing is read from it. The values are as sent (the caller
// bounds them); empty ones are left out.
func Identifier(s Settings) func(h http.Header, body []byte) []anyhook.RequestID {
	k := kinds[s.Provider]
	specs := slices.Clone(k.ids)
	if f, err := ParseField(s.ID); err == nil && !f.IsZero() {
		secret := slices.Contains(neverID, f.header) || slices.Contains(k.credentials, f.header) ||
			(s.Signature != nil && f.header != "" && f.header == http.CanonicalHeaderKey(s.Signature.Header))
		if !secret {
			specs = append(specs, idSpec{header: f.header, path: f.path})
		}
	}
	var paths [][]string
	for _, sp := range specs {
		if sp.path != nil {
			paths = append(paths, sp.path)
		}
	}
	return func(h http.Header, body []byte) []anyhook.RequestID {
		var fromBody []string
		if body != nil && len(paths) > 0 {
			fromBody = jsonScalars(body, paths...)
		}
		var out []anyhook.RequestID
		seen := map[string]bool{}
		j := 0
		for _, sp := range specs {
			var v string
			switch {
			case sp.path != nil:
				if fromBody != nil {
					v = fromBody[j]
				}
				j++
			case sp.param != "":
				v = headerParam(h.Get(sp.header), sp.sep, sp.param)
			default:
				v = h.Get(sp.header)
			}
			v = strings.TrimSpace(v)
			if v == "" || seen[sp.name()] {
				continue
			}
			seen[sp.name()] = true
			out = append(out, anyhook.RequestID{Name: sp.name(), Value: v})
		}
		return out
	}
}
