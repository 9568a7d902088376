package batches_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/batches"
	"github.com/sluice-gateway/sluice/pkg/config"
	"github.com/sluice-gateway/sluice/pkg/gateway/gatewaytest"
)

// Every bad create, list, get and cancel is an OpenAI error naming what is
// wrong, with the right status; nothing is a 500.
func TestBatchAPIErrors(t *testing.T) {
	u := newUpstream(t)
	opts := options(u)
	opts.Jobs = nil // nothing here needs to run
	opts.Settings = func(s *config.Settings) { s.BatchCompletionWindows = []string{"1h", "24h"} }
	gatewaytest.Run(t, opts, func(t *testing.T, g *gatewaytest.Gateway) {
		_, key := g.TeamKey()
		_, other := g.TeamKey()
		input := uploadInput(t, g, key, jsonl(embeddingLines("emb", "x", 2, func(i int) string { return "t" + strconv.Itoa(i) })))
		batchCreateErrors(t, g, key, other, input)

		// A 1h window, allowed by SLUICE_BATCH_COMPLETION_WINDOWS.
		resp := g.Do("POST", "/v1/batches", key, validBatch(input, func(m map[string]any) {
			m["completion_window"] = "1h"
			m["metadata"] = map[string]any{"project": "search", "owner": strings.Repeat("é", 512)}
			m["output_expires_after"] = map[string]any{"anchor": "created_at", "seconds": 7200}
		}))
		if resp.Status != 200 {
			t.Fatalf("create: %d %s", resp.Status, resp.Body)
		}
		b := decodeBatch(t, resp.Body)
		if *b.ExpiresAt-b.CreatedAt != 3600 || b.Metadata["project"] != "search" || b.CompletionWindow != "1h" {
			t.Errorf("%+v", b)
		}

		batchScopeErrors(t, g, key, other, input, b)
	})
}

// validBatch is a valid create request over input, changed by change.
func validBatch(input string, change func(m map[string]any)) map[string]any {
	m := map[string]any{"input_file_id": input, "endpoint": "/v1/embeddings", "completion_window": "24h"}
	change(m)
	return m
}

// batchCreateErrors holds every create request refused, with its error;
// input is a batch input file of key's team, other a key of another team.
func batchCreateErrors(t *testing.T, g *gatewaytest.Gateway, key, other, input string) {
	foreign := uploadInput(t, g, other, jsonl(embeddingLines("emb", "x", 1, func(int) string { return "t" })))
	userData := g.Do("POST", "/v1/files", key, multipart("user_data", "notes.txt", "hello"), "Content-Type", multipartType)
	if userData.Status != 200 {
		t.Fatalf("upload user_data: %d %s", userData.Status, userData.Body)
	}
	notBatch := userData.JSON(t)["id"].(string)
	valid := func(change func(m map[string]any)) map[string]any { return validBatch(input, change) }
	bigMeta := map[string]any{}
	for i := range 17 {
		bigMeta["k"+strconv.Itoa(i)] = "v"
	}
	for _, tc := range []struct {
		name   string
		body   any
		status int
		code   string
		param  string
	}{
		{"not JSON", `{"input_file_id":`, 400, "invalid_json", ""},
		{"not an object", `[1]`, 400, "invalid_json", ""},
		{"no input_file_id", valid(func(m map[string]any) { delete(m, "input_file_id") }), 400, "missing_required_parameter", "input_file_id"},
		{"empty input_file_id", valid(func(m map[string]any) { m["input_file_id"] = "" }), 400, "missing_required_parameter", "input_file_id"},
		{"input_file_id not a string", valid(func(m map[string]any) { m["input_file_id"] = 5 }), 400, "invalid_value", "input_file_id"},
		{"no endpoint", valid(func(m map[string]any) { delete(m, "endpoint") }), 400, "missing_required_parameter", "endpoint"},
		{"unknown endpoint", valid(func(m map[string]any) { m["endpoint"] = "/v1/images/generations" }), 400, "invalid_value", "endpoint"},
		{"no completion_window", valid(func(m map[string]any) { delete(m, "completion_window") }), 400, "missing_required_parameter", "completion_window"},
		{"window not allowed", valid(func(m map[string]any) { m["completion_window"] = "48h" }), 400, "invalid_value", "completion_window"},
		{"window not a window", valid(func(m map[string]any) { m["completion_window"] = "tomorrow" }), 400, "invalid_value", "completion_window"},
		{"17 metadata pairs", valid(func(m map[string]any) { m["metadata"] = bigMeta }), 400, "invalid_value", "metadata"},
		{"long metadata key", valid(func(m map[string]any) { m["metadata"] = map[string]any{strings.Repeat("k", 65): "v"} }), 400, "invalid_value", "metadata"},
		{"long metadata value", valid(func(m map[string]any) { m["metadata"] = map[string]any{"k": strings.Repeat("v", 513)} }), 400, "invalid_value", "metadata"},
		{"metadata value not a string", valid(func(m map[string]any) { m["metadata"] = map[string]any{"k": 1} }), 400, "invalid_value", "metadata"},
		{"metadata not an object", valid(func(m map[string]any) { m["metadata"] = "k=v" }), 400, "invalid_value", "metadata"},
		{"output expiry without anchor", valid(func(m map[string]any) { m["output_expires_after"] = map[string]any{"seconds": 3600} }), 400, "missing_required_parameter", "output_expires_after.anchor"},
		{"output expiry other anchor", valid(func(m map[string]any) {
			m["output_expires_after"] = map[string]any{"anchor": "completed_at", "seconds": 3600}
		}), 400, "invalid_value", "output_expires_after.anchor"},
		{"output expiry without seconds", valid(func(m map[string]any) { m["output_expires_after"] = map[string]any{"anchor": "created_at"} }), 400, "missing_required_parameter", "output_expires_after.seconds"},
		{"output expiry too short", valid(func(m map[string]any) {
			m["output_expires_after"] = map[string]any{"anchor": "created_at", "seconds": 3599}
		}), 400, "invalid_value", "output_expires_after.seconds"},
		{"output expiry too long", valid(func(m map[string]any) {
			m["output_expires_after"] = map[string]any{"anchor": "created_at", "seconds": 2592001}
		}), 400, "invalid_value", "output_expires_after.seconds"},
		{"unknown file", valid(func(m map[string]any) { m["input_file_id"] = "file-AAAAAAAAAAAAAAAAAAAAAAAA" }), 404, "not_found", ""},
		{"malformed file id", valid(func(m map[string]any) { m["input_file_id"] = "nope" }), 404, "not_found", ""},
		{"another team's file", valid(func(m map[string]any) { m["input_file_id"] = foreign }), 404, "not_found", ""},
		{"a file that is not batch input", valid(func(m map[string]any) { m["input_file_id"] = notBatch }), 400, "invalid_value", "input_file_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := g.Do("POST", "/v1/batches", key, tc.body)
			checkError(t, resp, tc.status, tc.code, tc.param)
		})
	}
}

