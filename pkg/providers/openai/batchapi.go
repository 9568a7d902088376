package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"

	"github.com/sluice-gateway/sluice/pkg/models"
	"github.com/sluice-gateway/sluice/pkg/providers"
)

// BatchAPI speaks OpenAI's Files and Batch APIs, which Azure OpenAI serves
// too (under {api_base}/openai, with an api-version query and an api-key
// header): a native batch's input is uploaded as a file of purpose batch,
// the batch is created on it, polled, cancelled, and its output and error
// files read.
//
//	POST   {base}/files{query}                 multipart: purpose=batch, file
//	POST   {base}/batches{query}               {input_file_id, endpoint, completion_window, metadata}
//	GET    {base}/batches/{id}{query}
//	POST   {base}/batches/{id}/cancel{query}
//	GET    {base}/files/{id}/content{query}
//	DELETE {base}/files/{id}{query}
type BatchAPI struct {
	Provider string
	Client   *http.Client
	// Base is the URL the paths follow; Query ("" or "?api-version=…")
	// follows them.
	Base  string
	Query string
	// Header is sent on every call (credentials); never modified.
	Header http.Header
	// NoV1 says the provider names batch endpoints without OpenAI's /v1
	// (Azure: /chat/completions).
	NoV1 bool
}

// BatchURL is how the provider names a batch endpoint (and a line's url).
func (b *BatchAPI) BatchURL(endpoint string) string {
	if b.NoV1 {
		return strings.TrimPrefix(endpoint, "/v1")
	}
	return endpoint
}

// SubmitBatch uploads in.Lines as a file of purpose batch, streaming, then
// creates the batch on it. A batch the provider refuses has its file
// deleted again.
func (b *BatchAPI) SubmitBatch(ctx context.Context, in *models.BatchInput) (models.BatchRef, error) {
	fileID, err := b.upload(ctx, in.ID+".jsonl", in.Lines)
	if err != nil {
		return models.BatchRef{}, err
	}
	body := map[string]any{
		"input_file_id": fileID, "endpoint": b.BatchURL(in.Endpoint), "completion_window": in.Window,
	}
	meta := map[string]string{"sluice_batch_id": in.ID}
	for k, v := range in.Metadata {
		if len(meta) < 16 {
			meta[k] = v
		}
	}
	body["metadata"] = meta
	req, _, err := providers.NewRequest(ctx, b.Provider, b.url("/batches"), body)
	if err != nil {
		return models.BatchRef{}, b.discard(ctx, fileID, err)
	}
	var created struct {
		ID string `json:"id"`
	}
	if err := b.do(req, &created); err != nil {
		return models.BatchRef{}, b.discard(ctx, fileID, err)
	}
	if created.ID == "" {
		return models.BatchRef{}, b.discard(ctx, fileID, &models.ProviderError{Provider: b.Provider, Status: http.StatusOK, Message: "created a batch without an id"})
	}
	return models.BatchRef{FileID: fileID, BatchID: created.ID}, nil
}

// discard deletes the provider's file of a batch that could not be made,
// and returns err (joined with the delete's failure, if any).
func (b *BatchAPI) discard(ctx context.Context, fileID string, err error) error {
	ctx = context.WithoutCancel(ctx)
	req, rerr := http.NewRequestWithContext(ctx, http.MethodDelete, b.url("/files/"+url.PathEscape(fileID)), nil)
	if rerr == nil {
		rerr = b.do(req, nil)
	}
	if rerr != nil {
		return errors.Join(err, fmt.Errorf("%s: delete file %s of the refused batch: %w", b.Provider, fileID, rerr))
	}
	return err
}

// upload streams r as a multipart form: memory stays one copy buffer
// whatever the file's size.
func (b *BatchAPI) upload(ctx context.Context, name string, r io.Reader) (string, error) {
	pr, pw := io.Pipe()
	form := multipart.NewWriter(pw)
	go func() {
		err := form.WriteField("purpose", "batch")
		if err == nil {
			var part io.Writer
			if part, err = form.CreateFormFile("file", name); err == nil {
				if _, err = io.Copy(part, r); err == nil {
					err = form.Close()
				}
			}
		}
		pw.CloseWithError(err)
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.url("/files"), pr)
	if err != nil {
		pr.CloseWithError(err)
		return "", fmt.Errorf("%s: build the upload: %w", b.Provider, err)
	}
	req.Header = b.Header.Clone()
	req.Header.Set("Content-Type", form.FormDataContentType())
	var f struct {
		ID string `json:"id"`
	}
	err = b.send(req, &f)
	pr.CloseWithError(err) // a refused upload stops the copy
	if err != nil {
		return "", err
	}
	if f.ID == "" {
		return "", &models.ProviderError{Provider: b.Provider, Status: http.StatusOK, Message: "uploaded the batch's file without giving its id"}
	}
	return f.ID, nil
}

