package main

import (
	"errors"
	"fmt"
	"time"
)

// options are the upstream's command-line settings.
type options struct {
	addr           string
	latency        time.Duration
	jitter         time.Duration
	errorRate      float64
	streamChunks   int
	streamInterval time.Duration
	dims           int
	recordServed   bool
}

// maxDims bounds the embedding size a request may ask for.
const maxDims = 16384

func (o options) validate() error {
	var errs []error
	if o.latency < 0 || o.jitter < 0 || o.streamInterval < 0 {
		errs = append(errs, errors.New("-latency, -jitter and -stream-interval must not be negative"))
	}
	if o.errorRate < 0 || o.errorRate > 1 {
		errs = append(errs, fmt.Errorf("-error-rate %v: want a fraction in [0, 1]", o.errorRate))
	}
	if o.streamChunks < 1 || o.streamChunks > 100000 {
		errs = append(errs, fmt.Errorf("-stream-chunks %d: want 1..100000", o.streamChunks))
	}
	if o.dims < 1 || o.dims > maxDims {
		errs = append(errs, fmt.Errorf("-dims %d: want 1..%d", o.dims, maxDims))
	}
	return errors.Join(errs...)
}
