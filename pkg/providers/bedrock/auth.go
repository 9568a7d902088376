// Package bedrock holds what sluice needs to call Amazon Bedrock: AWS
// credentials (config keys, the environment, or the SDK's default chain), the
// region, SigV4 signing over the exact bytes sent, the runtime and
// agent-runtime endpoints, and model-id path encoding. The Bedrock
// passthrough and the Bedrock providers share it.
package bedrock

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/smithy-go/encoding/httpbinding"

	"github.com/sluice-gateway/sluice/pkg/models"
)

// SigningName is the SigV4 service name of the Bedrock runtime and agent
// runtime APIs.
const SigningName = "bedrock"

// ErrNoCredentials wraps every failure to find AWS credentials or a region.
var ErrNoCredentials = errors.New("bedrock: no AWS credentials")

// Keys are what a config entry may set (aws_region_name, aws_access_key_id,
// aws_secret_access_key, aws_session_token). Empty fields fall back to the
// environment, then to the SDK's default chain.
type Keys struct {
	Region          string
	AccessKeyID     string
	SecretAccessKey string
	SessionToken    string
}

// Environment fallbacks: LiteLLM's region name, then the AWS SDK's names
// (in Lambda these hold the function role's credentials and region).
var (
	RegionEnv       = []string{"AWS_REGION_NAME", "AWS_REGION", "AWS_DEFAULT_REGION"}
	AccessKeyEnv    = []string{"AWS_ACCESS_KEY_ID"}
	SecretKeyEnv    = []string{"AWS_SECRET_ACCESS_KEY"}
	SessionTokenEnv = []string{"AWS_SESSION_TOKEN"}
)

// Resolve resolves keys as configured (each may be a secretsmanager/
// reference) and builds their Auth with NewAuth: the one place model calls
// and the /bedrock passthrough get AWS credentials. The environment's
// keys (RegionEnv, AccessKeyEnv, …) are read through resolve.
func Resolve(ctx context.Context, keys Keys, resolve models.Resolver, chain DefaultChain) (*Auth, error) {
	var conf, env Keys
	for _, f := range []struct {
		name, value string
		envs        []string
		dst, envDst *string
	}{
		{"aws_region_name", keys.Region, RegionEnv, &conf.Region, &env.Region},
		{"aws_access_key_id", keys.AccessKeyID, AccessKeyEnv, &conf.AccessKeyID, &env.AccessKeyID},
		{"aws_secret_access_key", keys.SecretAccessKey, SecretKeyEnv, &conf.SecretAccessKey, &env.SecretAccessKey},
		{"aws_session_token", keys.SessionToken, SessionTokenEnv, &conf.SessionToken, &env.SessionToken},
	} {
		v, err := resolve.Value(ctx, f.value)
		if err != nil {
			return nil, fmt.Errorf("bedrock: resolve %s: %w", f.name, err)
		}
		*f.dst = v
		*f.envDst, _ = resolve.Setting(ctx, "", f.envs...)
	}
	return NewAuth(ctx, conf, env, chain)
}

// DefaultChain finds credentials and a region the way the AWS SDK does when
// nothing is configured (shared config and credential files, SSO, web
// identity, container and instance roles). region is the region already
// known ("" if none); the chain's region is returned for when it was not.
type DefaultChain func(ctx context.Context, region string) (aws.CredentialsProvider, string, error)

// SDKDefaultChain is the AWS SDK's default chain (config.LoadDefaultConfig).
// It reads the process environment and files itself.
func SDKDefaultChain(ctx context.Context, region string) (aws.CredentialsProvider, string, error) {
	var opts []func(*awsconfig.LoadOptions) error
	if region != "" {
		opts = append(opts, awsconfig.WithRegion(region))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, "", fmt.Errorf("load the AWS default configuration: %w", err)
	}
	return cfg.Credentials, cfg.Region, nil
}

// Auth signs Bedrock requests with one set of credentials in one region.
type Auth struct {
	// Region is the AWS region requests are signed for and sent to.
	Region string
	// Source says where the credentials came from (for messages, never the secret).
	Source string
	creds  aws.CredentialsProvider
	signer *v4.Signer
	now    func() time.Time
}