// batchScopeErrors holds team scoping and ids: another team's batch b,
// unknown and malformed ids, bad list parameters, the running batch's input.
func batchScopeErrors(t *testing.T, g *gatewaytest.Gateway, key, other, input string, b batches.Batch) {
	for _, tc := range []struct {
		name, method, path, key string
		status                  int
		code, param             string
	}{
		{"get another team's", "GET", "/v1/batches/" + b.ID, other, 404, "not_found", ""},
		{"get unknown", "GET", "/v1/batches/batch_AAAAAAAAAAAAAAAAAAAAAAAA", key, 404, "not_found", ""},
		{"get malformed", "GET", "/v1/batches/nope", key, 404, "not_found", ""},
		{"cancel another team's", "POST", "/v1/batches/" + b.ID + "/cancel", other, 404, "not_found", ""},
		{"cancel unknown", "POST", "/v1/batches/batch_AAAAAAAAAAAAAAAAAAAAAAAA/cancel", key, 404, "not_found", ""},
		{"list limit 0", "GET", "/v1/batches?limit=0", key, 400, "invalid_value", "limit"},
		{"list limit 101", "GET", "/v1/batches?limit=101", key, 400, "invalid_value", "limit"},
		{"list limit not a number", "GET", "/v1/batches?limit=ten", key, 400, "invalid_value", "limit"},
		{"list after unknown", "GET", "/v1/batches?after=batch_AAAAAAAAAAAAAAAAAAAAAAAA", key, 400, "invalid_value", "after"},
		{"list after another team's", "GET", "/v1/batches?after=" + b.ID, other, 400, "invalid_value", "after"},
		{"delete the input of a running batch", "DELETE", "/v1/files/" + input, key, 409, "conflict", ""},
		{"no key", "GET", "/v1/batches", "", 401, "invalid_api_key", ""},
		{"wrong method", "PUT", "/v1/batches", key, 405, "method_not_allowed", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := g.Do(tc.method, tc.path, tc.key, nil)
			checkError(t, resp, tc.status, tc.code, tc.param)
			if tc.status == 409 && !strings.Contains(string(resp.Body), b.ID) {
				t.Errorf("the conflict does not name the batch: %s", resp.Body)
			}
		})
	}
	if got := getBatch(t, g, key, b.ID); got.ID != b.ID || got.Status != batches.StatusValidating {
		t.Errorf("get: %+v", got)
	}
	// The master key sees every team's batches.
	if got := getBatch(t, g, g.MasterKey, b.ID); got.ID != b.ID {
		t.Errorf("admin get: %+v", got)
	}
}

