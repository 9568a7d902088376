package files

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/store"
	"github.com/sluice-gateway/sluice/pkg/store/local"
)

// newTestService runs the service on the embedded backend and returns the
// directory its blobs live in.
func newTestService(t *testing.T, opts Options) (*Service, *store.Backend, string) {
	t.Helper()
	dir := t.TempDir()
	b, err := local.Open(dir, local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return NewService(b.Records, b.Blobs, opts), b, filepath.Join(dir, "blobs", "objects")
}

// objects lists the blob objects stored under root.
func objects(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out = append(out, p)
		}
		return nil
	})
	return out
}

func serve(h func(http.ResponseWriter, *http.Request) error, p auth.Principal, req *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	req = req.WithContext(auth.WithPrincipal(req.Context(), p))
	if err := h(w, req); err != nil {
		api.WriteError(w, req, err)
	}
	return w
}

func uploadRequest(t *testing.T, pairs ...string) *http.Request {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	for i := 0; i+1 < len(pairs); i += 2 {
		if name, ok := strings.CutPrefix(pairs[i], "@"); ok {
			w, _ := mw.CreateFormFile(name, "f.jsonl")
			w.Write([]byte(pairs[i+1]))
			continue
		}
		mw.WriteField(pairs[i], pairs[i+1])
	}
	mw.Close()
	r := httptest.NewRequest("POST", "/v1/files", &b)
	r.Header.Set("Content-Type", mw.FormDataContentType())
	return r
}

// Every refused upload leaves no object behind, whether the refusal came
// while the file streamed or after it was stored.
func TestRefusedUploadsStoreNothing(t *testing.T) {
	s, _, root := newTestService(t, Options{MaxFileSize: 4096})
	p := auth.Principal{TeamID: "t1"}
	good := `{"custom_id":"a","method":"POST","url":"/v1/embeddings","body":{}}` + "\n"
	bad := good + `{"custom_id":"b","method":"POST","url":"/v1/embeddings"}` + "\n"
	for _, tc := range []struct {
		name   string
		pairs  []string
		status int
	}{
		{"bad line, purpose first", []string{"purpose", "batch", "@file", bad}, 400},
		{"bad line, purpose after", []string{"@file", bad, "purpose", "batch"}, 400},
		{"bad last line without newline", []string{"purpose", "batch", "@file", strings.TrimSuffix(bad, "\n")}, 400},
		{"too large, purpose first", []string{"purpose", "user_data", "@file", strings.Repeat("x", 5000)}, 413},
		{"too large, purpose after", []string{"@file", strings.Repeat("x", 5000), "purpose", "user_data"}, 413},
		{"missing purpose", []string{"@file", good}, 400},
		{"bad purpose after the file", []string{"@file", good, "purpose", "nope"}, 400},
		{"bad expiry after the file", []string{"@file", good, "purpose", "batch", "expires_after[seconds]", "5"}, 400},
		{"blank batch file", []string{"purpose", "batch", "@file", "\n\n"}, 400},
	} {
		w := serve(Handlers{Service: s}.Upload, p, uploadRequest(t, tc.pairs...))
		if w.Code != tc.status {
			t.Errorf("%s: %d %s; want %d", tc.name, w.Code, w.Body, tc.status)
		}
		if left := objects(t, root); len(left) != 0 {
			t.Errorf("%s: objects left behind: %v", tc.name, left)
		}
	}
	w := serve(Handlers{Service: s}.Upload, p, uploadRequest(t, "@file", good, "purpose", "batch"))
	if w.Code != 200 || len(objects(t, root)) != 1 {
		t.Fatalf("a good upload: %d %s, %d objects", w.Code, w.Body, len(objects(t, root)))
	}
}

type busyBatches map[string]string

func (b busyBatches) InUse(_ context.Context, fileID string) (string, error) { return b[fileID], nil }

