package ingest

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/provider"
	"github.com/anyhook/anyhook/internal/store"
)

// FetchedScheme is the verification scheme of an event a backfill read
// from the provider's API: authentic by that channel (TLS, the source's
// API key), not by a webhook signature.
const FetchedScheme = "fetched from the provider API"

// fetchedHeader is the header a fetched event is recorded with: the
// content type a provider's webhook carries the same JSON object with.
var fetchedHeader = http.Header{"Content-Type": {"application/json; charset=utf-8"}}

// Fetched builds the events that webhooks carrying bodies (event objects a
// backfill read from the provider's API, each as the provider serialised
// it) would have been for source: the same dedup key, type, ordering
// fields, routing and stale rule, with origin backfill and verification
// FetchedScheme. An event object whose fields no store keeps
// (store.CheckEvent), as a webhook carrying it would be refused, fails
// the page. Nothing is recorded; RecordFetched does that.
func (h *Handler) Fetched(ctx context.Context, source string, bodies [][]byte) ([]store.NewEvent, error) {
	src, ok := h.sources[source]
	if !ok {
		return nil, fmt.Errorf("unknown source %q", source)
	}
	received := h.now()
	path := "/webhooks/" + source
	evs := make([]store.NewEvent, 0, len(bodies))
	for i, body := range bodies {
		ext, err := src.Provider.Extract(&provider.Request{Method: http.MethodPost, Header: fetchedHeader.Clone(), Body: body})
		if err != nil {
			return nil, fmt.Errorf("event %d of the page: %s", i, safeMessage(err))
		}
		if len(ext.Events) != 1 || ext.Events[0].DedupKey == "" {
			return nil, fmt.Errorf("event %d of the page: the provider's API answered an object without an event id", i)
		}
		pe := ext.Events[0]
		ne := store.NewEvent{
			Event: anyhook.Event{
				ID: h.newID(), Source: source, DedupKey: pe.DedupKey, ReceivedAt: received,
				Method: http.MethodPost, Path: path, Header: fetchedHeader.Clone(), Body: body,
				Type: pe.Type, Object: pe.Object, Version: pe.Version,
				Verification: anyhook.Verification{Method: anyhook.VerifyFetched, Scheme: FetchedScheme, Secret: -1},
				Origin:       anyhook.OriginBackfill,
			},
			// No content key: the API's answer is not signed content,
			// and the provider's event id is the dedup key.
			Destinations: src.Destinations,
			StaleSkip:    src.StaleSkip,
		}
		if err := store.CheckEvent(&ne); err != nil {
			return nil, fmt.Errorf("event %d of the page: %w", i, err)
		}
		if len(src.Filters) > 0 {
			h.route(ctx, src, &ne)
		}
		evs = append(evs, ne)
	}
	return evs, nil
}

// RecordFetched records events built by Fetched through the same store
// path as received ones (dedup, stale rules, deliveries in one
// transaction), and wakes the delivery workers when any was new.
func (h *Handler) RecordFetched(ctx context.Context, evs []store.NewEvent) ([]store.IngestResult, error) {
	res, err := h.rec.Ingest(ctx, evs)
	if err != nil {
		return nil, err
	}
	fresh := false
	for i, r := range res {
		if r.Err != nil {
			return nil, fmt.Errorf("provider event %s: %w", strconv.Quote(evs[i].Event.DedupKey), r.Err)
		}
		if !r.Duplicate {
			fresh = true
			if h.routing != nil {
				h.routing.EventRecorded(evs[i].Event.Source, evs[i].Event.Type)
			}
		}
	}
	if fresh && h.recorded != nil {
		h.recorded()
	}
	return res, nil
}
