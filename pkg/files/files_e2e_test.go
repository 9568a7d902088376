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

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/sluice-gateway/sluice/pkg/config"
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

// apiError asserts err is an OpenAI error with status and returns it.
func apiError(t *testing.T, err error, status int) *openai.Error {
	t.Helper()
	var e *openai.Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v; want an API error %d", err, status)
	}
	if e.StatusCode != status {
		t.Fatalf("status %d (%s: %s); want %d", e.StatusCode, e.Code, e.Message, status)
	}
	return e
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

func TestFilesWithOfficialSDK(t *testing.T) {
	clk := &clock{}
	gatewaytest.Run(t, gatewaytest.Options{Now: clk.Now}, func(t *testing.T, g *gatewaytest.Gateway) {
		ctx := context.Background()
		_, keyA := g.TeamKey()
		_, keyB := g.TeamKey()
		a, b, admin := sdk(g, keyA), sdk(g, keyB), sdk(g, g.MasterKey)

		t.Run("upload retrieve content delete", func(t *testing.T) {
			before := clk.Now().Unix()
			f := upload(t, a, "hello, sluice\n", "notes.txt", openai.FilePurposeUserData)
			if !strings.HasPrefix(f.ID, "file-") || f.Object != "file" || f.Bytes != 14 || f.Filename != "notes.txt" ||
				f.Purpose != "user_data" || f.Status != "processed" || f.CreatedAt < before || f.CreatedAt > clk.Now().Unix() {
				t.Errorf("file object = %s", f.RawJSON())
			}
			if !strings.Contains(f.RawJSON(), `"expires_at":null`) {
				t.Errorf("a user_data file without expires_after never expires; got %s", f.RawJSON())
			}
			got, err := a.Files.Get(ctx, f.ID)
			if err != nil || got.RawJSON() != f.RawJSON() {
				t.Errorf("Get = %v, %v; want %s", got, err, f.RawJSON())
			}
			if c := content(t, a, f.ID); string(c) != "hello, sluice\n" {
				t.Errorf("content = %q", c)
			}
			resp := g.Do("GET", "/v1/files/"+f.ID+"/content", keyA, nil)
			h := resp.Header
			if resp.Status != 200 || h.Get("Content-Type") != "text/plain" || h.Get("Content-Length") != "14" ||
				h.Get("Content-Disposition") != `attachment; filename=notes.txt` || h.Get("Accept-Ranges") != "bytes" {
				t.Errorf("content answer %d %v", resp.Status, h)
			}
			// The admin sees every team's file.
			if _, err := admin.Files.Get(ctx, f.ID); err != nil {
				t.Errorf("admin Get: %v", err)
			}
			del, err := a.Files.Delete(ctx, f.ID)
			if err != nil || !del.Deleted || del.ID != f.ID || del.Object != "file" {
				t.Fatalf("Delete = %v, %v", del, err)
			}
			_, err = a.Files.Get(ctx, f.ID)
			apiError(t, err, 404)
			_, err = a.Files.Content(ctx, f.ID)
			apiError(t, err, 404)
			_, err = a.Files.Delete(ctx, f.ID)
			apiError(t, err, 404)
			if _, err := g.Backend.Blobs.Size(ctx, "files/"+f.ID); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("the deleted file's bytes remain: %v", err)
			}
		})

		t.Run("batch files expire after 30 days by default", func(t *testing.T) {
			jsonl := batchLine("a", "/v1/embeddings") + "\n" + batchLine("b", "/v1/chat/completions") + "\n"
			f := upload(t, a, jsonl, "in.jsonl", openai.FilePurposeBatch)
			if f.ExpiresAt != f.CreatedAt+30*24*3600 {
				t.Errorf("expires_at %d, created_at %d: want 30 days later", f.ExpiresAt, f.CreatedAt)
			}
			f2, err := a.Files.New(ctx, openai.FileNewParams{
				File: openai.File(strings.NewReader(jsonl), "in.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch,
				ExpiresAfter: openai.FileNewParamsExpiresAfter{Seconds: 7200},
			})
			if err != nil || f2.ExpiresAt != f2.CreatedAt+7200 {
				t.Fatalf("with expires_after: %v, %v", f2, err)
			}
			if c := content(t, a, f2.ID); string(c) != jsonl {
				t.Errorf("content = %q", c)
			}
		})

		t.Run("50 MB streams both ways", func(t *testing.T) {
			const size = 50 << 20
			src := rand.NewChaCha8([32]byte{7})
			sum := sha256.New()
			f, err := a.Files.New(ctx, openai.FileNewParams{
				File:    openai.File(io.TeeReader(io.LimitReader(src, size), sum), "big.bin", "application/octet-stream"),
				Purpose: openai.FilePurposeUserData,
			})
			if err != nil || f.Bytes != size {
				t.Fatalf("upload = %v, %v", f, err)
			}
			resp, err := a.Files.Content(ctx, f.ID)
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
			r := g.Do("GET", "/v1/files/"+f.ID+"/content", keyA, nil, "Range", "bytes=30000000-30000009")
			want := make([]byte, 30000010)
			io.ReadFull(rand.NewChaCha8([32]byte{7}), want)
			if r.Status != 206 || !bytes.Equal(r.Body, want[30000000:]) {
				t.Errorf("range in a large file: %d %q", r.Status, r.Body)
			}
			if _, err := a.Files.Delete(ctx, f.ID); err != nil {
				t.Fatal(err)
			}
		})

		t.Run("range reads", func(t *testing.T) {
			body := "0123456789abcdefghij"
			f := upload(t, a, body, "r.txt", openai.FilePurposeUserData)
			path := "/v1/files/" + f.ID + "/content"
			for _, tc := range []struct {
				rng, ifRange string
				status       int
				want, cr     string
			}{
				{rng: "bytes=0-4", status: 206, want: "01234", cr: "bytes 0-4/20"},
				{rng: "bytes=15-", status: 206, want: "fghij", cr: "bytes 15-19/20"},
				{rng: "bytes=-3", status: 206, want: "hij", cr: "bytes 17-19/20"},
				{rng: "bytes=18-100", status: 206, want: "ij", cr: "bytes 18-19/20"},
				{rng: "bytes=20-", status: 416, cr: "bytes */20"},
				{rng: "bytes=0-1,4-5", status: 200, want: body},
				{rng: "bytes=0-4", ifRange: `"` + f.ID + `"`, status: 206, want: "01234", cr: "bytes 0-4/20"},
				{rng: "bytes=0-4", ifRange: `"something-else"`, status: 200, want: body},
			} {
				hdr := []string{"Range", tc.rng}
				if tc.ifRange != "" {
					hdr = append(hdr, "If-Range", tc.ifRange)
				}
				r := g.Do("GET", path, keyA, nil, hdr...)
				if r.Status != tc.status || r.Header.Get("Content-Range") != tc.cr {
					t.Errorf("%s: %d Content-Range %q; want %d %q", tc.rng, r.Status, r.Header.Get("Content-Range"), tc.status, tc.cr)
					continue
				}
				if tc.status == 416 {
					if r.ErrorCode(t) != "range_not_satisfiable" {
						t.Errorf("416 body %s", r.Body)
					}
					continue
				}
				if string(r.Body) != tc.want || r.Header.Get("Content-Length") != fmt.Sprint(len(tc.want)) {
					t.Errorf("%s: body %q length %s; want %q", tc.rng, r.Body, r.Header.Get("Content-Length"), tc.want)
				}
			}
		})

		t.Run("team isolation", func(t *testing.T) {
			f := upload(t, a, "team a's", "a.txt", openai.FilePurposeUserData)
			_, err := b.Files.Get(ctx, f.ID)
			if e := apiError(t, err, 404); e.Code != "not_found" {
				t.Errorf("code %q", e.Code)
			}
			_, err = b.Files.Content(ctx, f.ID)
			apiError(t, err, 404)
			_, err = b.Files.Delete(ctx, f.ID)
			apiError(t, err, 404)
			if _, err := a.Files.Get(ctx, f.ID); err != nil {
				t.Errorf("team B's attempts touched team A's file: %v", err)
			}
			page, err := b.Files.List(ctx, openai.FileListParams{})
			if err != nil {
				t.Fatal(err)
			}
			for _, x := range page.Data {
				if x.ID == f.ID {
					t.Error("team B lists team A's file")
				}
			}
			// A cursor naming another team's file is refused like an unknown one.
			_, err = b.Files.List(ctx, openai.FileListParams{After: openai.String(f.ID)})
			apiError(t, err, 400)
		})

		t.Run("list pagination", func(t *testing.T) {
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
				var got []string
				params := openai.FileListParams{Limit: openai.Int(3), Order: tc.order}
				for page := 0; ; page++ {
					p, err := c.Files.List(ctx, params)
					if err != nil {
						t.Fatal(err)
					}
					for _, f := range p.Data {
						got = append(got, f.ID)
					}
					if len(p.Data) > 0 && (p.JSON.ExtraFields["first_id"].Raw() != fmt.Sprintf("%q", p.Data[0].ID) ||
						p.JSON.ExtraFields["last_id"].Raw() != fmt.Sprintf("%q", p.Data[len(p.Data)-1].ID)) {
						t.Errorf("first_id/last_id do not match the page: %s", p.RawJSON())
					}
					if !p.HasMore {
						if page != 2 {
							t.Errorf("order %q: %d pages of 3 for 7 files", tc.order, page+1)
						}
						break
					}
					params.After = openai.String(p.Data[len(p.Data)-1].ID)
				}
				if !slices.Equal(got, tc.want) {
					t.Errorf("order %q: %v; want %v", tc.order, got, tc.want)
				}
				// The SDK's auto-pager follows the same cursors.
				var auto []string
				it := c.Files.ListAutoPaging(ctx, openai.FileListParams{Limit: openai.Int(2), Order: tc.order})
				for it.Next() {
					auto = append(auto, it.Current().ID)
				}
				if it.Err() != nil || !slices.Equal(auto, tc.want) {
					t.Errorf("auto-paging order %q: %v, %v", tc.order, auto, it.Err())
				}
			}
			p, err := c.Files.List(ctx, openai.FileListParams{Purpose: openai.String("assistants"), Order: openai.FileListParamsOrderAsc})
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, f := range p.Data {
				ids = append(ids, f.ID)
			}
			if want := []string{created[0], created[3], created[6]}; !slices.Equal(ids, want) || p.HasMore {
				t.Errorf("purpose filter: %v (more %v); want %v", ids, p.HasMore, want)
			}
			p, err = c.Files.List(ctx, openai.FileListParams{After: openai.String(created[5]), Order: openai.FileListParamsOrderAsc})
			if err != nil || len(p.Data) != 1 || p.Data[0].ID != created[6] || p.HasMore {
				t.Errorf("after the second newest, ascending: %v, %v", p, err)
			}
			// The admin sees every team's files.
			var all []string
			it := admin.Files.ListAutoPaging(ctx, openai.FileListParams{Limit: openai.Int(100)})
			for it.Next() {
				all = append(all, it.Current().ID)
			}
			for _, id := range created {
				if !slices.Contains(all, id) {
					t.Errorf("the admin's listing misses %s", id)
				}
			}
		})

		t.Run("uploads API", func(t *testing.T) {
			data := []byte("x" + strings.Repeat("0123456789", 1000) + "yz")
			u, err := a.Uploads.New(ctx, openai.UploadNewParams{Bytes: int64(len(data)), Filename: "big.txt", MimeType: "text/plain", Purpose: openai.FilePurposeUserData})
			if err != nil || !strings.HasPrefix(u.ID, "upload_") || u.Status != "pending" || u.Object != "upload" || u.ExpiresAt != u.CreatedAt+3600 {
				t.Fatalf("create = %v, %v", u, err)
			}
			// Parts of 1 byte and larger, sent out of order.
			chunks := [][]byte{data[:1], data[1:5001], data[5001 : len(data)-1], data[len(data)-1:]}
			ids := make([]string, len(chunks))
			for _, i := range []int{2, 0, 3, 1} {
				part, err := a.Uploads.Parts.New(ctx, u.ID, openai.UploadPartNewParams{Data: bytes.NewReader(chunks[i])})
				if err != nil || !strings.HasPrefix(part.ID, "part_") || part.UploadID != u.ID || part.Object != "upload.part" {
					t.Fatalf("part %d = %v, %v", i, part, err)
				}
				ids[i] = part.ID
			}
			// Bad completions leave the upload pending.
			sum := md5.Sum(data)
			for _, tc := range []struct {
				parts []string
				md5   string
				param string
			}{
				{parts: []string{ids[1], ids[0], ids[2], ids[3]}, md5: hex.EncodeToString(sum[:]), param: "md5"},
				{parts: []string{ids[0], ids[1], ids[2]}, param: "part_ids"},
				{parts: []string{ids[0], ids[0], ids[1], ids[2], ids[3]}, param: "part_ids"},
				{parts: []string{ids[0], ids[1], ids[2], "part_nope"}, param: "part_ids"},
				{parts: ids, md5: "nothex", param: "md5"},
			} {
				params := openai.UploadCompleteParams{PartIDs: tc.parts}
				if tc.md5 != "" {
					params.Md5 = openai.String(tc.md5)
				}
				_, err := a.Uploads.Complete(ctx, u.ID, params)
				if e := apiError(t, err, 400); e.Param != tc.param {
					t.Errorf("complete %v: param %q (%s); want %q", tc.parts, e.Param, e.Message, tc.param)
				}
			}
			// Another team cannot touch it.
			_, err = b.Uploads.Complete(ctx, u.ID, openai.UploadCompleteParams{PartIDs: ids})
			apiError(t, err, 404)
			done, err := a.Uploads.Complete(ctx, u.ID, openai.UploadCompleteParams{PartIDs: ids, Md5: openai.String(hex.EncodeToString(sum[:]))})
			if err != nil || done.Status != "completed" || done.File.Bytes != int64(len(data)) || done.File.Filename != "big.txt" {
				t.Fatalf("complete = %v, %v", done, err)
			}
			if c := content(t, a, done.File.ID); !bytes.Equal(c, data) {
				t.Errorf("content of the completed upload differs (%d bytes)", len(c))
			}
			r := g.Do("GET", "/v1/files/"+done.File.ID+"/content", keyA, nil, "Range", "bytes=0-5001")
			if r.Status != 206 || !bytes.Equal(r.Body, data[:5002]) {
				t.Errorf("range across parts: %d %q", r.Status, r.Body)
			}
			_, err = a.Uploads.Complete(ctx, u.ID, openai.UploadCompleteParams{PartIDs: ids})
			apiError(t, err, 409)
			_, err = a.Uploads.Parts.New(ctx, u.ID, openai.UploadPartNewParams{Data: strings.NewReader("more")})
			apiError(t, err, 409)
			_, err = a.Uploads.Cancel(ctx, u.ID)
			apiError(t, err, 409)

			// A part beyond the declared size is refused.
			u2, err := a.Uploads.New(ctx, openai.UploadNewParams{Bytes: 3, Filename: "s.txt", MimeType: "text/plain", Purpose: openai.FilePurposeUserData})
			if err != nil {
				t.Fatal(err)
			}
			_, err = a.Uploads.Parts.New(ctx, u2.ID, openai.UploadPartNewParams{Data: strings.NewReader("four")})
			if e := apiError(t, err, 400); e.Param != "data" {
				t.Errorf("oversized part: %s", e.Message)
			}
			// Cancel removes the parts.
			p, err := a.Uploads.Parts.New(ctx, u2.ID, openai.UploadPartNewParams{Data: strings.NewReader("ab")})
			if err != nil {
				t.Fatal(err)
			}
			cancelled, err := a.Uploads.Cancel(ctx, u2.ID)
			if err != nil || cancelled.Status != "cancelled" {
				t.Fatalf("cancel = %v, %v", cancelled, err)
			}
			if _, err := g.Backend.Blobs.Size(ctx, "uploads/"+u2.ID+"/"+p.ID); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("a cancelled upload's part remains: %v", err)
			}
			_, err = a.Uploads.Parts.New(ctx, u2.ID, openai.UploadPartNewParams{Data: strings.NewReader("c")})
			apiError(t, err, 409)
			_, err = a.Uploads.Complete(ctx, u2.ID, openai.UploadCompleteParams{PartIDs: []string{p.ID}})
			apiError(t, err, 409)
		})

		t.Run("uploads API validates batch lines across parts", func(t *testing.T) {
			good := batchLine("a", "/v1/embeddings") + "\n"
			bad := `{"custom_id":"b","method":"GET","url":"/v1/embeddings","body":{}}` + "\n"
			data := good + good + bad
			u, err := a.Uploads.New(ctx, openai.UploadNewParams{Bytes: int64(len(data)), Filename: "in.jsonl", MimeType: "text/jsonl", Purpose: openai.FilePurposeBatch})
			if err != nil {
				t.Fatal(err)
			}
			// The bad line straddles the two parts.
			cut := len(good)*2 + 10
			p1, err1 := a.Uploads.Parts.New(ctx, u.ID, openai.UploadPartNewParams{Data: strings.NewReader(data[:cut])})
			p2, err2 := a.Uploads.Parts.New(ctx, u.ID, openai.UploadPartNewParams{Data: strings.NewReader(data[cut:])})
			if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			_, err = a.Uploads.Complete(ctx, u.ID, openai.UploadCompleteParams{PartIDs: []string{p1.ID, p2.ID}})
			if e := apiError(t, err, 400); !strings.Contains(e.Message, "line 3") || !strings.Contains(e.Message, `"GET"`) {
				t.Errorf("message %q must name line 3 and the method", e.Message)
			}
			if _, err := a.Uploads.Cancel(ctx, u.ID); err != nil {
				t.Fatal(err)
			}
		})

		t.Run("expiry", func(t *testing.T) {
			f, err := a.Files.New(ctx, openai.FileNewParams{
				File:         openai.File(strings.NewReader("short-lived"), "s.txt", "text/plain"),
				Purpose:      openai.FilePurposeUserData,
				ExpiresAfter: openai.FileNewParamsExpiresAfter{Seconds: 3600},
			})
			if err != nil || f.ExpiresAt != f.CreatedAt+3600 {
				t.Fatalf("upload = %v, %v", f, err)
			}
			keep := upload(t, a, "long-lived", "l.txt", openai.FilePurposeUserData)
			u, err := a.Uploads.New(ctx, openai.UploadNewParams{Bytes: 10, Filename: "u.txt", MimeType: "text/plain", Purpose: openai.FilePurposeUserData})
			if err != nil {
				t.Fatal(err)
			}
			part, err := a.Uploads.Parts.New(ctx, u.ID, openai.UploadPartNewParams{Data: strings.NewReader("12345")})
			if err != nil {
				t.Fatal(err)
			}
			clk.Advance(2 * time.Hour)
			defer clk.Advance(-2 * time.Hour)

			_, err = a.Files.Get(ctx, f.ID)
			apiError(t, err, 404)
			_, err = a.Files.Content(ctx, f.ID)
			apiError(t, err, 404)
			_, err = a.Files.Delete(ctx, f.ID)
			apiError(t, err, 404)
			var listed []string
			for _, c := range []openai.Client{a, admin} {
				it := c.Files.ListAutoPaging(ctx, openai.FileListParams{})
				for it.Next() {
					listed = append(listed, it.Current().ID)
				}
			}
			if slices.Contains(listed, f.ID) || !slices.Contains(listed, keep.ID) {
				t.Errorf("listings after expiry: %v (expired %s, kept %s)", listed, f.ID, keep.ID)
			}
			_, err = a.Uploads.Parts.New(ctx, u.ID, openai.UploadPartNewParams{Data: strings.NewReader("67890")})
			if e := apiError(t, err, 409); !strings.Contains(e.Message, "expired") {
				t.Errorf("part on an expired upload: %s", e.Message)
			}
			// Reads refuse at once; the sweep reclaims the bytes.
			if _, err := g.Backend.Blobs.Size(ctx, "files/"+f.ID); err != nil {
				t.Fatalf("before the sweep the bytes are still there: %v", err)
			}
			res, err := g.Services.Files.Sweep(ctx)
			if err != nil || res.Files < 1 || res.Uploads < 1 || res.Failed != 0 {
				t.Fatalf("sweep = %+v, %v", res, err)
			}
			for _, key := range []string{"files/" + f.ID, "uploads/" + u.ID + "/" + part.ID} {
				if _, err := g.Backend.Blobs.Size(ctx, key); !errors.Is(err, store.ErrNotFound) {
					t.Errorf("after the sweep %s remains: %v", key, err)
				}
			}
			if c := content(t, a, keep.ID); string(c) != "long-lived" {
				t.Errorf("the sweep touched a live file: %q", c)
			}
			if res, err := g.Services.Files.Sweep(ctx); err != nil || res.Files+res.Uploads != 0 {
				t.Errorf("a second sweep found more: %+v, %v", res, err)
			}
		})

		t.Run("bad inputs", func(t *testing.T) {
			badBatch := batchLine("a", "/v1/embeddings") + "\n" + batchLine("b", "/v1/embeddings") + "\n" + `{"custom_id":"c","method":"POST","url":"/v1/images","body":{}}` + "\n"
			cases := []struct {
				name        string
				parts       []string // name/value pairs; "@file" is the file part
				status      int
				code, param string
				message     string
			}{
				{"empty file", []string{"purpose", "user_data", "@file", ""}, 400, "invalid_value", "file", "empty"},
				{"empty file, purpose after", []string{"@file", "", "purpose", "user_data"}, 400, "invalid_value", "file", "empty"},
				{"missing purpose", []string{"@file", "x"}, 400, "missing_required_parameter", "purpose", "purpose"},
				{"missing file", []string{"purpose", "user_data"}, 400, "missing_required_parameter", "file", "file"},
				{"unknown purpose", []string{"purpose", "homework", "@file", "x"}, 400, "invalid_value", "purpose", "homework"},
				{"output purpose", []string{"purpose", "batch_output", "@file", "x"}, 400, "invalid_value", "purpose", "batch_output"},
				{"bad batch line", []string{"purpose", "batch", "@file", badBatch}, 400, "invalid_value", "file", "line 3"},
				{"bad batch line, purpose after", []string{"@file", badBatch, "purpose", "batch"}, 400, "invalid_value", "file", "line 3"},
				{"not jsonl batch", []string{"purpose", "batch", "@file", "\x89PNG"}, 400, "invalid_value", "file", "line 1"},
				{"bad anchor", []string{"purpose", "user_data", "expires_after[anchor]", "now", "expires_after[seconds]", "3600", "@file", "x"}, 400, "invalid_value", "expires_after[anchor]", "created_at"},
				{"expiry too short", []string{"purpose", "user_data", "expires_after[anchor]", "created_at", "expires_after[seconds]", "60", "@file", "x"}, 400, "invalid_value", "expires_after[seconds]", "3600"},
				{"anchor without seconds", []string{"purpose", "user_data", "expires_after[anchor]", "created_at", "@file", "x"}, 400, "missing_required_parameter", "expires_after[seconds]", ""},
				{"two files", []string{"purpose", "user_data", "@file", "a", "@file", "b"}, 400, "invalid_value", "file", "one"},
			}
			for _, tc := range cases {
				before := listIDs(t, a)
				body, ct := multipartBody(tc.parts...)
				r := g.Do("POST", "/v1/files", keyA, body, "Content-Type", ct)
				checkError(t, tc.name, r, tc.status, tc.code, tc.param, tc.message)
				if after := listIDs(t, a); !slices.Equal(before, after) {
					t.Errorf("%s: a refused upload left a file: %v", tc.name, after)
				}
			}
			r := g.Do("POST", "/v1/files", keyA, `{"purpose":"batch"}`)
			checkError(t, "json body", r, 400, "invalid_value", "", "multipart")
			for _, tc := range []struct{ query, param string }{
				{"limit=0", "limit"}, {"limit=10001", "limit"}, {"limit=x", "limit"}, {"order=up", "order"},
				{"after=nope", "after"}, {"after=file-AAAAAAAAAAAAAAAAAAAAAAAA", "after"}, {"purpose=homework", "purpose"},
			} {
				r := g.Do("GET", "/v1/files?"+tc.query, keyA, nil)
				checkError(t, tc.query, r, 400, "invalid_value", tc.param, "")
			}
			for _, tc := range []struct {
				body        any
				status      int
				code, param string
			}{
				{map[string]any{"purpose": "batch", "bytes": 10, "mime_type": "text/jsonl"}, 400, "missing_required_parameter", "filename"},
				{map[string]any{"filename": "a", "purpose": "batch", "bytes": 0, "mime_type": "text/jsonl"}, 400, "invalid_value", "bytes"},
				{map[string]any{"filename": "a", "purpose": "nope", "bytes": 1, "mime_type": "text/jsonl"}, 400, "invalid_value", "purpose"},
				{map[string]any{"filename": "a", "purpose": "batch", "bytes": 300 << 20, "mime_type": "text/jsonl"}, 413, "payload_too_large", ""},
				{map[string]any{"filename": "a", "purpose": "user_data", "bytes": 1, "mime_type": "not a type"}, 400, "invalid_value", "mime_type"},
			} {
				r := g.Do("POST", "/v1/uploads", keyA, tc.body)
				checkError(t, fmt.Sprint(tc.body), r, tc.status, tc.code, tc.param, "")
			}
			r = g.Do("POST", "/v1/uploads/upload_AAAAAAAAAAAAAAAAAAAAAAAA/complete", keyA, map[string]any{"part_ids": []string{"part_x"}})
			checkError(t, "unknown upload", r, 404, "not_found", "", "")
		})
	})
}

