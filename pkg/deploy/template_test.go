package deploy_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/config"
	"github.com/sluice-gateway/sluice/pkg/deploy"
	"github.com/sluice-gateway/sluice/pkg/server"
	"github.com/sluice-gateway/sluice/pkg/store"
	awsstore "github.com/sluice-gateway/sluice/pkg/store/aws"
)

const templatePath = "../../template.yaml"

func load(t *testing.T) deploy.Template {
	t.Helper()
	tmpl, err := deploy.Load(templatePath)
	if err != nil {
		t.Fatal(err)
	}
	return tmpl
}

// TestTemplateMatchesTheCode is the drift test: template.yaml routes exactly
// the route table, each route on its function, streaming exactly where the
// route table streams; sets every variable the functions read; grants every
// capability they use and nothing else; has the API settings, gateway
// responses, alarms and outputs the deployment needs.
func TestTemplateMatchesTheCode(t *testing.T) {
	for _, p := range deploy.Check(load(t), functions(t)) {
		t.Error(p)
	}
}

// Helpers that reach into a parsed template for the mutations below.

func m(v any) map[string]any { return v.(map[string]any) }

func resources(tmpl deploy.Template) map[string]any { return m(tmpl["Resources"]) }

func props(tmpl deploy.Template, id string) map[string]any {
	return m(m(resources(tmpl)[id])["Properties"])
}

func events(tmpl deploy.Template, id string) map[string]any { return m(props(tmpl, id)["Events"]) }

func event(tmpl deploy.Template, fn, ev string) map[string]any {
	return m(m(events(tmpl, fn)[ev])["Properties"])
}

// policies returns a function's Policies list.
func policies(tmpl deploy.Template, fn string) []any { return props(tmpl, fn)["Policies"].([]any) }

func setPolicies(tmpl deploy.Template, fn string, l []any) { props(tmpl, fn)["Policies"] = l }

// removePolicy takes !Ref policy out of a function's Policies.
func removePolicy(tmpl deploy.Template, fn, policy string) {
	l := policies(tmpl, fn)
	n := len(l)
	l = slices.DeleteFunc(slices.Clone(l), func(p any) bool { pm, ok := p.(map[string]any); return ok && pm["Ref"] == policy })
	if len(l) == n {
		panic(fn + " does not take " + policy)
	}
	setPolicies(tmpl, fn, l)
}

func addPolicy(tmpl deploy.Template, fn string, p any) {
	setPolicies(tmpl, fn, append(slices.Clone(policies(tmpl, fn)), p))
}

// statements returns a managed policy's statements.
func statements(tmpl deploy.Template, policy string) []any {
	return m(props(tmpl, policy)["PolicyDocument"])["Statement"].([]any)
}

func setStatements(tmpl deploy.Template, policy string, l []any) {
	m(props(tmpl, policy)["PolicyDocument"])["Statement"] = l
}

// statement returns the statement sid of a managed policy.
func statement(tmpl deploy.Template, policy, sid string) map[string]any {
	for _, st := range statements(tmpl, policy) {
		if sm, ok := st.(map[string]any); ok && sm["Sid"] == sid {
			return sm
		}
	}
	panic("no statement " + sid + " in " + policy)
}

func removeStatement(tmpl deploy.Template, policy, sid string) {
	l := statements(tmpl, policy)
	n := len(l)
	l = slices.DeleteFunc(slices.Clone(l), func(s any) bool { sm, ok := s.(map[string]any); return ok && sm["Sid"] == sid })
	if len(l) == n {
		panic("no statement " + sid + " in " + policy)
	}
	setStatements(tmpl, policy, l)
}

func ifCondition(cond string, v any) map[string]any {
	return map[string]any{"Fn::If": []any{cond, v, ref("AWS::NoValue")}}
}

func globalEnv(tmpl deploy.Template) map[string]any {
	return m(m(m(m(tmpl["Globals"])["Function"])["Environment"])["Variables"])
}

func ref(id string) map[string]any { return map[string]any{"Ref": id} }

func getAtt(id, attr string) map[string]any { return map[string]any{"Fn::GetAtt": []any{id, attr}} }

func apiEvent(method, path string) map[string]any {
	return map[string]any{"Type": "Api", "Properties": map[string]any{"RestApiId": ref("Api"), "Path": path, "Method": method}}
}

// TestCheckCatchesDrift shows that the check fails for each kind of drift:
// each case changes a copy of the template (and, for workers, the
// declarations) and names a problem the check must report.
// driftCase is a change to the template (or to the functions) and the
// problems Check must report for it.
type driftCase struct {
	name   string
	mutate func(deploy.Template)
	fns    func([]deploy.Function) []deploy.Function
	want   []string
}

