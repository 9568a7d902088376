package batches

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/files"
	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/models"
	"github.com/sluice-gateway/sluice/pkg/oai"
	"github.com/sluice-gateway/sluice/pkg/spend"
	"github.com/sluice-gateway/sluice/pkg/store"
)

// PollResult counts what a poll run did.
type PollResult struct {
	Polled int // native batches read from their provider
	Ended  int // of them, batches that ended (their files copied)
	Failed int // polls that failed (the next run tries again)
}

// PollNative polls the open native batches, oldest first, at most
// NativeDeps.PollLimit of them: the batch-native-poll job. A batch polled
// less than RefreshAfter ago (a client's GET did it) is skipped.
func (s *Service) PollNative(ctx context.Context) (PollResult, error) {
	var res PollResult
	if s.native == nil {
		return res, nil
	}
	page, err := s.deps.Records.Query(ctx, store.Query{Index: store.GSI2, PK: activeNativePK, Limit: s.native.PollLimit})
	if err != nil {
		return res, fmt.Errorf("batches: open native batches: %w", err)
	}
	for _, entry := range page.Records {
		if ctx.Err() != nil {
			return res, nil
		}
		st, err := s.load(ctx, strings.TrimPrefix(entry.Key.PK, batchPrefix))
		if errors.Is(err, errNoBatch) {
			continue
		}
		if err != nil {
			return res, err
		}
		if st.doc.Native == nil || terminal(st.status) || s.now().Sub(time.Unix(0, st.doc.Native.Polled)) < s.native.RefreshAfter {
			continue
		}
		res.Polled++
		cur, err := s.refreshNative(ctx, st)
		if err != nil {
			res.Failed++
			slog.WarnContext(ctx, "batches: native batch not polled", "batch", st.doc.ID, "error", err)
			continue
		}
		if terminal(cur.status) {
			res.Ended++
		}
	}
	return res, nil
}

// refreshNative reads the provider's batch and mirrors it (returning the
// batch as written, or an error and nothing): status, counts,
// times and errors; once the provider is done, its output and error files
// are copied into sluice's store (streamed) as the batch's files, each
// line's log event published on the way.
func (s *Service) refreshNative(ctx context.Context, st *state) (*state, error) {
	n := st.doc.Native
	b, err := s.openNative(ctx, n)
	if err != nil {
		return st, err
	}
	ps, err := b.PollBatch(ctx, n.Ref)
	if err != nil {
		var pe *models.ProviderError
		if errors.As(err, &pe) && pe.Status == 404 {
			// The provider's batch is gone (expired, deleted there).
			return s.mirror(ctx, st.doc.ID, models.BatchState{Status: StatusFailed, FailedAt: s.now().Unix(),
				Errors: []models.BatchError{{Code: providerErrorCode(pe), Message: n.Provider + " no longer has the batch: " + pe.Message}}}, nil)
		}
		return st, err
	}
	var usage *Usage
	var cost int64
	var outID, errID string
	if terminal(ps.Status) {
		u := Usage{}
		usage = &u
		if outID, err = s.copyResults(ctx, st, b, ps, models.ResultsOut, ps.OutputFile, st.doc.OutFile, &u, &cost); err != nil {
			return st, err
		}
		if errID, err = s.copyResults(ctx, st, b, ps, models.ResultsErr, ps.ErrorFile, st.doc.ErrFile, &u, &cost); err != nil {
			return st, err
		}
	}
	cur, err := s.mirror(ctx, st.doc.ID, ps, func(d *batchDoc) {
		if usage != nil {
			d.Native.Usage, d.Native.Cost = *usage, cost
			d.OutputFileID, d.ErrorFileID = outID, errID
		}
	})
	if err == nil && usage != nil {
		if c, ok := b.(models.BatchCleaner); ok {
			if cerr := c.CleanBatch(ctx, n.Ref, s.native.Store); cerr != nil {
				slog.WarnContext(ctx, "batches: the provider's objects of a native batch were not removed", "batch", st.doc.ID, "error", cerr)
			}
		}
	}
	return cur, err
}