func listIDs(t *testing.T, c openai.Client) []string {
	t.Helper()
	p, err := c.Files.List(context.Background(), openai.FileListParams{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, f := range p.Data {
		ids = append(ids, f.ID)
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

func checkError(t *testing.T, name string, r gatewaytest.Response, status int, code, param, message string) {
	t.Helper()
	var body struct {
		Error struct {
			Message string  `json:"message"`
			Param   *string `json:"param"`
			Code    *string `json:"code"`
		} `json:"error"`
	}
	json.Unmarshal(r.Body, &body)
	gotParam := ""
	if body.Error.Param != nil {
		gotParam = *body.Error.Param
	}
	if r.Status != status || r.ErrorCode(t) != code || gotParam != param || !strings.Contains(body.Error.Message, message) {
		t.Errorf("%s: %d %s; want %d code %q param %q message containing %q", name, r.Status, r.Body, status, code, param, message)
	}
}

func TestFileSizeLimit(t *testing.T) {
	gatewaytest.Run(t, gatewaytest.Options{Settings: func(s *config.Settings) { s.MaxFileSize = 1000 }}, func(t *testing.T, g *gatewaytest.Gateway) {
		_, key := g.TeamKey()
		for _, order := range [][]string{
			{"purpose", "user_data", "@file", strings.Repeat("x", 1001)},
			{"@file", strings.Repeat("x", 1001), "purpose", "user_data"},
		} {
			body, ct := multipartBody(order...)
			r := g.Do("POST", "/v1/files", key, body, "Content-Type", ct)
			checkError(t, "too large", r, http.StatusRequestEntityTooLarge, "payload_too_large", "", "1000 bytes")
		}
		body, ct := multipartBody("purpose", "user_data", "@file", strings.Repeat("x", 1000))
		if r := g.Do("POST", "/v1/files", key, body, "Content-Type", ct); r.Status != 200 {
			t.Errorf("a file at the limit: %d %s", r.Status, r.Body)
		}
		r := g.Do("POST", "/v1/uploads", key, map[string]any{"filename": "a", "purpose": "user_data", "bytes": 1001, "mime_type": "text/plain"})
		checkError(t, "upload too large", r, 413, "payload_too_large", "", "")
		if len(listIDs(t, sdk(g, key))) != 1 {
			t.Error("a refused upload was stored")
		}
	})
}