// driftCases are the drifts TestCheckCatchesDrift makes.
var driftCases = []driftCase{
	// Routes.
	{"a route removed", func(d deploy.Template) { delete(events(d, "FilesUploadFunction"), "PostV1Files") },
		nil, []string{"function files-upload: no event routes POST /v1/files"}},
	{"a route no code serves", func(d deploy.Template) {
		events(d, "FilesListFunction")["Images"] = apiEvent("post", "/v1/images/generations")
	}, nil, []string{"function files-list: event Images: routes POST /v1/images/generations, which is no route of pkg/server"}},
	{"a route on the wrong function", func(d deploy.Template) {
		events(d, "HealthFunction")["Models"] = apiEvent("get", "/v1/models")
	}, nil, []string{"routes GET /v1/models, which pkg/server serves with function models"}},
	{"ANY instead of the route's methods", func(d deploy.Template) { event(d, "PassthroughAnthropicFunction", "GetAnthropic")["Method"] = "any" },
		nil, []string{"routes ANY /anthropic/{endpoint+}", "no event routes GET /anthropic/{endpoint+}"}},
	{"a path parameter renamed", func(d deploy.Template) { event(d, "FileGetFunction", "GetV1FilesByFileId")["Path"] = "/v1/files/{id}" },
		nil, []string{"routes GET /v1/files/{id}, which is no route", "no event routes GET /v1/files/{file_id}"}},
	{"a greedy path made plain", func(d deploy.Template) {
		event(d, "PassthroughGeminiFunction", "PostGemini")["Path"] = "/gemini/{endpoint}"
	},
		nil, []string{"no event routes POST /gemini/{endpoint+}"}},
	{"a route on another API", func(d deploy.Template) { event(d, "ModelsFunction", "GetV1Models")["RestApiId"] = ref("OtherApi") },
		nil, []string{"RestApiId \"${OtherApi}\", want !Ref Api"}},
	{"a second API", func(d deploy.Template) {
		resources(d)["OtherApi"] = map[string]any{"Type": "AWS::Serverless::HttpApi", "Properties": map[string]any{}}
	}, nil, []string{"resource OtherApi (AWS::Serverless::HttpApi) routes requests outside the API"}},
	{"a function URL", func(d deploy.Template) {
		props(d, "EmbeddingsFunction")["FunctionUrlConfig"] = map[string]any{"AuthType": "NONE", "InvokeMode": "RESPONSE_STREAM"}
	}, nil, []string{"function embeddings: FunctionUrlConfig is not allowed"}},
	{"an OpenAPI body", func(d deploy.Template) { props(d, "Api")["DefinitionBody"] = map[string]any{"openapi": "3.0.1"} },
		nil, []string{"api: DefinitionBody routes requests besides the functions' events"}},

	// Streaming.
	{"STREAM instead of RESPONSE_STREAM", func(d deploy.Template) {
		event(d, "EmbeddingsFunction", "PostV1Embeddings")["ResponseTransferMode"] = "STREAM"
	}, nil, []string{`ResponseTransferMode "STREAM" is not RESPONSE_STREAM`}},
	{"a streaming route buffered", func(d deploy.Template) {
		delete(event(d, "FileContentFunction", "GetV1FilesByFileIdContent"), "ResponseTransferMode")
	}, nil, []string{"GET /v1/files/{file_id}/content): a streaming route without ResponseTransferMode"}},
	{"a buffered route streamed", func(d deploy.Template) {
		event(d, "FilesListFunction", "GetV1Files")["ResponseTransferMode"] = "RESPONSE_STREAM"
	}, nil, []string{"GET /v1/files): a buffered route with ResponseTransferMode"}},
	{"a stream cut at 29 s", func(d deploy.Template) {
		event(d, "PassthroughBedrockFunction", "PostBedrock")["TimeoutInMillis"] = 29000
	}, nil, []string{"function passthrough-bedrock: event PostBedrock (POST /bedrock/{endpoint+}): TimeoutInMillis 29000, want 900000"}},
	{"an integration timeout that follows a parameter", func(d deploy.Template) {
		event(d, "ChatCompletionsFunction", "PostV1ChatCompletions")["TimeoutInMillis"] = map[string]any{"Fn::FindInMap": []any{"Millis", ref("ChatTimeout"), "Value"}}
	}, nil, []string{"never reaches API Gateway"}},
	{"a passthrough timeout the operator cannot set", func(d deploy.Template) { props(d, "PassthroughGeminiFunction")["Timeout"] = 900 },
		nil, []string{"function passthrough-gemini: Timeout 900, want !Ref PassthroughTimeout"}},
	{"a timeout parameter past Lambda's limit", func(d deploy.Template) {
		p := m(m(d["Parameters"])["PassthroughTimeout"])
		p["AllowedValues"] = append(p["AllowedValues"].([]any), 1800)
	}, nil, []string{"function passthrough-anthropic: Timeout ${PassthroughTimeout} (with PassthroughTimeout=1800), want 1..900 s"}},
	{"a buffered function past API Gateway's 29 s", func(d deploy.Template) { props(d, "FilesUploadFunction")["Timeout"] = 60 },
		nil, []string{"function files-upload: Timeout 60, want 1..29 s"}},

	// Environment.
	{"a variable removed", func(d deploy.Template) { delete(globalEnv(d), "SLUICE_TABLE") },
		nil, []string{"function admin: environment variable SLUICE_TABLE is not set", "function files-sweep: environment variable SLUICE_TABLE is not set"}},
	{"a variable pointing elsewhere", func(d deploy.Template) {
		props(d, "FilesListFunction")["Environment"] = map[string]any{"Variables": map[string]any{"SLUICE_BUCKET": ref("WorkQueue")}}
	}, nil, []string{`function files-list: environment variable SLUICE_BUCKET is "${WorkQueue}", want "${Files}"`}},
	{"the local backend", func(d deploy.Template) { globalEnv(d)["SLUICE_BACKEND"] = "local" },
		nil, []string{`function health: environment variable SLUICE_BACKEND is "local", want "aws"`}},
	{"a variable nothing reads", func(d deploy.Template) { globalEnv(d)["SLUICE_TABEL"] = ref("Records") },
		nil, []string{"function models: environment variable SLUICE_TABEL is set but not declared"}},

	// Permissions.
	{"a permission removed", func(d deploy.Template) { removePolicy(d, "FilesUploadFunction", "RecordsWritePolicy") },
		nil, []string{"function files-upload: lacks dynamodb:PutItem on ${Records.Arn} (needed for records-write)"}},
	{"a shared permission removed", func(d deploy.Template) { removeStatement(d, "AuthenticatedPolicy", "MasterKeySecret") },
		nil, []string{"function admin: lacks secretsmanager:GetSecretValue on ${MasterKeySecret} (needed for master-key)"}},
	{"the master key granted where no route takes a key", func(d deploy.Template) { addPolicy(d, "HealthFunction", ref("AuthenticatedPolicy")) },
		nil, []string{"function health: is granted secretsmanager:GetSecretValue on ${MasterKeySecret}"}},
	{"the config permission dropped for S3 configs", func(d deploy.Template) {
		l := slices.Clone(statements(d, "BasePolicy"))
		l[0] = map[string]any{"Fn::If": []any{"ConfigInS3", ref("AWS::NoValue"), m(l[0])["Fn::If"].([]any)[2]}}
		setStatements(d, "BasePolicy", l)
	}, nil, []string{"function files-sweep: lacks s3:GetObject on arn:${AWS::Partition}:s3:::${ConfigObject} when ConfigInS3"}},
	{"Bedrock for a function that never calls models", func(d deploy.Template) {
		addPolicy(d, "FilesListFunction", ifCondition("BedrockEnabled", ref("BedrockInvokePolicy")))
	}, nil, []string{"function files-list: is granted bedrock:InvokeModel on arn:${AWS::Partition}:bedrock:*::foundation-model/* when BedrockEnabled, which none of its capabilities"}},
	{"provider secrets for a CRUD function", func(d deploy.Template) { addPolicy(d, "FileDeleteFunction", ref("ModelCallPolicy")) },
		nil, []string{"function file-delete: is granted secretsmanager:GetSecretValue on ${ProviderSecret}"}},
	{"file bytes for a passthrough", func(d deploy.Template) { addPolicy(d, "PassthroughGeminiFunction", ref("FilesReadPolicy")) },
		nil, []string{"function passthrough-gemini: is granted s3:GetObject on ${Files.Arn}/files/*"}},
	{"a resource widened", func(d deploy.Template) {
		statement(d, "FilesReadPolicy", "FileBytesRead")["Resource"] = map[string]any{"Fn::Sub": "${Files.Arn}/*"}
	}, nil, []string{"function file-content: is granted s3:GetObject on ${Files.Arn}/*", "function file-content: lacks s3:GetObject on ${Files.Arn}/files/*"}},
	{"the limiter's key condition dropped", func(d deploy.Template) { delete(statement(d, "AuthenticatedPolicy", "RateLimitWindows"), "Condition") },
		nil, []string{"function files-list: is granted dynamodb:UpdateItem on ${Records.Arn}, which none"}},
	{"a listing limited by prefix, which a read's missing-key check does not carry", func(d deploy.Template) {
		statement(d, "FilesReadPolicy", "FileBytesList")["Condition"] = map[string]any{"StringLike": map[string]any{"s3:prefix": []any{"files/*"}}}
	}, nil, []string{"function file-content: lacks s3:ListBucket on ${Files.Arn} (needed for files-read)"}},
	{"a missing object read as 403", func(d deploy.Template) { removeStatement(d, "FilesReadPolicy", "FileBytesList") },
		nil, []string{`function file-content: lacks s3:ListBucket on ${Files.Arn} (needed for files-read)`}},
	{"Bedrock granted unconditionally", func(d deploy.Template) {
		l := slices.Clone(policies(d, "EmbeddingsFunction"))
		for i, p := range l {
			if args, ok := m(p)["Fn::If"].([]any); ok && args[0] == "BedrockEnabled" {
				l[i] = args[1]
			}
		}
		setPolicies(d, "EmbeddingsFunction", l)
	}, nil, []string{"function embeddings: Policies[2]: policy BedrockInvokePolicy exists only when BedrockEnabled"}},
	{"an AWS managed policy", func(d deploy.Template) { addPolicy(d, "AdminFunction", "AmazonDynamoDBFullAccess") },
		nil, []string{"function admin: Policies[2] is not !Ref"}},
	{"a SAM policy template", func(d deploy.Template) {
		addPolicy(d, "AdminFunction", map[string]any{"DynamoDBCrudPolicy": map[string]any{"TableName": ref("Records")}})
	}, nil, []string{"function admin: Policies[2] is not !Ref"}},
	{"inline statements", func(d deploy.Template) {
		addPolicy(d, "AdminFunction", map[string]any{"Version": "2012-10-17", "Statement": []any{
			map[string]any{"Effect": "Allow", "Action": "sns:Publish", "Resource": ref("Events")}}})
	}, nil, []string{"function admin: Policies[2] is not !Ref", "give each capability's grants one managed policy"}},
	{"more managed policies than a role takes", func(d deploy.Template) {
		for _, p := range []string{"RecordsWritePolicy", "FilesReadPolicy", "FilesWritePolicy", "FilesDeletePolicy"} {
			addPolicy(d, "UploadsFunction", ref(p))
		}
	}, nil, []string{"function uploads: 8 managed policies with the 2 SAM attaches, over 7 (IAM allows 10 a role"}},
	{"a role of its own", func(d deploy.Template) { props(d, "AdminFunction")["Role"] = getAtt("SomeRole", "Arn") },
		nil, []string{"function admin: Role is not allowed"}},

	// Build and runtime.
	{"the x86 architecture", func(d deploy.Template) { m(m(d["Globals"])["Function"])["Architectures"] = []any{"x86_64"} },
		nil, []string{"function health: Architectures [x86_64], want [arm64]"}},
	{"the go1.x builder", func(d deploy.Template) { m(m(resources(d)["ModelsFunction"])["Metadata"])["BuildMethod"] = "go1.x" },
		nil, []string{`function models: Metadata.BuildMethod "go1.x", want makefile`}},
	{"built from the function's folder", func(d deploy.Template) {
		delete(m(m(resources(d)["ModelsFunction"])["Metadata"]), "ProjectRootDirectory")
	},
		nil, []string{`function models: Metadata.ProjectRootDirectory "", want .`}},
	{"logs kept forever", func(d deploy.Template) { delete(props(d, "ModelsLogs"), "RetentionInDays") },
		nil, []string{"function models: LoggingConfig.LogGroup must !Ref a log group with RetentionInDays"}},
	{"text logs", func(d deploy.Template) {
		m(m(m(d["Globals"])["Function"])["LoggingConfig"])["LogFormat"] = "Text"
	}, nil, []string{`function admin: LoggingConfig.LogFormat "Text", want JSON`}},
	{"a function removed", func(d deploy.Template) { delete(resources(d), "FilesSweepFunction") },
		nil, []string{"function files-sweep: no AWS::Serverless::Function FilesSweepFunction"}},
	{"a function nothing declares", func(d deploy.Template) {
		resources(d)["ImagesFunction"] = map[string]any{"Type": "AWS::Serverless::Function", "Properties": map[string]any{}}
	}, nil, []string{"function resource ImagesFunction is no function of pkg/deploy"}},
	{"the sweep's schedule changed", func(d deploy.Template) { event(d, "FilesSweepFunction", "Schedule")["Schedule"] = "rate(1 day)" },
		nil, []string{`function files-sweep: event Schedule: Schedule "rate(1 day)", want "rate(1 hour)"`}},
	{"the sweep unscheduled", func(d deploy.Template) { delete(events(d, "FilesSweepFunction"), "Schedule") },
		nil, []string{"function files-sweep: 0 Schedule events, want 1"}},

	// Alarms.
	{"a dead-letter queue without an alarm", func(d deploy.Template) { delete(resources(d), "WorkDeadLettersAlarm") },
		nil, []string{"dead-letter queue WorkDeadLetters (of WorkQueue): no CloudWatch alarm"}},
	{"an alarm nobody hears", func(d deploy.Template) { delete(props(d, "DeliveryDeadLettersAlarm"), "AlarmActions") },
		nil, []string{"dead-letter queue DeliveryDeadLetters (of DeliveryQueue): no CloudWatch alarm"}},
	{"a job without an error alarm", func(d deploy.Template) { delete(resources(d), deploy.JobErrorsAlarmID(0)) },
		nil, []string{"function files-sweep: no CloudWatch alarm watches AWS/Lambda Errors of FilesSweepFunction"}},

	// The API.
	{"a gateway response removed", func(d deploy.Template) { delete(m(props(d, "Api")["GatewayResponses"]), "THROTTLED") },
		nil, []string{"api: no gateway response THROTTLED"}},
	{"a gateway response in another shape", func(d deploy.Template) {
		r := m(m(props(d, "Api")["GatewayResponses"])["MISSING_AUTHENTICATION_TOKEN"])
		r["ResponseTemplates"] = map[string]any{"application/json": `{"message":"Missing Authentication Token"}`}
	}, nil, []string{`api: gateway response MISSING_AUTHENTICATION_TOKEN: want {"error":{"message","type","param","code"}}`}},
	{"a gateway response with API Gateway's status", func(d deploy.Template) {
		delete(m(m(props(d, "Api")["GatewayResponses"])["MISSING_AUTHENTICATION_TOKEN"]), "StatusCode")
	}, nil, []string{"api: gateway response MISSING_AUTHENTICATION_TOKEN: status 0, want 404"}},
	{"a gateway response with a wrong code", func(d deploy.Template) {
		r := m(m(props(d, "Api")["GatewayResponses"])["REQUEST_TOO_LARGE"])
		r["ResponseTemplates"] = map[string]any{"application/json": `{"error":{"message":$context.error.messageString,"type":"invalid_request_error","param":null,"code":"too_big"}}`}
	}, nil, []string{`api: gateway response REQUEST_TOO_LARGE: error.code is not "payload_too_large"`}},
	{"binary media types unescaped", func(d deploy.Template) {
		props(d, "Api")["BinaryMediaTypes"] = []any{"multipart/form-data", "application/octet-stream"}
	}, nil, []string{"api: BinaryMediaTypes lacks multipart~1form-data", "api: BinaryMediaTypes lacks application~1octet-stream"}},
	{"an edge-optimized API", func(d deploy.Template) { props(d, "Api")["EndpointConfiguration"] = map[string]any{"Type": "EDGE"} },
		nil, []string{"api: EndpointConfiguration"}},
	{"no throttling", func(d deploy.Template) { delete(props(d, "Api"), "MethodSettings") },
		nil, []string{"api: no stage throttling"}},
	{"no access logs", func(d deploy.Template) { delete(props(d, "Api"), "AccessLogSetting") },
		nil, []string{"api: no AccessLogSetting"}},
	{"no output for a variable the functions read", func(d deploy.Template) { delete(m(d["Outputs"]), "DeliveryDLQURL") },
		nil, []string{"outputs: none has the Description SLUICE_DELIVERY_DLQ_URL"}},
	{"no API URL output", func(d deploy.Template) { delete(m(d["Outputs"]), "ApiURL") },
		nil, []string{`outputs: ApiURL "" is not the API's invoke URL`}},
	{"a master key written in the template", func(d deploy.Template) { props(d, "MasterKeySecret")["SecretString"] = "sk-123" },
		nil, []string{"secret MasterKeySecret: the master key must be generated"}},

	// Lifecycle.
	{"a secret kept when the first deploy rolls back", func(d deploy.Template) { m(resources(d)["MasterKeySecret"])["DeletionPolicy"] = "Retain" },
		nil, []string{"resource MasterKeySecret: DeletionPolicy Retain keeps it when a first deploy rolls back"}},
	{"the table deleted with the stack", func(d deploy.Template) { m(resources(d)["Records"])["DeletionPolicy"] = "Delete" },
		nil, []string{`resource Records (AWS::DynamoDB::Table): DeletionPolicy "Delete", want RetainExceptOnCreate`}},
	{"file bytes lost on replacement", func(d deploy.Template) { delete(m(resources(d)["Files"]), "UpdateReplacePolicy") },
		nil, []string{`resource Files (AWS::S3::Bucket): UpdateReplacePolicy "", want Retain`}},
	{"the table deletable by accident", func(d deploy.Template) { delete(props(d, "Records"), "DeletionProtectionEnabled") },
		nil, []string{"table Records: DeletionProtectionEnabled , want !If"}},
	{"the table protected on its first create", func(d deploy.Template) { props(d, "Records")["DeletionProtectionEnabled"] = true },
		nil, []string{"table Records: DeletionProtectionEnabled true, want !If [condition, true, false]", "ROLLBACK_FAILED"}},
	{"the table unprotected by default", func(d deploy.Template) { m(m(d["Parameters"])["ProtectRecords"])["Default"] = "false" },
		nil, []string{`table Records: DeletionProtectionEnabled follows ProtectRecords, whose default "false" is not "true"`}},
	{"the sweep index copying whole items", func(d deploy.Template) {
		m(m(props(d, "Records")["GlobalSecondaryIndexes"].([]any)[1])["Projection"])["ProjectionType"] = "ALL"
	}, nil, []string{"table Records: index gsi2 projects ALL, want KEYS_ONLY"}},
	{"the account's logging role always made", func(d deploy.Template) { delete(m(resources(d)["ApiGatewayAccount"]), "Condition") },
		nil, []string{"resource ApiGatewayAccount: the account's API Gateway logging role must be optional"}},
	{"the logging role made by default no more", func(d deploy.Template) {
		m(m(d["Parameters"])["CreateApiGatewayAccount"])["Default"] = "false"
	}, nil, []string{"resource ApiGatewayAccount: the account's API Gateway logging role must be optional"}},
	{"the API depending on a resource that may not exist", func(d deploy.Template) { m(resources(d)["Api"])["DependsOn"] = "ApiGatewayAccount" },
		nil, []string{"resource Api: DependsOn ApiGatewayAccount, which exists only when ApiGatewayAccountCreated"}},

	// Costs and limits.
	{"detailed metrics always on", func(d deploy.Template) {
		m(props(d, "Api")["MethodSettings"].([]any)[0])["MetricsEnabled"] = true
	}, nil, []string{"api: MetricsEnabled true, want !If"}},
	{"detailed metrics on by default", func(d deploy.Template) { m(m(d["Parameters"])["EnableDetailedMetrics"])["Default"] = "true" },
		nil, []string{`api: MetricsEnabled follows EnableDetailedMetrics, whose default "true" is not "false"`}},
	{"audio bodies mangled", func(d deploy.Template) {
		props(d, "Api")["BinaryMediaTypes"] = slices.DeleteFunc(slices.Clone(props(d, "Api")["BinaryMediaTypes"].([]any)), func(t any) bool { return t == "audio~1*" })
	}, nil, []string{"api: BinaryMediaTypes lacks audio~1*"}},
	{"a 413 that does not say what to do", func(d deploy.Template) {
		r := m(m(props(d, "Api")["GatewayResponses"])["REQUEST_TOO_LARGE"])
		r["ResponseTemplates"] = map[string]any{"application/json": `{"error":{"message":"Request too large.","type":"invalid_request_error","param":null,"code":"payload_too_large"}}`}
	}, nil, []string{`api: gateway response REQUEST_TOO_LARGE: the message does not say "6 MB"`, `does not say "part_size"`}},

	// Alarms.
	{"no alarm on API Gateway's 5XX", func(d deploy.Template) { delete(resources(d), "ApiErrors") },
		nil, []string{"alarms: none on AWS/ApiGateway 5XXError of the API (ApiName sluice-${Stage}, Stage ${Stage})"}},
	{"no alarm on DynamoDB throttling", func(d deploy.Template) { delete(resources(d), "RecordsThrottles") },
		nil, []string{"alarms: none on AWS/DynamoDB ReadThrottleEvents of table Records", "alarms: none on AWS/DynamoDB WriteThrottleEvents"}},
	{"no alarm on the account's throttles", func(d deploy.Template) { delete(resources(d), "LambdaThrottles") },
		nil, []string{"alarms: none on AWS/Lambda Throttles of the account"}},
	{"an alarm on a topic of its own", func(d deploy.Template) { props(d, "ApiErrors")["AlarmActions"] = []any{ref("OpsTopic")} },
		nil, []string{"alarm ApiErrors: AlarmActions [${OpsTopic}], want [!Ref Alarms]"}},

	// Jobs: a queue consumer needs its queue event as declared.
	{"an SQS event nothing declares", func(d deploy.Template) {
		events(d, "AdminFunction")["Work"] = map[string]any{"Type": "SQS", "Properties": map[string]any{"Queue": getAtt("WorkQueue", "Arn")}}
	}, nil, []string{"function admin: event Work: an SQS event on a function that declares no queue"}},
	{"a scheduled job with no time to run", func(d deploy.Template) { props(d, "FilesSweepFunction")["Timeout"] = 15 },
		nil, []string{"function files-sweep: Timeout 15 s leaves a scheduled run little time"}},
}

