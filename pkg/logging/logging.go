// Package logging builds sluice's slog logger: text on a terminal, JSON
// otherwise, with the request id from the context on every record.
package logging

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/sluice-gateway/sluice/pkg/api"
)

// New returns a logger writing to w in format ("text", "json" or "auto":
// text when w is a terminal) at level ("debug", "info", "warn", "error").
func New(w io.Writer, format, level string) *slog.Logger {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(strings.ToUpper(level))); err != nil {
		lvl = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: lvl, ReplaceAttr: renameForLambda}
	if format == "" || format == "auto" {
		format = "json"
		if isTerminal(w) {
			format = "text"
		}
	}
	var h slog.Handler
	if format == "text" {
		h = slog.NewTextHandler(w, &slog.HandlerOptions{Level: lvl})
	} else {
		h = slog.NewJSONHandler(w, opts)
	}
	return slog.New(contextHandler{h})
}

// renameForLambda names the JSON fields as Lambda's JSON log format does
// (timestamp, level, message), so CloudWatch filters apply.
func renameForLambda(groups []string, a slog.Attr) slog.Attr {
	if len(groups) > 0 {
		return a
	}
	switch a.Key {
	case slog.TimeKey:
		a.Key = "timestamp"
	case slog.MessageKey:
		a.Key = "message"
	}
	return a
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// contextHandler adds the request id (and any attributes stored with
// WithAttrs) from the context to each record.
type contextHandler struct{ slog.Handler }

type attrsKey struct{}

// WithAttrs returns ctx whose log records carry attrs (e.g. Lambda's request id).
func WithAttrs(ctx context.Context, attrs ...slog.Attr) context.Context {
	prev, _ := ctx.Value(attrsKey{}).([]slog.Attr)
	return context.WithValue(ctx, attrsKey{}, append(prev[:len(prev):len(prev)], attrs...))
}

func (h contextHandler) Handle(ctx context.Context, r slog.Record) error {
	if id := api.RequestID(ctx); id != "" {
		r.AddAttrs(slog.String("request_id", id))
	}
	if attrs, ok := ctx.Value(attrsKey{}).([]slog.Attr); ok {
		r.AddAttrs(attrs...)
	}
	return h.Handler.Handle(ctx, r)
}

func (h contextHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return contextHandler{h.Handler.WithAttrs(attrs)}
}

func (h contextHandler) WithGroup(name string) slog.Handler {
	return contextHandler{h.Handler.WithGroup(name)}
}
