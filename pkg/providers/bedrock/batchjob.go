package bedrock

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/models"
	"github.com/sluice-gateway/sluice/pkg/oai"
	"github.com/sluice-gateway/sluice/pkg/providers"
	"github.com/sluice-gateway/sluice/pkg/providers/embedbatch"
	"github.com/sluice-gateway/sluice/pkg/store"
)

// Bedrock batch inference: a native batch's lines become Bedrock's records
// ({"recordId","modelInput"}, the model's body built by the same
// translation as chat — Converse — and embeddings — InvokeModel), written
// under the batch's prefix of sluice's bucket; a model invocation job runs
// them on the control-plane host (bedrock.{region}.amazonaws.com, or
// AWS_ENDPOINT_URL_BEDROCK), SigV4-signed as the runtime is:
//
//	POST /model-invocation-job                    CreateModelInvocationJob
//	GET  /model-invocation-job/{jobArn}           GetModelInvocationJob
//	POST /model-invocation-job/{jobArn}/stop      StopModelInvocationJob
//
// The job writes <output prefix><job id>/<input file>.out (one record per
// line, modelOutput or error) and manifest.json.out; BatchResults turns the
// records back into OpenAI batch lines.

// Keys of a Bedrock batch's objects under its prefix.
const (
	batchInputName = "input.jsonl"
	batchOutputDir = "output/"
)

// ControlEndpoint is the Bedrock control-plane base URL of region.
func ControlEndpoint(region string) string { return "https://bedrock." + region + ".amazonaws.com" }

// maxRecordBytes bounds one line of Bedrock's output read back.
const maxRecordBytes = providers.MaxAnswerBytes

// invocationType is the job's modelInvocationType for an endpoint.
func invocationType(endpoint string) (string, error) {
	switch endpoint {
	case "/v1/chat/completions":
		return "Converse", nil
	case "/v1/embeddings":
		return "InvokeModel", nil
	}
	return "", api.InvalidValue("endpoint", "Bedrock batches run /v1/chat/completions and /v1/embeddings, not %s.", endpoint)
}

// SubmitBatch converts the lines into Bedrock's records under the batch's
// prefix of sluice's bucket and creates the job on them. A job Bedrock
// refuses has its input object deleted again.
func (e *endpoint) SubmitBatch(ctx context.Context, in *models.BatchInput) (models.BatchRef, error) {
	typ, err := invocationType(in.Endpoint)
	if err != nil {
		return models.BatchRef{}, err
	}
	if e.roleARN == "" {
		return models.BatchRef{}, api.Unavailable("Bedrock model '%s' has no service role for batch inference: set litellm_params.aws_batch_role_arn (or AWS_BATCH_ROLE_ARN).", e.model)
	}
	prefix := "batches/" + in.ID + "/bedrock/"
	inKey := prefix + batchInputName
	inURI, ok := in.Store.S3URI(inKey)
	outURI, _ := in.Store.S3URI(prefix + batchOutputDir)
	if !ok {
		return models.BatchRef{}, api.InvalidValue("custom_llm_provider", "Bedrock batches read their input from S3: they need sluice's AWS backend.")
	}
	pr, pw := io.Pipe()
	var convErr error
	converted := make(chan struct{})
	go func() {
		defer close(converted)
		convErr = e.records(in.Endpoint, in.Lines, pw)
		pw.CloseWithError(convErr)
	}()
	if _, err := in.Store.Put(ctx, inKey, pr); err != nil {
		pr.CloseWithError(err)
		<-converted
		_ = in.Store.Delete(context.WithoutCancel(ctx), inKey)
		// A line Bedrock cannot take, whatever the store made of the cut write.
		var ae *api.Error
		if errors.As(convErr, &ae) {
			return models.BatchRef{}, ae
		}
		return models.BatchRef{}, fmt.Errorf("bedrock: write the batch's input: %w", err)
	}
	<-converted
	hours := 24
	body := map[string]any{
		"jobName":                "sluice-" + strings.ReplaceAll(in.ID, "_", "-"),
		"clientRequestToken":     in.ID,
		"roleArn":                e.roleARN,
		"modelId":                e.id,
		"modelInvocationType":    typ,
		"inputDataConfig":        map[string]any{"s3InputDataConfig": map[string]any{"s3Uri": inURI, "s3InputFormat": "JSONL"}},
		"outputDataConfig":       map[string]any{"s3OutputDataConfig": map[string]any{"s3Uri": outURI}},
		"timeoutDurationInHours": hours,
		"tags":                   []map[string]string{{"key": "sluice_batch_id", "value": in.ID}},
	}
	var created struct {
		JobArn string `json:"jobArn"`
	}
	if err := e.control(ctx, http.MethodPost, "/model-invocation-job", body, &created); err != nil {
		_ = in.Store.Delete(context.WithoutCancel(ctx), inKey)
		return models.BatchRef{}, err
	}
	if created.JobArn == "" {
		_ = in.Store.Delete(context.WithoutCancel(ctx), inKey)
		return models.BatchRef{}, &models.ProviderError{Provider: Name, Status: http.StatusOK, Message: "created a model invocation job without its jobArn"}
	}
	return models.BatchRef{FileID: inKey, BatchID: created.JobArn, Prefix: prefix, Endpoint: in.Endpoint}, nil
}

