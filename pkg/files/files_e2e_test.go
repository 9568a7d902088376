package files_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"mime/multipart"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/sluice-gateway/sluice/pkg/config"
	"github.com/sluice-gateway/sluice/pkg/files"
	"github.com/sluice-gateway/sluice/pkg/gateway/gatewaytest"
	"github.com/sluice-gateway/sluice/pkg/store"
)

// clock is a test clock the gateway reads concurrently; Advance moves it.
type clock struct{ offset atomic.Int64 }

func (c *clock) Now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *clock) Advance(d time.Duration) { c.offset.Add(int64(d)) }

func sdk(g *gatewaytest.Gateway, key string) openai.Client {
	return openai.NewClient(option.WithBaseURL(g.URL+"/v1/"), option.WithAPIKey(key),
		option.WithHTTPClient(g.Client), option.WithMaxRetries(0))
}

// apiErr is what a test checks of an OpenAI error: status, code and param
// exactly, and a part of the message.
type apiErr struct {
	Status      int
	Code, Param string
	Message     string // a substring, checked apart
}

// wantErr asserts err is the OpenAI error want.
func wantErr(t *testing.T, err error, want apiErr) {
	t.Helper()
	var e *openai.Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v; want an API error %d", err, want.Status)
	}
	checkErr(t, apiErr{Status: e.StatusCode, Code: e.Code, Param: e.Param, Message: e.Message}, want)
}

// wantStatus asserts err is an OpenAI error with status.
func wantStatus(t *testing.T, err error, status int) {
	t.Helper()
	var e *openai.Error
	if !errors.As(err, &e) || e.StatusCode != status {
		t.Fatalf("err = %v; want an API error %d", err, status)
	}
}

// responseErr reads an OpenAI error body.
func responseErr(t *testing.T, r gatewaytest.Response) apiErr {
	t.Helper()
	var body struct {
		Error struct {
			Message string  `json:"message"`
			Param   *string `json:"param"`
			Code    *string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil || body.Error.Message == "" {
		t.Fatalf("answer %d is not an OpenAI error: %s", r.Status, r.Body)
	}
	got := apiErr{Status: r.Status, Message: body.Error.Message}
	if body.Error.Code != nil {
		got.Code = *body.Error.Code
	}
	if body.Error.Param != nil {
		got.Param = *body.Error.Param
	}
	return got
}

func checkErr(t *testing.T, got, want apiErr) {
	t.Helper()
	if diff := cmp.Diff(want, got, cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".Message" }, cmp.Ignore())); diff != "" {
		t.Errorf("error (-want +got):\n%s\nmessage: %s", diff, got.Message)
	}
	if !strings.Contains(got.Message, want.Message) {
		t.Errorf("message %q does not contain %q", got.Message, want.Message)
	}
}

func batchLine(id, url string) string {
	return fmt.Sprintf(`{"custom_id":%q,"method":"POST","url":%q,"body":{"model":"text-embedding-3-small","input":"hello"}}`, id, url)
}

func upload(t *testing.T, c openai.Client, content, name string, purpose openai.FilePurpose) *openai.FileObject {
	t.Helper()
	f, err := c.Files.New(context.Background(), openai.FileNewParams{
		File: openai.File(strings.NewReader(content), name, "text/plain"), Purpose: purpose,
	})
	if err != nil {
		t.Fatalf("upload %s: %v", name, err)
	}
	return f
}

// fileObject reads a File object as sent.
func fileObject(t *testing.T, raw string) files.File {
	t.Helper()
	var f files.File
	if err := json.Unmarshal([]byte(raw), &f); err != nil {
		t.Fatalf("file object %s: %v", raw, err)
	}
	return f
}

