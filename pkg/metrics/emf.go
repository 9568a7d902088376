package metrics

import (
	"encoding/json"
	"io"
	"log/slog"
	"sync"
	"time"
)

// EMF units (CloudWatch's StandardUnit values).
const (
	unitCount        = "Count"
	unitMilliseconds = "Milliseconds"
	unitNone         = "None"
)

// emfWriter writes CloudWatch Embedded Metric Format lines: one JSON object
// a line, which CloudWatch Logs turns into metrics — no API call, so
// nothing waits on CloudWatch. A Lambda function's stdout goes to its log
// group.
type emfWriter struct {
	mu        sync.Mutex
	out       io.Writer
	namespace string
	function  string
	now       func() time.Time
}

func newEMFWriter(out io.Writer, namespace, function string) *emfWriter {
	if namespace == "" {
		namespace = DefaultNamespace
	}
	return &emfWriter{out: out, namespace: namespace, function: function, now: time.Now}
}

// DefaultNamespace is the EMF namespace when none is set
// (SLUICE_METRICS_NAMESPACE; the template sets sluice/<stack>).
const DefaultNamespace = "sluice"

// emfLine is one EMF document being built.
type emfLine struct {
	w       *emfWriter
	dims    [][]string
	props   map[string]any
	metrics []emfMetric
}

type emfMetric struct {
	Name string `json:"Name"`
	Unit string `json:"Unit"`
}

// line starts a document whose metrics are aggregated by each of dims
// (dimension name sets; an empty set is the total). kv are its dimension
// values and other properties, name then value; an empty value is written
// "none" (a CloudWatch dimension value may not be empty).
func (w *emfWriter) line(dims [][]string, kv ...string) *emfLine {
	l := &emfLine{w: w, dims: dims, props: make(map[string]any, len(kv)/2+8)}
	for i := 0; i+1 < len(kv); i += 2 {
		l.prop(kv[i], kv[i+1])
	}
	if w.function != "" {
		l.props["Function"] = w.function
	}
	return l
}

func (l *emfLine) prop(k, v string) {
	if v == "" {
		v = "none"
	}
	l.props[k] = v
}

func (l *emfLine) metric(name, unit string, v float64) {
	l.metrics = append(l.metrics, emfMetric{Name: name, Unit: unit})
	l.props[name] = v
}

// values is a metric with several values (EMF's array form, at most
// emfMaxValues), each one an observation.
func (l *emfLine) values(name, unit string, v []float64) {
	l.metrics = append(l.metrics, emfMetric{Name: name, Unit: unit})
	l.props[name] = v
}

// write writes the line; a failure is logged, never returned: a metric
// must not fail a call.
func (l *emfLine) write() {
	w := l.w
	l.props["_aws"] = map[string]any{
		"Timestamp": w.now().UnixMilli(),
		"CloudWatchMetrics": []map[string]any{{
			"Namespace":  w.namespace,
			"Dimensions": l.dims,
			"Metrics":    l.metrics,
		}},
	}
	b, err := json.Marshal(l.props)
	if err != nil {
		slog.Warn("metrics: EMF line not encoded", "error", err)
		return
	}
	b = append(b, '\n')
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := w.out.Write(b); err != nil {
		slog.Warn("metrics: EMF line not written", "error", err)
	}
}