// record is one line of Bedrock's batch input.
type record struct {
	RecordID   string          `json:"recordId"`
	ModelInput json.RawMessage `json:"modelInput"`
}

// records converts OpenAI batch lines (one per line of r) into Bedrock's
// records on w, a line at a time. A line it cannot translate is a 400
// naming it.
func (e *endpoint) records(endpoint string, r io.Reader, w io.Writer) error {
	enc := json.NewEncoder(w)
	return eachLine(r, func(n int, raw []byte) error {
		var l struct {
			CustomID string          `json:"custom_id"`
			Body     json.RawMessage `json:"body"`
		}
		if err := json.Unmarshal(raw, &l); err != nil {
			return lineError(n, "Line %d is not a batch request line.", n)
		}
		in, err := e.modelInput(endpoint, l.Body)
		if err != nil {
			ae := api.AsError(err)
			return lineError(n, "Line %d cannot run on Bedrock: %s", n, ae.Message)
		}
		return enc.Encode(record{RecordID: l.CustomID, ModelInput: in})
	})
}

func lineError(line int, format string, args ...any) *api.Error {
	return api.InvalidValue(fmt.Sprintf("line %d", line), format, args...)
}

// eachLine calls f with each non-blank line of r (numbered from 1, without
// its line end) until r ends or f fails.
func eachLine(r io.Reader, f func(n int, line []byte) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for n := 1; ; n++ {
		raw, err := readLine(br)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := f(n, raw); err != nil {
			return err
		}
	}
}

// readLine reads one line (without its terminator) of at most
// maxRecordBytes; io.EOF at the end.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxRecordBytes {
			return nil, fmt.Errorf("bedrock: a line over %d bytes", maxRecordBytes)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == io.EOF && len(bytes.TrimSpace(line)) > 0 {
			return line, nil
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(line)) == 0 {
			line = line[:0]
			continue
		}
		return bytes.TrimRight(line, "\r\n"), nil
	}
}

// modelInput is a line body's Bedrock body: a Converse request for chat
// (the chat translation), the model's InvokeModel body for embeddings.
func (e *endpoint) modelInput(endpoint string, body []byte) (json.RawMessage, error) {
	if endpoint == "/v1/chat/completions" {
		req, err := oai.ParseChatRequest(body)
		if err != nil {
			return nil, err
		}
		if req.Stream {
			return nil, api.InvalidValue("stream", "A batch line cannot stream.")
		}
		t, err := e.translate(req)
		if err != nil {
			return nil, err
		}
		return json.Marshal(&t.out)
	}
	req, err := oai.ParseEmbeddingRequest(body)
	if err != nil {
		return nil, err
	}
	texts, err := embedbatch.Texts(req, Name)
	if err != nil {
		return nil, err
	}
	switch e.family {
	case familyTitanV1, familyTitanV2:
		if len(texts) != 1 {
			return nil, api.InvalidValue("input", "Titan embeds one text per call: a batch line for it has one input, not %d.", len(texts))
		}
		tr := titanRequest{InputText: texts[0], Normalize: e.defaults.normalize}
		if e.family == familyTitanV2 {
			tr.Dimensions, tr.EmbeddingTypes = req.Dimensions, []string{"float"}
		}
		return json.Marshal(tr)
	case familyCohere:
		if len(texts) > CohereMaxTexts {
			return nil, api.InvalidValue("input", "Cohere Embed takes at most %d texts a call.", CohereMaxTexts)
		}
		it := e.defaults.inputType
		if it == "" {
			it = DefaultCohereInputType
		}
		return json.Marshal(cohereRequest{Texts: texts, InputType: embedbatch.CohereInputType(it), EmbeddingTypes: []string{"float"}, OutputDimension: req.Dimensions, Truncate: e.defaults.truncate})
	}
	return nil, api.InvalidValue("model", "Bedrock model '%s' is not one sluice translates for embeddings (Titan Text Embeddings, Cohere Embed).", e.model)
}

