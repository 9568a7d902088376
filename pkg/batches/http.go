package batches

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/auth"
)

// Handlers serves the Batch API over a Service: each handler decodes its
// request, calls the Service and encodes the answer.
type Handlers struct {
	Service *Service
	// JSONLimit bounds a create's body; 0 means api.DefaultJSONLimit.
	JSONLimit int64
}

// idempotencyHeader names the header of a create that may be retried.
const idempotencyHeader = "Idempotency-Key"

// maxIdempotencyKey bounds the header's value.
const maxIdempotencyKey = 256

// createBody is the body of POST /v1/batches. Pointers tell an absent
// field from an empty one; fields of the wrong JSON type are 400s naming
// them (api.DecodeJSON).
type createBody struct {
	InputFileID      *string           `json:"input_file_id"`
	Endpoint         *string           `json:"endpoint"`
	CompletionWindow *string           `json:"completion_window"`
	Metadata         map[string]string `json:"metadata"`
	// CustomLLMProvider and Model make a native batch (LiteLLM's names).
	CustomLLMProvider  *string `json:"custom_llm_provider"`
	Model              *string `json:"model"`
	OutputExpiresAfter *struct {
		Anchor  *string `json:"anchor"`
		Seconds *int64  `json:"seconds"`
	} `json:"output_expires_after"`
	// DryRun answers the batch's estimate and creates nothing (sluice's).
	DryRun bool `json:"dry_run"`
}

// Create serves POST /v1/batches.
func (h Handlers) Create(w http.ResponseWriter, r *http.Request) error {
	var body createBody
	if err := api.DecodeJSON(w, r, h.JSONLimit, &body); err != nil {
		return err
	}
	nb := NewBatch{
		InputFileID: deref(body.InputFileID), Endpoint: deref(body.Endpoint),
		CompletionWindow: deref(body.CompletionWindow), Metadata: body.Metadata,
		IdempotencyKey: r.Header.Get(idempotencyHeader),
		// custom_llm_provider: LiteLLM's header, query, then body.
		Provider: firstOf(r.Header.Get("Custom-Llm-Provider"), r.URL.Query().Get("custom_llm_provider"), deref(body.CustomLLMProvider)),
		Model:    deref(body.Model),
	}
	if len(nb.IdempotencyKey) > maxIdempotencyKey {
		return api.InvalidValue("", "The Idempotency-Key header is longer than %d characters.", maxIdempotencyKey)
	}
	if oe := body.OutputExpiresAfter; oe != nil {
		switch {
		case oe.Anchor == nil:
			return api.MissingParam("output_expires_after.anchor")
		case *oe.Anchor != "created_at":
			return api.InvalidValue("output_expires_after.anchor", "Invalid anchor '%s'; the only supported anchor is 'created_at'.", *oe.Anchor)
		case oe.Seconds == nil:
			return api.MissingParam("output_expires_after.seconds")
		case *oe.Seconds <= 0:
			return api.InvalidValue("output_expires_after.seconds", "output_expires_after.seconds must be positive.")
		}
		nb.OutputExpiresAfter = time.Duration(min(*oe.Seconds, 1<<32)) * time.Second
	}
	if body.DryRun {
		est, err := h.Service.Estimate(r.Context(), auth.FromContext(r.Context()), nb)
		if err != nil {
			return err
		}
		api.WriteJSON(w, http.StatusOK, est)
		return nil
	}
	b, err := h.Service.Create(r.Context(), auth.FromContext(r.Context()), nb)
	if err != nil {
		return err
	}
	api.WriteJSON(w, http.StatusOK, b)
	return nil
}

// Get serves GET /v1/batches/{batch_id}.
func (h Handlers) Get(w http.ResponseWriter, r *http.Request) error {
	b, err := h.Service.Get(r.Context(), auth.FromContext(r.Context()), r.PathValue("batch_id"))
	if err != nil {
		return err
	}
	api.WriteJSON(w, http.StatusOK, b)
	return nil
}

// Cancel serves POST /v1/batches/{batch_id}/cancel.
func (h Handlers) Cancel(w http.ResponseWriter, r *http.Request) error {
	b, err := h.Service.Cancel(r.Context(), auth.FromContext(r.Context()), r.PathValue("batch_id"))
	if err != nil {
		return err
	}
	api.WriteJSON(w, http.StatusOK, b)
	return nil
}

// List serves GET /v1/batches (limit 1–100, default 20; after).
func (h Handlers) List(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	limit := DefaultListLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 || n > MaxListLimit {
			return api.InvalidValue("limit", "Invalid limit '%s': it must be a whole number from 1 to %d.", v, MaxListLimit)
		}
		limit = n
	}
	data, more, err := h.Service.List(r.Context(), auth.FromContext(r.Context()), limit, q.Get("after"))
	if err != nil {
		return err
	}
	api.WriteJSON(w, http.StatusOK, api.NewList(data, more, func(b Batch) string { return b.ID }))
	return nil
}

func firstOf(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
