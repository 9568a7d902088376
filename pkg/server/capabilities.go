package server

import "slices"

// Capability is one kind of access a function has to the deployment's
// resources. Every route and every job declares the capabilities its handler
// uses (its Needs); pkg/deploy turns them into IAM grants and holds the
// template to them, and the function tests hold each handler to what it
// declares.
type Capability string

// The capabilities. Reads and writes are separate so that, e.g., listing
// files cannot change them.
const (
	// RecordsRead reads the records table and its indexes (GetItem,
	// BatchGetItem, Query).
	RecordsRead Capability = "records-read"
	// RecordsWrite writes items of the records table (PutItem, UpdateItem,
	// DeleteItem; transactions are authorized per item).
	RecordsWrite Capability = "records-write"
	// Limits takes units from the shared rate-limit windows: the LIMIT#
	// items of the records table only.
	Limits Capability = "limits"
	// FilesRead reads file bytes (the files/ and uploads/ objects).
	FilesRead Capability = "files-read"
	// FilesWrite stores file bytes.
	FilesWrite Capability = "files-write"
	// FilesDelete removes file bytes.
	FilesDelete Capability = "files-delete"
	// ClaimCheckWrite stores log-event bodies too large for the bus under
	// the claim-check prefix (write only).
	ClaimCheckWrite Capability = "claim-check-write"
	// ClaimCheckRead reads the log-event bodies under the claim-check
	// prefix back (read only).
	ClaimCheckRead Capability = "claim-check-read"
	// WorkSend enqueues batch work.
	WorkSend Capability = "work-send"
	// WorkExtend changes the visibility of received batch work messages
	// (the batch worker keeps a message hidden while it runs).
	WorkExtend Capability = "work-extend"
	// EventsPublish publishes log events on the topic.
	EventsPublish Capability = "events-publish"
	// DeliveryDeadLetter sends the log events the delivery worker gives up
	// on to the delivery queue's dead-letter queue.
	DeliveryDeadLetter Capability = "delivery-dead-letter"
	// Seal seals and opens team secrets with the KMS key (envelope
	// encryption).
	Seal Capability = "seal"
	// ConfigRead reads the configuration document (an S3 object or an SSM
	// parameter).
	ConfigRead Capability = "config-read"
	// MasterKey reads the master key's secret.
	MasterKey Capability = "master-key"
	// ProviderSecrets reads the provider credentials' secret.
	ProviderSecrets Capability = "provider-secrets"
	// BedrockInvoke invokes Bedrock models (InvokeModel, Converse and their
	// streaming forms), when the deployment enables Bedrock.
	BedrockInvoke Capability = "bedrock-invoke"
	// BedrockAgents calls the Bedrock agent runtime (agents, knowledge
	// bases, flows), when the deployment enables it.
	BedrockAgents Capability = "bedrock-agents"
	// BedrockBatch creates, reads and stops Bedrock batch-inference jobs
	// (native batches) and passes their service role to Bedrock, when the
	// deployment enables Bedrock.
	BedrockBatch Capability = "bedrock-batch"
)

// Capabilities lists every capability, in a fixed order.
func Capabilities() []Capability {
	return []Capability{
		RecordsRead, RecordsWrite, Limits, FilesRead, FilesWrite, FilesDelete, ClaimCheckWrite, ClaimCheckRead,
		WorkSend, WorkExtend, EventsPublish, DeliveryDeadLetter, Seal, ConfigRead, MasterKey, ProviderSecrets, BedrockInvoke, BedrockAgents, BedrockBatch,
	}
}

// SortCapabilities removes duplicates and orders caps as Capabilities lists
// them.
func SortCapabilities(caps []Capability) []Capability {
	var out []Capability
	for _, c := range Capabilities() {
		if slices.Contains(caps, c) {
			out = append(out, c)
		}
	}
	return out
}

// Capability sets routes share.
var (
	// authenticated is what the middleware of a route that takes a key
	// uses: the master key (read on the first request that needs it), the
	// key and team lookups, and the key's and team's rate-limit windows.
	authenticated = []Capability{MasterKey, RecordsRead, Limits}

	// passthroughCall is what a passthrough prefix uses: the provider
	// credentials and the log event's way out — the topic, and the
	// claim-check prefix for bodies too large for it. (The emitter
	// publishes only while someone listens; the grant does not wait for
	// the first listener.)
	passthroughCall = []Capability{ProviderSecrets, EventsPublish, ClaimCheckWrite}

	// modelCall is what a model endpoint uses: a passthrough's needs, and
	// Bedrock models when the deployment enables them.
	modelCall = append(slices.Clone(passthroughCall), BedrockInvoke)

	// forwardedCall is what a model endpoint served by OpenAI-family
	// providers only (/v1/completions, /v1/responses) uses: a model call's
	// needs but Bedrock's.
	forwardedCall = passthroughCall
)

// Capabilities is what route r needs: what its handler touches (Needs) and
// what the middleware needs for its access level (the key lookups and
// limits of a route that takes a key), sorted.
func (r Route) Capabilities() []Capability {
	caps := slices.Clone(r.Needs)
	if r.Access != Public {
		caps = append(caps, authenticated...)
	}
	return SortCapabilities(caps)
}
