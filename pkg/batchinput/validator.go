package batchinput

import (
	"bytes"
	"errors"
	"fmt"
	"io"
)

// ErrNoRequests is a file without a single request line.
var ErrNoRequests = errors.New("the file holds no request lines")

// utf8BOM is skipped at the start of a file: some editors write one, and it
// is not part of the first line's JSON.
var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// Options configure a Validator. Zero values take the package defaults.
type Options struct {
	MaxLines     int   // default MaxLines
	MaxBytes     int64 // default MaxBytes
	MaxLineBytes int   // default DefaultMaxLineBytes
	// KeepGoing makes Write swallow the first error (reported by Err and
	// Close) instead of returning it, so a stream teed into the validator
	// goes on while the caller does not yet know whether the rules apply.
	// After the first error the validator only counts bytes.
	KeepGoing bool
	// OnLine, if set, is called with every valid request line in order. An
	// error it returns stops validation and is returned as is.
	OnLine func(Line) error
}

// Validator checks an input file as it is written to it, line by line, in
// memory bounded by MaxLineBytes whatever the file's size. Lines are
// terminated by "\n" (a CR before it is dropped). Whitespace-only lines are
// an error unless nothing but whitespace follows them (trailing blank lines
// are forgiven). Use it as the writer side of an io.TeeReader, or call
// Validate.
type Validator struct {
	opts    Options
	partial []byte // the current line's bytes seen so far
	off     int64  // bytes written so far
	start   int64  // offset of the current line's first byte
	number  int    // physical number of the current line
	blank   int    // first blank line since the last request line, 0 if none
	lines   int    // request lines seen
	err     error
	closed  bool
}

// NewValidator returns a validator for one file.
func NewValidator(opts Options) *Validator {
	if opts.MaxLines <= 0 {
		opts.MaxLines = MaxLines
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = MaxBytes
	}
	if opts.MaxLineBytes <= 0 {
		opts.MaxLineBytes = DefaultMaxLineBytes
	}
	return &Validator{opts: opts, number: 1}
}

// Validate reads r to the end through a new validator and returns the number
// of request lines and the first error: a *LineError, a *LimitError, an
// error from OnLine, or r's read error.
func Validate(r io.Reader, opts Options) (int, error) {
	opts.KeepGoing = false
	v := NewValidator(opts)
	if _, err := io.Copy(v, r); err != nil {
		return v.lines, err
	}
	return v.lines, v.Close()
}

// Lines returns the number of request lines validated so far.
func (v *Validator) Lines() int { return v.lines }

// Err returns the first error found so far.
func (v *Validator) Err() error { return v.err }

// Write validates every line p completes and keeps the rest for the next
// call. Without KeepGoing it returns the first error found.
func (v *Validator) Write(p []byte) (int, error) {
	n := len(p)
	if v.closed {
		return 0, fmt.Errorf("batchinput: write after Close")
	}
	if v.err != nil {
		return v.result(n)
	}
	v.off += int64(n)
	if v.off > v.opts.MaxBytes {
		v.err = &LimitError{Limit: LimitBytes, Max: v.opts.MaxBytes}
		return v.result(n)
	}
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if len(v.partial)+len(p) > v.opts.MaxLineBytes {
				v.err = &LineError{Line: v.number, Reason: fmt.Sprintf("the line is longer than %d bytes", v.opts.MaxLineBytes)}
				return v.result(n)
			}
			v.partial = append(v.partial, p...)
			break
		}
		if len(v.partial)+i > v.opts.MaxLineBytes {
			v.err = &LineError{Line: v.number, Reason: fmt.Sprintf("the line is longer than %d bytes", v.opts.MaxLineBytes)}
			return v.result(n)
		}
		line := p[:i]
		if len(v.partial) > 0 {
			v.partial = append(v.partial, line...)
			line = v.partial
		}
		end := v.start + int64(len(line)) + 1
		if err := v.line(line, end); err != nil {
			v.err = err
			return v.result(n)
		}
		v.partial = v.partial[:0]
		v.start = end
		v.number++
		p = p[i+1:]
	}
	return n, nil
}

// Close validates the last line if the file does not end with a newline and
// returns the first error found, if any. A file without a single request
// line is ErrNoRequests.
func (v *Validator) Close() error {
	if v.closed {
		return v.err
	}
	v.closed = true
	if v.err == nil && len(v.partial) > 0 {
		if err := v.line(v.partial, v.start+int64(len(v.partial))); err != nil {
			v.err = err
		}
	}
	if v.err == nil && v.lines == 0 {
		v.err = ErrNoRequests
	}
	v.partial = nil
	return v.err
}

func (v *Validator) result(n int) (int, error) {
	if v.opts.KeepGoing {
		return n, nil
	}
	return 0, v.err
}

// line checks one complete line ending at end (terminator included).
func (v *Validator) line(raw []byte, end int64) error {
	if v.start == 0 {
		raw = bytes.TrimPrefix(raw, utf8BOM)
	}
	raw = bytes.TrimSuffix(raw, []byte{'\r'})
	if firstNonSpace(raw) < 0 {
		if v.blank == 0 {
			v.blank = v.number
		}
		return nil
	}
	if v.blank != 0 {
		return &LineError{Line: v.blank, Reason: "the line is empty; every line must be a JSON object"}
	}
	if v.lines == v.opts.MaxLines {
		return &LimitError{Limit: LimitLines, Max: int64(v.opts.MaxLines)}
	}
	l := Line{Number: v.number, Offset: v.start, End: end, Raw: raw}
	if reason := parseLine(raw, &l); reason != "" {
		return &LineError{Line: v.number, Reason: reason}
	}
	v.lines++
	if v.opts.OnLine != nil {
		return v.opts.OnLine(l)
	}
	return nil
}
