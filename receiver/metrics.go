package receiver

import (
	"net/http"

	"github.com/hookdedup/hookdedup/storage"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are hookdedup's Prometheus series.
type Metrics struct {
	Deliveries       *prometheus.CounterVec   // hookdedup_deliveries_total{source,outcome}
	Rejections       *prometheus.CounterVec   // hookdedup_rejections_total{source,reason}
	ClaimDuration    prometheus.Histogram     // hookdedup_claim_duration_seconds
	SweepDeleted     *prometheus.CounterVec   // hookdedup_sweep_deleted_total{table}
	SweepClockHeld   prometheus.Gauge         // hookdedup_sweep_clock_step_seconds
	DispatchAttempts *prometheus.CounterVec   // hookdedup_dispatch_attempts_total{source,result}
	StuckKeys        *prometheus.GaugeVec     // hookdedup_stuck_keys{source}
	SignatureSkew    *prometheus.HistogramVec // hookdedup_signature_skew_seconds{source}
	Suspects         *prometheus.CounterVec   // hookdedup_suspects_total{source,kind}
	MoneyMismatches  *prometheus.CounterVec   // hookdedup_money_mismatches_total{source}
	AlertsNotified   *prometheus.CounterVec   // hookdedup_alert_notifications_total{channel,result}

	gatherer prometheus.Gatherer
}

// NewMetrics registers the series on a new registry (with the Go and process
// collectors) when reg is nil.
func NewMetrics(reg *prometheus.Registry) *Metrics {
	if reg == nil {
		reg = prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	m := &Metrics{
		Deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookdedup_deliveries_total",
			Help: "Webhook deliveries by source and outcome (accepted, duplicate, rejected, error).",
		}, []string{"source", "outcome"}),
		Rejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookdedup_rejections_total",
			Help: "Rejected deliveries by source (\"\" for unknown names) and reason (unknown_source, signature, too_large, timeout, unreadable, invalid_body, no_key), each counted whether stored individually or not.",
		}, []string{"source", "reason"}),
		ClaimDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "hookdedup_claim_duration_seconds",
			Help:    "Time from a delivery's arrival to its committed claim.",
			Buckets: []float64{.0005, .001, .002, .004, .008, .016, .032, .064, .128, .256, .512, 1, 2, 5},
		}),
		SweepDeleted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookdedup_sweep_deleted_total",
			Help: "Rows deleted by the background sweeps: expired claims and deliveries past retention.",
		}, []string{"table"}),
		SweepClockHeld: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hookdedup_sweep_clock_step_seconds",
			Help: "How far the wall clock leapt forward while the background sweeps hold their deletes for it; 0 when they do not.",
		}),
		DispatchAttempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookdedup_dispatch_attempts_total",
			Help: "Downstream hand-off attempts by source and result (success, retry, failed: the key fails with it); a record-only settlement sends nothing and is not counted.",
		}, []string{"source", "result"}),
		StuckKeys: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hookdedup_stuck_keys",
			Help: "Keys failed, or processing for longer than stuck_after.",
		}, []string{"source"}),
		SignatureSkew: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "hookdedup_signature_skew_seconds",
			Help: "Signed timestamp minus receipt time of the deliveries of timestamped schemes whose signature matched, " +
				"those refused only for being outside the tolerance included; positive when the sender's clock is ahead of this machine's.",
			Buckets: []float64{-3600, -900, -300, -120, -60, -30, -10, -5, -1, 1, 5, 10, 30, 60, 120, 300, 900, 3600},
		}, []string{"source"}),
		Suspects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookdedup_suspects_total",
			Help: "Accepted deliveries flagged at intake, by source and kind (business_key, correlation, late_duplicate).",
		}, []string{"source", "kind"}),
		MoneyMismatches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookdedup_money_mismatches_total",
			Help: "Duplicates whose amount, currency or event status differs from their first delivery's, by source.",
		}, []string{"source"}),
		AlertsNotified: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookdedup_alert_notifications_total",
			Help: "Attempts to send an alert's notification, by channel and result (sent, retry, failed: given up).",
		}, []string{"channel", "result"}),
		gatherer: reg,
	}
	reg.MustRegister(m.Deliveries, m.Rejections, m.ClaimDuration, m.SweepDeleted, m.SweepClockHeld, m.DispatchAttempts, m.StuckKeys, m.SignatureSkew,
		m.Suspects, m.MoneyMismatches, m.AlertsNotified)
	return m
}

// Handler serves the Prometheus text exposition.
func (m *Metrics) Handler() http.Handler {
	h := promhttp.HandlerFor(m.gatherer, promhttp.HandlerOpts{})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Live counts of every source, read anew at each scrape: no cache on the way,
		// nor a browser, is to keep them.
		w.Header().Set("Cache-Control", "no-store")
		dataHeaders(w.Header())
		h.ServeHTTP(w, r)
	})
}

// flags counts the forensic flags a stored delivery of source was given.
func (m *Metrics) flags(source string, d *storage.Delivery) {
	for _, k := range d.Suspects {
		m.Suspects.WithLabelValues(source, string(k)).Inc()
	}
	if d.MoneyMismatch {
		m.MoneyMismatches.WithLabelValues(source).Inc()
	}
}
