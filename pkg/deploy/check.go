package deploy

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-gateway/sluice/pkg/server"
)

// Function runtime settings every function must have (go-serverless-style
// §4–5): a static Go binary named bootstrap on the OS-only runtime, on
// Graviton, built from the repository root by the makefile builder.
const (
	Runtime      = "provided.al2023"
	Handler      = "bootstrap"
	Architecture = "arm64"
	BuildMethod  = "makefile"
)

// StreamMode is the one ResponseTransferMode value that streams: SAM turns
// it into the integration's responseTransferMode STREAM and the
// response-streaming-invocations URI. "STREAM" on the event lints clean
// and silently buffers.
const StreamMode = "RESPONSE_STREAM"

// SQSVisibilityFactor: a queue's visibility timeout must be at least this
// many times its consumer's timeout (plus the batching window), as AWS
// recommends, so a message is not redelivered while a retry still runs.
const SQSVisibilityFactor = 6

// BinaryMediaTypes must be listed on the API (in SAM's escaped form: "~1"
// is "/"), or API Gateway hands uploads and binary passthrough bodies
// (images, audio, documents) to Lambda as mangled text.
var BinaryMediaTypes = []string{
	"multipart~1form-data", "application~1octet-stream", "application~1pdf", "application~1zip", "application~1gzip",
	"image~1*", "audio~1*", "video~1*",
}

// GatewayResponse is how the API must answer one of API Gateway's own
// errors: the status (0: API Gateway's own status is kept) and the OpenAI
// error type and code of the body.
type GatewayResponse struct {
	Type   string // API Gateway's response type
	Status int
	Error  string // error.type
	Code   string // error.code
	// Says are what error.message must tell the caller (the limit, and
	// what to do instead).
	Says []string
}

// GatewayResponses are the API Gateway errors rewritten into the OpenAI
// error shape (ARCHITECTURE §3). Without an authorizer, an unknown route
// (or a known path with another method) is MISSING_AUTHENTICATION_TOKEN.
var GatewayResponses = []GatewayResponse{
	{"MISSING_AUTHENTICATION_TOKEN", 404, "invalid_request_error", "not_found", nil},
	{"RESOURCE_NOT_FOUND", 404, "invalid_request_error", "not_found", nil},
	{"THROTTLED", 429, "requests", "rate_limit_exceeded", nil},
	{"QUOTA_EXCEEDED", 429, "requests", "rate_limit_exceeded", nil},
	{"REQUEST_TOO_LARGE", 413, "invalid_request_error", "payload_too_large", []string{"6 MB", "Uploads API", "part_size"}},
	{"INTEGRATION_TIMEOUT", 504, "server_error", "upstream_timeout", nil},
	{"DEFAULT_4XX", 0, "invalid_request_error", "invalid_request", nil},
	{"DEFAULT_5XX", 0, "server_error", "internal_error", nil},
}

// resourceTypes are the types of the resources functions use.
var resourceTypes = map[string]string{
	TableID:           "AWS::DynamoDB::Table",
	BucketID:          "AWS::S3::Bucket",
	KeyID:             "AWS::KMS::Key",
	WorkQueueID:       "AWS::SQS::Queue",
	TopicID:           "AWS::SNS::Topic",
	DeliveryQueueID:   "AWS::SQS::Queue",
	MasterKeySecretID: "AWS::SecretsManager::Secret",
	ProviderSecretID:  "AWS::SecretsManager::Secret",
	APIID:             "AWS::Serverless::Api",
}

// otherEntries are resource types that would route requests outside the
// one API and its events.
var otherEntries = []string{
	"AWS::Serverless::HttpApi", "AWS::ApiGateway::RestApi", "AWS::ApiGateway::Resource",
	"AWS::ApiGateway::Method", "AWS::ApiGatewayV2::Api", "AWS::ApiGatewayV2::Route", "AWS::Lambda::Url",
}