func TestCheckCatchesDrift(t *testing.T) {
	base := load(t)
	for _, tc := range driftCases {
		t.Run(tc.name, func(t *testing.T) {
			d := base.Clone()
			tc.mutate(d)
			fns := functions(t)
			if tc.fns != nil {
				fns = tc.fns(fns)
			}
			problems := deploy.Check(d, fns)
			for _, want := range tc.want {
				if !slices.ContainsFunc(problems, func(p error) bool { return strings.Contains(p.Error(), want) }) {
					t.Errorf("no problem says %q; got:\n%s", want, join(problems))
				}
			}
		})
	}
	// The mutations changed copies only.
	if problems := deploy.Check(base, functions(t)); len(problems) > 0 {
		t.Errorf("the template changed under the mutations:\n%s", join(problems))
	}
}

func join(errs []error) string {
	var b strings.Builder
	for _, e := range errs {
		fmt.Fprintf(&b, "  %v\n", e)
	}
	return b.String()
}

// templateEnv is function fn's environment as the template sets it (Globals
// merged with the function's own), each value made concrete: !If takes the
// default branch (the SSM config), a parameter its default, any other ${X}
// test-X.
func templateEnv(t *testing.T, tmpl deploy.Template, id string) map[string]string {
	t.Helper()
	vars := map[string]any{}
	for k, v := range globalEnv(tmpl) {
		vars[k] = v
	}
	if own, ok := props(tmpl, id)["Environment"].(map[string]any); ok {
		for k, v := range m(own["Variables"]) {
			vars[k] = v
		}
	}
	subst := regexp.MustCompile(`\$\{([^}]+)\}`)
	env := map[string]string{}
	for k, v := range vars {
		if vm, ok := v.(map[string]any); ok && vm["Fn::If"] != nil {
			args := vm["Fn::If"].([]any)
			v = args[2]
		}
		env[k] = subst.ReplaceAllStringFunc(deploy.Render(v), func(ref string) string {
			name := ref[2 : len(ref)-1]
			if p, ok := m(tmpl["Parameters"])[name].(map[string]any); ok && p["Default"] != nil {
				return deploy.Render(p["Default"])
			}
			return "test-" + name
		})
	}
	return env
}

