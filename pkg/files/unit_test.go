package files

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/store/local"
)

func TestParseRange(t *testing.T) {
	const size = 100
	for _, tc := range []struct {
		h                      string
		start, length          int64
		partial, unsatisfiable bool
	}{
		{h: "bytes=0-9", start: 0, length: 10, partial: true},
		{h: "bytes=10-", start: 10, length: 90, partial: true},
		{h: "bytes=-10", start: 90, length: 10, partial: true},
		{h: "bytes=-1000", start: 0, length: 100, partial: true},
		{h: "bytes=95-1000", start: 95, length: 5, partial: true},
		{h: "bytes=99-99", start: 99, length: 1, partial: true},
		{h: "BYTES = 5 - 6", start: 5, length: 2, partial: true},
		{h: "bytes=100-", unsatisfiable: true},
		{h: "bytes=100-200", unsatisfiable: true},
		{h: "bytes=-0", unsatisfiable: true},
		{h: "bytes=99999999999999999999999-", unsatisfiable: true},
		// Ignored: the whole file is served.
		{h: "bytes=5-1", length: size},
		{h: "bytes=0-1,5-6", length: size},
		{h: "items=0-1", length: size},
		{h: "bytes=a-b", length: size},
		{h: "bytes=-", length: size},
		{h: "bytes=+1-2", length: size},
		{h: "bytes", length: size},
	} {
		start, length, partial, ok := parseRange(tc.h, size)
		if ok == tc.unsatisfiable || (ok && (start != tc.start || length != tc.length || partial != tc.partial)) {
			t.Errorf("parseRange(%q) = %d, %d, partial %v, satisfiable %v; want %d, %d, %v, %v",
				tc.h, start, length, partial, ok, tc.start, tc.length, tc.partial, !tc.unsatisfiable)
		}
	}
}

func FuzzParseRange(f *testing.F) {
	for _, s := range []string{"bytes=0-9", "bytes=-5", "bytes=3-", "bytes=1-2,3-4", "bytes=9-1", "x"} {
		f.Add(s, int64(10))
	}
	f.Fuzz(func(t *testing.T, h string, size int64) {
		if size <= 0 {
			return
		}
		start, length, partial, ok := parseRange(h, size)
		if !ok {
			return
		}
		if start < 0 || length <= 0 || start+length > size || (!partial && (start != 0 || length != size)) {
			t.Fatalf("parseRange(%q, %d) = %d, %d, %v: outside the file", h, size, start, length, partial)
		}
	})
}

// manifestFixture stores parts in a local blob store and returns a file over
// them and its whole content.
func manifestFixture(t *testing.T, sizes ...int) (*Service, Stored, []byte) {
	t.Helper()
	blobs, err := local.NewBlobs(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s := NewService(nil, blobs, Options{})
	f := Stored{File: File{ID: "file-x"}}
	var all []byte
	for i, n := range sizes {
		data := bytes.Repeat([]byte{byte('a' + i)}, n)
		for j := range data {
			data[j] += byte(j % 3)
		}
		key := fmt.Sprintf("p/%d", i)
		if _, err := blobs.Put(context.Background(), key, bytes.NewReader(data)); err != nil {
			t.Fatal(err)
		}
		f.Parts = append(f.Parts, Part{Key: key, Size: int64(n)})
		f.Bytes += int64(n)
		all = append(all, data...)
	}
	return s, f, all
}

func TestOpenStreamsAcrossParts(t *testing.T) {
	s, f, all := manifestFixture(t, 1, 5, 1, 1, 7, 3)
	ctx := context.Background()
	for off := int64(0); off <= f.Bytes; off++ {
		for n := int64(-1); off+n <= f.Bytes; n++ {
			rc, err := s.Open(ctx, f, off, n)
			if err != nil {
				t.Fatalf("Open(%d, %d): %v", off, n, err)
			}
			got, err := io.ReadAll(iotestOneByte(rc))
			rc.Close()
			want := all[off:]
			if n >= 0 {
				want = all[off : off+n]
			}
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("Open(%d, %d) read %q, %v; want %q", off, n, got, err, want)
			}
		}
	}
}

// iotestOneByte reads one byte at a time, to cross part boundaries in every way.
func iotestOneByte(r io.Reader) io.Reader {
	return readerFunc(func(p []byte) (int, error) {
		if len(p) == 0 {
			return 0, nil
		}
		return r.Read(p[:1])
	})
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

func TestOpenReportsMissingAndShortParts(t *testing.T) {
	s, f, _ := manifestFixture(t, 4, 4)
	ctx := context.Background()
	missing := f
	missing.Parts = append([]Part{{Key: "gone", Size: 2}}, f.Parts...)
	missing.Bytes += 2
	if _, err := s.Open(ctx, missing, 0, -1); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("Open over a missing first part = %v", err)
	}
	short := f
	short.Parts = []Part{{Key: f.Parts[0].Key, Size: 6}, f.Parts[1]}
	short.Bytes = 10
	rc, err := s.Open(ctx, short, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if _, err := io.ReadAll(rc); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("reading a part shorter than its manifest entry: %v; want ErrUnexpectedEOF", err)
	}
}

