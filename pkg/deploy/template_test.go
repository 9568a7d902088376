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

// TestTemplateMatchesTheCode is the drift test: template.yaml's generated
// sections are what make template writes from the route and jobs tables
// today, and its hand-written core passes CheckCore (the API, storage,
// queues, policies, alarms and outputs the deployment needs).
func TestTemplateMatchesTheCode(t *testing.T) {
	for _, p := range deploy.Check(readTemplate(t), functions(t)) {
		t.Error(p)
	}
}

func readTemplate(t *testing.T) []byte {
	t.Helper()
	text, err := os.ReadFile(templatePath)
	if err != nil {
		t.Fatal(err)
	}
	return text
}

// Helpers that reach into a parsed template for the mutations below.

func m(v any) map[string]any { return v.(map[string]any) }

func resources(tmpl deploy.Template) map[string]any { return m(tmpl["Resources"]) }

func props(tmpl deploy.Template, id string) map[string]any {
	return m(m(resources(tmpl)[id])["Properties"])
}

func event(tmpl deploy.Template, fn, ev string) map[string]any {
	return m(m(m(props(tmpl, fn)["Events"])[ev])["Properties"])
}

// statement returns the statement sid of a managed policy.
func statement(tmpl deploy.Template, policy, sid string) map[string]any {
	for _, st := range m(props(tmpl, policy)["PolicyDocument"])["Statement"].([]any) {
		if sm, ok := st.(map[string]any); ok && sm["Sid"] == sid {
			return sm
		}
	}
	panic("no statement " + sid + " in " + policy)
}

func globalFunction(tmpl deploy.Template) map[string]any { return m(m(tmpl["Globals"])["Function"]) }

func globalEnv(tmpl deploy.Template) map[string]any {
	return m(m(globalFunction(tmpl)["Environment"])["Variables"])
}

func ref(id string) map[string]any { return map[string]any{"Ref": id} }

// staleCase is an edit of template.yaml's text: the lines it changes, and
// the stale entry Check must name.
type staleCase struct {
	name     string
	old, new string
	entry    string
}

// TestCheckCatchesStaleGeneratedSections: any edit of a generated section —
// a route, the transfer mode, a policy, a timeout, a whole function, an
// alarm, a queue job's parameter — is caught by comparing the text with what
// make template writes, and the problem shows the stale lines, where they
// are, and says to run make template.
func TestCheckCatchesStaleGeneratedSections(t *testing.T) {
	text := string(readTemplate(t))
	for _, tc := range []staleCase{
		{"a route removed", "        PostV1Files: {Type: Api, Properties: {RestApiId: !Ref Api, Path: \"/v1/files\", Method: post}}\n", "", "FilesUploadFunction"},
		{"a streaming route buffered", `Path: "/v1/files/{file_id}/content", Method: get, ResponseTransferMode: RESPONSE_STREAM, TimeoutInMillis: 900000}}`,
			`Path: "/v1/files/{file_id}/content", Method: get}}`, "FileContentFunction"},
		{"a policy added", "      Policies: [!Ref AuthenticatedPolicy, !Ref FilesReadPolicy]\n",
			"      Policies: [!Ref AuthenticatedPolicy, !Ref FilesReadPolicy, !Ref FilesDeletePolicy]\n", "FileContentFunction"},
		{"a timeout the operator cannot set", "      Timeout: !Ref PassthroughTimeout\n      LoggingConfig: {LogGroup: !Ref PassthroughGeminiLogs}",
			"      Timeout: 900\n      LoggingConfig: {LogGroup: !Ref PassthroughGeminiLogs}", "PassthroughGeminiFunction"},
		{"an environment of its own", "      LoggingConfig: {LogGroup: !Ref HealthLogs}\n",
			"      LoggingConfig: {LogGroup: !Ref HealthLogs}\n      Environment: {Variables: {SLUICE_BACKEND: local}}\n", "HealthFunction"},
		{"a job's alarm made blind", "Value: !Ref FilesSweepFunction}]}", "Value: !Ref HealthFunction}]}", "JobErrors"},
		{"a concurrency cap Lambda refuses", "    MinValue: 2\n    MaxValue: 1000\n    Description: Most batch-worker",
			"    MinValue: 1\n    MaxValue: 1000\n    Description: Most batch-worker", "BatchWorkerMaxConcurrency"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if strings.Count(text, tc.old) != 1 {
				t.Fatalf("template.yaml has %q %d times, want once", tc.old, strings.Count(text, tc.old))
			}
			problems := deploy.Check([]byte(strings.Replace(text, tc.old, tc.new, 1)), functions(t))
			if len(problems) != 1 {
				t.Fatalf("%d problems, want 1 (the stale section):\n%s", len(problems), join(problems))
			}
			msg := problems[0].Error()
			for _, want := range []string{"not current: run make template", "(in " + tc.entry + ")"} {
				if !strings.Contains(msg, want) {
					t.Errorf("the problem does not say %q:\n%s", want, msg)
				}
			}
			removed := func(l string) bool { // a "-" line of the diff (the text as it is) shows it
				return slices.ContainsFunc(strings.Split(msg, "\n"), func(d string) bool { return strings.HasPrefix(d, "-") && strings.Contains(d, l) })
			}
			for _, l := range strings.Split(strings.TrimSuffix(tc.new, "\n"), "\n") {
				if l != "" && !strings.Contains(text, l) && !removed(l) {
					t.Errorf("the diff does not show the edited line %q:\n%s", l, msg)
				}
			}
		})
	}
}