// jobObject is GetModelInvocationJob's answer, as far as sluice mirrors it.
type jobObject struct {
	Status               string    `json:"status"`
	Message              string    `json:"message"`
	SubmitTime           time.Time `json:"submitTime"`
	EndTime              time.Time `json:"endTime"`
	TotalRecordCount     int64     `json:"totalRecordCount"`
	SuccessRecordCount   int64     `json:"successRecordCount"`
	ErrorRecordCount     int64     `json:"errorRecordCount"`
	ProcessedRecordCount int64     `json:"processedRecordCount"`
}

// PollBatch reads GetModelInvocationJob and maps Bedrock's statuses to
// OpenAI's.
func (e *endpoint) PollBatch(ctx context.Context, ref models.BatchRef) (models.BatchState, error) {
	var j jobObject
	if err := e.control(ctx, http.MethodGet, "/model-invocation-job/"+EscapeModelID(ref.BatchID), nil, &j); err != nil {
		return models.BatchState{}, err
	}
	st := models.BatchState{Total: j.TotalRecordCount, Completed: j.SuccessRecordCount, Failed: j.ErrorRecordCount}
	end := unix(j.EndTime)
	switch j.Status {
	case "Submitted", "Validating", "Scheduled":
		st.Status = "validating"
	case "InProgress":
		st.Status, st.InProgressAt = "in_progress", unix(j.SubmitTime)
	case "Stopping":
		st.Status = "cancelling"
	case "Stopped":
		st.Status, st.CancelledAt = "cancelled", end
	case "Completed", "PartiallyCompleted":
		st.Status, st.CompletedAt = "completed", end
	case "Expired":
		st.Status, st.ExpiredAt = "expired", end
	case "Failed":
		st.Status, st.FailedAt = "failed", end
		st.Errors = []models.BatchError{{Code: "bedrock_job_failed", Message: j.Message}}
	default:
		return st, &models.ProviderError{Provider: Name, Status: http.StatusOK, Message: fmt.Sprintf("a model invocation job in status %q", j.Status)}
	}
	switch st.Status {
	case "completed", "cancelled", "expired", "failed":
		// Bedrock's job id is the ARN's last part; the output of input.jsonl
		// is input.jsonl.out under it.
		id := ref.BatchID[strings.LastIndex(ref.BatchID, "/")+1:]
		key := ref.Prefix + batchOutputDir + id + "/" + batchInputName + ".out"
		st.OutputFile, st.ErrorFile = key, key
	}
	return st, nil
}

func unix(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Unix()
}