// formBody builds a multipart body with boundary "B" from name/value pairs;
// a name starting with "@" is a file part.
func formBody(pairs ...string) []byte {
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	mw.SetBoundary("B")
	for i := 0; i+1 < len(pairs); i += 2 {
		name, value := pairs[i], pairs[i+1]
		if file, ok := strings.CutPrefix(name, "@"); ok {
			w, _ := mw.CreateFormFile(file, "input.jsonl")
			w.Write([]byte(value))
			continue
		}
		mw.WriteField(name, value)
	}
	mw.Close()
	return b.Bytes()
}

func TestReadForm(t *testing.T) {
	known := []string{"purpose", "expires_after[seconds]"}
	for _, tc := range []struct {
		name       string
		body       []byte
		fields     map[string]string
		beforeFile map[string]string // fields onFile saw
		file       string
		status     int
		param      string
	}{
		{name: "purpose first", body: formBody("purpose", "batch", "@file", "abc"), fields: map[string]string{"purpose": "batch"}, beforeFile: map[string]string{"purpose": "batch"}, file: "abc"},
		{name: "file first", body: formBody("@file", "abc", "purpose", "batch"), fields: map[string]string{"purpose": "batch"}, beforeFile: map[string]string{}, file: "abc"},
		{name: "unknown fields ignored", body: formBody("x", "1", "purpose", "p", "@other", "zzz", "@file", "f"), fields: map[string]string{"purpose": "p"}, beforeFile: map[string]string{"purpose": "p"}, file: "f"},
		{name: "no file", body: formBody("purpose", "batch"), fields: map[string]string{"purpose": "batch"}},
		{name: "two files", body: formBody("@file", "a", "@file", "b"), status: 400, param: "file"},
		{name: "repeated field", body: formBody("purpose", "a", "purpose", "b"), status: 400, param: "purpose"},
		{name: "oversized field", body: formBody("purpose", strings.Repeat("x", maxFieldBytes+1)), status: 400, param: "purpose"},
		{name: "truncated", body: formBody("purpose", "batch", "@file", "abc")[:60], status: 400},
		{name: "not multipart at all", body: []byte("hello"), status: 400},
		{name: "too many parts", body: formBody(strings.Split(strings.Repeat("a,b,", maxFormParts+1), ",")...), status: 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var file string
			var before map[string]string
			fields, sawFile, err := readForm(multipart.NewReader(bytes.NewReader(tc.body), "B"), "file", known,
				func(fields map[string]string, ff formFile) error {
					before = clone(fields)
					b, err := io.ReadAll(ff.Body)
					file = string(b)
					return err
				})
			if tc.status != 0 {
				e := api.AsError(err)
				if err == nil || e.Status != tc.status || e.Param != tc.param {
					t.Fatalf("err = %v; want %d param %q", err, tc.status, tc.param)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(fields) != fmt.Sprint(tc.fields) || sawFile != (tc.file != "") || file != tc.file || fmt.Sprint(before) != fmt.Sprint(tc.beforeFile) {
				t.Errorf("fields %v sawFile %v file %q before %v", fields, sawFile, file, before)
			}
		})
	}
}

func clone(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func FuzzReadForm(f *testing.F) {
	f.Add(formBody("purpose", "batch", "@file", "abc"))
	f.Add(formBody("@file", "{}\n", "purpose", "batch", "expires_after[seconds]", "3600"))
	f.Add(formBody("@file", "a", "@file", "b"))
	f.Add([]byte("--B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a\"\r\n\r\nxx\r\n--B--"))
	f.Add([]byte("--B\r\nContent-Disposition: form-data; name=purpose\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\nba=\r\ntch\r\n--B--\r\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		known := []string{"purpose", "expires_after[seconds]"}
		var fileBytes []byte
		fields, sawFile, err := readForm(multipart.NewReader(bytes.NewReader(body), "B"), "file", known,
			func(_ map[string]string, ff formFile) error {
				var err error
				fileBytes, err = io.ReadAll(ff.Body)
				return err
			})
		if err != nil {
			// Whatever a client sends is the client's mistake: a 4xx with a message.
			e := api.AsError(err)
			if e.Status != http.StatusBadRequest || e.Message == "" {
				t.Fatalf("body %q: error %v is not a clear 400", body, err)
			}
			return
		}
		for name, v := range fields {
			if len(v) > maxFieldBytes {
				t.Fatalf("field %s holds %d bytes, over the limit", name, len(v))
			}
		}
		// What the streaming reader saw must be what the standard (buffering)
		// reader sees.
		form, stdErr := multipart.NewReader(bytes.NewReader(body), "B").ReadForm(1 << 20)
		if stdErr != nil {
			return
		}
		defer form.RemoveAll()
		for _, name := range known {
			if vs := form.Value[name]; len(vs) == 1 && fields[name] != vs[0] {
				t.Fatalf("field %s = %q, standard reader %q", name, fields[name], vs[0])
			}
		}
		if fhs := form.File["file"]; len(fhs) == 1 && sawFile {
			fh, _ := fhs[0].Open()
			want, _ := io.ReadAll(fh)
			fh.Close()
			if !bytes.Equal(fileBytes, want) {
				t.Fatalf("file part = %q, standard reader %q", fileBytes, want)
			}
		}
	})
}