// TestCheckCatchesATableChangeNotGenerated: a route added to the table
// without make template leaves the template stale, naming the function
// make template would write.
func TestCheckCatchesATableChangeNotGenerated(t *testing.T) {
	fns, err := deploy.FunctionsOf(append(server.Routes(), imagesRoute), server.Jobs())
	if err != nil {
		t.Fatal(err)
	}
	problems := deploy.Check(readTemplate(t), fns)
	if len(problems) != 1 || !strings.Contains(problems[0].Error(), "run make template") || !strings.Contains(problems[0].Error(), "+    ImagesFunction:") {
		t.Errorf("want one stale problem adding ImagesFunction, got:\n%s", join(problems))
	}
}

// TestCheckCatchesPoliciesThatNoLongerGrant: an edit of a managed policy of
// the core that leaves a function's capabilities without an exact set of
// policies fails generation, and Check names the grant and the function.
func TestCheckCatchesPoliciesThatNoLongerGrant(t *testing.T) {
	text := string(readTemplate(t))
	for _, tc := range []struct{ name, old, new, want string }{
		{"a file read widened to the whole bucket",
			"          - Sid: FileBytesRead\n            Effect: Allow\n            Action: s3:GetObject\n            Resource: [!Sub \"${Files.Arn}/files/*\", !Sub \"${Files.Arn}/uploads/*\", !Sub \"${Files.Arn}/batches/*\"]\n          - Sid: FileBytesList\n            Effect: Allow\n            Action: s3:ListBucket\n            Resource: !GetAtt Files.Arn\n          - Sid: BucketEncryptionKey\n            Effect: Allow\n            Action: kms:Decrypt",
			"          - Sid: FileBytesRead\n            Effect: Allow\n            Action: s3:GetObject\n            Resource: !Sub \"${Files.Arn}/*\"\n          - Sid: FileBytesList\n            Effect: Allow\n            Action: s3:ListBucket\n            Resource: !GetAtt Files.Arn\n          - Sid: BucketEncryptionKey\n            Effect: Allow\n            Action: kms:Decrypt",
			"function file-content: no managed policy of template.yaml grants "},
		{"the limiter's key condition dropped",
			"            Action: [dynamodb:GetItem, dynamodb:UpdateItem]\n            Resource: !GetAtt Records.Arn\n            Condition: {\"ForAllValues:StringLike\": {\"dynamodb:LeadingKeys\": \"LIMIT#*\"}}\n\n  RecordsWritePolicy:",
			"            Action: [dynamodb:GetItem, dynamodb:UpdateItem]\n            Resource: !GetAtt Records.Arn\n\n  RecordsWritePolicy:",
			"function models: no managed policy of template.yaml grants dynamodb:GetItem on ${Records.Arn} if"},
		{"a Deny statement",
			"          - Sid: RecordsWrite\n            Effect: Allow\n            Action: [dynamodb:PutItem, dynamodb:UpdateItem, dynamodb:DeleteItem]\n            Resource: !GetAtt Records.Arn\n\n  # Listing",
			"          - Sid: RecordsWrite\n            Effect: Deny\n            Action: [dynamodb:PutItem, dynamodb:UpdateItem, dynamodb:DeleteItem]\n            Resource: !GetAtt Records.Arn\n\n  # Listing",
			`policy RecordsWritePolicy: RecordsWritePolicy.Statement[0]: Effect "Deny", want Allow`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if strings.Count(text, tc.old) != 1 {
				t.Fatalf("template.yaml has the edited text %d times, want once", strings.Count(text, tc.old))
			}
			problems := deploy.Check([]byte(strings.Replace(text, tc.old, tc.new, 1)), functions(t))
			if !slices.ContainsFunc(problems, func(p error) bool { return strings.Contains(p.Error(), tc.want) }) {
				t.Errorf("no problem says %q; got:\n%s", tc.want, join(problems))
			}
		})
	}
}