// Check holds template.yaml's text to the functions fns (Functions()): its
// generated sections are what Generate writes for fns today — a stale
// section is one problem, naming what differs and "run make template" — and
// its hand-written core passes CheckCore. The core is checked as Generate
// leaves it (the generated sections rewritten), so a stale template reports
// only what regenerating it would not fix. It returns every problem found;
// none means the template matches.
func Check(text []byte, fns []Function) []error {
	out, err := Generate(text, fns)
	if err != nil {
		t, perr := Parse(text)
		if perr != nil {
			return []error{err}
		}
		problems := []error{err}
		for _, p := range CheckCore(t, fns) {
			if !strings.Contains(err.Error(), p.Error()) { // a malformed policy is Generate's error too
				problems = append(problems, p)
			}
		}
		return problems
	}
	var problems []error
	if d := Diff(text, out); d != "" {
		problems = append(problems, fmt.Errorf("template: the generated sections are not current: run make template (and commit template.yaml); what make template writes differs:\n%s", d))
	}
	t, err := Parse(out)
	if err != nil {
		return append(problems, err)
	}
	return append(problems, CheckCore(t, fns)...)
}

// CheckCore holds the hand-written part of template t to the functions fns:
// what the generated sections refer to and generation cannot guarantee.
// The API and its gateway responses; the resources functions use, of their
// types, and no other way in (a second API, a function URL, a function no
// table declares); the runtime, logging and environment every function
// takes from Globals; each function's timeout within its limit for every
// value of its parameter; each queue consumer's queue outlasting its
// retries and dead-lettering, the delivery queue fed by the topic; the
// managed policies well formed and attached only through the functions'
// Policies; every reference naming a parameter, resource or condition;
// stateful resources' lifecycle; alarms on the one topic; the outputs. It
// returns every problem found, sorted.
func CheckCore(t Template, fns []Function) []error {
	c := &checker{t: t, fns: fns}
	c.resources, _ = t["Resources"].(map[string]any)
	if c.resources == nil {
		return []error{fmt.Errorf("template: no Resources")}
	}
	c.checkResourceTypes()
	c.checkReferences()
	c.checkLifecycle()
	c.checkTable()
	c.checkAPI()
	c.checkAPIAccount()
	c.checkGlobals()
	c.checkFunctions()
	c.checkManagedPolicies()
	c.checkQueues()
	c.checkAlarms()
	c.checkOutputs()
	sort.Slice(c.problems, func(i, j int) bool { return c.problems[i].Error() < c.problems[j].Error() })
	return c.problems
}

type checker struct {
	t         Template
	fns       []Function
	resources map[string]any
	problems  []error
	grants    map[string]map[grantKey]bool // managed policy → what it grants (policyGrants)
}

func (c *checker) fail(format string, args ...any) {
	c.problems = append(c.problems, fmt.Errorf(format, args...))
}

func (c *checker) typeOf(id string) string { return Render(get(c.resources[id], "Type")) }

func (c *checker) props(id string) any { return get(c.resources[id], "Properties") }