// openEnv runs the readers a function runs at start-up (gateway.Open) over
// env: the settings, and the AWS resources.
func openEnv(t *testing.T, env map[string]string) error {
	settings, err := config.SettingsFromEnv(func(k string) string { return env[k] })
	if err != nil {
		return err
	}
	if settings.Backend != config.BackendAWS {
		return fmt.Errorf("backend %q", settings.Backend)
	}
	if !strings.HasPrefix(settings.ConfigLocation, "ssm:/") && !strings.HasPrefix(settings.ConfigLocation, "s3://") {
		return fmt.Errorf("config location %q", settings.ConfigLocation)
	}
	_, err = awsstore.ResourcesFromEnv(func(k string) string { return env[k] })
	return err
}

// TestTemplateEnvStartsEveryFunction runs the real readers of a function's
// start-up over the environment the template gives each function; and,
// dropping each declared variable in turn, shows every one is needed.
func TestTemplateEnvStartsEveryFunction(t *testing.T) {
	tmpl := load(t)
	for _, f := range functions(t) {
		env := templateEnv(t, tmpl, f.LogicalID())
		if err := openEnv(t, env); err != nil {
			t.Errorf("%s does not start with the template's environment: %v", f.Name, err)
		}
	}
	env := templateEnv(t, tmpl, "HealthFunction")
	for _, v := range deploy.CloudEnv() {
		without := map[string]string{}
		for k, val := range env {
			if k != v.Name {
				without[k] = val
			}
		}
		if err := openEnv(t, without); err == nil {
			t.Errorf("a function starts without %s: CloudEnv declares a variable nothing needs", v.Name)
		}
	}
}