// regionPattern is what a region may look like: it becomes part of a host name.
var regionPattern = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// NewAuth picks credentials and a region: keys from the config first, then
// the environment's env (read by Resolve), then chain (nil: none). The
// chain's credentials are retrieved at signing time, so a chain that finds
// nothing fails there with ErrNoCredentials.
func NewAuth(ctx context.Context, keys, env Keys, chain DefaultChain) (*Auth, error) {
	a := &Auth{signer: v4.NewSigner(), now: time.Now}
	a.Region = firstNonEmpty(keys.Region, env.Region)
	switch {
	case keys.AccessKeyID != "" || keys.SecretAccessKey != "":
		if keys.AccessKeyID == "" || keys.SecretAccessKey == "" {
			return nil, fmt.Errorf("%w: aws_access_key_id and aws_secret_access_key must be set together", ErrNoCredentials)
		}
		a.creds = credentials.NewStaticCredentialsProvider(keys.AccessKeyID, keys.SecretAccessKey, keys.SessionToken)
		a.Source = "config keys"
	case env.AccessKeyID != "" && env.SecretAccessKey != "":
		a.creds = credentials.NewStaticCredentialsProvider(env.AccessKeyID, env.SecretAccessKey, env.SessionToken)
		a.Source = "environment (AWS_ACCESS_KEY_ID)"
	case chain != nil:
		creds, region, err := chain(ctx, a.Region)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrNoCredentials, err)
		}
		if creds == nil {
			return nil, fmt.Errorf("%w: the AWS default chain found no credentials", ErrNoCredentials)
		}
		a.creds = aws.NewCredentialsCache(creds)
		a.Source = "AWS default chain"
		if a.Region == "" {
			a.Region = region
		}
	default:
		return nil, fmt.Errorf("%w: none configured", ErrNoCredentials)
	}
	if a.Region == "" {
		return nil, fmt.Errorf("%w: no region (set aws_region_name or AWS_REGION)", ErrNoCredentials)
	}
	if !regionPattern.MatchString(a.Region) || len(a.Region) > 32 {
		return nil, fmt.Errorf("%w: region %q is not an AWS region name", ErrNoCredentials, a.Region)
	}
	return a, nil
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v = strings.TrimSpace(v); v != "" {
			return v
		}
	}
	return ""
}

// Sign signs req for Bedrock over payload, which must be exactly the body
// that is sent (req.ContentLength must already be len(payload)). Every header
// on req when Sign is called is signed (except those SigV4 never signs), so
// add headers that must stay unsigned afterwards. Sign sets X-Amz-Date,
// X-Amz-Security-Token (for temporary credentials) and Authorization.
func (a *Auth) Sign(ctx context.Context, req *http.Request, payload []byte) error {
	sum := sha256.Sum256(payload)
	return a.SignHash(ctx, req, hex.EncodeToString(sum[:]))
}

// SignHash is Sign with the payload's hex SHA-256 already computed.
func (a *Auth) SignHash(ctx context.Context, req *http.Request, payloadHash string) error {
	creds, err := a.creds.Retrieve(ctx)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrNoCredentials, a.Source, err)
	}
	if err := a.signer.SignHTTP(ctx, creds, req, payloadHash, SigningName, a.Region, a.now()); err != nil {
		return fmt.Errorf("sign bedrock request: %w", err)
	}
	return nil
}

// RuntimeEndpoint is the Bedrock runtime base URL of region.
func RuntimeEndpoint(region string) string {
	return "https://bedrock-runtime." + region + ".amazonaws.com"
}

// AgentRuntimeEndpoint is the Bedrock agent runtime base URL of region.
func AgentRuntimeEndpoint(region string) string {
	return "https://bedrock-agent-runtime." + region + ".amazonaws.com"
}

// EscapeModelID encodes a model id, inference-profile id or ARN as one path
// segment, exactly as the AWS SDK does: every byte but the unreserved ones is
// percent-encoded, so ':' becomes %3A and an ARN's '/' becomes %2F. SigV4
// then encodes the path once more for its canonical form; the bytes on the
// wire are encoded once.
func EscapeModelID(id string) string { return httpbinding.EscapePath(id, true) }

// ModelPath is the escaped runtime path of an action on a model, e.g.
// /model/anthropic.claude-3-5-sonnet-20241022-v2%3A0/converse.
func ModelPath(modelID, action string) string {
	return "/model/" + EscapeModelID(modelID) + "/" + action
}
