package embedbatch

import (
	"strings"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/oai"
)

// The input types of embedding APIs, by vocabulary. LiteLLM passes a
// request's input_type to the provider as is; sluice also translates the
// four values both vocabularies share, so one client can send either
// spelling to any of these providers.
var (
	googleToCohere = map[string]string{
		"RETRIEVAL_DOCUMENT": "search_document",
		"RETRIEVAL_QUERY":    "search_query",
		"CLASSIFICATION":     "classification",
		"CLUSTERING":         "clustering",
	}
	cohereToGoogle = map[string]string{
		"search_document": "RETRIEVAL_DOCUMENT",
		"search_query":    "RETRIEVAL_QUERY",
		"classification":  "CLASSIFICATION",
		"clustering":      "CLUSTERING",
	}
)

// CohereInputType spells an input_type the way Cohere's embed API does:
// Google task types with a Cohere counterpart (RETRIEVAL_QUERY →
// search_query, …) are translated; other values pass unchanged for the
// provider to judge.
func CohereInputType(v string) string {
	if c, ok := googleToCohere[strings.ToUpper(v)]; ok {
		return c
	}
	return v
}

// CohereOptions reads a Cohere embed call's input_type and truncate (Cohere's
// API, and Cohere Embed on Bedrock): the request's extras, else the
// deployment's inputType and truncate; an input_type given nowhere is def
// (v2 requires one), and is spelt as Cohere does (CohereInputType).
func CohereOptions(x oai.Extras, inputType, truncate, def string) (string, string, error) {
	if v, given, err := x.String("input_type"); err != nil {
		return "", "", err
	} else if given {
		inputType = v
	}
	if inputType == "" {
		inputType = def
	}
	if v, given, err := x.String("truncate"); err != nil {
		return "", "", err
	} else if given {
		truncate = v
	}
	return CohereInputType(inputType), truncate, nil
}

// GoogleTaskType spells an input_type the way Vertex AI and Gemini do:
// Cohere's input types with a Google counterpart (search_query →
// RETRIEVAL_QUERY, …) are translated, Google's own in any case are upper
// cased; other values pass unchanged for the provider to judge.
func GoogleTaskType(v string) string {
	if g, ok := cohereToGoogle[strings.ToLower(v)]; ok {
		return g
	}
	return strings.ToUpper(v)
}

// DeploymentTaskType is a Google deployment's default task type: its
// litellm_params task_type, else input_type (LiteLLM's name); "" when it
// sets neither.
func DeploymentTaskType(extra map[string]any) string {
	if t, _ := extra["task_type"].(string); t != "" {
		return t
	}
	t, _ := extra["input_type"].(string)
	return t
}

// TaskType is a Google request's task type: the request's task_type or
// input_type (LiteLLM's name; given both, they must agree), else the
// deployment's default, in Google's spelling; "" when none is set.
func TaskType(req *oai.EmbeddingRequest, deployment string) (string, error) {
	x, err := req.Extras("input_type", "task_type")
	if err != nil {
		return "", err
	}
	in, inGiven, err := x.String("input_type")
	if err != nil {
		return "", err
	}
	task, taskGiven, err := x.String("task_type")
	if err != nil {
		return "", err
	}
	v := deployment
	switch {
	case inGiven && taskGiven && GoogleTaskType(in) != GoogleTaskType(task):
		return "", api.InvalidValue("task_type", "'task_type' and 'input_type' disagree; give one of them.")
	case taskGiven:
		v = task
	case inGiven:
		v = in
	}
	if v == "" {
		return "", nil
	}
	return GoogleTaskType(v), nil
}