// mirror writes a provider's state to batch id (and more, through also).
func (s *Service) mirror(ctx context.Context, id string, ps models.BatchState, also func(*batchDoc)) (*state, error) {
	return s.change(ctx, id, func(st *state) (bool, error) {
		if terminal(st.status) || st.doc.Native == nil {
			return false, nil
		}
		d := &st.doc
		n := d.Native
		n.Status, n.Polled = ps.Status, s.now().UnixNano()
		n.Counts = RequestCounts{Total: ps.Total, Completed: ps.Completed, Failed: ps.Failed}
		d.Total = ps.Total
		setNs := func(dst *int64, sec int64) {
			if sec > 0 {
				*dst = time.Unix(sec, 0).UnixNano()
			}
		}
		setNs(&d.InProgress, ps.InProgressAt)
		setNs(&d.Finalizing, ps.FinalizingAt)
		setNs(&d.Completed, ps.CompletedAt)
		setNs(&d.Failed, ps.FailedAt)
		setNs(&d.Expired, ps.ExpiredAt)
		setNs(&d.Cancelling, ps.CancellingAt)
		setNs(&d.Cancelled, ps.CancelledAt)
		if len(ps.Errors) > 0 {
			d.Errors = d.Errors[:0]
			for _, e := range ps.Errors {
				le := LineError{Code: e.Code, Message: e.Message}
				if e.Param != "" {
					p := e.Param
					le.Param = &p
				}
				if e.Line > 0 {
					l := e.Line
					le.Line = &l
				}
				d.Errors = append(d.Errors, le)
			}
		}
		switch ps.Status {
		case StatusValidating, StatusInProgress, StatusFinalizing, StatusCancelling,
			StatusCompleted, StatusFailed, StatusExpired, StatusCancelled:
			st.status = ps.Status
		}
		if terminal(st.status) {
			now := s.now().UnixNano()
			t := map[string]*int64{StatusCompleted: &d.Completed, StatusFailed: &d.Failed, StatusExpired: &d.Expired, StatusCancelled: &d.Cancelled}[st.status]
			if *t == 0 {
				*t = now
			}
		}
		if also != nil {
			also(d)
		}
		return true, nil
	})
}

// copyResults copies the provider's file of kind into sluice's store as the
// batch's file fileID (purpose batch_output), streaming, publishing each
// line's log event and adding its usage to u and its cost (nano-USD, as
// priced) to cost. It returns fileID, or "" when the provider has no such
// file. Copied again (a crash before the
// batch recorded it), it writes the same object; the file's record exists
// once.
func (s *Service) copyResults(ctx context.Context, st *state, b models.Batcher, ps models.BatchState, kind, file, fileID string, u *Usage, cost *int64) (string, error) {
	rc, err := b.BatchResults(ctx, st.doc.Native.Ref, kind, file, s.native.Store)
	if err != nil {
		return "", fmt.Errorf("batches: read the %s file of %s from %s: %w", kind, st.doc.ID, st.doc.Native.Provider, err)
	}
	if rc == nil {
		return "", nil
	}
	defer rc.Close()
	p, perr := s.principal(ctx, st.doc)
	ev := &lineEvents{s: s, st: st, p: p, usage: u, cost: cost, ok: perr == nil, ctx: ctx}
	key := fmt.Sprintf("batches/%s/native.%s.jsonl", st.doc.ID, kind)
	size, err := s.deps.Blobs.Put(ctx, key, io.TeeReader(rc, ev))
	ev.end()
	if err != nil {
		return "", fmt.Errorf("batches: copy the %s file of %s: %w", kind, st.doc.ID, err)
	}
	if size == 0 {
		_ = s.deps.Blobs.Delete(ctx, key)
		return "", nil
	}
	return s.createFile(ctx, st, fileID, kind, []files.Part{{Key: key, Size: size}})
}

// lineEvents splits the copied bytes into lines and publishes each line's
// log event: usage, model and team, tagged with the batch and custom_id, as
// the engine's lines are. A line longer than maxEventLine is skipped.
type lineEvents struct {
	s       *Service
	st      *state
	p       auth.Principal
	ok      bool // the principal resolved: events can be made
	usage   *Usage
	cost    *int64 // nano-USD, as the events are priced
	buf     []byte
	skip    bool
	pending []*logevent.Event // published together, eventBurst at a time
	ctx     context.Context
}

func (l *lineEvents) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if !l.skip && len(l.buf)+len(p) <= maxEventLine {
				l.buf = append(l.buf, p...)
			} else {
				l.skip, l.buf = true, l.buf[:0]
			}
			break
		}
		if !l.skip && len(l.buf)+i <= maxEventLine {
			l.line(append(l.buf, p[:i]...))
		}
		l.buf, l.skip = l.buf[:0], false
		p = p[i+1:]
	}
	return n, nil
}

