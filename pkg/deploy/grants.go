package deploy

import (
	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/server"
)

// Logical IDs of the template's resources that functions use. The
// pkg/store/aws adapters name the same resources through the SLUICE_*
// variables of CloudEnv.
const (
	TableID           = "Records"             // AWS::DynamoDB::Table
	BucketID          = "Files"               // AWS::S3::Bucket
	KeyID             = "SecretsKey"          // AWS::KMS::Key (bucket encryption, sealed secrets)
	WorkQueueID       = "WorkQueue"           // AWS::SQS::Queue
	TopicID           = "Events"              // AWS::SNS::Topic
	DeliveryQueueID   = "DeliveryQueue"       // AWS::SQS::Queue
	DeliveryDLQID     = "DeliveryDeadLetters" // AWS::SQS::Queue
	MasterKeySecretID = "MasterKeySecret"     // AWS::SecretsManager::Secret
	ProviderSecretID  = "ProviderSecret"      // AWS::SecretsManager::Secret
	APIID             = "Api"                 // AWS::Serverless::Api
)

// Template parameters and conditions the grants and variables refer to.
const (
	// ConfigInS3 holds when the config is an S3 object (ConfigObject set);
	// otherwise it is the SSM parameter ConfigParameterName.
	ConfigInS3 = "ConfigInS3"
	// BedrockEnabled holds when the EnableBedrock parameter is "true".
	BedrockEnabled = "BedrockEnabled"
	// BedrockAgentsEnabled holds when the EnableBedrockAgents parameter is "true".
	BedrockAgentsEnabled = "BedrockAgentsEnabled"
)

// FilePrefixes are the blob key prefixes of file bytes (pkg/files): an
// ordinary upload's object, an Uploads API file's parts, and a batch's
// result objects (pkg/batches), which its output and error files are made
// of.
var FilePrefixes = []string{"files/", "uploads/", "batches/"}

// EnvVar is an environment variable the template sets for a function, and
// the value it must have, rendered as Render renders template values
// (${X} for !Ref X, ${X.Y} for !GetAtt X.Y, If(cond,a,b) for !If).
type EnvVar struct {
	Name  string
	Value string
}

// CloudEnv is the environment every function reads in the cloud: the
// backend, where the config lives, and the resources the AWS adapters open
// (pkg/store/aws.ResourcesFromEnv requires every one of them, whatever the
// function uses: a test holds this list to that reader).
func CloudEnv() []EnvVar {
	return []EnvVar{
		{"SLUICE_BACKEND", "aws"},
		{"SLUICE_CONFIG", "If(" + ConfigInS3 + ",s3://${ConfigObject},ssm:${ConfigParameterName})"},
		{"SLUICE_TABLE", "${" + TableID + "}"},
		{"SLUICE_BUCKET", "${" + BucketID + "}"},
		{"SLUICE_WORK_QUEUE_URL", "${" + WorkQueueID + "}"},
		{"SLUICE_TOPIC_ARN", "${" + TopicID + "}"},
		{"SLUICE_DELIVERY_QUEUE_URL", "${" + DeliveryQueueID + "}"},
		{"SLUICE_DELIVERY_DLQ_URL", "${" + DeliveryDLQID + "}"},
		{"SLUICE_KMS_KEY_ID", "${" + KeyID + "}"},
	}
}

// FunctionEnv is the environment every function is given: CloudEnv, and
// the CloudWatch namespace of its EMF metrics, one per stack (optional to
// the code: sluice without it writes to "sluice").
func FunctionEnv() []EnvVar {
	return append(CloudEnv(), EnvVar{"SLUICE_METRICS_NAMESPACE", "sluice/${AWS::StackName}"})
}

// Grant is one IAM permission: each action on each resource, under an IAM
// condition block, and only when a template condition holds.
type Grant struct {
	Actions   []string
	Resources []string
	// Condition is the statement's IAM Condition block (operator → key →
	// values), nil for none.
	Condition map[string]map[string][]string
	// When is the template condition the statement sits under ("" for
	// always; "!C" for the else branch of !If [C, …]).
	When string
}

