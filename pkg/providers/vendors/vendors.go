// Package vendors is the table of the vendors sluice calls: the one list
// the router's provider registry and the passthrough's credentials are
// read from. Adding a vendor is its package and its row here.
package vendors

import (
	"net/http"

	"github.com/sluice-gateway/sluice/pkg/models"
	"github.com/sluice-gateway/sluice/pkg/providers/anthropic"
	"github.com/sluice-gateway/sluice/pkg/providers/azure"
	"github.com/sluice-gateway/sluice/pkg/providers/bedrock"
	"github.com/sluice-gateway/sluice/pkg/providers/cohere"
	"github.com/sluice-gateway/sluice/pkg/providers/gemini"
	"github.com/sluice-gateway/sluice/pkg/providers/openai"
	"github.com/sluice-gateway/sluice/pkg/providers/vertex"
)

// Vendor is one row of the table.
type Vendor struct {
	// Name is the litellm_params.model provider prefix (and, for a vendor
	// with a passthrough, the config's passthrough key).
	Name string
	// Key is the vendor's API-key credential; nil where the credential is
	// not a key (Bedrock's SigV4, Vertex AI's service account: their
	// packages resolve those through the same models.Resolver).
	Key *models.KeySpec
	// New builds the vendor's models.Provider.
	New func(Deps) models.Provider
}

// Deps are what a vendor's provider calls out with.
type Deps struct {
	Client *http.Client
	// AWSDefaultChain finds AWS credentials when none are configured
	// (bedrock.SDKDefaultChain); nil: none.
	AWSDefaultChain bedrock.DefaultChain
}

// All lists every vendor.
func All() []Vendor {
	vs := []Vendor{
		{Name: anthropic.Name, Key: &anthropic.Key, New: func(d Deps) models.Provider { return anthropic.New(d.Client) }},
		{Name: azure.Name, Key: &azure.Key, New: func(d Deps) models.Provider { return azure.New(d.Client) }},
		{Name: bedrock.Name, New: func(d Deps) models.Provider { return bedrock.NewProvider(d.Client, d.AWSDefaultChain) }},
		{Name: cohere.Name, Key: &cohere.Key, New: func(d Deps) models.Provider { return cohere.New(d.Client) }},
		{Name: gemini.Name, Key: &gemini.Key, New: func(d Deps) models.Provider { return gemini.New(d.Client) }},
		{Name: vertex.Name, New: func(d Deps) models.Provider { return vertex.New(d.Client) }},
	}
	for _, name := range openai.Names() {
		key := openai.Key(name)
		vs = append(vs, Vendor{Name: name, Key: &key, New: func(d Deps) models.Provider { return openai.New(name, d.Client) }})
	}
	return vs
}

// Lookup finds a vendor by name.
func Lookup(name string) (Vendor, bool) {
	for _, v := range All() {
		if v.Name == name {
			return v, true
		}
	}
	return Vendor{}, false
}

// Providers is the router's provider registry: every vendor's provider by
// name.
func Providers(d Deps) map[string]models.Provider {
	m := map[string]models.Provider{}
	for _, v := range All() {
		m[v.Name] = v.New(d)
	}
	return m
}