// batchObject is the provider's Batch object, as far as sluice mirrors it.
type batchObject struct {
	Status string `json:"status"`
	Errors *struct {
		Data []struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Param   string `json:"param"`
			Line    int    `json:"line"`
		} `json:"data"`
	} `json:"errors"`
	OutputFileID  string `json:"output_file_id"`
	ErrorFileID   string `json:"error_file_id"`
	InProgressAt  int64  `json:"in_progress_at"`
	FinalizingAt  int64  `json:"finalizing_at"`
	CompletedAt   int64  `json:"completed_at"`
	FailedAt      int64  `json:"failed_at"`
	ExpiredAt     int64  `json:"expired_at"`
	CancellingAt  int64  `json:"cancelling_at"`
	CancelledAt   int64  `json:"cancelled_at"`
	RequestCounts struct {
		Total     int64 `json:"total"`
		Completed int64 `json:"completed"`
		Failed    int64 `json:"failed"`
	} `json:"request_counts"`
}

func (o *batchObject) state() models.BatchState {
	st := models.BatchState{
		Status: o.Status, Total: o.RequestCounts.Total, Completed: o.RequestCounts.Completed, Failed: o.RequestCounts.Failed,
		InProgressAt: o.InProgressAt, FinalizingAt: o.FinalizingAt, CompletedAt: o.CompletedAt, FailedAt: o.FailedAt,
		ExpiredAt: o.ExpiredAt, CancellingAt: o.CancellingAt, CancelledAt: o.CancelledAt,
		OutputFile: o.OutputFileID, ErrorFile: o.ErrorFileID,
	}
	if o.Errors != nil {
		for _, e := range o.Errors.Data {
			st.Errors = append(st.Errors, models.BatchError{Code: e.Code, Message: e.Message, Param: e.Param, Line: e.Line})
		}
	}
	return st
}

// PollBatch reads GET {base}/batches/{id}.
func (b *BatchAPI) PollBatch(ctx context.Context, ref models.BatchRef) (models.BatchState, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.url("/batches/"+url.PathEscape(ref.BatchID)), nil)
	if err != nil {
		return models.BatchState{}, fmt.Errorf("%s: build the request: %w", b.Provider, err)
	}
	var o batchObject
	if err := b.do(req, &o); err != nil {
		return models.BatchState{}, err
	}
	return o.state(), nil
}

// CancelBatch sends POST {base}/batches/{id}/cancel.
func (b *BatchAPI) CancelBatch(ctx context.Context, ref models.BatchRef) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.url("/batches/"+url.PathEscape(ref.BatchID)+"/cancel"), nil)
	if err != nil {
		return fmt.Errorf("%s: build the request: %w", b.Provider, err)
	}
	return b.do(req, nil)
}

// BatchResults opens GET {base}/files/{file}/content: the provider's lines
// are OpenAI's already.
func (b *BatchAPI) BatchResults(ctx context.Context, _ models.BatchRef, _, file string, _ models.BatchStore) (io.ReadCloser, error) {
	if file == "" {
		return nil, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.url("/files/"+url.PathEscape(file)+"/content"), nil)
	if err != nil {
		return nil, fmt.Errorf("%s: build the request: %w", b.Provider, err)
	}
	req.Header = b.Header.Clone()
	req.Header.Del("Content-Type")
	resp, err := providers.Send(b.Client, req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", b.Provider, req.URL.Path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, models.ReadProviderError(b.Provider, resp)
	}
	return resp.Body, nil
}

func (b *BatchAPI) url(path string) string { return b.Base + path + b.Query }

// do sends req with the API's headers and decodes its JSON answer into v
// (nil: discarded).
func (b *BatchAPI) do(req *http.Request, v any) error {
	h := b.Header.Clone()
	for k, vs := range req.Header {
		h[k] = vs
	}
	req.Header = h
	return b.send(req, v)
}

func (b *BatchAPI) send(req *http.Request, v any) error {
	resp, err := providers.Do(b.Client, b.Provider, req)
	if err != nil {
		return err
	}
	if v == nil {
		return nil
	}
	if err := json.Unmarshal(resp.Body, v); err != nil {
		return &models.ProviderError{Provider: b.Provider, Status: resp.Status, Message: "answered JSON sluice cannot read: " + err.Error()}
	}
	return nil
}