// Resource ARNs, rendered.
var (
	tableARN      = "${" + TableID + ".Arn}"
	tableIndexes  = "${" + TableID + ".Arn}/index/*"
	keyARN        = "${" + KeyID + ".Arn}"
	bucketARN     = "${" + BucketID + ".Arn}"
	bucketObjects = func(prefix string) string { return "${" + BucketID + ".Arn}/" + prefix + "*" }
	viaS3         = map[string]map[string][]string{"StringEquals": {"kms:ViaService": {"s3.${AWS::Region}.amazonaws.com"}}}
)

// listBucket makes S3 answer a read of a missing object with 404, not the
// 403 it gives a caller that may not list the bucket. It carries no
// s3:prefix condition: a GetObject or HeadObject request has no prefix in
// its context, so a conditioned grant does not apply to the missing-key
// check and a missing object would still be a 403 (→ 500). Listing shows
// keys (ids), never bytes.
var listBucket = Grant{Actions: []string{"s3:ListBucket"}, Resources: []string{bucketARN}}

func fileObjects() []string {
	out := make([]string, len(FilePrefixes))
	for i, p := range FilePrefixes {
		out[i] = bucketObjects(p)
	}
	return out
}

// Grants is what c grants, as IAM statements. Objects in the bucket are
// encrypted with the stack's KMS key (SSE-KMS), so reading them needs
// kms:Decrypt and writing them kms:GenerateDataKey (and kms:Decrypt, for
// multipart uploads) — through S3 only.
func Grants(c server.Capability) []Grant {
	switch c {
	case server.RecordsRead:
		return []Grant{
			{Actions: []string{"dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query"}, Resources: []string{tableARN}},
			{Actions: []string{"dynamodb:Query"}, Resources: []string{tableIndexes}},
		}
	case server.RecordsWrite:
		return []Grant{{Actions: []string{"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"}, Resources: []string{tableARN}}}
	case server.Limits:
		return []Grant{{
			Actions: []string{"dynamodb:GetItem", "dynamodb:UpdateItem"}, Resources: []string{tableARN},
			Condition: map[string]map[string][]string{"ForAllValues:StringLike": {"dynamodb:LeadingKeys": {"LIMIT#*"}}},
		}}
	case server.FilesRead:
		return []Grant{
			{Actions: []string{"s3:GetObject"}, Resources: fileObjects()},
			listBucket,
			{Actions: []string{"kms:Decrypt"}, Resources: []string{keyARN}, Condition: viaS3},
		}
	case server.FilesWrite:
		return []Grant{
			{Actions: []string{"s3:PutObject", "s3:AbortMultipartUpload"}, Resources: fileObjects()},
			{Actions: []string{"kms:GenerateDataKey", "kms:Decrypt"}, Resources: []string{keyARN}, Condition: viaS3},
		}
	case server.FilesDelete:
		return []Grant{{Actions: []string{"s3:DeleteObject"}, Resources: fileObjects()}}
	case server.ClaimCheckWrite:
		return []Grant{
			{Actions: []string{"s3:PutObject", "s3:AbortMultipartUpload"}, Resources: []string{bucketObjects(logevent.ClaimCheckPrefix)}},
			{Actions: []string{"kms:GenerateDataKey", "kms:Decrypt"}, Resources: []string{keyARN}, Condition: viaS3},
		}
	case server.ClaimCheckRead:
		return []Grant{
			{Actions: []string{"s3:GetObject"}, Resources: []string{bucketObjects(logevent.ClaimCheckPrefix)}},
			listBucket,
			{Actions: []string{"kms:Decrypt"}, Resources: []string{keyARN}, Condition: viaS3},
		}
	case server.DeliveryDeadLetter:
		return []Grant{{Actions: []string{"sqs:SendMessage"}, Resources: []string{"${" + DeliveryDLQID + ".Arn}"}}}
	case server.WorkSend:
		return []Grant{{Actions: []string{"sqs:SendMessage"}, Resources: []string{"${" + WorkQueueID + ".Arn}"}}}
	case server.WorkExtend:
		return []Grant{{Actions: []string{"sqs:ChangeMessageVisibility"}, Resources: []string{"${" + WorkQueueID + ".Arn}"}}}
	case server.EventsPublish:
		return []Grant{{Actions: []string{"sns:Publish"}, Resources: []string{"${" + TopicID + "}"}}}
	case server.Seal:
		return []Grant{{Actions: []string{"kms:GenerateDataKey", "kms:Decrypt"}, Resources: []string{keyARN}}}
	case server.ConfigRead:
		return []Grant{
			{Actions: []string{"s3:GetObject"}, Resources: []string{"arn:${AWS::Partition}:s3:::${ConfigObject}"}, When: ConfigInS3},
			{Actions: []string{"ssm:GetParameter"}, Resources: []string{"arn:${AWS::Partition}:ssm:${AWS::Region}:${AWS::AccountId}:parameter${ConfigParameterName}"}, When: "!" + ConfigInS3},
		}
	case server.MasterKey:
		return []Grant{{Actions: []string{"secretsmanager:GetSecretValue"}, Resources: []string{"${" + MasterKeySecretID + "}"}}}
	case server.ProviderSecrets:
		return []Grant{{Actions: []string{"secretsmanager:GetSecretValue"}, Resources: []string{"${" + ProviderSecretID + "}"}}}
	case server.BedrockInvoke:
		// Converse and ConverseStream are authorized as InvokeModel and
		// InvokeModelWithResponseStream. A cross-region inference profile
		// needs the model in every region it routes to; a deployment's
		// model_id may also name provisioned throughput.
		return []Grant{{
			Actions: []string{"bedrock:InvokeModel", "bedrock:InvokeModelWithResponseStream"},
			Resources: []string{
				"arn:${AWS::Partition}:bedrock:*::foundation-model/*",
				"arn:${AWS::Partition}:bedrock:${AWS::Region}:${AWS::AccountId}:inference-profile/*",
				"arn:${AWS::Partition}:bedrock:${AWS::Region}:${AWS::AccountId}:application-inference-profile/*",
				"arn:${AWS::Partition}:bedrock:${AWS::Region}:${AWS::AccountId}:provisioned-model/*",
			},
			When: BedrockEnabled,
		}}
	case server.BedrockBatch:
		// A job's service role (the deployment's aws_batch_role_arn) is
		// passed to Bedrock only.
		account := "arn:${AWS::Partition}:bedrock:${AWS::Region}:${AWS::AccountId}:"
		return []Grant{
			{Actions: []string{"bedrock:CreateModelInvocationJob", "bedrock:GetModelInvocationJob", "bedrock:StopModelInvocationJob"},
				Resources: []string{account + "model-invocation-job/*", "arn:${AWS::Partition}:bedrock:*::foundation-model/*", account + "inference-profile/*"},
				When:      BedrockEnabled},
			{Actions: []string{"iam:PassRole"}, Resources: []string{"arn:${AWS::Partition}:iam::${AWS::AccountId}:role/*"},
				Condition: map[string]map[string][]string{"StringEquals": {"iam:PassedToService": {"bedrock.amazonaws.com"}}},
				When:      BedrockEnabled},
		}
	case server.BedrockAgents:
		account := "arn:${AWS::Partition}:bedrock:${AWS::Region}:${AWS::AccountId}:"
		return []Grant{
			{Actions: []string{"bedrock:InvokeAgent"}, Resources: []string{account + "agent-alias/*"}, When: BedrockAgentsEnabled},
			{Actions: []string{"bedrock:Retrieve", "bedrock:RetrieveAndGenerate"}, Resources: []string{account + "knowledge-base/*"}, When: BedrockAgentsEnabled},
			{Actions: []string{"bedrock:InvokeFlow"}, Resources: []string{account + "flow/*"}, When: BedrockAgentsEnabled},
		}
	}
	return nil
}
