package lambdaedge

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/sluice-gateway/sluice/pkg/lambdaedge/rie"
)

// invoke runs a Lambda handler on event the way the runtime does: the event
// as JSON through lambda.Handler.Invoke, with a Lambda context.
func invoke(t *testing.T, h lambda.Handler, event any) ([]byte, error) {
	t.Helper()
	payload, err := json.Marshal(event)
	if err != nil {
		t.Fatal(err)
	}
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "8476a536-e9f4-11e8-9739-2dfe598c3fcd"})
	return h.Invoke(ctx, payload)
}

// answer invokes h and decodes its HTTP answer.
func answer(t *testing.T, h lambda.Handler, streamed bool, event any) *rie.HTTPResponse {
	t.Helper()
	out, err := invoke(t, h, event)
	if err != nil {
		t.Fatalf("invoke: %v", err)
	}
	resp, err := rie.DecodeHTTP(streamed, out)
	if err != nil {
		t.Fatalf("%v\n%q", err, out)
	}
	return resp
}

// errorCode reads error.code from an OpenAI error body.
func errorCode(t *testing.T, body []byte) string {
	t.Helper()
	var b struct {
		Error struct {
			Code    string `json:"code"`
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &b); err != nil || b.Error.Message == "" || b.Error.Type == "" {
		t.Fatalf("not an OpenAI error body: %s", body)
	}
	return b.Error.Code
}

func TestBuffered(t *testing.T) {
	h := http.NewServeMux()
	h.HandleFunc("POST /echo", func(w http.ResponseWriter, r *http.Request) {
		var buf bytes.Buffer
		buf.ReadFrom(r.Body)
		w.Header().Add("X-Multi", "1")
		w.Header().Add("X-Multi", "2")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(map[string]string{"body": buf.String(), "q": r.URL.Query().Get("q"), "ct": r.Header.Get("Content-Type")})
	})
	h.HandleFunc("GET /binary", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write([]byte{0xff, 0x00, 0xfe})
	})
	h.HandleFunc("GET /silent", func(w http.ResponseWriter, r *http.Request) {})
	h.HandleFunc("GET /panic", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Partial", "yes")
		w.Write([]byte("half an answer"))
		panic("boom")
	})
	h.HandleFunc("GET /abort", func(w http.ResponseWriter, r *http.Request) { panic(http.ErrAbortHandler) })
	h.HandleFunc("GET /huge", func(w http.ResponseWriter, r *http.Request) {
		w.Write(bytes.Repeat([]byte("x"), MaxBufferedResponse+1))
	})
	fn := lambda.NewHandler(Buffered(h))

	t.Run("echo", func(t *testing.T) {
		e := restEvent("POST", "/echo")
		e.Body = "aGVsbG8="
		e.IsBase64Encoded = true
		e.MultiValueHeaders["Content-Type"] = []string{"text/plain"}
		e.MultiValueQueryStringParameters = map[string][]string{"q": {"a b"}}
		resp := answer(t, fn, false, e)
		if resp.Status != http.StatusCreated || !slices.Equal(resp.Header.Values("X-Multi"), []string{"1", "2"}) {
			t.Errorf("status %d header %v", resp.Status, resp.Header)
		}
		var got map[string]string
		json.Unmarshal(resp.Body, &got)
		if got["body"] != "hello" || got["q"] != "a b" || got["ct"] != "text/plain" {
			t.Errorf("handler saw %v", got)
		}
	})
	t.Run("binary answer is base64", func(t *testing.T) {
		out, err := invoke(t, fn, restEvent("GET", "/binary"))
		if err != nil {
			t.Fatal(err)
		}
		var raw events.APIGatewayProxyResponse
		json.Unmarshal(out, &raw)
		if !raw.IsBase64Encoded || raw.Body != "/wD+" {
			t.Errorf("response %+v", raw)
		}
	})
	t.Run("a handler that writes nothing answers 200", func(t *testing.T) {
		if resp := answer(t, fn, false, restEvent("GET", "/silent")); resp.Status != http.StatusOK || len(resp.Body) != 0 {
			t.Errorf("status %d body %q", resp.Status, resp.Body)
		}
	})
	t.Run("panic answers a clean 500", func(t *testing.T) {
		resp := answer(t, fn, false, restEvent("GET", "/panic"))
		if resp.Status != http.StatusInternalServerError || errorCode(t, resp.Body) != "internal_error" {
			t.Errorf("status %d body %s", resp.Status, resp.Body)
		}
		if resp.Header.Get("X-Partial") != "" || strings.Contains(string(resp.Body), "half") || resp.Header.Get("X-Request-Id") == "" {
			t.Errorf("the panicked answer leaked or the request id is missing: %v %s", resp.Header, resp.Body)
		}
	})
	t.Run("abort is a function error", func(t *testing.T) {
		if _, err := invoke(t, fn, restEvent("GET", "/abort")); err == nil {
			t.Error("no error")
		}
	})
	t.Run("too large for a buffered answer", func(t *testing.T) {
		resp := answer(t, fn, false, restEvent("GET", "/huge"))
		if resp.Status != http.StatusInternalServerError || errorCode(t, resp.Body) != "internal_error" {
			t.Errorf("status %d", resp.Status)
		}
	})
	t.Run("an event that is no request answers 400", func(t *testing.T) {
		resp := answer(t, fn, false, restEvent("", "/echo"))
		if resp.Status != http.StatusBadRequest || errorCode(t, resp.Body) != "invalid_value" {
			t.Errorf("status %d body %s", resp.Status, resp.Body)
		}
	})
	t.Run("unknown route is the mux's answer", func(t *testing.T) {
		if resp := answer(t, fn, false, restEvent("GET", "/nowhere")); resp.Status != http.StatusNotFound {
			t.Errorf("status %d", resp.Status)
		}
	})
}
