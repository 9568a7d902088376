package embedbatch

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/jsonscan"
	"github.com/sluice-gateway/sluice/pkg/models"
	"github.com/sluice-gateway/sluice/pkg/oai"
	"github.com/sluice-gateway/sluice/pkg/providers/embedbatch/embedtest"
)

// rawVector writes v as a provider would: JSON numbers that round-trip to
// the float32 values.
func rawVector(v []float32) json.RawMessage {
	b := []byte{'['}
	for i, f := range v {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = strconv.AppendFloat(b, float64(f), 'g', -1, 32)
	}
	return append(b, ']')
}

func readAnswer(t *testing.T, a *models.Answer) embedtest.Answer {
	t.Helper()
	b, err := io.ReadAll(a.Body)
	if err != nil {
		t.Fatal(err)
	}
	a.Body.Close()
	if int64(len(b)) != a.ContentLength {
		t.Errorf("ContentLength %d, body %d bytes", a.ContentLength, len(b))
	}
	var out embedtest.Answer
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("answer is not JSON: %v\n%s", err, b)
	}
	return out
}

func texts(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("text number %d", i)
	}
	return out
}

func TestSplit(t *testing.T) {
	for _, tc := range []struct {
		name  string
		texts []string
		lim   Limits
		want  [][2]int // start, len
	}{
		{"one per call", []string{"a", "b", "c"}, Limits{MaxInputs: 1}, [][2]int{{0, 1}, {1, 1}, {2, 1}}},
		{"under the limit", []string{"a", "b"}, Limits{MaxInputs: 96}, [][2]int{{0, 2}}},
		{"exact multiple", texts(6), Limits{MaxInputs: 3}, [][2]int{{0, 3}, {3, 3}}},
		{"remainder", texts(7), Limits{MaxInputs: 3}, [][2]int{{0, 3}, {3, 3}, {6, 1}}},
		{"zero limit means one", []string{"a", "b"}, Limits{}, [][2]int{{0, 1}, {1, 1}}},
		{"byte bound", []string{"aaaa", "bbbb", "cc", "dddddddddd", "e"}, Limits{MaxInputs: 10, MaxBytes: 8}, [][2]int{{0, 2}, {2, 1}, {3, 1}, {4, 1}}},
		{"large text alone", []string{strings.Repeat("x", 20), "y"}, Limits{MaxInputs: 10, MaxBytes: 8}, [][2]int{{0, 1}, {1, 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got [][2]int
			next := 0
			for _, b := range Split(tc.texts, tc.lim) {
				got = append(got, [2]int{b.Start, len(b.Texts)})
				if b.Start != next || !reflect.DeepEqual(b.Texts, tc.texts[b.Start:b.Start+len(b.Texts)]) {
					t.Errorf("batch %+v does not follow on", b)
				}
				next += len(b.Texts)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("batches %v, want %v", got, tc.want)
			}
		})
	}
}

func TestAppendVector(t *testing.T) {
	v := []float32{0.1, -2.5e-8, 3, 1e-3, -0.99999994}
	raw := rawVector(v)
	out, n, err := AppendVector(nil, raw, oai.EncodingFloat)
	if err != nil || n != len(v) || !reflect.DeepEqual(embedtest.Decode(t, out), v) {
		t.Errorf("float: %s %d %v", out, n, err)
	}
	if string(out) != "[0.1,-2.5e-08,3,0.001,-0.99999994]" {
		t.Errorf("float output %s: want the provider's numbers, compact", out)
	}
	out, n, err = AppendVector([]byte("x"), raw, oai.EncodingBase64)
	if err != nil || n != len(v) || out[0] != 'x' || !reflect.DeepEqual(embedtest.Decode(t, out[1:]), v) {
		t.Errorf("base64: %s %d %v", out, n, err)
	}
	for _, bad := range []string{``, `{}`, `[]`, `[ ]`, `[1,]`, `[1 2]`, `["1"]`, `[1,[2]]`, `[01]`, `[1.]`, `[.5]`, `[+1]`, `[1e]`, `[1,null]`, `[true]`, `[1]x`, `[1`, `[NaN]`, `[1e39]`, `[1e700]`, `[1,-1e309]`} {
		for _, enc := range []string{oai.EncodingFloat, oai.EncodingBase64} {
			got, _, err := AppendVector([]byte("keep"), json.RawMessage(bad), enc)
			if bad == `[1e39]` && enc == oai.EncodingFloat {
				// A valid JSON number, relayed as the provider wrote it.
				if err != nil {
					t.Errorf("%s float: %v", bad, err)
				}
				continue
			}
			if err == nil || string(got) != "keep" {
				t.Errorf("%q %s: %q %v; want an error and dst unchanged", bad, enc, got, err)
			}
		}
	}
}

func TestRunAssembles(t *testing.T) {
	in := texts(10)
	for _, enc := range []string{oai.EncodingFloat, oai.EncodingBase64} {
		t.Run(enc, func(t *testing.T) {
			var calls atomic.Int32
			ans, err := Run(context.Background(), in, Limits{MaxInputs: 3}, Output{Provider: "p", Model: "m-1", Encoding: enc, Dimensions: 4},
				func(ctx context.Context, b Batch) (Result, error) {
					calls.Add(1)
					res := Result{Tokens: int64(10 * len(b.Texts)), TokensKnown: b.Start != 3}
					for _, t := range b.Texts {
						res.Vectors = append(res.Vectors, rawVector(embedtest.Vector(t, 4)))
					}
					return res, nil
				})
			if err != nil {
				t.Fatal(err)
			}
			if calls.Load() != 4 || ans.Encoding != enc || !ans.UsageEstimated {
				t.Errorf("%d calls, encoding %s, estimated %v", calls.Load(), ans.Encoding, ans.UsageEstimated)
			}
			got := readAnswer(t, ans)
			// Batch 3..5 reported nothing: estimated at 4 bytes a token.
			var est int64
			for _, s := range in[3:6] {
				est += EstimateTokens(s)
			}
			if want := 70 + est; got.Usage.PromptTokens != want || got.Usage.TotalTokens != want {
				t.Errorf("usage %+v, want %d", got.Usage, want)
			}
			if got.Object != "list" || got.Model != "m-1" || len(got.Data) != len(in) {
				t.Fatalf("%+v", got)
			}
			for i, d := range got.Data {
				if d.Index != i || d.Object != "embedding" || !reflect.DeepEqual(embedtest.Decode(t, d.Embedding), embedtest.Vector(in[i], 4)) {
					t.Errorf("item %d: %+v", i, d)
				}
				if (enc == oai.EncodingBase64) != (d.Embedding[0] == '"') {
					t.Errorf("item %d in the wrong encoding: %s", i, d.Embedding)
				}
			}
		})
	}
}

// Answers read into an endpoint's kept buffers stay intact until their
// vectors are encoded: many requests at once, each answer distinct, every
// vector where it belongs. (A buffer handed back too early would carry
// another call's vector.) A malformed answer's buffer goes back too.
func TestPostBuffersReused(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct{ Text string }
		json.NewDecoder(r.Body).Decode(&req)
		body := []byte(`{"embedding":`)
		if req.Text == "malformed" {
			body = append(body, "[1,]"...)
		} else {
			body = append(body, rawVector(embedtest.Vector(req.Text, 300))...)
		}
		body = append(body, '}')
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Write(body)
	}))
	defer srv.Close()
	var bufs Buffers
	ep := Endpoint{Provider: "p", Client: srv.Client(), URL: srv.URL, Buffers: &bufs, Authorize: func(*http.Request, []byte) error { return nil }}
	call := Post(ep, func(b Batch) map[string]string { return map[string]string{"text": b.Texts[0]} },
		func(body []byte, _ http.Header) (Result, error) {
			v, err := Path(body, "embedding")
			return Result{Vectors: []json.RawMessage{v}}, err
		})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range 10 {
				in := []string{fmt.Sprintf("g%d r%d a", g, r), fmt.Sprintf("g%d r%d b", g, r), fmt.Sprintf("g%d r%d c", g, r)}
				if r == 5 {
					if _, err := Run(context.Background(), []string{"malformed"}, Limits{MaxInputs: 1}, Output{Provider: "p", Encoding: oai.EncodingBase64}, call); err == nil {
						t.Error("a malformed answer was accepted")
					}
				}
				ans, err := Run(context.Background(), in, Limits{MaxInputs: 1}, Output{Provider: "p", Model: "m", Encoding: oai.EncodingBase64}, call)
				if err != nil {
					t.Error(err)
					return
				}
				got := readAnswer(t, ans)
				for i, d := range got.Data {
					if !reflect.DeepEqual(embedtest.Decode(t, d.Embedding), embedtest.Vector(in[i], 300)) {
						t.Errorf("%s: another vector", in[i])
					}
				}
			}
		}()
	}
	wg.Wait()
}

