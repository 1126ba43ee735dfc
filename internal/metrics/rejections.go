package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/anyhook/anyhook/internal/rejectlog"
)

// registerRejections registers the rejection log's drop counter, every
// reason at 0.
func (m *Metrics) registerRejections() {
	m.rejDropped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "anyhook_rejections_dropped_total",
		Help: "Records of refused webhook requests that the rejection log did not keep, by reason: rate (over a per-minute cap), queue (the writer was behind), error (the store refused the batch). The requests themselves are counted in anyhook_ingest_requests_total.",
	}, []string{"reason"})
	m.reg.MustRegister(m.rejDropped)
	for _, r := range rejectlog.DropReasons() {
		m.rejDropped.WithLabelValues(r)
	}
}

// RejectionDropped implements rejectlog.Observer.
func (m *Metrics) RejectionDropped(reason string, n int) {
	m.rejDropped.WithLabelValues(reason).Add(float64(n))
}
