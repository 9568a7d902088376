package deploy

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

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

// Check holds template t to the functions fns (Functions()): the API and
// its gateway responses; one function resource per function, built and run
// as required, its events exactly its routes (streaming exactly where the
// route table streams), or its job's schedule, or its job's queue (partial
// batch failures, a concurrency cap that is a parameter, a visibility
// timeout that outlasts its retries, a dead-letter queue, the topic's
// subscription for the delivery queue); its environment exactly its
// variables, its permissions exactly its capabilities; alarms on every
// function's errors and every dead-letter queue; the outputs. It returns
// every problem found, sorted; none means the template matches.
func Check(t Template, fns []Function) []error {
	c := &checker{t: t, fns: fns}
	c.resources, _ = t["Resources"].(map[string]any)
	if c.resources == nil {
		return []error{fmt.Errorf("template: no Resources")}
	}
	c.routeOwner = map[string]string{}
	for _, f := range fns {
		for _, r := range f.Routes {
			if p, err := APIPath(r.Pattern); err == nil {
				c.routeOwner[r.Method+" "+p] = f.Name
			}
		}
	}
	c.checkResourceTypes()
	c.checkLifecycle()
	c.checkTable()
	c.checkAPI()
	c.checkAPIAccount()
	c.checkFunctions()
	c.checkQueues()
	c.checkAlarms()
	c.checkOutputs()
	sort.Slice(c.problems, func(i, j int) bool { return c.problems[i].Error() < c.problems[j].Error() })
	return c.problems
}