// The answer's model is a JSON string whatever the name holds.
func TestRunModelEscaped(t *testing.T) {
	const model = "team/\"m\" <1> & \u2028"
	ans, err := Run(context.Background(), []string{"a"}, Limits{MaxInputs: 1}, Output{Provider: "p", Model: model, Encoding: oai.EncodingFloat},
		func(ctx context.Context, b Batch) (Result, error) {
			return Result{Vectors: []json.RawMessage{rawVector([]float32{1})}}, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if got := readAnswer(t, ans); got.Model != model {
		t.Errorf("model %q, want %q", got.Model, model)
	}
}

func TestRunKnownUsage(t *testing.T) {
	ans, err := Run(context.Background(), []string{"a"}, Limits{MaxInputs: 1}, Output{Model: "m", Encoding: oai.EncodingFloat},
		func(ctx context.Context, b Batch) (Result, error) {
			return Result{Vectors: []json.RawMessage{json.RawMessage(`[1]`)}, Tokens: 7, TokensKnown: true}, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if ans.UsageEstimated || readAnswer(t, ans).Usage.PromptTokens != 7 {
		t.Errorf("usage not the provider's")
	}
}

// TestRunConcurrent is the fan-out's performance target: 16 one-text calls
// to an upstream that takes 100 ms each finish in about one call's latency
// (at most 2×), not 16×, with the calls truly in flight together and never
// more than the bound.
func TestRunConcurrent(t *testing.T) {
	const latency = 100 * time.Millisecond
	var inFlight, peak atomic.Int32
	call := func(ctx context.Context, b Batch) (Result, error) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		select {
		case <-time.After(latency):
		case <-ctx.Done():
			return Result{}, ctx.Err()
		}
		return Result{Vectors: []json.RawMessage{rawVector(embedtest.Vector(b.Texts[0], 8))}, Tokens: 1, TokensKnown: true}, nil
	}
	start := time.Now()
	ans, err := Run(context.Background(), texts(16), Limits{MaxInputs: 1}, Output{Encoding: oai.EncodingBase64}, call)
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if got := readAnswer(t, ans); len(got.Data) != 16 {
		t.Fatalf("%d embeddings", len(got.Data))
	}
	t.Logf("16 inputs, one call each at %v: %v wall (%.2f× one call), peak %d in flight", latency, took.Round(time.Millisecond), float64(took)/float64(latency), peak.Load())
	if peak.Load() != 16 {
		t.Errorf("peak %d calls in flight, want all 16 together", peak.Load())
	}
	if took > 2*latency {
		t.Errorf("16 inputs took %v, more than 2× one call (%v)", took, latency)
	}

	// The bound holds: 40 calls with a bound of 5 never exceed 5 at once.
	peak.Store(0)
	if _, err := Run(context.Background(), texts(40), Limits{MaxInputs: 1, Concurrency: 5}, Output{Encoding: oai.EncodingFloat}, func(ctx context.Context, b Batch) (Result, error) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(time.Millisecond)
		return Result{Vectors: []json.RawMessage{json.RawMessage(`[1]`)}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if peak.Load() > 5 || peak.Load() < 2 {
		t.Errorf("peak %d in flight with a bound of 5", peak.Load())
	}
}

func TestRunFirstErrorCancels(t *testing.T) {
	boom := &models.ProviderError{Provider: "p", Status: 400, Message: "bad text 3"}
	var cancelled atomic.Int32
	var mu sync.Mutex
	started := map[int]bool{}
	_, err := Run(context.Background(), texts(40), Limits{MaxInputs: 1, Concurrency: 4}, Output{}, func(ctx context.Context, b Batch) (Result, error) {
		mu.Lock()
		started[b.Start] = true
		mu.Unlock()
		if b.Start == 3 {
			return Result{}, boom
		}
		select {
		case <-ctx.Done():
			cancelled.Add(1)
			return Result{}, ctx.Err()
		case <-time.After(5 * time.Second):
			return Result{Vectors: []json.RawMessage{json.RawMessage(`[1]`)}}, nil
		}
	})
	if !errors.Is(err, boom) {
		t.Fatalf("error %v, want the first failure", err)
	}
	if cancelled.Load() == 0 || len(started) >= 40 {
		t.Errorf("%d calls cancelled, %d of 40 started: the failure should stop the rest", cancelled.Load(), len(started))
	}
}

func TestRunParentCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Run(ctx, texts(5), Limits{MaxInputs: 1}, Output{}, func(ctx context.Context, b Batch) (Result, error) {
		return Result{}, fmt.Errorf("call: %w", ctx.Err())
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("%v", err)
	}
}

func TestRunMalformed(t *testing.T) {
	for _, tc := range []struct {
		name string
		res  Result
		dims int
		msg  string
	}{
		{"too few", Result{Vectors: []json.RawMessage{json.RawMessage(`[1]`)}}, 0, "1 embeddings for 2 inputs"},
		{"not numbers", Result{Vectors: []json.RawMessage{json.RawMessage(`[1]`), json.RawMessage(`["x"]`)}}, 0, "not a number"},
		{"wrong size", Result{Vectors: []json.RawMessage{json.RawMessage(`[1,2]`), json.RawMessage(`[1,2,3]`)}}, 2, "3 dimensions, not the 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Run(context.Background(), []string{"a", "b"}, Limits{MaxInputs: 2}, Output{Provider: "p", Dimensions: tc.dims}, func(ctx context.Context, b Batch) (Result, error) {
				return tc.res, nil
			})
			var pe *models.ProviderError
			if !errors.As(err, &pe) || !strings.Contains(pe.Message, tc.msg) {
				t.Errorf("%v; want a provider error saying %q", err, tc.msg)
			}
		})
	}
}

func TestTexts(t *testing.T) {
	for _, tc := range []struct {
		body string
		want []string
	}{
		{`{"model":"m","input":"héllo \"x\""}`, []string{`héllo "x"`}},
		{`{"model":"m","input": "plain text" }`, []string{"plain text"}},
		{`{"model":"m","input":"\ud83d\ude00 \u00e9"}`, []string{"😀 é"}},
		{"{\"model\":\"m\",\"input\":\"bad \xff utf-8\"}", []string{"bad \ufffd utf-8"}}, // replaced, as encoding/json does
		{`{"model":"m","input":["a","b\n"]}`, []string{"a", "b\n"}},
	} {
		req, err := oai.ParseEmbeddingRequest([]byte(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		got, err := Texts(req, "p")
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %q %v", tc.body, got, err)
		}
	}
	for _, body := range []string{`{"model":"m","input":[1,2]}`, `{"model":"m","input":[[1],[2]]}`} {
		req, err := oai.ParseEmbeddingRequest([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		_, err = Texts(req, "p")
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Status != 400 || ae.Param != "input" || !strings.Contains(ae.Message, "text only") {
			t.Errorf("%s: %v", body, err)
		}
	}
}

func TestTaskTypes(t *testing.T) {
	for _, tc := range []struct{ in, cohere, google string }{
		{"search_query", "search_query", "RETRIEVAL_QUERY"},
		{"RETRIEVAL_DOCUMENT", "search_document", "RETRIEVAL_DOCUMENT"},
		{"retrieval_query", "search_query", "RETRIEVAL_QUERY"},
		{"clustering", "clustering", "CLUSTERING"},
		{"SEMANTIC_SIMILARITY", "SEMANTIC_SIMILARITY", "SEMANTIC_SIMILARITY"},
		{"image", "image", "IMAGE"},
	} {
		if got := CohereInputType(tc.in); got != tc.cohere {
			t.Errorf("CohereInputType(%s) = %s", tc.in, got)
		}
		if got := GoogleTaskType(tc.in); got != tc.google {
			t.Errorf("GoogleTaskType(%s) = %s", tc.in, got)
		}
	}
	for _, tc := range []struct {
		body, deployment, want, errParam string
	}{
		{`{"model":"m","input":"x"}`, "", "", ""},
		{`{"model":"m","input":"x"}`, "clustering", "CLUSTERING", ""},
		{`{"model":"m","input":"x","input_type":"search_query"}`, "clustering", "RETRIEVAL_QUERY", ""},
		{`{"model":"m","input":"x","task_type":"QUESTION_ANSWERING"}`, "", "QUESTION_ANSWERING", ""},
		{`{"model":"m","input":"x","task_type":"RETRIEVAL_QUERY","input_type":"search_query"}`, "", "RETRIEVAL_QUERY", ""},
		{`{"model":"m","input":"x","task_type":"RETRIEVAL_QUERY","input_type":"clustering"}`, "", "", "task_type"},
		{`{"model":"m","input":"x","input_type":7}`, "", "", "input_type"},
		{`{"model":"m","input":"x","input_type":"a","input_type":"b"}`, "", "", "input_type"},
	} {
		req, err := oai.ParseEmbeddingRequest([]byte(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		got, err := TaskType(req, tc.deployment)
		var ae *api.Error
		if tc.errParam != "" {
			if !errors.As(err, &ae) || ae.Param != tc.errParam || ae.Status != 400 {
				t.Errorf("%s: %v, want a 400 naming %s", tc.body, err, tc.errParam)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %q %v, want %q", tc.body, got, err, tc.want)
		}
	}
}

// FuzzAppendVector holds the vector encoder to encoding/json: whatever JSON
// array of numbers it accepts decodes to the same float32 values in both
// encodings, and what encoding/json accepts as a non-empty array of
// float32-range numbers it accepts too.
func FuzzAppendVector(f *testing.F) {
	for _, s := range []string{`[1,2,3]`, ` [ -0.5 , 1e-3,2E+2 ] `, `[0]`, `[]`, `[1,]`, `["a"]`, `[1e39]`, `[-0]`, `[01]`, `{"a":1}`, "[1,\n2]"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var want []float64
		jsonErr := json.Unmarshal(raw, &want)
		fits := jsonErr == nil && len(want) > 0 && raw[jsonscan.SkipSpace(raw, 0)] == '['
		for _, w := range want {
			if math.Abs(w) > math.MaxFloat32 {
				fits = false
			}
		}
		for _, enc := range []string{oai.EncodingFloat, oai.EncodingBase64} {
			out, n, err := AppendVector(nil, raw, enc)
			if err != nil {
				if fits {
					t.Fatalf("%s: %q refused (%v) though encoding/json reads %v", enc, raw, err, want)
				}
				continue
			}
			if jsonErr != nil {
				t.Fatalf("%s: %q accepted though encoding/json refuses it: %v", enc, raw, jsonErr)
			}
			if n != len(want) {
				t.Fatalf("%s: %d values, want %d", enc, n, len(want))
			}
			if enc == oai.EncodingFloat {
				// The provider's numbers, as written.
				var got []float64
				if err := json.Unmarshal(out, &got); err != nil || !reflect.DeepEqual(got, want) {
					t.Fatalf("float: %s reads %v (%v), want %v", out, got, err, want)
				}
				continue
			}
			if !fits {
				continue
			}
			got := embedtest.Decode(t, out)
			for i := range want {
				// Rounding the decimal straight to float32 may differ from
				// rounding through float64 by one unit in the last place.
				w := float32(want[i])
				if got[i] != w && got[i] != math.Nextafter32(w, float32(math.Inf(1))) && got[i] != math.Nextafter32(w, float32(math.Inf(-1))) {
					t.Fatalf("base64: value %d is %v, want %v", i, got[i], w)
				}
			}
		}
	})
}

// A batch's items are sized once: one allocation, in either encoding, and
// base64's with little room to spare.
func TestAppendItemsSizedOnce(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates too")
	}
	vectors := []json.RawMessage{rawVector(embedtest.Vector("a", 1536)), rawVector(embedtest.Vector("b", 1536))}
	for _, enc := range []string{oai.EncodingFloat, oai.EncodingBase64} {
		var out []byte
		allocs := testing.AllocsPerRun(10, func() {
			var err error
			if out, err = appendItems(nil, 0, vectors, Output{Provider: "p", Encoding: enc}); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 1 {
			t.Errorf("%s: %v allocations, want 1", enc, allocs)
		}
		if enc == oai.EncodingBase64 && cap(out)-len(out) > len(out)/6 { // the allocator rounds up by up to 1/8
			t.Errorf("base64: %d bytes for %d", cap(out), len(out))
		}
	}
}

// The base64 of a vector is encoded a group of values at a time: whatever
// the length, it is the base64 of all the vector's float32 bytes at once.
func TestAppendVectorBase64Groups(t *testing.T) {
	for n := 1; n <= 150; n++ {
		v := embedtest.Vector("groups", n)
		raw := make([]byte, 0, 4*n)
		for _, f := range v {
			raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(f))
		}
		want := `"` + base64.StdEncoding.EncodeToString(raw) + `"`
		out, got, err := AppendVector(nil, rawVector(v), oai.EncodingBase64)
		if err != nil || got != n || string(out) != want {
			t.Fatalf("%d values: %s (%d, %v), want %s", n, out, got, err, want)
		}
	}
}

// float32At must read every number as strconv.ParseFloat(s, 32) does, bit
// for bit, including the float64 results that fall exactly halfway between
// two float32s (rounding those again would round the wrong way).
func TestFloat32AtRoundsAsStrconv(t *testing.T) {
	for _, s := range []string{
		"0", "-0", "0.0", "1", "-1.5", "0.0123456789", "-0.06784367", "3.4028234e38", "3.4028236e38", "1e-38", "1e-45", "1e-46",
		"1.000000059604644775", "1.000000178813934326", "1.0000000596046448", "16777217", "16777219", "0.30000001192092896",
		"123456789012345678901234", "1.00000000000000000000001", "1e22", "1e23", "4.5e-22", "7E+3", "16777217.00000001", "0.0000000000000000000001234",
	} {
		want, wantErr := strconv.ParseFloat(s, 32)
		got, end, err := float32At([]byte(s), 0)
		if end != len(s) || (err == nil) != (wantErr == nil) || math.Float32bits(got) != math.Float32bits(float32(want)) {
			t.Errorf("float32At(%s) = %v (%#x) end %d err %v; strconv %v (%#x) err %v",
				s, got, math.Float32bits(got), end, err, float32(want), math.Float32bits(float32(want)), wantErr)
		}
	}
	for _, bad := range []string{"", "-", "+1", ".5", "1.", "1e", "1e+", "x", "-x"} {
		if _, end, _ := float32At([]byte(bad), 0); end >= 0 {
			t.Errorf("float32At(%q) read a number ending at %d", bad, end)
		}
	}
}

// TestFloat32AtRandom holds float32At to strconv on numbers of the shapes
// providers write (shortest float32 text, fixed digit counts) and on the
// decimals nearest the points halfway between two float32s, where a
// conversion that rounds twice goes wrong.
func TestFloat32AtRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	check := func(s string) {
		t.Helper()
		want, wantErr := strconv.ParseFloat(s, 32)
		got, end, err := float32At([]byte(s), 0)
		if end != len(s) || (err == nil) != (wantErr == nil) || math.Float32bits(got) != math.Float32bits(float32(want)) {
			t.Fatalf("float32At(%s) = %v (%#x) end %d err %v; strconv %v (%#x) err %v",
				s, got, math.Float32bits(got), end, err, float32(want), math.Float32bits(float32(want)), wantErr)
		}
	}
	for range 50000 {
		f := float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(12)-8)))
		check(strconv.FormatFloat(float64(f), 'g', -1, 32))
		check(strconv.FormatFloat(float64(f), 'f', rng.IntN(20), 64))
		check(strconv.FormatFloat(float64(f), 'e', rng.IntN(17), 64))
		// The point halfway to the next float32, exactly and nudged.
		h := (float64(f) + float64(math.Nextafter32(f, float32(math.Inf(1))))) / 2
		check(strconv.FormatFloat(h, 'g', -1, 64))
		for _, digits := range []int{15, 16, 17} {
			check(strconv.FormatFloat(h, 'e', digits, 64))
			check(strconv.FormatFloat(math.Nextafter(h, 0), 'e', digits, 64))
			check(strconv.FormatFloat(math.Nextafter(h, math.Inf(1)), 'e', digits, 64))
		}
	}
}

// FuzzFloat32At holds float32At to strconv.ParseFloat(s, 32) on the JSON
// number jsonscan.NumberEnd finds: the same end, the same verdict on range,
// the same bits.
func FuzzFloat32At(f *testing.F) {
	for _, s := range []string{"0.0123456789", "-1e-3", "1.000000178813934326", "3.4028236e38", "1e-46", "00", "1.5e+22,", "-0.0]"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, end, err := float32At(raw, 0)
		wantEnd := jsonscan.NumberEnd(raw, 0)
		if end != wantEnd {
			t.Fatalf("%q: end %d, want %d", raw, end, wantEnd)
		}
		if end < 0 {
			return
		}
		want, wantErr := strconv.ParseFloat(string(raw[:end]), 32)
		if (err == nil) != (wantErr == nil) || err == nil && math.Float32bits(got) != math.Float32bits(float32(want)) {
			t.Fatalf("%q: %v (%#x) %v; strconv %v (%#x) %v", raw[:end], got, math.Float32bits(got), err, float32(want), math.Float32bits(float32(want)), wantErr)
		}
	})
}

// BenchmarkAppendVectorBase64 is the translation's hot path: one
// 1536-dimension float answer re-encoded as OpenAI base64.
func BenchmarkAppendVectorBase64(b *testing.B) {
	benchmarkAppendVector(b, rawVector(embedtest.Vector("benchmark", 1536)))
}

// BenchmarkAppendVectorBase64Compact is the same vector as Bedrock writes
// it: no space after the commas.
func BenchmarkAppendVectorBase64Compact(b *testing.B) {
	benchmarkAppendVector(b, bytes.ReplaceAll(rawVector(embedtest.Vector("benchmark", 1536)), []byte(", "), []byte(",")))
}

func benchmarkAppendVector(b *testing.B, raw []byte) {
	var dst []byte
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		var err error
		dst, _, err = AppendVector(dst[:0], raw, oai.EncodingBase64)
		if err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzAppendBase64 holds the vector's base64 encoder to encoding/base64's,
// after any prefix.
func FuzzAppendBase64(f *testing.F) {
	for _, s := range []string{"", "a", "ab", "abc", "abcdef", "abcdefgh", strings.Repeat("\xff\x00\x7f", 70)} {
		f.Add([]byte("x"), []byte(s))
	}
	f.Fuzz(func(t *testing.T, prefix, src []byte) {
		want := base64.StdEncoding.AppendEncode(slices.Clone(prefix), src)
		if got := appendBase64(slices.Clone(prefix), src); !bytes.Equal(got, want) {
			t.Fatalf("%q: %q, want %q", src, got, want)
		}
	})
}

// The fast reader of the usual provider number (0.ddd with enough bytes
// after it for two 8-byte loads) reads as strconv does, whatever follows.
func TestFloat32AtShortFraction(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 50000 {
		f := float32(rng.NormFloat64() / 40)
		for _, s := range []string{
			strconv.FormatFloat(float64(f), 'f', -1, 32),
			strconv.FormatFloat(float64(f), 'f', 1+rng.IntN(18), 64),
		} {
			_, wantErr := strconv.ParseFloat(s, 32)
			for _, tail := range []string{",0.12345678901234567", "]                 ", "e-3,0.000000000000", "E+0]               ", "7890123456789012345"} {
				raw := []byte(s + tail)
				got, end, err := float32At(raw, 0)
				wantEnd := jsonscan.NumberEnd(raw, 0)
				if wantEnd == len(s) && (err == nil) != (wantErr == nil) {
					t.Fatalf("%q: err %v; strconv %v", raw, err, wantErr)
				}
				if end != wantEnd {
					t.Fatalf("%q: end %d, want %d", raw, end, wantEnd)
				}
				w, _ := strconv.ParseFloat(string(raw[:end]), 32)
				if math.Float32bits(got) != math.Float32bits(float32(w)) {
					t.Fatalf("%q: %v (%#x); strconv %v (%#x)", raw[:end], got, math.Float32bits(got), float32(w), math.Float32bits(float32(w)))
				}
			}
		}
	}
}
