// Package moderations is the POST /v1/moderations operation: it validates
// the request, picks the default model when none is named, routes it through
// pkg/models, and hands OpenAI's answer to pkg/modelcall to relay exactly as
// it came.
package moderations

import (
	"context"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/config"
	"github.com/sluice-gateway/sluice/pkg/jsonscan"
	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/modelcall"
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

// Service is the moderations endpoint's operation, transport-free.
type Service struct {
	router       Router
	calls        *modelcall.Calls
	defaultModel string
}

// New builds the service over the model list in cfg, its calls ending
// through calls.
func New(router Router, calls *modelcall.Calls, cfg *config.Config) *Service {
	return &Service{router: router, calls: calls, defaultModel: defaultModel(cfg)}
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

// Create is the moderations Operation (POST /v1/moderations).
func (s *Service) Create(ctx context.Context, p auth.Principal, body []byte) (*modelcall.Result, error) {
	c, _, rep, err := modelcall.Steps[*oai.ModerationRequest]{
		CallType: logevent.CallModeration, Parse: oai.ParseModerationRequest, Route: s.router.Moderate,
		Describe: func(req *oai.ModerationRequest, ev *logevent.Event) error {
			if req.Model == "" {
				if s.defaultModel == "" {
					return api.InvalidValue("model",
						"No moderation model is configured on this gateway: name one in 'model', or configure a deployment named '%s' or with model_info.mode: %s.",
						DefaultModel, ModeModeration)
				}
				req.Model = s.defaultModel
			}
			ev.Model, ev.ModelGroup = req.Model, req.Model
			ev.Messages = req.Input
			return nil
		},
	}.Start(ctx, s.calls, p, body)
	if err != nil {
		return nil, err
	}
	return c.Answer(rep.Answer.Body, rep.Answer.ContentLength, &capped{max: maxLoggedAnswer}), nil
}

// capped is the moderations Meter: it keeps the first max bytes of the
// answer for the log event, and notes whether more came. A moderation
// reports no tokens.
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

func (c *capped) End(ev *logevent.Event) (oai.Usage, error) {
	if !c.over && jsonscan.Valid(c.buf) {
		ev.Response = c.buf
	}
	return oai.Usage{}, nil
}