func content(t *testing.T, c openai.Client, id string) []byte {
	t.Helper()
	resp, err := c.Files.Content(context.Background(), id)
	if err != nil {
		t.Fatalf("content %s: %v", id, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func listIDs(t *testing.T, c openai.Client) []string {
	t.Helper()
	var ids []string
	it := c.Files.ListAutoPaging(context.Background(), openai.FileListParams{})
	for it.Next() {
		ids = append(ids, it.Current().ID)
	}
	if it.Err() != nil {
		t.Fatal(it.Err())
	}
	return ids
}

// multipartBody builds a form from name/value pairs; "@name" makes a file part.
func multipartBody(pairs ...string) ([]byte, string) {
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	for i := 0; i+1 < len(pairs); i += 2 {
		if name, ok := strings.CutPrefix(pairs[i], "@"); ok {
			w, _ := mw.CreateFormFile(name, "upload.jsonl")
			w.Write([]byte(pairs[i+1]))
			continue
		}
		mw.WriteField(pairs[i], pairs[i+1])
	}
	mw.Close()
	return b.Bytes(), mw.FormDataContentType()
}

func postForm(g *gatewaytest.Gateway, path, key string, pairs ...string) gatewaytest.Response {
	body, ct := multipartBody(pairs...)
	return g.Do("POST", path, key, body, "Content-Type", ct)
}

func noSuchObject(t *testing.T, g *gatewaytest.Gateway, key string) {
	t.Helper()
	if _, err := g.Backend.Blobs.Size(context.Background(), key); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("object %s: %v; want it gone", key, err)
	}
}

func TestUploadRetrieveContentDelete(t *testing.T) {
	t.Parallel()
	gatewaytest.Run(t, gatewaytest.Options{}, func(t *testing.T, g *gatewaytest.Gateway) {
		ctx := context.Background()
		_, key := g.TeamKey()
		c := sdk(g, key)
		before := time.Now().Unix()
		f := upload(t, c, "hello, sluice\n", "notes.txt", openai.FilePurposeUserData)
		got := fileObject(t, f.RawJSON())
		want := files.File{ID: got.ID, Object: "file", Bytes: 14, CreatedAt: got.CreatedAt, Filename: "notes.txt", Purpose: "user_data", Status: "processed"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("file object (-want +got):\n%s", diff)
		}
		if !strings.HasPrefix(got.ID, "file-") || got.CreatedAt < before || got.CreatedAt > time.Now().Unix() {
			t.Errorf("id %q, created_at %d", got.ID, got.CreatedAt)
		}
		if !strings.Contains(f.RawJSON(), `"expires_at":null`) {
			t.Errorf("a user_data file without expires_after never expires: %s", f.RawJSON())
		}
		again, err := c.Files.Get(ctx, f.ID)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(got, fileObject(t, again.RawJSON())); diff != "" {
			t.Errorf("Get (-upload +get):\n%s", diff)
		}
		if b := content(t, c, f.ID); string(b) != "hello, sluice\n" {
			t.Errorf("content = %q", b)
		}
		resp := g.Do("GET", "/v1/files/"+f.ID+"/content", key, nil)
		headers := map[string]string{}
		for _, h := range []string{"Content-Type", "Content-Length", "Content-Disposition", "Accept-Ranges", "X-Content-Type-Options"} {
			headers[h] = resp.Header.Get(h)
		}
		wantHeaders := map[string]string{
			"Content-Type": "text/plain", "Content-Length": "14", "Content-Disposition": "attachment; filename=notes.txt",
			"Accept-Ranges": "bytes", "X-Content-Type-Options": "nosniff",
		}
		if diff := cmp.Diff(wantHeaders, headers); resp.Status != 200 || diff != "" {
			t.Errorf("content answer %d, headers (-want +got):\n%s", resp.Status, diff)
		}
		admin := sdk(g, g.MasterKey)
		if _, err := admin.Files.Get(ctx, f.ID); err != nil {
			t.Errorf("the admin sees every team's files: %v", err)
		}
		del, err := c.Files.Delete(ctx, f.ID)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(files.Deleted{ID: f.ID, Object: "file", Deleted: true}, files.Deleted{ID: del.ID, Object: string(del.Object), Deleted: del.Deleted}); diff != "" {
			t.Errorf("delete answer (-want +got):\n%s", diff)
		}
		_, err = c.Files.Get(ctx, f.ID)
		wantStatus(t, err, 404)
		_, err = c.Files.Content(ctx, f.ID)
		wantStatus(t, err, 404)
		_, err = c.Files.Delete(ctx, f.ID)
		wantStatus(t, err, 404)
		noSuchObject(t, g, "files/"+f.ID)
	})
}

func TestBatchFilesExpireAfter30DaysByDefault(t *testing.T) {
	t.Parallel()
	gatewaytest.Run(t, gatewaytest.Options{}, func(t *testing.T, g *gatewaytest.Gateway) {
		_, key := g.TeamKey()
		c := sdk(g, key)
		jsonl := batchLine("a", "/v1/embeddings") + "\n" + batchLine("b", "/v1/chat/completions") + "\n"
		f := upload(t, c, jsonl, "in.jsonl", openai.FilePurposeBatch)
		if f.ExpiresAt != f.CreatedAt+30*24*3600 {
			t.Errorf("expires_at %d, created_at %d: want 30 days later", f.ExpiresAt, f.CreatedAt)
		}
		f2, err := c.Files.New(context.Background(), openai.FileNewParams{
			File: openai.File(strings.NewReader(jsonl), "in.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch,
			ExpiresAfter: openai.FileNewParamsExpiresAfter{Seconds: 7200},
		})
		if err != nil {
			t.Fatal(err)
		}
		if f2.ExpiresAt != f2.CreatedAt+7200 {
			t.Errorf("with expires_after 7200: expires_at %d, created_at %d", f2.ExpiresAt, f2.CreatedAt)
		}
		if b := content(t, c, f2.ID); string(b) != jsonl {
			t.Errorf("content = %q", b)
		}
	})
}

func TestLargeFileStreamsBothWays(t *testing.T) {
	t.Parallel()
	gatewaytest.Run(t, gatewaytest.Options{}, func(t *testing.T, g *gatewaytest.Gateway) {
		ctx := context.Background()
		_, key := g.TeamKey()
		c := sdk(g, key)
		const size = 50 << 20
		sum := sha256.New()
		f, err := c.Files.New(ctx, openai.FileNewParams{
			File:    openai.File(io.TeeReader(io.LimitReader(rand.NewChaCha8([32]byte{7}), size), sum), "big.bin", "application/octet-stream"),
			Purpose: openai.FilePurposeUserData,
		})
		if err != nil || f.Bytes != size {
			t.Fatalf("upload = %v, %v", f, err)
		}
		resp, err := c.Files.Content(ctx, f.ID)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		back := sha256.New()
		n, err := io.Copy(back, resp.Body)
		if err != nil || n != size || !bytes.Equal(back.Sum(nil), sum.Sum(nil)) {
			t.Fatalf("downloaded %d bytes (%v); sha256 match %v", n, err, bytes.Equal(back.Sum(nil), sum.Sum(nil)))
		}
		// A range in the middle of a large file.
		r := g.Do("GET", "/v1/files/"+f.ID+"/content", key, nil, "Range", "bytes=30000000-30000009")
		want := make([]byte, 30000010)
		io.ReadFull(rand.NewChaCha8([32]byte{7}), want)
		if r.Status != 206 || !bytes.Equal(r.Body, want[30000000:]) {
			t.Errorf("range in a large file: %d %q", r.Status, r.Body)
		}
	})
}

func TestContentRangeReads(t *testing.T) {
	t.Parallel()
	gatewaytest.Run(t, gatewaytest.Options{}, func(t *testing.T, g *gatewaytest.Gateway) {
		_, key := g.TeamKey()
		body := "0123456789abcdefghij"
		f := upload(t, sdk(g, key), body, "r.txt", openai.FilePurposeUserData)
		type answer struct {
			Status                      int
			ContentRange, ContentLength string
			Body                        string
		}
		for _, tc := range []struct {
			rng, ifRange string
			want         answer
		}{
			{rng: "bytes=0-4", want: answer{206, "bytes 0-4/20", "5", "01234"}},
			{rng: "bytes=15-", want: answer{206, "bytes 15-19/20", "5", "fghij"}},
			{rng: "bytes=-3", want: answer{206, "bytes 17-19/20", "3", "hij"}},
			{rng: "bytes=18-100", want: answer{206, "bytes 18-19/20", "2", "ij"}},
			{rng: "bytes=0-1,4-5", want: answer{200, "", "20", body}},
			{rng: "bytes=0-4", ifRange: `"` + f.ID + `"`, want: answer{206, "bytes 0-4/20", "5", "01234"}},
			{rng: "bytes=0-4", ifRange: `"something-else"`, want: answer{200, "", "20", body}},
		} {
			hdr := []string{"Range", tc.rng}
			if tc.ifRange != "" {
				hdr = append(hdr, "If-Range", tc.ifRange)
			}
			r := g.Do("GET", "/v1/files/"+f.ID+"/content", key, nil, hdr...)
			got := answer{r.Status, r.Header.Get("Content-Range"), r.Header.Get("Content-Length"), string(r.Body)}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Range %s If-Range %s (-want +got):\n%s", tc.rng, tc.ifRange, diff)
			}
		}
		r := g.Do("GET", "/v1/files/"+f.ID+"/content", key, nil, "Range", "bytes=20-")
		checkErr(t, responseErr(t, r), apiErr{Status: 416, Code: "range_not_satisfiable", Message: "20 bytes"})
		if cr := r.Header.Get("Content-Range"); cr != "bytes */20" {
			t.Errorf("416 Content-Range %q; want bytes */20", cr)
		}
	})
}

func TestTeamsCannotReachOtherTeamsFiles(t *testing.T) {
	t.Parallel()
	gatewaytest.Run(t, gatewaytest.Options{}, func(t *testing.T, g *gatewaytest.Gateway) {
		ctx := context.Background()
		_, keyA := g.TeamKey()
		_, keyB := g.TeamKey()
		a, b := sdk(g, keyA), sdk(g, keyB)
		f := upload(t, a, "team a's", "a.txt", openai.FilePurposeUserData)
		_, err := b.Files.Get(ctx, f.ID)
		wantErr(t, err, apiErr{Status: 404, Code: "not_found", Message: f.ID})
		_, err = b.Files.Content(ctx, f.ID)
		wantStatus(t, err, 404)
		_, err = b.Files.Delete(ctx, f.ID)
		wantStatus(t, err, 404)
		if _, err := a.Files.Get(ctx, f.ID); err != nil {
			t.Errorf("team B's attempts touched team A's file: %v", err)
		}
		if ids := listIDs(t, b); slices.Contains(ids, f.ID) {
			t.Error("team B lists team A's file")
		}
		// A cursor naming another team's file is refused like an unknown one.
		_, err = b.Files.List(ctx, openai.FileListParams{After: openai.String(f.ID)})
		wantErr(t, err, apiErr{Status: 400, Code: "invalid_value", Param: "after"})
		// So is every part of another team's upload.
		u, err := a.Uploads.New(ctx, openai.UploadNewParams{Bytes: 2, Filename: "u.txt", MimeType: "text/plain", Purpose: openai.FilePurposeUserData})
		if err != nil {
			t.Fatal(err)
		}
		_, err = b.Uploads.Parts.New(ctx, u.ID, openai.UploadPartNewParams{Data: strings.NewReader("ab")})
		wantStatus(t, err, 404)
		_, err = b.Uploads.Complete(ctx, u.ID, openai.UploadCompleteParams{PartIDs: []string{"part_x"}})
		wantStatus(t, err, 404)
		_, err = b.Uploads.Cancel(ctx, u.ID)
		wantStatus(t, err, 404)
	})
}

func TestListPagesInBothOrders(t *testing.T) {
	t.Parallel()
	gatewaytest.Run(t, gatewaytest.Options{}, func(t *testing.T, g *gatewaytest.Gateway) {
		ctx := context.Background()
		_, key := g.TeamKey()
		c := sdk(g, key)
		var created []string
		for i := range 7 {
			purpose := openai.FilePurposeUserData
			if i%3 == 0 {
				purpose = openai.FilePurposeAssistants
			}
			created = append(created, upload(t, c, fmt.Sprint("file ", i), fmt.Sprintf("f%d.txt", i), purpose).ID)
		}
		newest := slices.Clone(created)
		slices.Reverse(newest)
		for _, tc := range []struct {
			order openai.FileListParamsOrder
			want  []string
		}{{"", newest}, {openai.FileListParamsOrderDesc, newest}, {openai.FileListParamsOrderAsc, created}} {
			// Pages of 3, following the cursors by hand.
			var pages [][]string
			params := openai.FileListParams{Limit: openai.Int(3), Order: tc.order}
			for {
				p, err := c.Files.List(ctx, params)
				if err != nil {
					t.Fatal(err)
				}
				var page []string
				for _, f := range p.Data {
					page = append(page, f.ID)
				}
				pages = append(pages, page)
				var ends struct {
					FirstID string `json:"first_id"`
					LastID  string `json:"last_id"`
				}
				json.Unmarshal([]byte(p.RawJSON()), &ends)
				if diff := cmp.Diff([2]string{page[0], page[len(page)-1]}, [2]string{ends.FirstID, ends.LastID}); diff != "" {
					t.Errorf("first_id/last_id do not match the page (-page +ids):\n%s", diff)
				}
				if !p.HasMore {
					break
				}
				params.After = openai.String(page[len(page)-1])
			}
			want := [][]string{tc.want[:3], tc.want[3:6], tc.want[6:]}
			if diff := cmp.Diff(want, pages); diff != "" {
				t.Errorf("order %q, pages of 3 (-want +got):\n%s", tc.order, diff)
			}
			// The SDK's auto-pager follows the same cursors.
			var auto []string
			it := c.Files.ListAutoPaging(ctx, openai.FileListParams{Limit: openai.Int(2), Order: tc.order})
			for it.Next() {
				auto = append(auto, it.Current().ID)
			}
			if diff := cmp.Diff(tc.want, auto); it.Err() != nil || diff != "" {
				t.Errorf("auto-paging order %q (%v) (-want +got):\n%s", tc.order, it.Err(), diff)
			}
		}
		p, err := c.Files.List(ctx, openai.FileListParams{Purpose: openai.String("assistants"), Order: openai.FileListParamsOrderAsc})
		if err != nil {
			t.Fatal(err)
		}
		var assistants []string
		for _, f := range p.Data {
			assistants = append(assistants, f.ID)
		}
		if diff := cmp.Diff([]string{created[0], created[3], created[6]}, assistants); diff != "" || p.HasMore {
			t.Errorf("purpose filter (more %v) (-want +got):\n%s", p.HasMore, diff)
		}
		p, err = c.Files.List(ctx, openai.FileListParams{After: openai.String(created[5]), Order: openai.FileListParamsOrderAsc})
		if err != nil || len(p.Data) != 1 || p.Data[0].ID != created[6] || p.HasMore {
			t.Errorf("after the second newest, ascending: %v, %v", p, err)
		}
		// The admin sees every team's files.
		_, otherKey := g.TeamKey()
		other := upload(t, sdk(g, otherKey), "other", "o.txt", openai.FilePurposeUserData)
		all := listIDs(t, sdk(g, g.MasterKey))
		for _, id := range append(created, other.ID) {
			if !slices.Contains(all, id) {
				t.Errorf("the admin's listing misses %s", id)
			}
		}
	})
}

func TestUploadsAPIAssemblesPartsInTheOrderGiven(t *testing.T) {
	t.Parallel()
	gatewaytest.Run(t, gatewaytest.Options{}, func(t *testing.T, g *gatewaytest.Gateway) {
		ctx := context.Background()
		_, key := g.TeamKey()
		c := sdk(g, key)
		data := []byte("x" + strings.Repeat("0123456789", 1000) + "yz")
		u, err := c.Uploads.New(ctx, openai.UploadNewParams{Bytes: int64(len(data)), Filename: "big.txt", MimeType: "text/plain", Purpose: openai.FilePurposeUserData})
		if err != nil {
			t.Fatal(err)
		}
		created := files.Upload{ID: u.ID, Object: "upload", Bytes: int64(len(data)), CreatedAt: u.CreatedAt, ExpiresAt: u.CreatedAt + 3600,
			Filename: "big.txt", Purpose: "user_data", Status: "pending"}
		var got files.Upload
		json.Unmarshal([]byte(u.RawJSON()), &got)
		if diff := cmp.Diff(created, got); diff != "" || !strings.HasPrefix(u.ID, "upload_") {
			t.Errorf("created upload %s (-want +got):\n%s", u.ID, diff)
		}
		// Parts of 1 byte and larger, sent out of order.
		chunks := [][]byte{data[:1], data[1:5001], data[5001 : len(data)-1], data[len(data)-1:]}
		ids := make([]string, len(chunks))
		for _, i := range []int{2, 0, 3, 1} {
			part, err := c.Uploads.Parts.New(ctx, u.ID, openai.UploadPartNewParams{Data: bytes.NewReader(chunks[i])})
			if err != nil {
				t.Fatalf("part %d: %v", i, err)
			}
			var gotPart files.UploadPart
			json.Unmarshal([]byte(part.RawJSON()), &gotPart)
			wantPart := files.UploadPart{ID: part.ID, Object: "upload.part", CreatedAt: part.CreatedAt, UploadID: u.ID}
			if diff := cmp.Diff(wantPart, gotPart); diff != "" || !strings.HasPrefix(part.ID, "part_") {
				t.Errorf("part %d (-want +got):\n%s", i, diff)
			}
			ids[i] = part.ID
		}
		sum := md5.Sum(data)
		done, err := c.Uploads.Complete(ctx, u.ID, openai.UploadCompleteParams{PartIDs: ids, Md5: openai.String(hex.EncodeToString(sum[:]))})
		if err != nil {
			t.Fatal(err)
		}
		file := fileObject(t, done.File.RawJSON())
		completed := created
		completed.Status = "completed"
		completed.File = &files.File{ID: file.ID, Object: "file", Bytes: int64(len(data)), CreatedAt: file.CreatedAt, Filename: "big.txt", Purpose: "user_data", Status: "processed"}
		json.Unmarshal([]byte(done.RawJSON()), &got)
		if diff := cmp.Diff(completed, got); diff != "" {
			t.Errorf("completed upload (-want +got):\n%s", diff)
		}
		if b := content(t, c, file.ID); !bytes.Equal(b, data) {
			t.Errorf("content of the completed upload differs (%d bytes)", len(b))
		}
		r := g.Do("GET", "/v1/files/"+file.ID+"/content", key, nil, "Range", "bytes=0-5001")
		if r.Status != 206 || !bytes.Equal(r.Body, data[:5002]) {
			t.Errorf("range across parts: %d %q", r.Status, r.Body)
		}
		// A completed upload takes nothing more.
		_, err = c.Uploads.Complete(ctx, u.ID, openai.UploadCompleteParams{PartIDs: ids})
		wantErr(t, err, apiErr{Status: 409, Code: "conflict", Message: "completed"})
		_, err = c.Uploads.Parts.New(ctx, u.ID, openai.UploadPartNewParams{Data: strings.NewReader("more")})
		wantErr(t, err, apiErr{Status: 409, Code: "conflict", Message: "completed"})
		_, err = c.Uploads.Cancel(ctx, u.ID)
		wantErr(t, err, apiErr{Status: 409, Code: "conflict", Message: "completed"})
	})
}

func TestBadCompletionsLeaveTheUploadPending(t *testing.T) {
	t.Parallel()
	gatewaytest.Run(t, gatewaytest.Options{}, func(t *testing.T, g *gatewaytest.Gateway) {
		ctx := context.Background()
		_, key := g.TeamKey()
		c := sdk(g, key)
		data := "abcdef"
		u, err := c.Uploads.New(ctx, openai.UploadNewParams{Bytes: 6, Filename: "s.txt", MimeType: "text/plain", Purpose: openai.FilePurposeUserData})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, chunk := range []string{data[:1], data[1:3], data[3:5], data[5:]} {
			p, err := c.Uploads.Parts.New(ctx, u.ID, openai.UploadPartNewParams{Data: strings.NewReader(chunk)})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, p.ID)
		}
		sum := md5.Sum([]byte(data))
		for _, tc := range []struct {
			name  string
			parts []string
			md5   string
			want  apiErr
		}{
			{"md5 of another order", []string{ids[1], ids[0], ids[2], ids[3]}, hex.EncodeToString(sum[:]), apiErr{Status: 400, Code: "invalid_value", Param: "md5", Message: "MD5"}},
			{"too few bytes", ids[:3], "", apiErr{Status: 400, Code: "invalid_value", Param: "part_ids", Message: "5 bytes"}},
			{"a part twice", []string{ids[0], ids[0], ids[1], ids[2], ids[3]}, "", apiErr{Status: 400, Code: "invalid_value", Param: "part_ids", Message: "more than once"}},
			{"an unknown part", []string{ids[0], ids[1], ids[2], "part_nope"}, "", apiErr{Status: 400, Code: "invalid_value", Param: "part_ids", Message: "part_nope"}},
			{"md5 not hex", ids, "nothex", apiErr{Status: 400, Code: "invalid_value", Param: "md5", Message: "32 hexadecimal"}},
			{"no parts", []string{}, "", apiErr{Status: 400, Code: "invalid_value", Param: "part_ids"}},
		} {
			params := openai.UploadCompleteParams{PartIDs: tc.parts}
			if tc.md5 != "" {
				params.Md5 = openai.String(tc.md5)
			}
			_, err := c.Uploads.Complete(ctx, u.ID, params)
			t.Run(tc.name, func(t *testing.T) { wantErr(t, err, tc.want) })
		}
		done, err := c.Uploads.Complete(ctx, u.ID, openai.UploadCompleteParams{PartIDs: ids, Md5: openai.String(hex.EncodeToString(sum[:]))})
		if err != nil || done.Status != "completed" {
			t.Fatalf("the upload after refused completions: %v, %v", done, err)
		}
	})
}

func TestUploadPartBeyondDeclaredBytesIsRefused(t *testing.T) {
	t.Parallel()
	gatewaytest.Run(t, gatewaytest.Options{}, func(t *testing.T, g *gatewaytest.Gateway) {
		ctx := context.Background()
		_, key := g.TeamKey()
		c := sdk(g, key)
		u, err := c.Uploads.New(ctx, openai.UploadNewParams{Bytes: 3, Filename: "s.txt", MimeType: "text/plain", Purpose: openai.FilePurposeUserData})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Uploads.Parts.New(ctx, u.ID, openai.UploadPartNewParams{Data: strings.NewReader("four")})
		wantErr(t, err, apiErr{Status: 400, Code: "invalid_value", Param: "data", Message: "3 bytes"})
		if _, err := c.Uploads.Parts.New(ctx, u.ID, openai.UploadPartNewParams{Data: strings.NewReader("abc")}); err != nil {
			t.Fatalf("a part of the declared size after a refused one: %v", err)
		}
		_, err = c.Uploads.Parts.New(ctx, u.ID, openai.UploadPartNewParams{Data: strings.NewReader("d")})
		wantErr(t, err, apiErr{Status: 400, Code: "invalid_value", Param: "data", Message: "already hold all 3 bytes"})
	})
}

// Parts sent at once take their room in the upload atomically: exactly as
// many fit as the declared bytes hold, and the rest are refused, stored
// nowhere.
func TestConcurrentPartsCannotExceedDeclaredBytes(t *testing.T) {
	t.Parallel()
	gatewaytest.Run(t, gatewaytest.Options{}, func(t *testing.T, g *gatewaytest.Gateway) {
		ctx := context.Background()
		_, key := g.TeamKey()
		c := sdk(g, key)
		const parts, partSize = 6, 100
		u, err := c.Uploads.New(ctx, openai.UploadNewParams{Bytes: 2 * partSize, Filename: "p.txt", MimeType: "text/plain", Purpose: openai.FilePurposeUserData})
		if err != nil {
			t.Fatal(err)
		}
		type result struct {
			id  string
			err error
		}
		results := make(chan result, parts)
		for i := range parts {
			go func() {
				p, err := c.Uploads.Parts.New(ctx, u.ID, openai.UploadPartNewParams{Data: strings.NewReader(strings.Repeat(string(rune('a'+i)), partSize))})
				if err != nil {
					results <- result{err: err}
					return
				}
				results <- result{id: p.ID}
			}()
		}
		var accepted []string
		for range parts {
			r := <-results
			if r.err != nil {
				wantErr(t, r.err, apiErr{Status: 400, Code: "invalid_value", Param: "data", Message: "bytes it was created for"})
				continue
			}
			accepted = append(accepted, r.id)
		}
		if len(accepted) != 2 {
			t.Fatalf("%d parts of %d bytes accepted by an upload of %d bytes; want 2", len(accepted), partSize, 2*partSize)
		}
		done, err := c.Uploads.Complete(ctx, u.ID, openai.UploadCompleteParams{PartIDs: accepted})
		if err != nil || done.File.Bytes != 2*partSize {
			t.Fatalf("complete = %v, %v", done, err)
		}
	})
}

func TestCancelRemovesTheParts(t *testing.T) {
	t.Parallel()
	gatewaytest.Run(t, gatewaytest.Options{}, func(t *testing.T, g *gatewaytest.Gateway) {
		ctx := context.Background()
		_, key := g.TeamKey()
		c := sdk(g, key)
		u, err := c.Uploads.New(ctx, openai.UploadNewParams{Bytes: 3, Filename: "s.txt", MimeType: "text/plain", Purpose: openai.FilePurposeUserData})
		if err != nil {
			t.Fatal(err)
		}
		p, err := c.Uploads.Parts.New(ctx, u.ID, openai.UploadPartNewParams{Data: strings.NewReader("ab")})
		if err != nil {
			t.Fatal(err)
		}
		cancelled, err := c.Uploads.Cancel(ctx, u.ID)
		if err != nil || cancelled.Status != "cancelled" {
			t.Fatalf("cancel = %v, %v", cancelled, err)
		}
		noSuchObject(t, g, "uploads/"+u.ID+"/"+p.ID)
		_, err = c.Uploads.Parts.New(ctx, u.ID, openai.UploadPartNewParams{Data: strings.NewReader("c")})
		wantErr(t, err, apiErr{Status: 409, Code: "conflict", Message: "cancelled"})
		_, err = c.Uploads.Complete(ctx, u.ID, openai.UploadCompleteParams{PartIDs: []string{p.ID}})
		wantErr(t, err, apiErr{Status: 409, Code: "conflict", Message: "cancelled"})
	})
}

func TestUploadsValidateBatchLinesAcrossParts(t *testing.T) {
	t.Parallel()
	gatewaytest.Run(t, gatewaytest.Options{}, func(t *testing.T, g *gatewaytest.Gateway) {
		ctx := context.Background()
		_, key := g.TeamKey()
		c := sdk(g, key)
		good := batchLine("a", "/v1/embeddings") + "\n"
		bad := `{"custom_id":"b","method":"GET","url":"/v1/embeddings","body":{}}` + "\n"
		data := good + good + bad
		u, err := c.Uploads.New(ctx, openai.UploadNewParams{Bytes: int64(len(data)), Filename: "in.jsonl", MimeType: "text/jsonl", Purpose: openai.FilePurposeBatch})
		if err != nil {
			t.Fatal(err)
		}
		// The bad line straddles the two parts.
		cut := len(good)*2 + 10
		p1, err1 := c.Uploads.Parts.New(ctx, u.ID, openai.UploadPartNewParams{Data: strings.NewReader(data[:cut])})
		p2, err2 := c.Uploads.Parts.New(ctx, u.ID, openai.UploadPartNewParams{Data: strings.NewReader(data[cut:])})
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		_, err = c.Uploads.Complete(ctx, u.ID, openai.UploadCompleteParams{PartIDs: []string{p1.ID, p2.ID}})
		wantErr(t, err, apiErr{Status: 400, Code: "invalid_value", Param: "file", Message: `line 3: 'method' must be "POST", got "GET"`})
	})
}

func TestExpiredFilesAndUploadsVanishAndAreSwept(t *testing.T) {
	t.Parallel()
	clk := &clock{}
	gatewaytest.Run(t, gatewaytest.Options{Now: clk.Now}, func(t *testing.T, g *gatewaytest.Gateway) {
		ctx := context.Background()
		_, key := g.TeamKey()
		c, admin := sdk(g, key), sdk(g, g.MasterKey)
		f, err := c.Files.New(ctx, openai.FileNewParams{
			File:         openai.File(strings.NewReader("short-lived"), "s.txt", "text/plain"),
			Purpose:      openai.FilePurposeUserData,
			ExpiresAfter: openai.FileNewParamsExpiresAfter{Seconds: 3600},
		})
		if err != nil || f.ExpiresAt != f.CreatedAt+3600 {
			t.Fatalf("upload = %v, %v", f, err)
		}
		keep := upload(t, c, "long-lived", "l.txt", openai.FilePurposeUserData)
		u, err := c.Uploads.New(ctx, openai.UploadNewParams{Bytes: 10, Filename: "u.txt", MimeType: "text/plain", Purpose: openai.FilePurposeUserData})
		if err != nil {
			t.Fatal(err)
		}
		part, err := c.Uploads.Parts.New(ctx, u.ID, openai.UploadPartNewParams{Data: strings.NewReader("12345")})
		if err != nil {
			t.Fatal(err)
		}
		clk.Advance(2 * time.Hour)
		defer clk.Advance(-2 * time.Hour)

		_, err = c.Files.Get(ctx, f.ID)
		wantStatus(t, err, 404)
		_, err = c.Files.Content(ctx, f.ID)
		wantStatus(t, err, 404)
		_, err = c.Files.Delete(ctx, f.ID)
		wantStatus(t, err, 404)
		for _, lister := range []openai.Client{c, admin} {
			if ids := listIDs(t, lister); slices.Contains(ids, f.ID) || !slices.Contains(ids, keep.ID) {
				t.Errorf("listing after expiry: %v (expired %s, kept %s)", ids, f.ID, keep.ID)
			}
		}
		_, err = c.Uploads.Parts.New(ctx, u.ID, openai.UploadPartNewParams{Data: strings.NewReader("67890")})
		wantErr(t, err, apiErr{Status: 409, Code: "conflict", Message: "expired"})
		// Reads refuse at once; the sweep reclaims the bytes.
		if _, err := g.Backend.Blobs.Size(ctx, "files/"+f.ID); err != nil {
			t.Fatalf("before the sweep the bytes are still there: %v", err)
		}
		res, err := g.Services.Files.Sweep(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(files.SweepResult{Files: 1, Uploads: 1}, res); diff != "" {
			t.Errorf("sweep (-want +got):\n%s", diff)
		}
		noSuchObject(t, g, "files/"+f.ID)
		noSuchObject(t, g, "uploads/"+u.ID+"/"+part.ID)
		if b := content(t, c, keep.ID); string(b) != "long-lived" {
			t.Errorf("the sweep touched a live file: %q", b)
		}
		if res, err := g.Services.Files.Sweep(ctx); err != nil || res != (files.SweepResult{}) {
			t.Errorf("a second sweep found more: %+v, %v", res, err)
		}
	})
}

// Every refused upload answers the right error and stores nothing.
func TestRefusedUploadsAnswerAndStoreNothing(t *testing.T) {
	t.Parallel()
	gatewaytest.Run(t, gatewaytest.Options{}, func(t *testing.T, g *gatewaytest.Gateway) {
		_, key := g.TeamKey()
		c := sdk(g, key)
		badBatch := batchLine("a", "/v1/embeddings") + "\n" + batchLine("b", "/v1/embeddings") + "\n" + `{"custom_id":"c","method":"POST","url":"/v1/images","body":{}}` + "\n"
		for _, tc := range []struct {
			name  string
			parts []string // name/value pairs; "@file" is the file part
			want  apiErr
		}{
			{"empty file", []string{"purpose", "user_data", "@file", ""}, apiErr{400, "invalid_value", "file", "empty"}},
			{"empty file, purpose after", []string{"@file", "", "purpose", "user_data"}, apiErr{400, "invalid_value", "file", "empty"}},
			{"missing purpose", []string{"@file", "x"}, apiErr{400, "missing_required_parameter", "purpose", "purpose"}},
			{"missing file", []string{"purpose", "user_data"}, apiErr{400, "missing_required_parameter", "file", "file"}},
			{"unknown purpose", []string{"purpose", "homework", "@file", "x"}, apiErr{400, "invalid_value", "purpose", "homework"}},
			{"unknown purpose after the file", []string{"@file", "x", "purpose", "homework"}, apiErr{400, "invalid_value", "purpose", "homework"}},
			{"output purpose", []string{"purpose", "batch_output", "@file", "x"}, apiErr{400, "invalid_value", "purpose", "batch_output"}},
			{"bad batch line", []string{"purpose", "batch", "@file", badBatch}, apiErr{400, "invalid_value", "file", "line 3"}},
			{"bad batch line, purpose after", []string{"@file", badBatch, "purpose", "batch"}, apiErr{400, "invalid_value", "file", "line 3"}},
			{"not jsonl batch", []string{"purpose", "batch", "@file", "\x89PNG"}, apiErr{400, "invalid_value", "file", "line 1"}},
			{"bad anchor", []string{"purpose", "user_data", "expires_after[anchor]", "now", "expires_after[seconds]", "3600", "@file", "x"}, apiErr{400, "invalid_value", "expires_after[anchor]", "created_at"}},
			{"expiry too short", []string{"purpose", "user_data", "expires_after[anchor]", "created_at", "expires_after[seconds]", "60", "@file", "x"}, apiErr{400, "invalid_value", "expires_after[seconds]", "3600"}},
			{"expiry not a number", []string{"@file", "x", "purpose", "user_data", "expires_after[seconds]", "soon"}, apiErr{400, "invalid_value", "expires_after[seconds]", "soon"}},
			{"anchor without seconds", []string{"purpose", "user_data", "expires_after[anchor]", "created_at", "@file", "x"}, apiErr{400, "missing_required_parameter", "expires_after[seconds]", ""}},
			{"two files", []string{"purpose", "user_data", "@file", "a", "@file", "b"}, apiErr{400, "invalid_value", "file", "one"}},
			{"provider too long", []string{"@file", "x", "purpose", "user_data", "custom_llm_provider", strings.Repeat("p", 65)}, apiErr{400, "invalid_value", "custom_llm_provider", "64"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := postForm(g, "/v1/files", key, tc.parts...)
				checkErr(t, responseErr(t, r), tc.want)
				if ids := listIDs(t, c); len(ids) != 0 {
					t.Errorf("a refused upload left a file: %v", ids)
				}
			})
		}
		r := g.Do("POST", "/v1/files", key, `{"purpose":"batch"}`)
		checkErr(t, responseErr(t, r), apiErr{Status: 400, Code: "invalid_value", Message: "multipart"})
	})
}

func TestBadListParamsAreRefused(t *testing.T) {
	t.Parallel()
	gatewaytest.Run(t, gatewaytest.Options{}, func(t *testing.T, g *gatewaytest.Gateway) {
		_, key := g.TeamKey()
		for _, tc := range []struct{ query, param string }{
			{"limit=0", "limit"}, {"limit=10001", "limit"}, {"limit=x", "limit"}, {"order=up", "order"},
			{"after=nope", "after"}, {"after=file-AAAAAAAAAAAAAAAAAAAAAAAA", "after"}, {"purpose=homework", "purpose"},
		} {
			r := g.Do("GET", "/v1/files?"+tc.query, key, nil)
			t.Run(tc.query, func(t *testing.T) {
				checkErr(t, responseErr(t, r), apiErr{Status: 400, Code: "invalid_value", Param: tc.param})
			})
		}
	})
}

func TestBadUploadsAreRefused(t *testing.T) {
	t.Parallel()
	gatewaytest.Run(t, gatewaytest.Options{}, func(t *testing.T, g *gatewaytest.Gateway) {
		_, key := g.TeamKey()
		for _, tc := range []struct {
			name string
			body any
			want apiErr
		}{
			{"no filename", map[string]any{"purpose": "batch", "bytes": 10, "mime_type": "text/jsonl"}, apiErr{Status: 400, Code: "missing_required_parameter", Param: "filename"}},
			{"no bytes", map[string]any{"filename": "a", "purpose": "batch", "bytes": 0, "mime_type": "text/jsonl"}, apiErr{Status: 400, Code: "invalid_value", Param: "bytes"}},
			{"unknown purpose", map[string]any{"filename": "a", "purpose": "nope", "bytes": 1, "mime_type": "text/jsonl"}, apiErr{Status: 400, Code: "invalid_value", Param: "purpose"}},
			{"batch too large", map[string]any{"filename": "a", "purpose": "batch", "bytes": 300 << 20, "mime_type": "text/jsonl"}, apiErr{Status: 413, Code: "payload_too_large"}},
			{"bad mime type", map[string]any{"filename": "a", "purpose": "user_data", "bytes": 1, "mime_type": "not a type"}, apiErr{Status: 400, Code: "invalid_value", Param: "mime_type"}},
			{"expiry too long", map[string]any{"filename": "a", "purpose": "user_data", "bytes": 1, "mime_type": "text/plain", "expires_after": map[string]any{"anchor": "created_at", "seconds": 2592001}}, apiErr{Status: 400, Code: "invalid_value", Param: "expires_after.seconds"}},
		} {
			r := g.Do("POST", "/v1/uploads", key, tc.body)
			t.Run(tc.name, func(t *testing.T) { checkErr(t, responseErr(t, r), tc.want) })
		}
		r := g.Do("POST", "/v1/uploads/upload_AAAAAAAAAAAAAAAAAAAAAAAA/complete", key, map[string]any{"part_ids": []string{"part_x"}})
		checkErr(t, responseErr(t, r), apiErr{Status: 404, Code: "not_found", Message: "upload_AAAAAAAAAAAAAAAAAAAAAAAA"})
		r = g.Do("POST", "/v1/uploads/upload_AAAAAAAAAAAAAAAAAAAAAAAA/complete", key, map[string]any{})
		checkErr(t, responseErr(t, r), apiErr{Status: 400, Code: "missing_required_parameter", Param: "part_ids"})
	})
}

func TestFileSizeLimit(t *testing.T) {
	t.Parallel()
	gatewaytest.Run(t, gatewaytest.Options{Settings: func(s *config.Settings) { s.MaxFileSize = 1000 }}, func(t *testing.T, g *gatewaytest.Gateway) {
		_, key := g.TeamKey()
		for _, order := range [][]string{
			{"purpose", "user_data", "@file", strings.Repeat("x", 1001)},
			{"@file", strings.Repeat("x", 1001), "purpose", "user_data"},
		} {
			r := postForm(g, "/v1/files", key, order...)
			checkErr(t, responseErr(t, r), apiErr{Status: http.StatusRequestEntityTooLarge, Code: "payload_too_large", Message: "1000 bytes"})
		}
		if r := postForm(g, "/v1/files", key, "purpose", "user_data", "@file", strings.Repeat("x", 1000)); r.Status != 200 {
			t.Errorf("a file at the limit: %d %s", r.Status, r.Body)
		}
		r := g.Do("POST", "/v1/uploads", key, map[string]any{"filename": "a", "purpose": "user_data", "bytes": 1001, "mime_type": "text/plain"})
		checkErr(t, responseErr(t, r), apiErr{Status: 413, Code: "payload_too_large", Message: "1000 bytes"})
		if ids := listIDs(t, sdk(g, key)); len(ids) != 1 {
			t.Errorf("files after refusals: %v; want only the one at the limit", ids)
		}
	})
}