// checkError holds an answer to an OpenAI error of status, code and param.
func checkError(t *testing.T, resp gatewaytest.Response, status int, code, param string) {
	t.Helper()
	if resp.Status != status {
		t.Fatalf("%d %s; want %d", resp.Status, resp.Body, status)
	}
	if got := resp.ErrorCode(t); got != code {
		t.Errorf("code %q, want %q: %s", got, code, resp.Body)
	}
	e, _ := resp.JSON(t)["error"].(map[string]any)
	if got, _ := e["param"].(string); got != param {
		t.Errorf("param %q, want %q: %s", got, param, resp.Body)
	}
}

const multipartType = "multipart/form-data; boundary=sluiceboundary"

// multipart is a POST /v1/files form.
func multipart(purpose, filename, content string) string {
	return "--sluiceboundary\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\n" + purpose +
		"\r\n--sluiceboundary\r\nContent-Disposition: form-data; name=\"file\"; filename=\"" + filename + "\"\r\nContent-Type: text/plain\r\n\r\n" +
		content + "\r\n--sluiceboundary--\r\n"
}

// Listing is newest first, pages with after, and is scoped to the team (the
// master key sees every team's); a retried create with the same
// Idempotency-Key gets the same batch.
func TestListAndIdempotency(t *testing.T) {
	u := newUpstream(t)
	opts := options(u)
	opts.Jobs = nil
	gatewaytest.Run(t, opts, func(t *testing.T, g *gatewaytest.Gateway) {
		_, key := g.TeamKey()
		_, other := g.TeamKey()
		input := uploadInput(t, g, key, jsonl(embeddingLines("emb", "x", 1, func(int) string { return "t" })))
		var ids []string
		for range 5 {
			ids = append(ids, createBatch(t, g, key, input).ID)
		}
		theirs := createBatch(t, g, other, uploadInput(t, g, other, jsonl(embeddingLines("emb", "x", 1, func(int) string { return "t" })))).ID

		page := func(k, query string) (got []string, first, last string, more bool) {
			resp := g.Do("GET", "/v1/batches"+query, k, nil)
			if resp.Status != 200 {
				t.Fatalf("list %s: %d %s", query, resp.Status, resp.Body)
			}
			m := resp.JSON(t)
			for _, d := range m["data"].([]any) {
				got = append(got, d.(map[string]any)["id"].(string))
			}
			first, _ = m["first_id"].(string)
			last, _ = m["last_id"].(string)
			return got, first, last, m["has_more"].(bool)
		}
		got, first, last, more := page(key, "?limit=2")
		if fmt.Sprint(got) != fmt.Sprint([]string{ids[4], ids[3]}) || !more || first != ids[4] || last != ids[3] {
			t.Errorf("page 1: %v %s %s %v", got, first, last, more)
		}
		got, _, _, more = page(key, "?limit=2&after="+last)
		if fmt.Sprint(got) != fmt.Sprint([]string{ids[2], ids[1]}) || !more {
			t.Errorf("page 2: %v %v", got, more)
		}
		got, _, _, more = page(key, "?after="+ids[1])
		if fmt.Sprint(got) != fmt.Sprint([]string{ids[0]}) || more {
			t.Errorf("page 3: %v %v", got, more)
		}
		if got, _, _, _ := page(other, ""); fmt.Sprint(got) != fmt.Sprint([]string{theirs}) {
			t.Errorf("the other team lists %v", got)
		}
		if got, _, _, _ := page(g.MasterKey, "?limit=100"); len(got) != 6 || got[0] != theirs {
			t.Errorf("the admin lists %v", got)
		}

		body := map[string]any{"input_file_id": input, "endpoint": "/v1/embeddings", "completion_window": "24h", "metadata": map[string]any{"try": "1"}}
		a := g.Do("POST", "/v1/batches", key, body, "Idempotency-Key", "retry-me")
		b := g.Do("POST", "/v1/batches", key, body, "Idempotency-Key", "retry-me")
		if a.Status != 200 || b.Status != 200 || decodeBatch(t, a.Body).ID != decodeBatch(t, b.Body).ID {
			t.Errorf("a retry made another batch: %s / %s", a.Body, b.Body)
		}
		body["metadata"] = map[string]any{"try": "2"}
		checkError(t, g.Do("POST", "/v1/batches", key, body, "Idempotency-Key", "retry-me"), 409, "conflict", "")
		// Keys are the team's own.
		theirInput := uploadInput(t, g, other, jsonl(embeddingLines("emb", "x", 1, func(int) string { return "t" })))
		c := g.Do("POST", "/v1/batches", other, map[string]any{"input_file_id": theirInput, "endpoint": "/v1/embeddings", "completion_window": "24h"}, "Idempotency-Key", "retry-me")
		if c.Status != 200 || decodeBatch(t, c.Body).ID == decodeBatch(t, a.Body).ID {
			t.Errorf("another team's key: %d %s", c.Status, c.Body)
		}
	})
}