// ofType lists the logical IDs of the resources of type typ, sorted.
func (c *checker) ofType(typ string) []string {
	var ids []string
	for id := range c.resources {
		if c.typeOf(id) == typ {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

func (c *checker) checkResourceTypes() {
	for id, typ := range resourceTypes {
		if got := c.typeOf(id); got != typ {
			c.fail("resource %s: type %q, want %s", id, got, typ)
		}
	}
	for _, typ := range otherEntries {
		for _, id := range c.ofType(typ) {
			c.fail("resource %s (%s) routes requests outside the API %s: every route is an event of the function serving it", id, typ, APIID)
		}
	}
	for _, id := range c.ofType("AWS::Serverless::Api") {
		if id != APIID {
			c.fail("resource %s: a second API; every route belongs on %s", id, APIID)
		}
	}
	for _, s := range []struct{ id, param string }{{MasterKeySecretID, "MasterKeySecretName"}, {ProviderSecretID, "ProviderSecretName"}} {
		if got := Render(get(c.props(s.id), "Name")); got != "${"+s.param+"}" {
			c.fail("secret %s: Name %q, want !Ref %s (the config refers to it by that name)", s.id, got, s.param)
		}
		if get(c.props(s.id), "SecretString") != nil && s.id == MasterKeySecretID {
			c.fail("secret %s: the master key must be generated (GenerateSecretString), never written in the template", s.id)
		}
	}
}

func (c *checker) checkAPI() {
	props := merge(get(c.t, "Globals", "Api"), c.props(APIID))
	if props == nil {
		return
	}
	if endpoint := get(props, "EndpointConfiguration"); Render(endpoint) != "REGIONAL" && Render(get(endpoint, "Type")) != "REGIONAL" {
		c.fail("api: EndpointConfiguration %s, want REGIONAL (response streaming idles out after 30 s on edge-optimized APIs)", Render(endpoint))
	}
	for _, k := range []string{"DefinitionBody", "DefinitionUri"} {
		if get(props, k) != nil {
			c.fail("api: %s routes requests besides the functions' events; remove it", k)
		}
	}
	if get(props, "StageName") == nil {
		c.fail("api: no StageName")
	}
	types := renderList(get(props, "BinaryMediaTypes"))
	for _, mt := range BinaryMediaTypes {
		if !slices.Contains(types, mt) {
			c.fail("api: BinaryMediaTypes lacks %s (uploads would reach the functions mangled)", mt)
		}
	}
	if get(props, "AccessLogSetting", "DestinationArn") == nil || get(props, "AccessLogSetting", "Format") == nil {
		c.fail("api: no AccessLogSetting with DestinationArn and Format")
	}
	throttled := false
	for _, s := range list(get(props, "MethodSettings")) {
		if Render(get(s, "ResourcePath")) == "/*" && Render(get(s, "HttpMethod")) == "*" &&
			get(s, "ThrottlingRateLimit") != nil && get(s, "ThrottlingBurstLimit") != nil {
			throttled = true
		}
	}
	if !throttled {
		c.fail("api: no stage throttling (MethodSettings for /* and * with ThrottlingRateLimit and ThrottlingBurstLimit)")
	}
	responses := get(props, "GatewayResponses")
	for _, want := range GatewayResponses {
		r := get(responses, want.Type)
		if r == nil {
			c.fail("api: no gateway response %s: API Gateway's own %s error would not have the OpenAI error shape", want.Type, want.Type)
			continue
		}
		status := toInt(get(r, "StatusCode"))
		if want.Status != 0 && status != want.Status {
			c.fail("api: gateway response %s: status %d, want %d", want.Type, status, want.Status)
		}
		if want.Status == 0 && get(r, "StatusCode") != nil {
			c.fail("api: gateway response %s: keep API Gateway's status (no StatusCode)", want.Type)
		}
		body := Render(get(r, "ResponseTemplates", "application/json"))
		if err := checkErrorBody(body, want); err != nil {
			c.fail("api: gateway response %s: %v", want.Type, err)
		}
		for _, say := range want.Says {
			if !strings.Contains(body, say) {
				c.fail("api: gateway response %s: the message does not say %q", want.Type, say)
			}
		}
	}
	c.checkDetailedMetrics(props)
}

// checkErrorBody checks that a gateway response template renders the
// OpenAI error shape with the wanted type and code. $context.error.
// messageString is API Gateway's message as a quoted JSON string; the other
// $context variables are plain text.
func checkErrorBody(tmpl string, want GatewayResponse) error {
	if tmpl == "" {
		return fmt.Errorf("no application/json template")
	}
	body := strings.ReplaceAll(tmpl, "$context.error.messageString", `"Some \"message\""`)
	var doc map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		return fmt.Errorf("the body is not JSON: %v: %s", err, tmpl)
	}
	var e map[string]json.RawMessage
	if len(doc) != 1 || doc["error"] == nil || json.Unmarshal(doc["error"], &e) != nil || len(e) != 4 {
		return fmt.Errorf(`want {"error":{"message","type","param","code"}}: %s`, tmpl)
	}
	str := func(k string) string {
		var s string
		json.Unmarshal(e[k], &s)
		return s
	}
	switch {
	case str("message") == "":
		return fmt.Errorf("error.message missing: %s", tmpl)
	case str("type") != want.Error:
		return fmt.Errorf("error.type is not %q: %s", want.Error, tmpl)
	case string(e["param"]) != "null":
		return fmt.Errorf("error.param must be null: %s", tmpl)
	case str("code") != want.Code:
		return fmt.Errorf("error.code is not %q: %s", want.Code, tmpl)
	}
	return nil
}

// checkGlobals: what every function takes from Globals (the generated
// sections set none of it) — the runtime, handler and architecture of a
// static Go binary, JSON logs at the levels the code logs at, exactly the
// environment FunctionEnv declares, and neither a role of its own (the role
// comes from the generated Policies) nor a function URL (requests come
// through the API).
func (c *checker) checkGlobals() {
	g := get(c.t, "Globals", "Function")
	for k, want := range map[string]string{"Runtime": Runtime, "Handler": Handler} {
		if got := Render(get(g, k)); got != want {
			c.fail("globals: function %s %q, want %q", k, got, want)
		}
	}
	if got := renderList(get(g, "Architectures")); !slices.Equal(got, []string{Architecture}) {
		c.fail("globals: function Architectures %v, want [%s]", got, Architecture)
	}
	if pt := Render(get(g, "PackageType")); pt != "" && pt != "Zip" {
		c.fail("globals: function PackageType %s, want Zip", pt)
	}
	for k, want := range map[string]string{"LogFormat": "JSON", "ApplicationLogLevel": "INFO", "SystemLogLevel": "WARN"} {
		if got := Render(get(g, "LoggingConfig", k)); got != want {
			c.fail("globals: function LoggingConfig.%s %q, want %s", k, got, want)
		}
	}
	for _, k := range []string{"Role", "FunctionUrlConfig"} {
		if get(g, k) != nil {
			c.fail("globals: function %s is not allowed (the role comes from each function's generated Policies; requests come through the API)", k)
		}
	}
	vars, _ := get(g, "Environment", "Variables").(map[string]any)
	env := FunctionEnv()
	for _, v := range env {
		got, ok := vars[v.Name]
		switch {
		case !ok:
			c.fail("globals: environment variable %s is not set (want %s)", v.Name, v.Value)
		case Render(got) != v.Value:
			c.fail("globals: environment variable %s is %q, want %q", v.Name, Render(got), v.Value)
		}
	}
	for k := range vars {
		if !slices.ContainsFunc(env, func(v EnvVar) bool { return v.Name == k }) {
			c.fail("globals: environment variable %s is set but not declared in pkg/deploy (CloudEnv)", k)
		}
	}
}

// checkFunctions: every function resource is one Generate wrote for a
// function of the tables, and each function's timeout — the Globals
// default, its declared seconds or a parameter's every allowed value — is
// within its limit; a queue consumer's queue outlasts its retries and
// dead-letters what keeps failing; the delivery queue is fed by the topic.
func (c *checker) checkFunctions() {
	declared := map[string]bool{}
	for _, f := range c.fns {
		id := f.LogicalID()
		declared[id] = true
		if c.typeOf(id) != "AWS::Serverless::Function" {
			continue // Generate writes it; a stale section is Check's problem
		}
		timeout := c.checkTimeout(f, merge(get(c.t, "Globals", "Function"), c.props(id)))
		if f.Queue != "" {
			c.checkConsumedQueue(f, timeout)
		}
		c.checkSubscription(f)
	}
	for _, id := range c.ofType("AWS::Serverless::Function") {
		if !declared[id] {
			c.fail("function resource %s is no function of pkg/deploy (Functions): declare it as a route or a job in pkg/server, and make template writes it", id)
		}
	}
	for _, id := range c.ofType("AWS::Lambda::Function") {
		c.fail("resource %s: a plain AWS::Lambda::Function escapes these checks; declare a route or a job in pkg/server", id)
	}
}

// checkTimeout checks f's Timeout for every value its parameter may take,
// and returns the longest.
func (c *checker) checkTimeout(f Function, props any) int {
	name := "function " + f.Name
	limit := MaxTimeout
	if len(f.Routes) > 0 && !f.Stream {
		limit = MaxBufferedTimeout
	}
	expr := get(props, "Timeout")
	longest := 0
	for _, a := range c.assignments(expr) {
		timeout, _ := c.intAt(expr, a)
		longest = max(longest, timeout)
		if timeout <= 0 || timeout > limit {
			c.fail("%s: Timeout %v%s, want 1..%d s", name, Render(expr), a, limit)
		}
		if margin := int(server.ScheduleMargin.Seconds()); f.Schedule != "" && timeout <= 2*margin {
			c.fail("%s: Timeout %d s leaves a scheduled run little time: it stops %d s before its deadline (want more than %d s)", name, timeout, margin, 2*margin)
		}
	}
	return longest
}

// checkConsumedQueue: a queue job's queue outlasts its consumer's retries
// (a visibility timeout of SQSVisibilityFactor × (timeout + batching
// window)) and dead-letters what keeps failing.
func (c *checker) checkConsumedQueue(f Function, timeout int) {
	where := "function " + f.Name
	if c.typeOf(f.Queue) != "AWS::SQS::Queue" {
		c.fail("%s: no AWS::SQS::Queue %s to consume", where, f.Queue)
		return
	}
	visibility := toInt(get(c.props(f.Queue), "VisibilityTimeout"))
	need := SQSVisibilityFactor * (timeout + int(f.BatchWindow/time.Second))
	if visibility < need {
		c.fail("%s: queue %s VisibilityTimeout %d s, want at least %d × (Timeout + batching window) = %d s",
			where, f.Queue, visibility, SQSVisibilityFactor, need)
	}
	if get(c.props(f.Queue), "RedrivePolicy") == nil {
		c.fail("%s: queue %s has no RedrivePolicy: a message that keeps failing would be retried until it expires, not dead-lettered", where, f.Queue)
	}
}

// checkSubscription: a queue the bus feeds (the delivery queue) receives the
// topic's events, raw, and lets the topic send to it.
func (c *checker) checkSubscription(f Function) {
	if f.Queue != DeliveryQueueID {
		return
	}
	subscribed := false
	for _, id := range c.ofType("AWS::SNS::Subscription") {
		p := c.props(id)
		if Render(get(p, "TopicArn")) == "${"+TopicID+"}" && Render(get(p, "Protocol")) == "sqs" &&
			Render(get(p, "Endpoint")) == "${"+f.Queue+".Arn}" && get(p, "RawMessageDelivery") == true {
			subscribed = true
		}
	}
	if !subscribed {
		c.fail("function %s: queue %s is not subscribed to topic %s (AWS::SNS::Subscription, Protocol sqs, RawMessageDelivery: true)", f.Name, f.Queue, TopicID)
	}
	allowed := false
	for _, id := range c.ofType("AWS::SQS::QueuePolicy") {
		p := c.props(id)
		if !slices.Contains(renderList(get(p, "Queues")), "${"+f.Queue+"}") {
			continue
		}
		for _, st := range list(get(p, "PolicyDocument", "Statement")) {
			if Render(get(st, "Effect")) == "Allow" && slices.Contains(renderList(get(st, "Action")), "sqs:SendMessage") &&
				Render(get(st, "Principal", "Service")) == "sns.amazonaws.com" &&
				Render(get(st, "Condition", "ArnEquals", "aws:SourceArn")) == "${"+TopicID+"}" {
				allowed = true
			}
		}
	}
	if !allowed {
		c.fail("function %s: queue %s has no policy letting topic %s send to it (sqs:SendMessage for sns.amazonaws.com, aws:SourceArn the topic)", f.Name, f.Queue, TopicID)
	}
}

// checkManagedPolicies: the managed policies of the core are what
// Generate gives functions, so each is well formed (Allow statements that
// Generate reads), grants only what some capability declares (Grants),
// attaches itself to no role, user or group (functions take it through
// their generated Policies), and is taken by some function.
func (c *checker) checkManagedPolicies() {
	declared := map[grantKey]bool{}
	for _, cp := range server.Capabilities() {
		for _, g := range Grants(cp) {
			for _, k := range expand(g) {
				declared[k] = true
			}
		}
	}
	taken := map[string]bool{}
	for _, id := range c.ofType("AWS::Serverless::Function") {
		for _, p := range list(get(c.props(id), "Policies")) {
			if args, ok := get(p, "Fn::If").([]any); ok && len(args) == 3 {
				p = args[1]
			}
			if ref, ok := get(p, "Ref").(string); ok {
				taken[ref] = true
			}
		}
	}
	for _, id := range c.ofType("AWS::IAM::ManagedPolicy") {
		for _, k := range []string{"Roles", "Users", "Groups"} {
			if get(c.props(id), k) != nil {
				c.fail("policy %s: attaches itself to %s; functions take it through their Policies, which make template writes from their capabilities", id, k)
			}
		}
		var extra []string
		for k := range c.policyGrants(id) {
			if !declared[k] {
				extra = append(extra, k.String())
			}
		}
		sort.Strings(extra)
		for _, k := range extra {
			c.fail("policy %s: grants %s, which no capability needs (pkg/deploy Grants)", id, k)
		}
		if !taken[id] {
			c.fail("policy %s: no function takes it (no function's capabilities are exactly its grants, or a smaller set of policies covers them): remove it", id)
		}
	}
}

func (c *checker) hasDimension(p any, name, value string) bool {
	for _, d := range list(get(p, "Dimensions")) {
		if Render(get(d, "Name")) == name && Render(get(d, "Value")) == value {
			return true
		}
	}
	return false
}

// checkQueues: every queue with a dead-letter queue redrives there after a
// bounded number of receives, and every dead-letter queue has an alarm.
func (c *checker) checkQueues() {
	for _, q := range c.ofType("AWS::SQS::Queue") {
		redrive := get(c.props(q), "RedrivePolicy")
		if redrive == nil {
			continue
		}
		dlq := strings.TrimSuffix(strings.TrimPrefix(Render(get(redrive, "deadLetterTargetArn")), "${"), ".Arn}")
		if c.typeOf(dlq) != "AWS::SQS::Queue" {
			c.fail("queue %s: deadLetterTargetArn must be !GetAtt <queue>.Arn of this template", q)
			continue
		}
		if toInt(get(redrive, "maxReceiveCount")) <= 0 {
			c.fail("queue %s: RedrivePolicy has no maxReceiveCount", q)
		}
		found := false
		for _, a := range c.ofType("AWS::CloudWatch::Alarm") {
			p := c.props(a)
			if Render(get(p, "Namespace")) == "AWS/SQS" && Render(get(p, "MetricName")) == "ApproximateNumberOfMessagesVisible" &&
				c.hasDimension(p, "QueueName", "${"+dlq+".QueueName}") && len(list(get(p, "AlarmActions"))) > 0 {
				found = true
			}
		}
		if !found {
			c.fail("dead-letter queue %s (of %s): no CloudWatch alarm (with AlarmActions) on ApproximateNumberOfMessagesVisible", dlq, q)
		}
	}
}

// checkOutputs: the API URL, the table and the bucket are stack outputs
// (integration tests and operators read them), and so is every variable of
// CloudEnv, in an output whose Description is its name (make env-json
// writes env.json for sam local invoke from them: EnvJSON).
func (c *checker) checkOutputs() {
	outputs := get(c.t, "Outputs")
	if v := Render(get(outputs, "ApiURL", "Value")); !strings.Contains(v, "${"+APIID+"}.execute-api.") {
		c.fail("outputs: ApiURL %q is not the API's invoke URL", v)
	}
	for k, want := range map[string]string{"Table": "${" + TableID + "}", "Bucket": "${" + BucketID + "}"} {
		if v := Render(get(outputs, k, "Value")); v != want {
			c.fail("outputs: %s %q, want %s", k, v, want)
		}
	}
	byVar := map[string]string{}
	om, _ := outputs.(map[string]any)
	for _, o := range om {
		byVar[Render(get(o, "Description"))] = Render(get(o, "Value"))
	}
	for _, v := range CloudEnv() {
		got, ok := byVar[v.Name]
		switch {
		case v.Name == "SLUICE_BACKEND":
		case !ok:
			c.fail("outputs: none has the Description %s: sam local invoke's env.json (make env-json) could not set it", v.Name)
		case got != v.Value:
			c.fail("outputs: %s is %q, want %q (the functions' value)", v.Name, got, v.Value)
		}
	}
}

// toInt reads a number (or a numeric string); 0 when v is neither.
func toInt(v any) int {
	switch v := v.(type) {
	case int:
		return v
	case int64:
		return int(v)
	case float64:
		return int(v)
	case uint64:
		return int(v)
	case string:
		n, _ := strconv.Atoi(v)
		return n
	}
	return 0
}
