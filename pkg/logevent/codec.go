package logevent

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/sluice-gateway/sluice/pkg/jsonscan"
)

// The event's JSON without reflection. Every model call of a team that
// logs is encoded once by the emitter and decoded once per delivery, so
// encoding/json's reflection — a good part of what a logging callback
// costs — is left to what is rare: members of types the generator does
// not know (model parameters), and any input the fast path does not
// recognize, which encoding/json then reads (it stays the reference: the
// fuzz and field tests hold the two to the same results).
//
// The appenders and readers (codec_gen.go) are generated from the structs
// of event.go, the schema's one source: a field added there is encoded
// after `go generate ./pkg/logevent` (TestGeneratedCodecIsCurrent fails
// until it is run). This file holds what they call.

//go:generate go run ./codecgen

// AppendMetadata appends md's JSON as encoding/json writes it (but for HTML
// escapes), for destinations that carry it without reflection.
func AppendMetadata(b []byte, md *Metadata) []byte { return appendMetadata(b, md) }

// AppendErrorInfo appends e's JSON as encoding/json writes it (but for HTML
// escapes).
func AppendErrorInfo(b []byte, e *ErrorInfo) []byte { return appendErrorInfo(b, e) }

// AppendPassthrough appends p's JSON as encoding/json writes it (but for
// HTML escapes).
func AppendPassthrough(b []byte, p *Passthrough) []byte { return appendPassthrough(b, p) }

// errSlowPath sends a document to encoding/json.
var errSlowPath = errors.New("logevent: not in the fast path's form")

// decodeEvent decodes one event: the fast path, else encoding/json.
func decodeEvent(doc []byte) (*Event, error) {
	ev := new(Event)
	if err := readEvent(doc, ev); err == nil {
		return ev, nil
	}
	ev = new(Event)
	if err := json.Unmarshal(doc, ev); err != nil {
		return nil, err
	}
	return ev, nil
}

var null = []byte("null")

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

func errNotFinite(field string) error {
	return fmt.Errorf("%s is not a finite number", field)
}

func str(v []byte, dst *string) error {
	s, ok := jsonscan.Unquote(v)
	if !ok {
		return errSlowPath
	}
	*dst = string(s)
	return nil
}

func boolean(v []byte, dst *bool) error {
	switch string(v) {
	case "true":
		*dst = true
	case "false":
		*dst = false
	default:
		return errSlowPath
	}
	return nil
}

func integer(v []byte, dst *int64) error {
	if !jsonscan.ValidNumber(v) {
		return errSlowPath
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return errSlowPath
	}
	*dst = n
	return nil
}

func integerInt(v []byte, dst *int) error {
	var n int64
	if err := integer(v, &n); err != nil || n != int64(int(n)) {
		return errSlowPath
	}
	*dst = int(n)
	return nil
}

func float(v []byte, dst *float64) error {
	if !jsonscan.ValidNumber(v) {
		return errSlowPath
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil {
		return errSlowPath
	}
	*dst = f
	return nil
}

// stringList reads an array of strings; null is a nil slice.
func stringList(v []byte, dst *[]string) error {
	if string(v) == "null" {
		*dst = nil
		return nil
	}
	list := []string{}
	err := jsonscan.Elements(v, func(e []byte) error {
		var s string
		if err := str(e, &s); err != nil {
			return err
		}
		list = append(list, s)
		return nil
	})
	*dst = list
	return err
}

// rawValue keeps a copy of a raw value, as json.RawMessage does.
func rawValue(v []byte, dst *json.RawMessage) error {
	if !jsonscan.Valid(v) {
		return errSlowPath
	}
	*dst = append(json.RawMessage(nil), v...)
	return nil
}
