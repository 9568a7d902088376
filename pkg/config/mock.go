package config

import (
	"fmt"
	"math"
	"strconv"

	"gopkg.in/yaml.v3"
)

// Mock is LiteLLM's mock_response: calls to the deployment are answered
// from it, never sent to its provider. It is a text (a YAML string) or an
// embedding vector (a YAML list of numbers).
//
// A text answers chat completions with itself and embeddings with a vector
// derived from each input; a vector answers embeddings with itself for
// every input (LiteLLM's mock_embedding) and serves no chat.
type Mock struct {
	Text string
	// Vector is the embedding vector; nil for a text.
	Vector []float32
}

// UnmarshalYAML reads a string as a text and a sequence as a vector of
// finite numbers within float32's range; anything else is an error that
// says what is accepted.
func (m *Mock) UnmarshalYAML(n *yaml.Node) error {
	const forms = "mock_response must be a text (chat) or a list of numbers (an embedding vector)"
	switch n.Kind {
	case yaml.ScalarNode:
		if n.ShortTag() != "!!str" {
			// A bare number or boolean is more likely a slip than a
			// text: say how to write either form.
			return fmt.Errorf("line %d: mock_response is %s, not a text; %s (quote a text that looks like a number)", n.Line, n.Value, forms)
		}
		*m = Mock{Text: n.Value}
		return nil
	case yaml.SequenceNode:
	default:
		return fmt.Errorf("line %d: %s", n.Line, forms)
	}
	if len(n.Content) == 0 {
		return fmt.Errorf("line %d: mock_response is an empty list; an embedding vector needs at least one number", n.Line)
	}
	v := make([]float32, len(n.Content))
	for i, c := range n.Content {
		if c.Kind != yaml.ScalarNode || (c.ShortTag() != "!!int" && c.ShortTag() != "!!float") {
			return fmt.Errorf("line %d: mock_response[%d] is not a number; %s", c.Line, i, forms)
		}
		f, err := strconv.ParseFloat(c.Value, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) > math.MaxFloat32 {
			return fmt.Errorf("line %d: mock_response[%d] is %s, not a finite number an embedding (float32) can hold", c.Line, i, c.Value)
		}
		v[i] = float32(f)
	}
	*m = Mock{Vector: v}
	return nil
}