// coreCase is a change to the hand-written core of a template generated
// for the functions (fns, when set, changes the declarations first), and
// the problems CheckCore must report for it.
type coreCase struct {
	name   string
	mutate func(deploy.Template)
	fns    func([]deploy.Function)
	want   []string
}

// coreCases are the drifts TestCheckCoreCatchesDrift makes.
var coreCases = []coreCase{
	// The one way in.
	{"a second API", func(d deploy.Template) {
		resources(d)["OtherApi"] = map[string]any{"Type": "AWS::Serverless::HttpApi", "Properties": map[string]any{}}
	}, nil, []string{"resource OtherApi (AWS::Serverless::HttpApi) routes requests outside the API"}},
	{"function URLs", func(d deploy.Template) {
		globalFunction(d)["FunctionUrlConfig"] = map[string]any{"AuthType": "NONE", "InvokeMode": "RESPONSE_STREAM"}
	}, nil, []string{"globals: function FunctionUrlConfig is not allowed"}},
	{"an OpenAPI body", func(d deploy.Template) { props(d, "Api")["DefinitionBody"] = map[string]any{"openapi": "3.0.1"} },
		nil, []string{"api: DefinitionBody routes requests besides the functions' events"}},
	{"a function nothing declares", func(d deploy.Template) {
		resources(d)["ImagesFunction"] = map[string]any{"Type": "AWS::Serverless::Function", "Properties": map[string]any{}}
	}, nil, []string{"function resource ImagesFunction is no function of pkg/deploy"}},
	{"a plain Lambda function", func(d deploy.Template) {
		resources(d)["Images"] = map[string]any{"Type": "AWS::Lambda::Function", "Properties": map[string]any{}}
	}, nil, []string{"resource Images: a plain AWS::Lambda::Function escapes these checks"}},

	// Timeouts: the parameters and the Globals default are the core's.
	{"a timeout parameter past Lambda's limit", func(d deploy.Template) {
		p := m(m(d["Parameters"])["PassthroughTimeout"])
		p["AllowedValues"] = append(p["AllowedValues"].([]any), 1800)
	}, nil, []string{"function passthrough-anthropic: Timeout ${PassthroughTimeout} (with PassthroughTimeout=1800), want 1..900 s"}},
	{"a default past API Gateway's 29 s", func(d deploy.Template) { globalFunction(d)["Timeout"] = 60 },
		nil, []string{"function files-list: Timeout 60, want 1..29 s"}},
	{"a buffered route declared past API Gateway's 29 s", nil, func(fns []deploy.Function) { fn(fns, "files-upload").Timeout = time.Minute },
		[]string{"function files-upload: Timeout 60, want 1..29 s"}},
	{"a scheduled job with no time to run", nil, func(fns []deploy.Function) { fn(fns, "files-sweep").Timeout = 15 * time.Second },
		[]string{"function files-sweep: Timeout 15 s leaves a scheduled run little time"}},

	// What the generated sections refer to.
	{"a timeout parameter removed", func(d deploy.Template) { delete(m(d["Parameters"]), "ChatTimeout") },
		nil, []string{"resource ChatCompletionsFunction: !Ref ChatTimeout names no parameter or resource"}},
	{"a managed policy's condition removed", func(d deploy.Template) { delete(m(d["Conditions"]), "BedrockEnabled") },
		nil, []string{"resource EmbeddingsFunction: !If [BedrockEnabled, …]: BedrockEnabled is no condition", "resource BedrockInvokePolicy: Condition BedrockEnabled is no condition"}},
	{"the alarm topic removed", func(d deploy.Template) { delete(resources(d), "Alarms") },
		nil, []string{"resource JobErrors: !Ref Alarms names no parameter or resource", "alarms: no SNS topic Alarms"}},
	{"a queue removed", func(d deploy.Template) { delete(resources(d), "WorkQueue") },
		nil, []string{"resource BatchWorkerFunction: !GetAtt WorkQueue.Arn names no resource", "function batch-worker: no AWS::SQS::Queue WorkQueue to consume"}},

	// The environment every function takes from Globals.
	{"a variable removed", func(d deploy.Template) { delete(globalEnv(d), "SLUICE_TABLE") },
		nil, []string{"globals: environment variable SLUICE_TABLE is not set"}},
	{"a variable pointing elsewhere", func(d deploy.Template) { globalEnv(d)["SLUICE_BUCKET"] = ref("WorkQueue") },
		nil, []string{`globals: environment variable SLUICE_BUCKET is "${WorkQueue}", want "${Files}"`}},
	{"the local backend", func(d deploy.Template) { globalEnv(d)["SLUICE_BACKEND"] = "local" },
		nil, []string{`globals: environment variable SLUICE_BACKEND is "local", want "aws"`}},
	{"a variable nothing reads", func(d deploy.Template) { globalEnv(d)["SLUICE_TABEL"] = ref("Records") },
		nil, []string{"globals: environment variable SLUICE_TABEL is set but not declared"}},

	// The managed policies.
	{"a policy attached to a role", func(d deploy.Template) { props(d, "RecordsWritePolicy")["Roles"] = []any{"SomeRole"} },
		nil, []string{"policy RecordsWritePolicy: attaches itself to Roles"}},
	{"a policy granting what no capability needs", func(d deploy.Template) {
		statement(d, "FilesDeletePolicy", "FileBytesDelete")["Resource"] = map[string]any{"Fn::Sub": "${Files.Arn}/*"}
	}, nil, []string{"policy FilesDeletePolicy: grants s3:DeleteObject on ${Files.Arn}/*, which no capability needs"}},
	{"a policy no function takes", func(d deploy.Template) {
		resources(d)["SpareRecordsWritePolicy"] = resources(d.Clone())["RecordsWritePolicy"]
	}, nil, []string{"policy SpareRecordsWritePolicy: no function takes it"}},
	{"a role of its own", func(d deploy.Template) {
		globalFunction(d)["Role"] = map[string]any{"Fn::GetAtt": []any{"SomeRole", "Arn"}}
	},
		nil, []string{"globals: function Role is not allowed"}},

	// Build and runtime.
	{"the x86 architecture", func(d deploy.Template) { globalFunction(d)["Architectures"] = []any{"x86_64"} },
		nil, []string{"globals: function Architectures [x86_64], want [arm64]"}},
	{"a managed runtime", func(d deploy.Template) { globalFunction(d)["Runtime"] = "go1.x" },
		nil, []string{`globals: function Runtime "go1.x", want "provided.al2023"`}},
	{"text logs", func(d deploy.Template) { m(globalFunction(d)["LoggingConfig"])["LogFormat"] = "Text" },
		nil, []string{`globals: function LoggingConfig.LogFormat "Text", want JSON`}},

	// Alarms.
	{"a dead-letter queue without an alarm", func(d deploy.Template) { delete(resources(d), "WorkDeadLettersAlarm") },
		nil, []string{"dead-letter queue WorkDeadLetters (of WorkQueue): no CloudWatch alarm"}},
	{"an alarm nobody hears", func(d deploy.Template) { delete(props(d, "DeliveryDeadLettersAlarm"), "AlarmActions") },
		nil, []string{"dead-letter queue DeliveryDeadLetters (of DeliveryQueue): no CloudWatch alarm"}},
	{"no alarm on API Gateway's 5XX", func(d deploy.Template) { delete(resources(d), "ApiErrors") },
		nil, []string{"alarms: none on AWS/ApiGateway 5XXError of the API (ApiName sluice-${Stage}, Stage ${Stage})"}},
	{"no alarm on DynamoDB throttling", func(d deploy.Template) { delete(resources(d), "RecordsThrottles") },
		nil, []string{"alarms: none on AWS/DynamoDB ReadThrottleEvents of table Records", "alarms: none on AWS/DynamoDB WriteThrottleEvents"}},
	{"no alarm on the account's throttles", func(d deploy.Template) { delete(resources(d), "LambdaThrottles") },
		nil, []string{"alarms: none on AWS/Lambda Throttles of the account"}},
	{"an alarm on a topic of its own", func(d deploy.Template) { props(d, "ApiErrors")["AlarmActions"] = []any{ref("OpsTopic")} },
		nil, []string{"alarm ApiErrors: AlarmActions [${OpsTopic}], want [!Ref Alarms]"}},

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
}

