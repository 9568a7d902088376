package files

import (
	"context"
	"errors"
	"io"
	"mime/multipart"
	"net/http"
	"slices"

	"github.com/sluice-gateway/sluice/pkg/api"
)

// Bounds on a multipart form, apart from the file itself.
const (
	// maxFieldBytes bounds one value field (purpose, expires_after[…], …).
	maxFieldBytes = 64 << 10
	// maxFormParts bounds the parts of one form, ignored ones included.
	maxFormParts = 100
)

// formFile is the file part of a form, handed over while it streams.
type formFile struct {
	Filename    string
	ContentType string
	Body        io.Reader
}

// readForm reads a multipart form one part at a time and never holds more
// than one value field in memory. Value fields named in known are collected
// (others are read past and ignored, as LiteLLM's extra fields are); the one
// part named fileField is handed to onFile together with the fields read so
// far, whichever order the parts come in, and onFile must stream it. A
// second file part, a repeated known field, an oversized field, too many
// parts or a malformed body is a 400.
func readForm(mr *multipart.Reader, fileField string, known []string, onFile func(fields map[string]string, f formFile) error) (fields map[string]string, sawFile bool, err error) {
	fields = map[string]string{}
	for n := 0; ; n++ {
		part, err := mr.NextPart()
		if err == io.EOF {
			return fields, sawFile, nil
		}
		if err != nil {
			return fields, sawFile, formError(err)
		}
		if n == maxFormParts {
			part.Close()
			return fields, sawFile, api.InvalidValue("", "The form has more than %d parts.", maxFormParts)
		}
		name := part.FormName()
		switch {
		case name == fileField:
			if sawFile {
				part.Close()
				return fields, sawFile, api.InvalidValue(fileField, "The form has more than one '%s' part; send one file per request.", fileField)
			}
			sawFile = true
			err = onFile(fields, formFile{Filename: part.FileName(), ContentType: part.Header.Get("Content-Type"), Body: partReader{part}})
		case slices.Contains(known, name):
			if _, dup := fields[name]; dup {
				err = api.InvalidValue(name, "The form field '%s' is given more than once.", name)
				break
			}
			var v string
			if v, err = readField(part, name); err == nil {
				fields[name] = v
			}
		default:
			// Unknown fields are read past by NextPart.
		}
		part.Close()
		if err != nil {
			return fields, sawFile, err
		}
	}
}

// readField reads a value field of at most maxFieldBytes.
func readField(part *multipart.Part, name string) (string, error) {
	b, err := io.ReadAll(io.LimitReader(part, maxFieldBytes+1))
	if err != nil {
		return "", formError(err)
	}
	if len(b) > maxFieldBytes {
		return "", api.InvalidValue(name, "The form field '%s' is longer than %d bytes.", name, maxFieldBytes)
	}
	return string(b), nil
}

// partReader turns a malformed-body error inside the file part into a 400,
// so that whatever streams the part reports the client's fault as such.
type partReader struct{ p *multipart.Part }

func (r partReader) Read(b []byte) (int, error) {
	n, err := r.p.Read(b)
	if err != nil && err != io.EOF {
		err = formError(err)
	}
	return n, err
}

// formError classifies an error from reading the multipart body: a body over
// the server's limit stays a 413 and a cancelled request stays itself;
// anything else means the body is not a well-formed form.
func formError(err error) error {
	var tooLarge *http.MaxBytesError
	var ae *api.Error
	switch {
	case errors.As(err, &tooLarge), errors.As(err, &ae), errors.Is(err, context.Canceled):
		return err
	case errors.Is(err, io.ErrUnexpectedEOF):
		return api.InvalidValue("", "The multipart body ends early: the request was cut short or its final boundary is missing.")
	}
	e := api.InvalidValue("", "The multipart body is malformed: %v.", err)
	e.Err = err
	return e
}