func TestDeleteRefusesInputOfRunningBatch(t *testing.T) {
	busy := busyBatches{}
	s, _, _ := newTestService(t, Options{Batches: busy})
	ctx := context.Background()
	p := auth.Principal{TeamID: "t1"}
	if _, err := s.blobs.Put(ctx, "k", strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	f, err := s.Create(ctx, NewFile{Team: "t1", Filename: "in.jsonl", Purpose: PurposeBatch, Parts: []Part{{Key: "k", Size: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	busy[f.ID] = "batch_abc"
	err = s.Delete(ctx, p, f.ID)
	if e := api.AsError(err); e.Status != http.StatusConflict || !strings.Contains(e.Message, "batch_abc") {
		t.Fatalf("Delete = %v; want 409 naming the batch", err)
	}
	if _, err := s.Get(ctx, p, f.ID); err != nil {
		t.Fatalf("a refused delete removed the file: %v", err)
	}
	delete(busy, f.ID)
	if err := s.Delete(ctx, p, f.ID); err != nil {
		t.Fatal(err)
	}
}

// failingDeletes makes blob deletes fail, as an interrupted delete would.
type failingDeletes struct{ store.Blobs }

func (failingDeletes) Delete(context.Context, string) error { return errors.New("disk unplugged") }

func TestSweepFinishesAnInterruptedDelete(t *testing.T) {
	s, b, _ := newTestService(t, Options{})
	ctx := context.Background()
	p := auth.Principal{TeamID: "t1"}
	if _, err := b.Blobs.Put(ctx, "k", strings.NewReader("abc")); err != nil {
		t.Fatal(err)
	}
	f, err := s.Create(ctx, NewFile{Team: "t1", Filename: "a", Purpose: "user_data", Parts: []Part{{Key: "k", Size: 3}}})
	if err != nil {
		t.Fatal(err)
	}
	s.blobs = failingDeletes{b.Blobs}
	if err := s.Delete(ctx, p, f.ID); err != nil {
		t.Fatalf("the client's delete must succeed even if the bytes stay for the sweep: %v", err)
	}
	if _, err := s.Get(ctx, p, f.ID); api.AsError(err).Status != 404 {
		t.Fatalf("Get after delete = %v", err)
	}
	if page, _, _ := s.List(ctx, p, ListParams{Limit: 10, Desc: true}); len(page) != 0 {
		t.Fatalf("a deleted file is listed: %v", page)
	}
	if _, err := b.Blobs.Size(ctx, "k"); err != nil {
		t.Fatalf("the failed delete should have left the bytes: %v", err)
	}
	res, err := s.Sweep(ctx)
	if err == nil || res.Failed != 1 {
		t.Fatalf("sweep with deletes failing = %+v, %v", res, err)
	}
	s.blobs = b.Blobs
	res, err = s.Sweep(ctx)
	if err != nil || res.Files != 1 {
		t.Fatalf("sweep = %+v, %v", res, err)
	}
	if _, err := b.Blobs.Size(ctx, "k"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("bytes remain after the sweep: %v", err)
	}
	if _, err := b.Records.Get(ctx, fileKey(f.ID)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("record remains after the sweep: %v", err)
	}
}

func TestSweepLeavesWhatIsNotDue(t *testing.T) {
	now := time.Now()
	s, b, _ := newTestService(t, Options{Now: func() time.Time { return now }})
	ctx := context.Background()
	if _, err := b.Blobs.Put(ctx, "k", strings.NewReader("abc")); err != nil {
		t.Fatal(err)
	}
	f, err := s.Create(ctx, NewFile{Team: "t1", Filename: "a", Purpose: "batch", Parts: []Part{{Key: "k", Size: 3}}, ExpiresAfter: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := s.Sweep(ctx); err != nil || res != (SweepResult{}) {
		t.Fatalf("sweep before expiry = %+v, %v", res, err)
	}
	now = now.Add(time.Hour) // expiry is inclusive: at expires_at the file is gone
	if _, err := s.Get(ctx, auth.Principal{TeamID: "t1"}, f.ID); api.AsError(err).Status != 404 {
		t.Fatalf("Get at expires_at = %v", err)
	}
	if res, err := s.Sweep(ctx); err != nil || res.Files != 1 {
		t.Fatalf("sweep at expiry = %+v, %v", res, err)
	}
}

// Parts the form reader ignores still count against the body limit.
func TestIgnoredPartsAreBounded(t *testing.T) {
	s, _, root := newTestService(t, Options{MaxFileSize: 1000})
	req := uploadRequest(t, "purpose", "user_data", "padding", strings.Repeat("x", formOverhead+2000), "@file", "abc")
	w := serve(Handlers{Service: s}.Upload, auth.Principal{TeamID: "t1"}, req)
	if w.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("an oversized ignored part: %d %s; want 413", w.Code, w.Body)
	}
	if left := objects(t, root); len(left) != 0 {
		t.Errorf("objects left behind: %v", left)
	}
}

// The service is usable without HTTP: the batch engine's way in.
func TestServiceUploadsWithoutHTTP(t *testing.T) {
	s, _, root := newTestService(t, Options{})
	ctx := context.Background()
	p := auth.Principal{TeamID: "t1"}
	good := `{"custom_id":"a","method":"POST","url":"/v1/embeddings","body":{}}` + "\n"
	f, err := s.Upload(ctx, p, FileParams{Purpose: PurposeBatch}, Content{Filename: "in.jsonl", Body: strings.NewReader(good)})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, p, f.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := File{ID: f.ID, Object: "file", Bytes: int64(len(good)), CreatedAt: f.CreatedAt, Filename: "in.jsonl",
		Purpose: PurposeBatch, Status: "processed", ExpiresAt: f.ExpiresAt}
	if diff := cmp.Diff(want, got.File); diff != "" || f.ExpiresAt == nil || *f.ExpiresAt != f.CreatedAt+int64(DefaultBatchExpiry/time.Second) {
		t.Errorf("file (-want +got):\n%s", diff)
	}
	rc, err := s.Open(ctx, got, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if string(b) != good {
		t.Errorf("content %q", b)
	}

	// Parameters are checked before any byte is read.
	_, err = s.Upload(ctx, p, FileParams{Purpose: "user_data", ExpiresAfter: time.Minute}, Content{Body: strings.NewReader("x")})
	if e := api.AsError(err); e.Status != 400 || e.Param != "expires_after[seconds]" {
		t.Errorf("a one-minute expiry: %v", err)
	}
	// Staged without a purpose, the batch verdict waits for Commit.
	st, err := s.Stage(ctx, p, "", Content{Body: strings.NewReader("not json\n")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Commit(ctx, FileParams{Purpose: PurposeBatch}); api.AsError(err).Status != 400 {
		t.Errorf("a bad batch file committed: %v", err)
	}
	if left := objects(t, root); len(left) != 1 {
		t.Errorf("objects: %v; want only the first file's", left)
	}
	// The same bytes are a fine user_data file.
	st, err = s.Stage(ctx, p, "", Content{Body: strings.NewReader("not json\n")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Commit(ctx, FileParams{Purpose: "user_data"}); err != nil {
		t.Errorf("commit as user_data: %v", err)
	}
	// Discard removes what was staged.
	st, err = s.Stage(ctx, p, "user_data", Content{Body: strings.NewReader("gone")})
	if err != nil {
		t.Fatal(err)
	}
	st.Discard(ctx)
	if left := objects(t, root); len(left) != 2 {
		t.Errorf("objects after Discard: %v; want two", left)
	}
}

// A parts form that goes bad after its data part leaves no part behind,
// and the upload's room is given back.
func TestBadPartFormLeavesNothing(t *testing.T) {
	s, _, root := newTestService(t, Options{})
	ctx := context.Background()
	p := auth.Principal{TeamID: "t1"}
	u, err := s.CreateUpload(ctx, p, NewUpload{Filename: "a.txt", Purpose: "user_data", Bytes: 4, MimeType: "text/plain"})
	if err != nil {
		t.Fatal(err)
	}
	h := Handlers{Service: s}
	post := func(pairs ...string) *httptest.ResponseRecorder {
		req := uploadRequest(t, pairs...)
		req.URL.Path = "/v1/uploads/" + u.ID + "/parts"
		req.SetPathValue("upload_id", u.ID)
		return serve(h.AddPart, p, req)
	}
	if w := post("@data", "abcd", "@data", "efgh"); w.Code != 400 {
		t.Fatalf("two data parts: %d %s", w.Code, w.Body)
	}
	if left := objects(t, root); len(left) != 0 {
		t.Fatalf("objects after a refused form: %v", left)
	}
	if w := post("@data", "abcd"); w.Code != 200 {
		t.Fatalf("the whole declared size after a refused form: %d %s", w.Code, w.Body)
	}
}

// reservingReader takes room for every byte before handing it on, exactly,
// and a refusal stops the stream before the refused bytes pass.
func TestReservingReaderTakesBeforeHandingOn(t *testing.T) {
	for _, tc := range []struct {
		name   string
		size   int
		limit  int64
		room   int64
		passed int64 // what passes before a refusal; the size without one
	}{
		{"one block", 1000, 1 << 30, 1 << 30, 1000},
		{"several blocks", 2*reserveStep + 5, 1 << 30, 1 << 30, 2*reserveStep + 5},
		{"block bounded by the limit", 100, 10, 1 << 30, 100},
		{"refused at the third block", 2*reserveStep + 5, 1 << 30, firstBlock + reserveStep + 1, firstBlock + reserveStep},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &countingBudget{room: tc.room}
			q := newReservingReader(context.Background(), strings.NewReader(strings.Repeat("x", tc.size)), b, tc.limit)
			var passed int64
			buf := make([]byte, 7000)
			var err error
			for {
				var n int
				n, err = q.Read(buf)
				passed += int64(n)
				if passed > b.taken {
					t.Fatalf("%d bytes handed on, %d taken", passed, b.taken)
				}
				if err != nil {
					break
				}
			}
			if wantErr := map[bool]error{true: errNoRoom, false: io.EOF}[tc.room < int64(tc.size)]; err != wantErr {
				t.Fatalf("err = %v; want %v", err, wantErr)
			}
			if passed != tc.passed || b.taken != tc.passed {
				t.Errorf("passed %d, taken %d; want %d each", passed, b.taken, tc.passed)
			}
			if most := min(reserveStep, tc.limit); b.biggest > most {
				t.Errorf("a block of %d bytes; want at most %d", b.biggest, most)
			}
		})
	}
}

var errNoRoom = errors.New("no room")

type countingBudget struct{ room, taken, biggest int64 }

func (b *countingBudget) take(_ context.Context, n int64) error {
	if b.taken+n > b.room {
		return errNoRoom
	}
	b.taken += n
	b.biggest = max(b.biggest, n)
	return nil
}

func (b *countingBudget) release(context.Context) { b.taken = 0 }

// An upload streams: what it allocates does not grow with the file, quota
// reservation and batch validation included.
func TestUploadAllocationsDoNotGrowWithSize(t *testing.T) {
	s, _, _ := newTestService(t, Options{MaxFileSize: 1 << 30})
	ctx := context.Background()
	quota := int64(1 << 40)
	p := auth.Principal{TeamID: "t1", Team: &auth.Team{TeamID: "t1", MaxStorageBytes: &quota}}
	allocated := func(size int64) uint64 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if _, err := s.Upload(ctx, p, FileParams{Purpose: "user_data"}, Content{Body: io.LimitReader(rand.NewChaCha8([32]byte{1}), size)}); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	small, large := allocated(8<<20), allocated(128<<20)
	t.Logf("allocated %d KiB for 8 MiB, %d KiB for 128 MiB", small>>10, large>>10)
	if large > 3*small {
		t.Errorf("allocations grew with the file: %d bytes for 8 MiB, %d for 128 MiB", small, large)
	}
}