// TestCloudEnvIsWhatTheAdapterReads: the resource variables of CloudEnv are
// exactly the ones pkg/store/aws requires.
func TestCloudEnvIsWhatTheAdapterReads(t *testing.T) {
	var want []string
	for _, line := range (awsstore.Resources{}).Env() { // required variables only, when empty
		name, _, _ := strings.Cut(line, "=")
		want = append(want, name)
	}
	var got []string
	for _, v := range deploy.CloudEnv() {
		if v.Name != "SLUICE_BACKEND" && v.Name != "SLUICE_CONFIG" {
			got = append(got, v.Name)
		}
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("CloudEnv resources %v, pkg/store/aws requires %v", got, want)
	}
}

// TestStorageMatchesTheAdapters: the queues and the table are what
// pkg/store/aws provisions and expects.
func TestStorageMatchesTheAdapters(t *testing.T) {
	tmpl := load(t)
	secs := func(d time.Duration) int { return int(d / time.Second) }
	for _, q := range []struct {
		id, dlq    string
		visibility time.Duration
	}{
		{deploy.WorkQueueID, "WorkDeadLetters", awsstore.WorkVisibility},
		{deploy.DeliveryQueueID, "DeliveryDeadLetters", awsstore.DeliveryVisibility},
	} {
		p := props(tmpl, q.id)
		if got := p["VisibilityTimeout"]; got != secs(q.visibility) {
			t.Errorf("%s: VisibilityTimeout %v, pkg/store/aws provisions %d", q.id, got, secs(q.visibility))
		}
		redrive := m(p["RedrivePolicy"])
		if got := redrive["maxReceiveCount"]; got != awsstore.MaxReceives {
			t.Errorf("%s: maxReceiveCount %v, pkg/store/aws provisions %d", q.id, got, awsstore.MaxReceives)
		}
		if got := deploy.Render(redrive["deadLetterTargetArn"]); got != "${"+q.dlq+".Arn}" {
			t.Errorf("%s: dead letters go to %s", q.id, got)
		}
		if got := props(tmpl, q.dlq)["MessageRetentionPeriod"]; got != secs(14*24*time.Hour) {
			t.Errorf("%s: MessageRetentionPeriod %v, want 14 days", q.dlq, got)
		}
	}
	table := props(tmpl, deploy.TableID)
	var indexes []string
	for _, g := range table["GlobalSecondaryIndexes"].([]any) {
		indexes = append(indexes, m(g)["IndexName"].(string))
	}
	if want := []string{string(store.GSI1), string(store.GSI2)}; !slices.Equal(indexes, want) {
		t.Errorf("table indexes %v, want %v", indexes, want)
	}
	if table["BillingMode"] != "PAY_PER_REQUEST" || deploy.Render(table["PointInTimeRecoverySpecification"]) != `{"PointInTimeRecoveryEnabled":true}` ||
		deploy.Render(table["TimeToLiveSpecification"]) != `{"AttributeName":"ttl","Enabled":true}` {
		t.Errorf("table: want on-demand, point-in-time recovery and TTL on ttl: %v", table)
	}
}

