package callbacks

import (
	"net/http"
	"strconv"
	"strings"
	"unicode"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/auth"
)

// Changed-by headers: sluice's, and LiteLLM's for clients migrating from it.
const (
	HeaderChangedBy        = "Sluice-Changed-By"
	HeaderLiteLLMChangedBy = "Litellm-Changed-By"
)

// maxChangedByBytes bounds the changed-by header.
const maxChangedByBytes = 256

// Handlers serves the team callback endpoints (LiteLLM-compatible shapes).
type Handlers struct {
	Service   *Service
	JSONLimit int64
}

// envelope is LiteLLM's answer shape for these endpoints.
type envelope struct {
	Status  string `json:"status"`
	Message string `json:"message,omitempty"`
	Data    any    `json:"data"`
}

// Add serves POST /team/{team_id}/callback.
func (h Handlers) Add(w http.ResponseWriter, r *http.Request) error {
	by, err := changedBy(r)
	if err != nil {
		return err
	}
	var in AddCallback
	if err := api.DecodeJSON(w, r, h.JSONLimit, &in); err != nil {
		return err
	}
	t, err := h.Service.Add(r.Context(), auth.FromContext(r.Context()), r.PathValue("team_id"), in, by)
	if err != nil {
		return err
	}
	api.WriteJSON(w, http.StatusOK, envelope{Status: "success", Data: t})
	return nil
}

// Get serves GET /team/{team_id}/callback.
func (h Handlers) Get(w http.ResponseWriter, r *http.Request) error {
	t, err := h.Service.Get(r.Context(), auth.FromContext(r.Context()), r.PathValue("team_id"))
	if err != nil {
		return err
	}
	api.WriteJSON(w, http.StatusOK, envelope{Status: "success", Data: t})
	return nil
}

// Delete serves DELETE /team/{team_id}/callback/{callback_name}.
func (h Handlers) Delete(w http.ResponseWriter, r *http.Request) error {
	by, err := changedBy(r)
	if err != nil {
		return err
	}
	t, err := h.Service.Delete(r.Context(), auth.FromContext(r.Context()), r.PathValue("team_id"), r.PathValue("callback_name"), by)
	if err != nil {
		return err
	}
	api.WriteJSON(w, http.StatusOK, envelope{Status: "success", Data: t})
	return nil
}

// DisableLogging serves POST /team/{team_id}/disable_logging.
func (h Handlers) DisableLogging(w http.ResponseWriter, r *http.Request) error {
	by, err := changedBy(r)
	if err != nil {
		return err
	}
	teamID := r.PathValue("team_id")
	t, err := h.Service.DisableLogging(r.Context(), auth.FromContext(r.Context()), teamID, by)
	if err != nil {
		return err
	}
	api.WriteJSON(w, http.StatusOK, envelope{Status: "success", Message: "Logging disabled for team " + teamID, Data: t})
	return nil
}

// Audit serves GET /team/{team_id}/audit?limit=&cursor=.
func (h Handlers) Audit(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	limit := 0
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return api.InvalidValue("limit", "limit must be an integer between 1 and %d.", MaxAuditLimit)
		}
		if n == 0 {
			n = -1 // an explicit 0 is out of range, not the default
		}
		limit = n
	}
	page, err := h.Service.Audit(r.Context(), auth.FromContext(r.Context()), r.PathValue("team_id"), limit, q.Get("cursor"))
	if err != nil {
		return err
	}
	api.WriteJSON(w, http.StatusOK, page)
	return nil
}

// changedBy reads the changed-by header: sluice's, else LiteLLM's. It is a
// user identifier, bounded and printable.
func changedBy(r *http.Request) (string, error) {
	name := HeaderChangedBy
	v := r.Header.Get(name)
	if v == "" {
		name = HeaderLiteLLMChangedBy
		v = r.Header.Get(name)
	}
	v = strings.TrimSpace(v)
	if len(v) > maxChangedByBytes || strings.ContainsFunc(v, unicode.IsControl) {
		return "", api.InvalidValue(strings.ToLower(name), "The %s header must be at most %d printable bytes.", strings.ToLower(name), maxChangedByBytes)
	}
	return v, nil
}