// CleanBatch removes the job's input and output objects (the batch's
// files are copies).
func (e *endpoint) CleanBatch(ctx context.Context, ref models.BatchRef, st models.BatchStore) error {
	id := ref.BatchID[strings.LastIndex(ref.BatchID, "/")+1:]
	out := ref.Prefix + batchOutputDir + id + "/"
	var errs []error
	for _, key := range []string{ref.FileID, out + batchInputName + ".out", out + "manifest.json.out"} {
		if err := st.Delete(ctx, key); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// CancelBatch sends StopModelInvocationJob.
func (e *endpoint) CancelBatch(ctx context.Context, ref models.BatchRef) error {
	return e.control(ctx, http.MethodPost, "/model-invocation-job/"+EscapeModelID(ref.BatchID)+"/stop", nil, nil)
}

// BatchResults reads the job's output records from sluice's bucket and
// turns those of kind into OpenAI batch lines: answered records into the
// output (chat.completion or embeddings list), failed ones into the errors.
// A job that wrote no output has none.
func (e *endpoint) BatchResults(ctx context.Context, ref models.BatchRef, kind, file string, st models.BatchStore) (io.ReadCloser, error) {
	if file == "" {
		return nil, nil
	}
	rc, err := st.Get(ctx, file, 0, -1)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil // a job stopped or failed before writing: no lines
	}
	if err != nil {
		return nil, fmt.Errorf("bedrock: read the job's output: %w", err)
	}
	pr, pw := io.Pipe()
	go func() {
		err := e.lines(ref, kind, rc, pw)
		rc.Close()
		pw.CloseWithError(err)
	}()
	return pr, nil
}

// outputRecord is one record of a job's output.
type outputRecord struct {
	RecordID    string          `json:"recordId"`
	ModelOutput json.RawMessage `json:"modelOutput"`
	Error       *struct {
		ErrorCode    json.RawMessage `json:"errorCode"`
		ErrorMessage string          `json:"errorMessage"`
	} `json:"error"`
}

// lines writes the OpenAI batch lines of kind for the records of r.
func (e *endpoint) lines(ref models.BatchRef, kind string, r io.Reader, w io.Writer) error {
	job := ref.BatchID[strings.LastIndex(ref.BatchID, "/")+1:]
	return eachLine(r, func(n int, raw []byte) error {
		var rec outputRecord
		if err := json.Unmarshal(raw, &rec); err != nil {
			return fmt.Errorf("bedrock: output record %d: %w", n, err)
		}
		var body json.RawMessage
		var fail *oai.BatchLineError
		switch {
		case rec.Error != nil:
			fail = &oai.BatchLineError{Code: strings.Trim(string(rec.Error.ErrorCode), `"`), Message: rec.Error.ErrorMessage}
		case len(rec.ModelOutput) == 0:
			fail = &oai.BatchLineError{Code: "no_output", Message: "Bedrock returned no output for the record."}
		default:
			var err error
			if body, err = e.answer(ref.Endpoint, rec.ModelOutput); err != nil {
				fail = &oai.BatchLineError{Code: "unreadable_output", Message: api.AsError(err).Message}
			}
		}
		if (fail == nil) != (kind == models.ResultsOut) {
			return nil
		}
		out := oai.BatchOutputLine{ID: fmt.Sprintf("batch_req_%s_%d", job, n), CustomID: rec.RecordID, Error: fail}
		if fail == nil {
			out.Response = &oai.BatchLineResponse{StatusCode: http.StatusOK, RequestID: fmt.Sprintf("%s-%d", job, n), Body: body}
		}
		b, err := json.Marshal(out)
		if err != nil {
			return err
		}
		_, err = w.Write(append(b, '\n'))
		return err
	})
}

// answer turns a record's modelOutput into OpenAI's answer body.
func (e *endpoint) answer(endpoint string, out []byte) (json.RawMessage, error) {
	if endpoint == "/v1/chat/completions" {
		cc, err := e.completion(out, false)
		if err != nil {
			return nil, err
		}
		return json.Marshal(cc)
	}
	var vecs []json.RawMessage
	var tokens int64
	switch e.family {
	case familyTitanV1, familyTitanV2:
		vec, n, _, err := parseTitan(out)
		if err != nil {
			return nil, malformed("%v", err)
		}
		vecs, tokens = []json.RawMessage{vec}, n
	case familyCohere:
		v, err := parseCohere(out)
		if err != nil {
			return nil, malformed("%v", err)
		}
		vecs = v
	}
	type item struct {
		Object    string          `json:"object"`
		Index     int             `json:"index"`
		Embedding json.RawMessage `json:"embedding"`
	}
	items := make([]item, len(vecs))
	for i, v := range vecs {
		items[i] = item{Object: "embedding", Index: i, Embedding: v}
	}
	return json.Marshal(map[string]any{
		"object": "list", "data": items, "model": e.model,
		"usage": map[string]int64{"prompt_tokens": tokens, "total_tokens": tokens},
	})
}

// control sends a control-plane call, SigV4-signed over its exact body, and
// decodes its JSON answer into v (nil: discarded). An answer other than 2xx
// is a *models.ProviderError with Bedrock's message.
func (e *endpoint) control(ctx context.Context, method, path string, in, v any) error {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return fmt.Errorf("bedrock: encode %s: %w", path, err)
		}
	}
	hreq, err := http.NewRequestWithContext(ctx, method, e.controlBase+path, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("bedrock: build %s: %w", path, err)
	}
	if in != nil {
		hreq.Header.Set("Content-Type", "application/json")
	}
	hreq.Header.Set("Accept", "application/json")
	if err := e.auth.Sign(ctx, hreq, body); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("bedrock %s: %w", path, err)
		}
		u := api.Unavailable("The gateway has no usable AWS credentials for Bedrock model '%s' (%s).", e.model, e.auth.Source)
		u.Err = err
		return u
	}
	resp, err := providers.Send(e.client, hreq)
	if err != nil {
		return fmt.Errorf("bedrock %s: %w", path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return readError(Name, resp)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("bedrock %s: read the answer: %w", path, err)
	}
	if v == nil {
		return nil
	}
	if err := json.Unmarshal(data, v); err != nil {
		return &models.ProviderError{Provider: Name, Status: resp.StatusCode, Message: "answered JSON sluice cannot read: " + err.Error()}
	}
	return nil
}