// fn returns the function named name of fns.
func fn(fns []deploy.Function, name string) *deploy.Function {
	for i := range fns {
		if fns[i].Name == name {
			return &fns[i]
		}
	}
	panic("no function " + name)
}

// TestCheckCoreCatchesDrift shows that CheckCore fails for each kind of
// drift of the hand-written part: each case changes a copy of the template
// generated for the functions (or the functions' declarations, then
// generates) and names a problem CheckCore must report.
func TestCheckCoreCatchesDrift(t *testing.T) {
	base := load(t)
	for _, tc := range coreCases {
		t.Run(tc.name, func(t *testing.T) {
			fns := functions(t)
			d := base.Clone()
			if tc.fns != nil {
				tc.fns(fns)
				d = generated(t, fns)
			}
			if tc.mutate != nil {
				tc.mutate(d)
			}
			problems := deploy.CheckCore(d, fns)
			for _, want := range tc.want {
				if !slices.ContainsFunc(problems, func(p error) bool { return strings.Contains(p.Error(), want) }) {
					t.Errorf("no problem says %q; got:\n%s", want, join(problems))
				}
			}
		})
	}
	// The mutations changed copies only.
	if problems := deploy.CheckCore(base, functions(t)); len(problems) > 0 {
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
		deploy.CheckCore(tmpl, nil)
		deploy.Check(data, nil)
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
	if d := deploy.Diff(text, out); d != "" {
		t.Errorf("template.yaml's generated sections are not current: run make template (and commit template.yaml); what it writes differs:\n%s", d)
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

// imagesRoute is a route of a function that is in no production table.
var imagesRoute = server.Route{Method: "POST", Pattern: "/v1/images/generations", Function: "images", Access: server.AnyKey, Stream: true,
	Needs: []server.Capability{server.ProviderSecrets, server.EventsPublish, server.ClaimCheckWrite}, Memory: 256, Timeout: 120 * time.Second}

// TestGenerateNewFunction: a route of a new function is all make template
// needs: its resource, routes, log group and alarms appear, and it passes
// the check.
func TestGenerateNewFunction(t *testing.T) {
	fns, err := deploy.FunctionsOf(append(server.Routes(), imagesRoute), server.Jobs())
	if err != nil {
		t.Fatal(err)
	}
	tmpl := generated(t, fns)
	for _, p := range deploy.CheckCore(tmpl, fns) {
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
