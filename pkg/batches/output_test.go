package batches

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/store/local"
)

// An answer of any bytes, written in any pieces, with the line held in
// memory or streamed to the object, becomes at most one line of the
// object: one that ends with its only newline (or, refused after part of
// it was streamed, the writer says the object is lost). When the answer is
// a JSON object the line is OpenAI's output line wrapping it (its line
// breaks turned into spaces); when it is not an object the line is
// refused.
func FuzzLineWriter(f *testing.F) {
	for _, seed := range []string{`{"a":1}`, "{\r\n  \"a\": \"x\\ny\"\r\n}\n", `[1]`, `"s"`, ``, `{"a":"\u2028"}`, " { } ", `{"a":1}}`} {
		f.Add([]byte(seed), uint8(3), uint16(5))
	}
	b, err := local.Open(f.TempDir(), local.Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { b.Close() })
	s := NewService(Deps{}, Options{})
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, body []byte, piece uint8, inline uint16) {
		st := newStream(ctx, b.Blobs, "fuzz/line")
		w := s.newLineWriter(st, "cid-1", "req_1")
		w.limit = len(w.buf) + int(inline) // small limits stream the line
		for rest := body; len(rest) > 0; {
			n := min(len(rest), int(piece)+1)
			if _, err := w.Write(rest[:n]); err != nil {
				t.Fatal(err)
			}
			rest = rest[n:]
		}
		err := w.finish()
		if err != nil && w.spilled {
			st.abort(err) // part of the line is in the object: the run discards it
			return
		}
		part, cerr := st.close()
		if cerr != nil {
			t.Fatal(cerr)
		}
		var got []byte
		if part != nil {
			rc, err := b.Blobs.Get(ctx, part.Key, 0, -1)
			if err != nil {
				t.Fatal(err)
			}
			got, _ = io.ReadAll(rc)
			rc.Close()
		}
		if len(got) > 0 && (got[len(got)-1] != '\n' || bytes.Count(got, []byte{'\n'}) != 1 || bytes.IndexByte(got, '\r') >= 0) {
			t.Fatalf("%q: not one line: %q", body, got)
		}
		trimmed := bytes.TrimSpace(body)
		object := json.Valid(body) && len(trimmed) > 0 && trimmed[0] == '{'
		if !object && err == nil && (len(trimmed) == 0 || trimmed[0] != '{' || trimmed[len(trimmed)-1] != '}') {
			t.Fatalf("%q is not an object, yet it was written: %q", body, got)
		}
		if !object {
			return
		}
		if err != nil {
			t.Fatalf("%q: %v", body, err)
		}
		var line struct {
			ID       string `json:"id"`
			CustomID string `json:"custom_id"`
			Response struct {
				StatusCode int             `json:"status_code"`
				RequestID  string          `json:"request_id"`
				Body       json.RawMessage `json:"body"`
			} `json:"response"`
			Error *struct{} `json:"error"`
		}
		if err := json.Unmarshal(got, &line); err != nil {
			t.Fatalf("%q: the line %q is not JSON: %v", body, got, err)
		}
		var want, have bytes.Buffer
		json.Compact(&want, body)
		json.Compact(&have, line.Response.Body)
		if line.CustomID != "cid-1" || line.Response.StatusCode != 200 || line.Response.RequestID != "req_1" || line.Error != nil ||
			!bytes.Equal(want.Bytes(), have.Bytes()) {
			t.Fatalf("%q: line %q", body, got)
		}
	})
}
