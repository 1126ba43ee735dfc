package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// MaxTypes bounds the type label values of anyhook_ingest_events_total per
// source: the first MaxTypes distinct types seen by this process get their
// own series, later ones count under OtherType. Types are provider-defined
// (Stripe has a few hundred), but a generic source's type comes from the
// sender.
const MaxTypes = 50

// OtherType is the type label of the types past MaxTypes.
const OtherType = "other"

// typeLabels remembers which types got their own series, per source.
type typeLabels struct {
	mu   sync.Mutex
	seen map[string]map[string]bool
}

// label returns the label value for typ in source.
func (l *typeLabels) label(source, typ string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen == nil {
		l.seen = map[string]map[string]bool{}
	}
	s := l.seen[source]
	if s == nil {
		s = map[string]bool{}
		l.seen[source] = s
	}
	if s[typ] {
		return typ
	}
	if len(s) >= MaxTypes {
		return OtherType
	}
	s[typ] = true
	return typ
}

func (m *Metrics) registerRouting(sources, destinations []string) {
	m.events = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "anyhook_ingest_events_total",
		Help: "Events recorded as new, by source and event type (\"\" when the event has none; the first 50 types of a source per process, then \"other\").",
	}, []string{"source", "type"})
	m.filterErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "anyhook_filter_errors_total",
		Help: "Filter evaluations that failed (and so did not route the event to the destination), by destination.",
	}, []string{"destination"})
	m.reg.MustRegister(m.events, m.filterErrors)
	for _, d := range destinations {
		m.filterErrors.WithLabelValues(d)
	}
}

// EventRecorded implements ingest.RoutingObserver.
func (m *Metrics) EventRecorded(source, eventType string) {
	m.events.WithLabelValues(source, m.types.label(source, eventType)).Inc()
}

// FilterFailed implements ingest.RoutingObserver.
func (m *Metrics) FilterFailed(destination string) {
	m.filterErrors.WithLabelValues(destination).Inc()
}
