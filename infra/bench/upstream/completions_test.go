package main

import (
	"bufio"
	"strings"
	"testing"
)

func TestCompletionsAnswer(t *testing.T) {
	ts := newTestServer(t, options{})
	var got struct {
		ID      string
		Object  string
		Model   string
		Choices []struct {
			Text         string
			FinishReason string `json:"finish_reason"`
		}
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		}
	}
	mustUnmarshal(t, readAll(t, post(t, ts.URL+"/v1/completions", `{"model":"gpt-3.5-turbo-instruct","prompt":"Say this is a test.","max_tokens":7}`)), &got)
	if !strings.HasPrefix(got.ID, "cmpl-") || got.Object != "text_completion" || got.Model != "gpt-3.5-turbo-instruct" || len(got.Choices) != 1 {
		t.Fatalf("answer %+v", got)
	}
	if n := len(strings.Fields(got.Choices[0].Text)); n != 7 || got.Choices[0].FinishReason != "length" {
		t.Errorf("%d words, finish %q; want 7 and length", n, got.Choices[0].FinishReason)
	}
	if got.Usage.PromptTokens < 1 || got.Usage.CompletionTokens != 7 {
		t.Errorf("usage %+v", got.Usage)
	}
}

func TestCompletionsStream(t *testing.T) {
	ts := newTestServer(t, options{streamChunks: 5})
	resp := post(t, ts.URL+"/v1/completions", `{"model":"m","prompt":["a","b"],"stream":true,"stream_options":{"include_usage":true}}`)
	var text strings.Builder
	var finishes []string
	completion, done := 0, false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if line == "[DONE]" {
			done = true
			continue
		}
		var c struct {
			Object  string
			Choices []struct {
				Text         string
				FinishReason *string `json:"finish_reason"`
			}
			Usage *struct {
				CompletionTokens int `json:"completion_tokens"`
			}
		}
		mustUnmarshal(t, []byte(line), &c)
		if c.Object != "text_completion" {
			t.Fatalf("object %q", c.Object)
		}
		for _, ch := range c.Choices {
			text.WriteString(ch.Text)
			if ch.FinishReason != nil {
				finishes = append(finishes, *ch.FinishReason)
			}
		}
		if c.Usage != nil {
			completion = c.Usage.CompletionTokens
		}
	}
	if !done || completion != 5 || len(strings.Fields(text.String())) != 5 {
		t.Fatalf("done=%v completion=%d text=%q", done, completion, text.String())
	}
	if len(finishes) != 1 || finishes[0] != "stop" {
		t.Errorf("finish reasons %v, want one stop on the last chunk", finishes)
	}
}