func TestParseAndRender(t *testing.T) {
	doc := `
A: !Ref Table
B: !GetAtt Queue.Arn
C: !Sub "arn:${AWS::Partition}:s3:::${Bucket}/*"
D: !If [IsProd, !Sub "s3://${Obj}", !Join ["", ["ssm:", !Ref Param]]]
E: !Sub ["${X}-y", {X: !Ref Stage}]
F: !GetAtt [Queue, QueueName]
G: !Select [0, !GetAZs ""]
H: {"Fn::GetAtt": ["Queue", "Arn"]}
I: [1, true, "x"]
`
	tmpl, err := deploy.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{
		"A": "${Table}", "B": "${Queue.Arn}", "C": "arn:${AWS::Partition}:s3:::${Bucket}/*",
		"D": "If(IsProd,s3://${Obj},ssm:${Param})", "E": "${Stage}-y", "F": "${Queue.QueueName}",
		"G": "Fn::Select(0,Fn::GetAZs())", "H": "${Queue.Arn}", "I": `[1,true,"x"]`,
	} {
		if got := deploy.Render(tmpl[k]); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
	for name, bad := range map[string]string{
		"alias":         "a: &x 1\nb: *x\n",
		"merge key":     "a: {x: 1}\nb:\n  <<: {y: 2}\n",
		"duplicate key": "a: 1\na: 2\n",
		"GetAtt":        "a: !GetAtt NoDot\n",
		"not a map":     "- a\n",
		"two documents": "a: 1\n---\nb: 2\n",
	} {
		if _, err := deploy.Parse([]byte(bad)); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

// FuzzParse: a template is read from a file the team writes, but the parser
// must still never panic, and whatever parses renders.
func FuzzParse(f *testing.F) {
	f.Add([]byte("a: !Ref B\nc: !If [X, !Sub '${Y}', !Ref AWS::NoValue]\n"))
	f.Add([]byte("Resources: {F: {Type: AWS::Serverless::Function, Properties: {Events: {E: {Type: Api}}}}}\n"))
	f.Add([]byte("a: !GetAtt [B, C]\nb: !Sub [x, {y: !Ref z}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		tmpl, err := deploy.Parse(data)
		if err != nil {
			return
		}
		for _, v := range tmpl {
			deploy.Render(v)
		}
		deploy.Check(tmpl, nil)
	})
}

// TestSamconfigParameters: every parameter samconfig.toml overrides exists
// in the template and takes the value given (its pattern, its allowed
// values), so `make deploy` does not fail on a typo after the build.
func TestSamconfigParameters(t *testing.T) {
	data, err := os.ReadFile("../../samconfig.toml")
	if err != nil {
		t.Fatal(err)
	}
	params := m(load(t)["Parameters"])
	line := regexp.MustCompile(`(?m)^parameter_overrides = "([^"]*)"$`)
	envs := line.FindAllStringSubmatch(string(data), -1)
	if len(envs) < 2 {
		t.Fatalf("want parameter_overrides for the default and the prod environment, found %d", len(envs))
	}
	for _, env := range envs {
		for _, kv := range strings.Fields(env[1]) {
			k, v, _ := strings.Cut(kv, "=")
			p, ok := params[k].(map[string]any)
			if !ok {
				t.Errorf("samconfig.toml overrides %s, which is no template parameter", k)
				continue
			}
			if pat, ok := p["AllowedPattern"].(string); ok {
				re, err := regexp.Compile(pat)
				if err != nil {
					t.Errorf("parameter %s: AllowedPattern %s: %v", k, pat, err)
				} else if !re.MatchString(v) {
					t.Errorf("samconfig.toml: %s=%s does not match %s", k, v, pat)
				}
			}
			if allowed, ok := p["AllowedValues"].([]any); ok && !slices.ContainsFunc(allowed, func(a any) bool { return deploy.Render(a) == v }) {
				t.Errorf("samconfig.toml: %s=%s is not one of %v", k, v, allowed)
			}
		}
	}
}

// generated returns template.yaml with its generated sections written for
// fns.
func generated(t *testing.T, fns []deploy.Function) deploy.Template {
	t.Helper()
	text, err := os.ReadFile(templatePath)
	if err != nil {
		t.Fatal(err)
	}
	out, err := deploy.Generate(text, fns)
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := deploy.Parse(out)
	if err != nil {
		t.Fatal(err)
	}
	return tmpl
}

// TestGeneratedSectionsAreCurrent: template.yaml's generated sections are
// what make template writes from the route and jobs tables today.
func TestGeneratedSectionsAreCurrent(t *testing.T) {
	text, err := os.ReadFile(templatePath)
	if err != nil {
		t.Fatal(err)
	}
	out, err := deploy.Generate(text, functions(t))
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != string(text) {
		t.Errorf("template.yaml's generated sections are not current: run make template (and commit template.yaml)")
	}
}

// maxHandWrittenLines bounds the hand-written part of template.yaml (the
// API, storage, queues, policies, parameters, shared alarms, outputs).
const maxHandWrittenLines = 1200

func TestTemplateHandWrittenLines(t *testing.T) {
	text, err := os.ReadFile(templatePath)
	if err != nil {
		t.Fatal(err)
	}
	if hand, _ := deploy.CountLines(text); hand > maxHandWrittenLines {
		t.Errorf("template.yaml has %d hand-written lines, over %d: what repeats per function belongs in the generator (pkg/deploy.Generate)", hand, maxHandWrittenLines)
	}
}

// TestGenerateNewFunction: a route of a new function is all make template
// needs: its resource, routes, log group and alarms appear, and it passes
// the check.
func TestGenerateNewFunction(t *testing.T) {
	routes := append(server.Routes(), server.Route{Method: "POST", Pattern: "/v1/images/generations", Function: "images", Access: server.AnyKey, Stream: true, Needs: []server.Capability{server.ProviderSecrets, server.EventsPublish, server.ClaimCheckWrite}, Memory: 256, Timeout: 120 * time.Second})
	fns, err := deploy.FunctionsOf(routes, server.Jobs())
	if err != nil {
		t.Fatal(err)
	}
	tmpl := generated(t, fns)
	for _, p := range deploy.Check(tmpl, fns) {
		t.Error(p)
	}
	p := props(tmpl, "ImagesFunction")
	if p["MemorySize"] != 256 || p["Timeout"] != 120 {
		t.Errorf("ImagesFunction: MemorySize %v, Timeout %v, want 256 and 120", p["MemorySize"], p["Timeout"])
	}
	if ev := event(tmpl, "ImagesFunction", "PostV1ImagesGenerations"); ev["Path"] != "/v1/images/generations" || ev["ResponseTransferMode"] != deploy.StreamMode {
		t.Errorf("ImagesFunction's event: %v", ev)
	}
}

// TestGenerateRefusesUngrantable: a capability no managed policy grants
// exactly fails the generation, naming what to add.
func TestGenerateRefusesUngrantable(t *testing.T) {
	text, err := os.ReadFile(templatePath)
	if err != nil {
		t.Fatal(err)
	}
	routes := append(server.Routes(), server.Route{Method: "GET", Pattern: "/v1/x", Function: "x", Access: server.Public, Needs: []server.Capability{server.RecordsRead, server.WorkExtend}})
	fns, err := deploy.FunctionsOf(routes, server.Jobs())
	if err != nil {
		t.Fatal(err)
	}
	_, err = deploy.Generate(text, fns)
	if err == nil || !strings.Contains(err.Error(), "function x: no managed policy of template.yaml grants sqs:ChangeMessageVisibility on ${WorkQueue.Arn} without") {
		t.Errorf("Generate: %v, want the missing grant named", err)
	}
}

// TestBinaryMediaTypesCoverBinaryBodies: every kind of binary body sluice
// takes — uploads, and what the passthroughs carry (Gemini and Vertex AI
// file uploads of images, audio, video, documents; Bedrock document blocks)
// — matches a binary media type of the API as API Gateway matches them
// (type/subtype, "*" for any subtype, parameters ignored), so it arrives
// base64-encoded and intact, not as mangled UTF-8.
func TestBinaryMediaTypesCoverBinaryBodies(t *testing.T) {
	var types []string
	for _, bt := range renderListOf(props(load(t), "Api")["BinaryMediaTypes"]) {
		types = append(types, strings.ReplaceAll(bt, "~1", "/"))
	}
	matches := func(ct string) bool {
		ct, _, _ = strings.Cut(ct, ";")
		for _, bt := range types {
			typ, sub, _ := strings.Cut(bt, "/")
			ctTyp, ctSub, _ := strings.Cut(strings.TrimSpace(ct), "/")
			if typ == ctTyp && (sub == "*" || sub == ctSub) {
				return true
			}
		}
		return false
	}
	for _, ct := range []string{
		"multipart/form-data; boundary=----x", "application/octet-stream", "application/pdf", "application/zip",
		"image/png", "image/jpeg", "image/webp", "audio/wav", "audio/mpeg", "audio/flac", "video/mp4",
	} {
		if !matches(ct) {
			t.Errorf("a %s body would reach the function as text: the API's BinaryMediaTypes %v do not cover it", ct, types)
		}
	}
	if matches("application/json") || matches("text/event-stream") {
		t.Errorf("BinaryMediaTypes %v cover text: JSON bodies would arrive base64-encoded for no reason", types)
	}
}

func renderListOf(v any) []string {
	var out []string
	for _, e := range v.([]any) {
		out = append(out, deploy.Render(e))
	}
	return out
}

// TestDocsDescribeTheDeploy: the reference pages (docs/deploy-aws.md, and
// a feature's own page for its parameters) name every template parameter,
// the Go version of go.mod, and the tools' facts a first deploy needs.
func TestDocsDescribeTheDeploy(t *testing.T) {
	pages, err := filepath.Glob("../../docs/*.md")
	if err != nil || len(pages) == 0 {
		t.Fatalf("no docs pages: %v", err)
	}
	var docs strings.Builder
	for _, p := range pages {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		docs.Write(b)
	}
	gomod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	doc := docs.String()
	for name := range m(load(t)["Parameters"]) {
		if !strings.Contains(doc, "`"+name+"`") {
			t.Errorf("no page of docs/ names the parameter %s (docs/deploy-aws.md has the table)", name)
		}
	}
	goVersion := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(gomod)
	if goVersion == nil || !strings.Contains(doc, "Go "+string(goVersion[1])) {
		t.Errorf("docs/ does not name the Go version of go.mod (%s)", goVersion)
	}
	for _, fact := range []string{
		"SAM CLI 1.158.0",                 // the first with a translator that knows ResponseTransferMode
		"--use-container",                 // which sam build does without
		"sam local start-api",             // which cannot serve the streaming routes
		"make invoke",                     // which can
		"env.json",                        // for sam local invoke
		"--no-confirm-changeset",          // for deploys without a person
		"curl -N",                         // the smoke test
		"RetainExceptOnCreate",            // what a deleted or failed stack leaves
		"--force-delete-without-recovery", // re-creating a stage
		"part_size",                       // uploads over the 6 MB limit
	} {
		if !strings.Contains(doc, fact) {
			t.Errorf("docs/ does not say %q", fact)
		}
	}
}

// TestTimeoutParametersReachTheAPI transforms template.yaml with SAM's own
// translator for two values of ChatTimeout and PassthroughTimeout: a value
// that changes a streamed route's integration timeout must also change the
// API deployment's logical ID (CloudFormation deploys the API again only
// then).
func TestTimeoutParametersReachTheAPI(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err == nil {
		err = exec.Command(python, "-c", "import samtranslator").Run()
	}
	if err != nil {
		if os.Getenv("SLUICE_REQUIRE_NODE") != "" {
			t.Fatalf("python3 with samtranslator (installed with cfn-lint, which make test needs): %v", err)
		}
		t.Skipf("python3 with samtranslator is not installed (pip install cfn-lint): %v", err)
	}
	values := []string{"60", "900"}
	out, err := exec.Command(python, append([]string{"testdata/samtransform.py", templatePath}, values...)...).Output()
	if err != nil {
		t.Fatalf("samtransform.py: %v", err)
	}
	var got map[string]struct {
		Deployments []string
		Timeouts    map[string]any
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("samtransform.py: %v: %s", err, out)
	}
	a, b := got[values[0]], got[values[1]]
	if len(a.Timeouts) == 0 {
		t.Fatalf("no streamed route in the transformed template: %s", out)
	}
	for route, ta := range a.Timeouts {
		if fmt.Sprint(ta) != fmt.Sprint(b.Timeouts[route]) && slices.Equal(a.Deployments, b.Deployments) {
			t.Errorf("%s: integration timeout %v with %s, %v with %s, but the same API deployment %v: the change would never reach API Gateway",
				route, ta, values[0], b.Timeouts[route], values[1], a.Deployments)
		}
	}
}

// TestEnvJSON: make env-json's transformation of describe-stacks (a sample
// answer) gives every variable a function reads at start, and the start-up
// readers accept it (sam local invoke with it opens the AWS store).
func TestEnvJSON(t *testing.T) {
	describe, err := os.ReadFile("testdata/describe-stacks.json")
	if err != nil {
		t.Fatal(err)
	}
	out, err := deploy.EnvJSON(describe)
	if err != nil {
		t.Fatal(err)
	}
	var env struct{ Parameters map[string]string }
	if err := json.Unmarshal(out, &env); err != nil {
		t.Fatalf("env.json: %v: %s", err, out)
	}
	for _, v := range deploy.CloudEnv() {
		if env.Parameters[v.Name] == "" {
			t.Errorf("env.json lacks %s", v.Name)
		}
	}
	if got := env.Parameters["SLUICE_DELIVERY_DLQ_URL"]; got != "https://sqs.eu-west-1.amazonaws.com/123456789012/sluice-dev-DeliveryDeadLetters-GhI" {
		t.Errorf("SLUICE_DELIVERY_DLQ_URL = %q", got)
	}
	if err := openEnv(t, env.Parameters); err != nil {
		t.Errorf("the functions would not start with env.json: %v", err)
	}
}

// TestEnvJSONNamesMissingOutputs: a stack deployed from a template without
// an output a function needs is refused, naming it.
func TestEnvJSONNamesMissingOutputs(t *testing.T) {
	describe, err := os.ReadFile("testdata/describe-stacks.json")
	if err != nil {
		t.Fatal(err)
	}
	old := strings.Replace(string(describe), `"Description": "SLUICE_DELIVERY_DLQ_URL"`, `"Description": "dead letters"`, 1)
	if _, err := deploy.EnvJSON([]byte(old)); err == nil || !strings.Contains(err.Error(), "stack sluice-dev has no output for SLUICE_DELIVERY_DLQ_URL") {
		t.Errorf("EnvJSON: %v, want the missing output named", err)
	}
}
