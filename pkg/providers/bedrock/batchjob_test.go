package bedrock

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/config"
	"github.com/sluice-gateway/sluice/pkg/models"
	"github.com/sluice-gateway/sluice/pkg/oai"
	"github.com/sluice-gateway/sluice/pkg/providers"
)

func batchEndpoint(model string) *endpoint {
	return &endpoint{model: model, family: familyOf(model), chat: chatFamilyOf(model),
		drop: providers.NewDropParams(Name, config.Deployment{})}
}

// The job's output records become OpenAI lines: answered ones in the
// output, failed ones (and unreadable answers) in the errors, none twice.
func TestBatchResultLines(t *testing.T) {
	e := batchEndpoint("anthropic.claude-3-haiku-20240307-v1:0")
	ref := models.BatchRef{BatchID: "arn:aws:bedrock:us-east-1:1:model-invocation-job/j1", Endpoint: "/v1/chat/completions"}
	records := `{"recordId":"a","modelInput":{},"modelOutput":{"output":{"message":{"role":"assistant","content":[{"text":"hi"}]}},"stopReason":"end_turn","usage":{"inputTokens":1,"outputTokens":1,"totalTokens":2}}}
{"recordId":"b","modelInput":{},"error":{"errorCode":400,"errorMessage":"Malformed input request"}}

{"recordId":"c","modelInput":{},"modelOutput":{"output":42}}
`
	var out, errs bytes.Buffer
	if err := e.lines(ref, models.ResultsOut, strings.NewReader(records), &out); err != nil {
		t.Fatal(err)
	}
	if err := e.lines(ref, models.ResultsErr, strings.NewReader(records), &errs); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, b := range []*bytes.Buffer{&out, &errs} {
		sc := bufio.NewScanner(b)
		for sc.Scan() {
			var l oai.BatchOutputLine
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				t.Fatal(err)
			}
			switch {
			case l.Response != nil:
				got = append(got, l.CustomID+" 200")
			case l.Error != nil:
				got = append(got, l.CustomID+" "+l.Error.Code)
			}
		}
	}
	if diff := cmp.Diff([]string{"a 200", "b 400", "c unreadable_output"}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// A line Bedrock cannot take is a 400 naming it.
func TestBatchRecordsRefuseALine(t *testing.T) {
	e := batchEndpoint("amazon.titan-embed-text-v2:0")
	in := `{"custom_id":"x","body":{"model":"m","input":"one"}}` + "\n" + `{"custom_id":"y","body":{"model":"m","input":["a","b"]}}` + "\n"
	var w bytes.Buffer
	err := e.records("/v1/embeddings", strings.NewReader(in), &w)
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Status != 400 || ae.Param != "line 2" {
		t.Fatalf("%v", err)
	}
	if w.String() != `{"recordId":"x","modelInput":{"inputText":"one","embeddingTypes":["float"]}}`+"\n" {
		t.Errorf("%s", w.String())
	}
}

// Whatever a job's output holds, reading it back never panics, and every
// line it writes is one JSON object.
func FuzzBatchResultLines(f *testing.F) {
	f.Add([]byte(`{"recordId":"a","modelOutput":{"output":{"message":{"role":"assistant","content":[{"text":"hi"}]}},"stopReason":"end_turn"}}`), false)
	f.Add([]byte(`{"recordId":"b","error":{"errorCode":"x","errorMessage":"y"}}`+"\n"+`{"recordId":"c","modelOutput":{"embedding":[1],"inputTextTokenCount":1}}`), true)
	f.Add([]byte("{\n}\n\n{"), false)
	f.Fuzz(func(t *testing.T, data []byte, embed bool) {
		model, endpoint := "anthropic.claude-3-haiku-20240307-v1:0", "/v1/chat/completions"
		if embed {
			model, endpoint = "amazon.titan-embed-text-v2:0", "/v1/embeddings"
		}
		e := batchEndpoint(model)
		ref := models.BatchRef{BatchID: "j", Endpoint: endpoint}
		for _, kind := range []string{models.ResultsOut, models.ResultsErr} {
			var w bytes.Buffer
			if err := e.lines(ref, kind, bytes.NewReader(data), &w); err != nil {
				continue
			}
			sc := bufio.NewScanner(&w)
			sc.Buffer(nil, 1<<26)
			for sc.Scan() {
				if !json.Valid(sc.Bytes()) {
					t.Fatalf("not JSON: %s", sc.Bytes())
				}
			}
		}
	})
}

// Whatever a batch's lines hold, converting them never panics, and each
// record written is one JSON object.
func FuzzBatchRecords(f *testing.F) {
	f.Add([]byte(`{"custom_id":"a","body":{"model":"m","messages":[{"role":"user","content":"hi"}]}}`), false)
	f.Add([]byte(`{"custom_id":"a","body":{"model":"m","input":"x"}}`), true)
	f.Add([]byte("\n\n{}\n"), false)
	f.Fuzz(func(t *testing.T, data []byte, embed bool) {
		model, endpoint := "anthropic.claude-3-haiku-20240307-v1:0", "/v1/chat/completions"
		if embed {
			model, endpoint = "amazon.titan-embed-text-v2:0", "/v1/embeddings"
		}
		var w bytes.Buffer
		_ = batchEndpoint(model).records(endpoint, bytes.NewReader(data), &w)
		sc := bufio.NewScanner(&w)
		sc.Buffer(nil, 1<<26)
		for sc.Scan() {
			if !json.Valid(sc.Bytes()) {
				t.Fatalf("not JSON: %s", sc.Bytes())
			}
		}
	})
}
