// Package logging builds sluice's slog logger: text on a terminal, JSON
// otherwise, with the request id from the context on every record.
package logging

import (
	"context"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
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
	return slog.New(contextHandler{Handler: h, taken: builtinNames})
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
// WithAttrs) from the context to each record, and keeps every member name of
// a record unique (jq and CloudWatch keep only one of two): an attribute
// named like a built-in field ("message", "level", "timestamp") or like an
// attribute before it is renamed with a suffix (message_2), unless it repeats
// that attribute's value too, when it is dropped.
type contextHandler struct {
	slog.Handler
	// taken are the names used at the level where a record's attributes
	// land: the built-in fields and the logger's own attributes, or, inside
	// a group, that group's.
	taken []string
}

// builtinNames are the fields slog writes itself, under both formats' names:
// an attribute "msg" would become a second "message" in JSON (renameForLambda).
var builtinNames = []string{slog.TimeKey, slog.LevelKey, slog.MessageKey, slog.SourceKey, "timestamp", "message"}

type attrsKey struct{}

// WithAttrs returns ctx whose log records carry attrs (e.g. Lambda's request id).
func WithAttrs(ctx context.Context, attrs ...slog.Attr) context.Context {
	prev, _ := ctx.Value(attrsKey{}).([]slog.Attr)
	return context.WithValue(ctx, attrsKey{}, append(prev[:len(prev):len(prev)], attrs...))
}

func (h contextHandler) Handle(ctx context.Context, r slog.Record) error {
	attrs := make([]slog.Attr, 0, r.NumAttrs()+2)
	r.Attrs(func(a slog.Attr) bool {
		attrs = append(attrs, a)
		return true
	})
	if id := api.RequestID(ctx); id != "" {
		attrs = append(attrs, slog.String("request_id", id))
	}
	if extra, ok := ctx.Value(attrsKey{}).([]slog.Attr); ok {
		attrs = append(attrs, extra...)
	}
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	out.AddAttrs(unique(attrs, h.taken)...)
	return h.Handler.Handle(ctx, out)
}

func (h contextHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	attrs = unique(attrs, h.taken)
	taken := slices.Clip(h.taken)
	for _, a := range attrs {
		taken = append(taken, a.Key)
	}
	return contextHandler{h.Handler.WithAttrs(attrs), taken}
}

func (h contextHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return contextHandler{Handler: h.Handler.WithGroup(freeName(name, h.taken))}
}

// unique returns attrs with every name distinct from taken and from each
// other, at this level and inside groups. Values are resolved first (a
// LogValuer may be a group); a group without a name is inlined, as slog
// would, and an attribute without a name dropped, as slog would.
func unique(attrs []slog.Attr, taken []string) []slog.Attr {
	out := make([]slog.Attr, 0, len(attrs))
	var seen []slog.Attr // attributes kept, to compare a repeated name's value
	var add func(a slog.Attr)
	add = func(a slog.Attr) {
		a.Value = a.Value.Resolve()
		if a.Value.Kind() == slog.KindGroup {
			group := a.Value.Group()
			if a.Key == "" {
				for _, g := range group {
					add(g)
				}
				return
			}
			a.Value = slog.GroupValue(unique(group, nil)...)
		} else if a.Key == "" {
			return
		}
		if slices.ContainsFunc(seen, func(s slog.Attr) bool { return s.Key == a.Key && sameScalar(s.Value, a.Value) }) {
			return
		}
		a.Key = freeName(a.Key, taken)
		taken = append(slices.Clip(taken), a.Key)
		seen = append(seen, a)
		out = append(out, a)
	}
	for _, a := range attrs {
		add(a)
	}
	return out
}

// sameScalar reports whether two values are equal scalars (Value.Equal
// panics on values of incomparable dynamic types, so groups and arbitrary
// values count as different).
func sameScalar(a, b slog.Value) bool {
	switch a.Kind() {
	case slog.KindAny, slog.KindGroup, slog.KindLogValuer:
		return false
	}
	return a.Equal(b)
}

// freeName returns name, or name_2, name_3, … if name is taken.
func freeName(name string, taken []string) string {
	if !slices.Contains(taken, name) {
		return name
	}
	for n := 2; ; n++ {
		if c := name + "_" + strconv.Itoa(n); !slices.Contains(taken, c) {
			return c
		}
	}
}