type checker struct {
	t          Template
	fns        []Function
	resources  map[string]any
	routeOwner map[string]string // "METHOD /path" → function
	problems   []error
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
	for _, id := range c.ofType("AWS::IAM::ManagedPolicy") {
		for _, k := range []string{"Roles", "Users", "Groups"} {
			if get(c.props(id), k) != nil {
				c.fail("policy %s: attaches itself to %s; functions take it through their Policies, where the check sees it", id, k)
			}
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

func (c *checker) checkFunctions() {
	declared := map[string]bool{}
	for _, f := range c.fns {
		id := f.LogicalID()
		declared[id] = true
		if c.typeOf(id) != "AWS::Serverless::Function" {
			c.fail("function %s: no AWS::Serverless::Function %s", f.Name, id)
			continue
		}
		c.checkFunction(f, id)
	}
	for _, id := range c.ofType("AWS::Serverless::Function") {
		if !declared[id] {
			c.fail("function resource %s is no function of pkg/deploy (Functions): declare it as a route or a job in pkg/server", id)
		}
	}
	for _, id := range c.ofType("AWS::Lambda::Function") {
		c.fail("resource %s: a plain AWS::Lambda::Function escapes these checks; use AWS::Serverless::Function", id)
	}
}

func (c *checker) checkFunction(f Function, id string) {
	props := merge(get(c.t, "Globals", "Function"), c.props(id))
	name := "function " + f.Name
	for k, want := range map[string]string{"Runtime": Runtime, "Handler": Handler} {
		if got := Render(get(props, k)); got != want {
			c.fail("%s: %s %q, want %q", name, k, got, want)
		}
	}
	if got := renderList(get(props, "Architectures")); !slices.Equal(got, []string{Architecture}) {
		c.fail("%s: Architectures %v, want [%s]", name, got, Architecture)
	}
	if pt := Render(get(props, "PackageType")); pt != "" && pt != "Zip" {
		c.fail("%s: PackageType %s, want Zip", name, pt)
	}
	if got := strings.TrimSuffix(Render(get(props, "CodeUri")), "/"); got != "functions/"+f.Name {
		c.fail("%s: CodeUri %q, want functions/%s/", name, got, f.Name)
	}
	meta := get(c.resources[id], "Metadata")
	if got := Render(get(meta, "BuildMethod")); got != BuildMethod {
		c.fail("%s: Metadata.BuildMethod %q, want %s (build-%s in infra/deploy.mk builds it from the repository root)", name, got, BuildMethod, id)
	}
	for _, k := range []string{"ContextPath", "ProjectRootDirectory"} {
		if got := Render(get(meta, k)); got != "." {
			c.fail("%s: Metadata.%s %q, want . (the module root: functions/%s alone has no go.mod)", name, k, got, f.Name)
		}
	}
	for k, want := range map[string]string{"LogFormat": "JSON", "ApplicationLogLevel": "INFO", "SystemLogLevel": "WARN"} {
		if got := Render(get(props, "LoggingConfig", k)); got != want {
			c.fail("%s: LoggingConfig.%s %q, want %s", name, k, got, want)
		}
	}
	group, _ := strings.CutPrefix(Render(get(props, "LoggingConfig", "LogGroup")), "${")
	group = strings.TrimSuffix(group, "}")
	if c.typeOf(group) != "AWS::Logs::LogGroup" || get(c.props(group), "RetentionInDays") == nil {
		c.fail("%s: LoggingConfig.LogGroup must !Ref a log group with RetentionInDays", name)
	}
	for _, k := range []string{"Role", "FunctionUrlConfig"} {
		if get(props, k) != nil {
			c.fail("%s: %s is not allowed (the role comes from Policies, which this check reads; requests come through the API)", name, k)
		}
	}
	limit := MaxTimeout
	if len(f.Routes) > 0 && !f.Stream {
		limit = MaxBufferedTimeout
	}
	timeoutExpr := get(props, "Timeout")
	timeouts := map[assignment]int{}
	for _, a := range c.assignments(timeoutExpr) {
		timeout, _ := c.intAt(timeoutExpr, a)
		timeouts[a] = timeout
		if timeout <= 0 || timeout > limit {
			c.fail("%s: Timeout %v%s, want 1..%d s", name, Render(timeoutExpr), a, limit)
		}
		if margin := int(server.ScheduleMargin.Seconds()); f.Schedule != "" && timeout <= 2*margin {
			c.fail("%s: Timeout %d s leaves a scheduled run little time: it stops %d s before its deadline (want more than %d s)", name, timeout, margin, 2*margin)
		}
	}
	if param, ok := TimeoutParameters[f.Name]; ok && refParam(timeoutExpr) != param {
		c.fail("%s: Timeout %s, want !Ref %s (an operator sets how long its calls may run)", name, Render(timeoutExpr), param)
	}
	c.checkEvents(f, props, timeouts)
	c.checkSubscription(f)
	c.checkEnv(f, props)
	c.checkPolicies(f, props)
	if len(f.Routes) == 0 {
		c.checkJobAlarm(f, id)
	}
}

func (c *checker) checkEvents(f Function, props any, timeouts map[assignment]int) {
	name := "function " + f.Name
	want := map[string]server.Route{}
	for _, r := range f.Routes {
		p, err := APIPath(r.Pattern)
		if err != nil {
			c.fail("%s: %v", name, err)
			continue
		}
		want[r.Method+" "+p] = r
	}
	seen := map[string]bool{}
	var schedules, queues int
	events, _ := get(props, "Events").(map[string]any)
	evNames := make([]string, 0, len(events))
	for n := range events {
		evNames = append(evNames, n)
	}
	sort.Strings(evNames)
	for _, evName := range evNames {
		ev := events[evName]
		p := get(ev, "Properties")
		where := fmt.Sprintf("%s: event %s", name, evName)
		switch typ := Render(get(ev, "Type")); typ {
		case "Api":
			key := strings.ToUpper(Render(get(p, "Method"))) + " " + Render(get(p, "Path"))
			if api := Render(get(p, "RestApiId")); api != "${"+APIID+"}" {
				c.fail("%s (%s): RestApiId %q, want !Ref %s", where, key, api, APIID)
			}
			r, ok := want[key]
			switch {
			case seen[key]:
				c.fail("%s: %s is routed twice", where, key)
				continue
			case !ok && c.routeOwner[key] != "":
				c.fail("%s: routes %s, which pkg/server serves with function %s", where, key, c.routeOwner[key])
				continue
			case !ok:
				c.fail("%s: routes %s, which is no route of pkg/server", where, key)
				continue
			}
			seen[key] = true
			mode := get(p, "ResponseTransferMode")
			switch {
			case mode != nil && Render(mode) != StreamMode:
				c.fail("%s (%s): ResponseTransferMode %q is not %s: SAM only streams %s; anything else buffers", where, key, Render(mode), StreamMode, StreamMode)
			case r.Stream && mode == nil:
				c.fail("%s (%s): a streaming route without ResponseTransferMode: %s", where, key, StreamMode)
			case !r.Stream && mode != nil:
				c.fail("%s (%s): a buffered route with ResponseTransferMode (the function answers buffered)", where, key)
			}
			ms := get(p, "TimeoutInMillis")
			got := toInt(ms)
			switch {
			case r.Stream && (got != StreamIntegrationTimeout || Render(ms) != strconv.Itoa(StreamIntegrationTimeout)):
				c.fail("%s (%s): TimeoutInMillis %s, want %d, written as a number: the function's own Timeout ends the stream, and SAM names the API deployment "+
					"from the template before parameters are resolved, so an integration timeout that follows a parameter never reaches API Gateway",
					where, key, Render(ms), StreamIntegrationTimeout)
			case !r.Stream && ms != nil && got > MaxBufferedTimeout*1000:
				c.fail("%s (%s): TimeoutInMillis %d is over a buffered integration's %d", where, key, got, MaxBufferedTimeout*1000)
			}
		case "Schedule":
			schedules++
			if f.Schedule == "" {
				c.fail("%s: a schedule on a function that declares none", where)
				continue
			}
			if got := Render(get(p, "Schedule")); got != f.Schedule {
				c.fail("%s: Schedule %q, want %q", where, got, f.Schedule)
			}
			if en := get(p, "Enabled"); en != nil && en != true {
				c.fail("%s: the schedule is disabled", where)
			}
		case "SQS":
			queues++
			c.checkQueueEvent(f, where, p, slices.Max(slices.Collect(maps.Values(timeouts))))
		default:
			c.fail("%s: event type %q is not one this function declares", where, typ)
		}
	}
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !seen[k] {
			c.fail("%s: no event routes %s (pkg/server serves it with this function)", name, k)
		}
	}
	if f.Schedule != "" && schedules != 1 {
		c.fail("%s: %d Schedule events, want 1 (%s)", name, schedules, f.Schedule)
	}
	if f.Queue != "" && queues != 1 {
		c.fail("%s: %d SQS events, want 1 (%s)", name, queues, f.Queue)
	}
}

// MaxConcurrencyRange is the range ScalingConfig.MaximumConcurrency
// accepts (Lambda's API).
var MaxConcurrencyRange = [2]int{2, 1000}

// checkQueueEvent checks a queue job's SQS event: its declared queue,
// partial batch failures, a concurrency cap that is a template parameter,
// and a queue that outlasts its consumer's retries and dead-letters what
// keeps failing.
func (c *checker) checkQueueEvent(f Function, where string, p any, timeout int) {
	if f.Queue == "" {
		c.fail("%s: an SQS event on a function that declares no queue", where)
		return
	}
	if got := Render(get(p, "Queue")); got != "${"+f.Queue+".Arn}" {
		c.fail("%s: Queue %q, want !GetAtt %s.Arn", where, got, f.Queue)
	}
	if !slices.Contains(renderList(get(p, "FunctionResponseTypes")), "ReportBatchItemFailures") {
		c.fail("%s: FunctionResponseTypes lacks ReportBatchItemFailures (a failed message would fail the whole batch)", where)
	}
	c.checkConcurrencyParameter(f, where, get(p, "ScalingConfig", "MaximumConcurrency"))
	visibility := toInt(get(c.props(f.Queue), "VisibilityTimeout"))
	need := SQSVisibilityFactor * (timeout + toInt(get(p, "MaximumBatchingWindowInSeconds")))
	if visibility < need {
		c.fail("%s: queue %s VisibilityTimeout %d s, want at least %d × (Timeout + batching window) = %d s",
			where, f.Queue, visibility, SQSVisibilityFactor, need)
	}
	if get(c.props(f.Queue), "RedrivePolicy") == nil {
		c.fail("%s: queue %s has no RedrivePolicy: a message that keeps failing would be retried until it expires, not dead-lettered", where, f.Queue)
	}
}

// checkConcurrencyParameter: a queue job's ScalingConfig.MaximumConcurrency
// is !Ref its own Number parameter, within what Lambda accepts, so an
// operator sets how much of the account's concurrency it may take.
func (c *checker) checkConcurrencyParameter(f Function, where string, v any) {
	param := f.ConcurrencyParameter()
	if got := Render(v); got != "${"+param+"}" {
		c.fail("%s: ScalingConfig.MaximumConcurrency %q, want !Ref %s (a template parameter)", where, got, param)
		return
	}
	def, _ := get(c.t, "Parameters", param).(map[string]any)
	lo, hi := MaxConcurrencyRange[0], MaxConcurrencyRange[1]
	switch {
	case def == nil:
		c.fail("%s: no template parameter %s", where, param)
	case Render(def["Type"]) != "Number" || def["MinValue"] == nil || def["MaxValue"] == nil:
		c.fail("%s: parameter %s: want Type Number with MinValue and MaxValue", where, param)
	case toInt(def["MinValue"]) < lo || toInt(def["MaxValue"]) > hi || toInt(def["Default"]) < toInt(def["MinValue"]) || toInt(def["Default"]) > toInt(def["MaxValue"]):
		c.fail("%s: parameter %s: want %d ≤ MinValue ≤ Default ≤ MaxValue ≤ %d (Lambda's range)", where, param, lo, hi)
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

func (c *checker) checkEnv(f Function, props any) {
	name := "function " + f.Name
	vars, _ := get(props, "Environment", "Variables").(map[string]any)
	for _, v := range f.Env {
		got, ok := vars[v.Name]
		switch {
		case !ok:
			c.fail("%s: environment variable %s is not set (want %s)", name, v.Name, v.Value)
		case Render(got) != v.Value:
			c.fail("%s: environment variable %s is %q, want %q", name, v.Name, Render(got), v.Value)
		}
	}
	for k := range vars {
		if !slices.ContainsFunc(f.Env, func(v EnvVar) bool { return v.Name == k }) {
			c.fail("%s: environment variable %s is set but not declared in pkg/deploy (CloudEnv)", name, k)
		}
	}
}

// grantKey is one action on one resource, under an IAM condition block and
// a template condition.
type grantKey struct{ action, resource, condition, when string }

func (k grantKey) String() string {
	s := k.action + " on " + k.resource
	if k.condition != "" {
		s += " if " + k.condition
	}
	if k.when != "" {
		s += " when " + k.when
	}
	return s
}

func expand(g Grant) []grantKey {
	cond := canonicalCondition(g.Condition)
	var out []grantKey
	for _, a := range g.Actions {
		for _, r := range g.Resources {
			out = append(out, grantKey{a, r, cond, g.When})
		}
	}
	return out
}

func canonicalCondition(c map[string]map[string][]string) string {
	if len(c) == 0 {
		return ""
	}
	sorted := make(map[string]map[string][]string, len(c))
	for op, keys := range c {
		sorted[op] = make(map[string][]string, len(keys))
		for k, vals := range keys {
			sorted[op][k] = slices.Sorted(slices.Values(vals))
		}
	}
	b, _ := json.Marshal(sorted)
	return string(b)
}

func (c *checker) checkPolicies(f Function, props any) {
	name := "function " + f.Name
	want := map[grantKey][]server.Capability{}
	for _, cp := range f.Capabilities {
		for _, g := range Grants(cp) {
			for _, k := range expand(g) {
				want[k] = append(want[k], cp)
			}
		}
	}
	got := map[grantKey]bool{}
	policies := list(get(props, "Policies"))
	for i, pol := range policies {
		cond, ref := "", pol
		if args, ok := get(pol, "Fn::If").([]any); ok && len(args) == 3 && isNoValue(args[2]) {
			cond, ref = Render(args[0]), args[1]
		}
		id, _ := get(ref, "Ref").(string)
		if m, _ := ref.(map[string]any); len(m) != 1 || c.typeOf(id) != "AWS::IAM::ManagedPolicy" {
			c.fail("%s: Policies[%d] is not !Ref (or !If [condition, !Ref, !Ref AWS::NoValue]) to an AWS::IAM::ManagedPolicy of this template: "+
				"give each capability's grants one managed policy (inline statements repeat across functions; AWS managed policies and SAM policy templates grant more than the capabilities)", name, i)
			continue
		}
		if own, _ := get(c.resources[id], "Condition").(string); own != "" && own != cond {
			c.fail("%s: Policies[%d]: policy %s exists only when %s: take it under !If [%s, !Ref %s, !Ref AWS::NoValue]", name, i, id, own, own, id)
		}
		for j, st := range list(get(c.props(id), "PolicyDocument", "Statement")) {
			c.statement(name, fmt.Sprintf("%s.Statement[%d]", id, j), st, cond, got)
		}
	}
	sam := 1 // AWSLambdaBasicExecutionRole
	if Render(get(props, "Tracing")) == "Active" {
		sam++ // AWSXrayWriteOnlyAccess
	}
	if f.Queue != "" {
		sam++ // AWSLambdaSQSQueueExecutionRole
	}
	if n := len(policies) + sam; n > MaxRolePolicies {
		c.fail("%s: %d managed policies with the %d SAM attaches, over %d (IAM allows %d a role; the rest is headroom for a new capability): bundle capabilities that go together into one policy",
			name, n, sam, MaxRolePolicies, MaxManagedPolicies)
	}
	var missing, extra []string
	for k, caps := range want {
		if !got[k] {
			missing = append(missing, fmt.Sprintf("%s: lacks %s (needed for %s)", name, k, joinCaps(caps)))
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			extra = append(extra, fmt.Sprintf("%s: is granted %s, which none of its capabilities (%s) needs", name, k, joinCaps(f.Capabilities)))
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	for _, m := range append(missing, extra...) {
		c.problems = append(c.problems, fmt.Errorf("%s", m))
	}
}

// MaxManagedPolicies is how many managed policies IAM lets a role have
// (the default quota).
const MaxManagedPolicies = 10

// MaxRolePolicies is how many a function's role may have here, SAM's
// included: three under IAM's quota, so one more capability (or SAM
// attaching one more) never breaks a deploy.
const MaxRolePolicies = MaxManagedPolicies - 3

// statement adds what one policy statement grants to got, under template
// condition when. !If [C, a, b] grants a when C holds and b when it does not.
func (c *checker) statement(name, where string, st any, when string, got map[grantKey]bool) {
	if isNoValue(st) {
		return
	}
	m, _ := st.(map[string]any)
	if args, ok := m["Fn::If"].([]any); ok && len(m) == 1 && len(args) == 3 {
		if when != "" {
			c.fail("%s: %s: nested !If in a statement is not supported", name, where)
			return
		}
		cond := Render(args[0])
		c.statement(name, where, args[1], cond, got)
		c.statement(name, where, args[2], "!"+cond, got)
		return
	}
	if m == nil || isIntrinsic(m) {
		c.fail("%s: %s: not a statement", name, where)
		return
	}
	for k := range m {
		if !slices.Contains([]string{"Sid", "Effect", "Action", "Resource", "Condition"}, k) {
			c.fail("%s: %s: %s is not supported (write Allow statements with Action and Resource)", name, where, k)
			return
		}
	}
	if Render(m["Effect"]) != "Allow" {
		c.fail("%s: %s: Effect %q, want Allow", name, where, Render(m["Effect"]))
		return
	}
	cond := map[string]map[string][]string{}
	if cm, ok := m["Condition"].(map[string]any); ok {
		for op, keys := range cm {
			km, _ := keys.(map[string]any)
			cond[op] = map[string][]string{}
			for key, vals := range km {
				cond[op][key] = renderList(vals)
			}
		}
	} else if m["Condition"] != nil {
		c.fail("%s: %s: Condition is not a map", name, where)
	}
	canon := canonicalCondition(cond)
	for _, a := range renderList(m["Action"]) {
		for _, r := range renderList(m["Resource"]) {
			got[grantKey{a, r, canon, when}] = true
		}
	}
}

func joinCaps(caps []server.Capability) string {
	s := make([]string, len(caps))
	for i, c := range caps {
		s[i] = string(c)
	}
	return strings.Join(s, ", ")
}

// checkJobAlarm: a job's errors are watched by an alarm (its own metric,
// or one of a metric-math alarm's). A route function's failures are the
// API's 5XX, and throttling anywhere is the account's Throttles alarm
// (checkAlarms).
func (c *checker) checkJobAlarm(f Function, id string) {
	if !c.alarmWatches(metricRef{"AWS/Lambda", "Errors", map[string]string{"FunctionName": "${" + id + "}"}}) {
		c.fail("function %s: no CloudWatch alarm watches AWS/Lambda Errors of %s (a job has no API whose 5XX alarm would show its failures)", f.Name, id)
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