func (l *lineEvents) line(raw []byte) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return
	}
	var o oai.BatchOutputLine
	if json.Unmarshal(raw, &o) != nil {
		return
	}
	var use oai.Usage
	var model string
	if o.Response != nil && len(o.Response.Body) > 0 {
		var body struct {
			Model string          `json:"model"`
			Usage json.RawMessage `json:"usage"`
		}
		if json.Unmarshal(o.Response.Body, &body) == nil {
			model = body.Model
			if len(body.Usage) > 0 {
				use, _ = oai.ParseUsage(body.Usage)
			}
		}
	}
	l.usage.InputTokens += use.PromptTokens
	l.usage.OutputTokens += use.CompletionTokens
	l.usage.TotalTokens += use.TotalTokens
	l.usage.InputTokensDetails.CachedTokens += use.PromptTokensDetails.CachedTokens
	l.usage.OutputTokensDetails.ReasoningTokens += use.CompletionTokensDetails.ReasoningTokens
	if !l.ok || l.s.native.Events == nil {
		return
	}
	n := l.st.doc.Native
	ctx := logevent.WithBatchLine(l.ctx, l.st.doc.ID, o.CustomID)
	ev := logevent.New(ctx, l.p, callType(l.st.doc.Endpoint))
	id := o.ID
	if o.Response != nil && o.Response.RequestID != "" {
		id = o.Response.RequestID
	}
	ev.ID, ev.TraceID, ev.Metadata.RequestID = id, id, id
	ev.CustomLLMProvider, ev.ModelGroup, ev.ModelID = n.Provider, n.ModelGroup, n.Deployment
	ev.Model = model
	ev.PromptTokens, ev.CompletionTokens, ev.TotalTokens = use.PromptTokens, use.CompletionTokens, use.TotalTokens
	ev.CachedTokens = use.PromptTokensDetails.CachedTokens
	ev.NativeBatch = true // priced at the batch prices
	switch {
	case o.Error != nil:
		ev.Fail(api.Upstream(nil, "%s: %s", o.Error.Code, o.Error.Message))
	case o.Response != nil && o.Response.StatusCode >= 400:
		ev.Fail(&api.Error{Status: o.Response.StatusCode, Type: "provider_error", Message: "The provider answered the line with an error."})
	}
	l.pending = append(l.pending, ev)
	if len(l.pending) >= eventBurst {
		l.flush()
	}
}

func (l *lineEvents) flush() {
	if len(l.pending) > 0 {
		l.s.native.Events.EmitAll(l.ctx, l.pending)
		for _, ev := range l.pending {
			*l.cost += spend.NanoUSD(ev.ResponseCost) // priced by the emit
		}
	}
	l.pending = l.pending[:0]
}

func (l *lineEvents) end() {
	if len(l.buf) > 0 && !l.skip {
		l.line(l.buf)
	}
	l.flush()
}

// callType is the log event call type of a batch endpoint's lines.
func callType(endpoint string) string {
	switch endpoint {
	case "/v1/embeddings":
		return logevent.CallEmbedding
	case "/v1/moderations":
		return logevent.CallModeration
	case "/v1/completions":
		return logevent.CallTextCompletion
	case "/v1/responses":
		return logevent.CallResponses
	}
	return logevent.CallCompletion
}

// cancelNative forwards a cancel to the provider and mirrors what it says.
func (s *Service) cancelNative(ctx context.Context, st *state) (Batch, error) {
	switch st.status {
	case StatusCancelling:
		return st.object(), nil
	case StatusValidating, StatusInProgress:
	default:
		return Batch{}, cannotCancel(st.status)
	}
	b, err := s.openNative(ctx, st.doc.Native)
	if err != nil {
		return Batch{}, err
	}
	if err := b.CancelBatch(ctx, st.doc.Native.Ref); err != nil {
		var pe *models.ProviderError
		if errors.As(err, &pe) && pe.Status >= 400 && pe.Status < 500 {
			return Batch{}, api.Conflict("%s refused to cancel the batch: %s", st.doc.Native.Provider, pe.Message)
		}
		return Batch{}, fmt.Errorf("batches: cancel native %s: %w", st.doc.ID, err)
	}
	now := s.now()
	st, err = s.change(ctx, st.doc.ID, func(st *state) (bool, error) {
		if terminal(st.status) || st.status == StatusCancelling {
			return false, nil
		}
		st.status = StatusCancelling
		st.doc.Cancelling = now.UnixNano()
		return true, nil
	})
	if err != nil {
		return Batch{}, err
	}
	return st.object(), nil
}

// getNative refreshes an open native batch whose last poll is older than
// RefreshAfter; a failed refresh answers the batch as last mirrored.
func (s *Service) getNative(ctx context.Context, st *state) *state {
	if s.native == nil || terminal(st.status) || s.now().Sub(time.Unix(0, st.doc.Native.Polled)) < s.native.RefreshAfter {
		return st
	}
	cur, err := s.refreshNative(ctx, st)
	if err != nil {
		slog.WarnContext(ctx, "batches: native batch not refreshed", "batch", st.doc.ID, "error", err)
		return st
	}
	return cur
}
