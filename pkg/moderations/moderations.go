// Package moderations serves POST /v1/moderations (and /moderations): it
// validates the request, picks the default model when none is named, routes
// it through pkg/models, and relays OpenAI's answer exactly as it came.
package moderations

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/config"
	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/models"
	"github.com/sluice-gateway/sluice/pkg/oai"
)

// DefaultModel is the model_name used when a request names none, if it is
// configured.
const DefaultModel = "omni-moderation-latest"

// ModeModeration is the model_info.mode marking moderation deployments.
const ModeModeration = "moderation"

// maxLoggedAnswer bounds how much of an answer the log event keeps (the
// whole answer is usually a few KB; the event's claim check handles the rest).
const maxLoggedAnswer = 256 << 10

// Router is what the service needs of pkg/models.
type Router interface {
	Moderate(ctx context.Context, p auth.Principal, req *oai.ModerationRequest) (*models.Reply, error)
}

// Service serves the moderations endpoint.
type Service struct {
	router       Router
	events       *logevent.Emitter
	jsonLimit    int64
	defaultModel string
}

// New builds the service over the model list in cfg. jsonLimit caps request
// bodies (0: api.DefaultJSONLimit).
func New(router Router, events *logevent.Emitter, cfg *config.Config, jsonLimit int64) *Service {
	return &Service{router: router, events: events, jsonLimit: jsonLimit, defaultModel: defaultModel(cfg)}
}

// defaultModel is the model used when a request names none: the
// deployment named DefaultModel, else the first whose model_info.mode is
// moderation, else "" (none configured).
func defaultModel(cfg *config.Config) string {
	if cfg == nil {
		return ""
	}
	for _, d := range cfg.ModelList {
		if d.ModelName == DefaultModel {
			return DefaultModel
		}
	}
	for _, d := range cfg.ModelList {
		if d.ModelInfo.Mode == ModeModeration {
			return d.ModelName
		}
	}
	return ""
}

// Create serves POST /v1/moderations.
func (s *Service) Create(w http.ResponseWriter, r *http.Request) error {
	start := api.RequestStart(r.Context())
	ctx := r.Context()
	p := auth.FromContext(ctx)
	ev := logevent.New(ctx, p, logevent.CallModeration)

	body, err := api.ReadBody(w, r, s.jsonLimit)
	if err != nil {
		return models.Failed(ctx, w.Header(), s.events, start, nil, ev, err)
	}
	req, err := oai.ParseModerationRequest(body)
	if err != nil {
		return models.Failed(ctx, w.Header(), s.events, start, nil, ev, err)
	}
	if req.Model == "" {
		if s.defaultModel == "" {
			return models.Failed(ctx, w.Header(), s.events, start, nil, ev, api.InvalidValue("model",
				"No moderation model is configured on this gateway: name one in 'model', or configure a deployment named '%s' or with model_info.mode: %s.",
				DefaultModel, ModeModeration))
		}
		req.Model = s.defaultModel
	}
	ev.Model, ev.ModelGroup = req.Model, req.Model
	ev.Messages = req.Input

	rep, err := s.router.Moderate(ctx, p, req)
	rep.Describe(ev)
	if err != nil {
		return models.Failed(ctx, w.Header(), s.events, start, rep, ev, err)
	}
	ans := rep.Answer
	defer ans.Body.Close()

	h := w.Header()
	h.Set("Content-Type", "application/json")
	if ans.ContentLength >= 0 {
		h.Set("Content-Length", strconv.FormatInt(ans.ContentLength, 10))
	}
	api.SetOverhead(h, ctx)
	first := time.Now()
	w.WriteHeader(http.StatusOK)
	logged := &capped{max: maxLoggedAnswer}
	_, sendErr := io.Copy(w, io.TeeReader(ans.Body, logged))
	if !logged.over && json.Valid(logged.buf) {
		ev.Response = logged.buf
	}
	if sendErr != nil {
		ev.Fail(api.Upstream(sendErr, "The answer was cut off before it ended."))
	}
	ev.SetTimes(start, first, time.Now())
	s.events.Start(ctx, ev)()
	return sendErr
}

// capped keeps the first max bytes written to it and notes whether more came.
type capped struct {
	buf  []byte
	max  int
	over bool
}

func (c *capped) Write(p []byte) (int, error) {
	if !c.over {
		if len(c.buf)+len(p) > c.max {
			c.over, c.buf = true, nil
		} else {
			c.buf = append(c.buf, p...)
		}
	}
	return len(p), nil
}
