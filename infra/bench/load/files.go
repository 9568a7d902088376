package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"mime/multipart"
	"net/http"
	"time"
)

// patternBlock is the size of the pseudo-random block an upload repeats.
const patternBlock = 1 << 20

// pattern is an endless reader repeating one pseudo-random block: the same
// bytes for the disk baseline and for sluice, without holding 200 MB.
type pattern struct {
	block []byte
	off   int
}

func newPattern(seed uint64) *pattern {
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	b := make([]byte, patternBlock)
	for i := 0; i < len(b); i += 8 {
		v := rng.Uint64()
		for j := range 8 {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return &pattern{block: b}
}

func (p *pattern) Read(b []byte) (int, error) {
	n := 0
	for n < len(b) {
		k := copy(b[n:], p.block[p.off:])
		n += k
		p.off = (p.off + k) % len(p.block)
	}
	return n, nil
}

// multipartEnvelope returns the bytes around a file's content in a
// multipart/form-data body with a purpose field, so a body of known length
// can be streamed without buffering the file.
func multipartEnvelope(purpose, filename string) (head, tail []byte, contentType string, err error) {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	if err := mw.WriteField("purpose", purpose); err != nil {
		return nil, nil, "", fmt.Errorf("multipart purpose: %w", err)
	}
	if _, err := mw.CreateFormFile("file", filename); err != nil {
		return nil, nil, "", fmt.Errorf("multipart file header: %w", err)
	}
	head = bytes.Clone(buf.Bytes())
	buf.Reset()
	if err := mw.Close(); err != nil {
		return nil, nil, "", fmt.Errorf("multipart close: %w", err)
	}
	return head, bytes.Clone(buf.Bytes()), mw.FormDataContentType(), nil
}

// filesClient talks to sluice's Files API with a team key.
type filesClient struct {
	client *http.Client
	base   string
	key    string
}

// fileAnswer is the part of an OpenAI file object the harness reads.
type fileAnswer struct {
	ID    string `json:"id"`
	Bytes int64  `json:"bytes"`
}

// upload streams size bytes of data as POST /v1/files and returns the
// status and answer.
func (f filesClient) upload(ctx context.Context, purpose, filename string, size int64, data io.Reader) (int, []byte, error) {
	head, tail, ct, err := multipartEnvelope(purpose, filename)
	if err != nil {
		return 0, nil, err
	}
	body := io.MultiReader(bytes.NewReader(head), io.LimitReader(data, size), bytes.NewReader(tail))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.base+"/v1/files", body)
	if err != nil {
		return 0, nil, err
	}
	req.ContentLength = int64(len(head)) + size + int64(len(tail))
	req.Header.Set("Content-Type", ct)
	req.Header.Set("Authorization", "Bearer "+f.key)
	resp, err := f.client.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("POST /v1/files: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, b, err
}

// download reads GET /v1/files/{id}/content to the end, hashing it.
func (f filesClient) download(ctx context.Context, id string, sum hash.Hash32) (int, int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.base+"/v1/files/"+id+"/content", nil)
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Authorization", "Bearer "+f.key)
	resp, err := f.client.Do(req)
	if err != nil {
		return 0, 0, fmt.Errorf("GET content: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, 0, nil
	}
	n, err := io.CopyBuffer(sum, resp.Body, make([]byte, 256<<10))
	return resp.StatusCode, n, err
}

func (f filesClient) delete(ctx context.Context, id string) {
	_, _, _ = doJSON(ctx, f.client, http.MethodDelete, f.base+"/v1/files/"+id, f.key, nil)
}

// uploadSmall uploads b and returns the new file's id; a missing route is
// a skip.
func (f filesClient) uploadSmall(ctx context.Context, purpose, filename string, b []byte) (string, error) {
	status, body, err := f.upload(ctx, purpose, filename, int64(len(b)), bytes.NewReader(b))
	if err != nil {
		return "", err
	}
	if status == http.StatusNotFound || status == http.StatusMethodNotAllowed {
		return "", skipf("POST /v1/files answers %d: the Files API has not landed in sluice yet", status)
	}
	if status/100 != 2 {
		return "", fmt.Errorf("POST /v1/files (%s, %d bytes) answers %d: %s", purpose, len(b), status, clip(body))
	}
	var fa fileAnswer
	if err := json.Unmarshal(body, &fa); err != nil || fa.ID == "" {
		return "", fmt.Errorf("POST /v1/files: no file id in %s", clip(body))
	}
	return fa.ID, nil
}

// probeFiles checks that upload and content download both work.
func (f filesClient) probeFiles(ctx context.Context, purpose string) error {
	content := []byte("sluice bench probe\n")
	id, err := f.uploadSmall(ctx, purpose, "probe.txt", content)
	if err != nil {
		return err
	}
	defer f.delete(ctx, id)
	sum := crc32.NewIEEE()
	status, n, err := f.download(ctx, id, sum)
	switch {
	case err != nil:
		return err
	case status == http.StatusNotFound || status == http.StatusMethodNotAllowed:
		return skipf("GET /v1/files/{id}/content answers %d: file download has not landed in sluice yet", status)
	case status != http.StatusOK:
		return fmt.Errorf("GET /v1/files/{id}/content answers %d", status)
	case n != int64(len(content)) || sum.Sum32() != crc32.ChecksumIEEE(content):
		return fmt.Errorf("GET /v1/files/{id}/content returned %d bytes that differ from the %d uploaded", n, len(content))
	}
	return nil
}

// mbps is megabytes (MiB) per second.
func mbps(bytes int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return mb(bytes) / d.Seconds()
}
