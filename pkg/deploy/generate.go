package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// template.yaml is written in two parts: the hand-written core (the API,
// storage, queues, managed policies, parameters, shared alarms) and the
// per-function sections, which Generate writes from the route and jobs
// tables between these markers (`make template`). A new function is then
// its route or job entry, its functions/<fn>/main.go and its sample event.
const (
	beginMarker = "# BEGIN GENERATED "
	endMarker   = "# END GENERATED "
	// generatedNote follows the begin marker: the reader's instruction.
	generatedNote = "(make template writes this section from pkg/server's route and jobs tables: do not edit it)"
)

// Regions of the template that Generate writes.
const (
	regionParameters = "parameters"
	regionResources  = "functions"
)

// Generate returns the template text with its generated regions rewritten
// for fns: each function's resource (its events, memory, timeout and the
// managed policies of the core that grant exactly its capabilities), its log
// group, each queue job's concurrency parameter, and the alarms on the jobs'
// errors. The rest of
// the text is kept byte for byte.
func Generate(text []byte, fns []Function) ([]byte, error) {
	t, err := Parse(text)
	if err != nil {
		return nil, err
	}
	c := &checker{t: t, fns: fns}
	c.resources, _ = t["Resources"].(map[string]any)
	for _, id := range c.ofType("AWS::IAM::ManagedPolicy") {
		c.policyGrants(id) // reads every statement: a malformed one fails here
	}
	if len(c.problems) > 0 {
		return nil, fmt.Errorf("deploy: template: %w", errors.Join(c.problems...))
	}
	var params, res bytes.Buffer
	for _, f := range fns {
		if f.Queue != "" {
			writeConcurrencyParameter(&params, f)
		}
		if err := c.writeFunction(&res, f); err != nil {
			return nil, err
		}
	}
	writeJobErrorAlarms(&res, fns)
	out, err := splice(text, regionParameters, params.Bytes())
	if err != nil {
		return nil, err
	}
	return splice(out, regionResources, res.Bytes())
}

// splice replaces the lines between region's markers with body.
func splice(text []byte, region string, body []byte) ([]byte, error) {
	lines := bytes.SplitAfter(text, []byte("\n"))
	begin, end := -1, -1
	for i, l := range lines {
		trimmed := string(bytes.TrimSpace(l))
		switch {
		case strings.HasPrefix(trimmed, beginMarker+region+" "):
			if begin >= 0 {
				return nil, fmt.Errorf("deploy: template: two %q markers for %s", beginMarker, region)
			}
			begin = i
		case trimmed == endMarker+region:
			end = i
		}
	}
	if begin < 0 || end < begin {
		return nil, fmt.Errorf("deploy: template: no generated region %q (want the lines %q and %q)", region, beginMarker+region+" "+generatedNote, endMarker+region)
	}
	var out bytes.Buffer
	for _, l := range lines[:begin+1] {
		out.Write(l)
	}
	out.Write(body)
	for _, l := range lines[end:] {
		out.Write(l)
	}
	return out.Bytes(), nil
}

// CountLines counts the template text's hand-written lines and its
// generated ones (markers included in neither).
func CountLines(text []byte) (handWritten, generated int) {
	in := false
	for _, l := range strings.Split(string(text), "\n") {
		trimmed := strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(trimmed, beginMarker):
			in = true
		case strings.HasPrefix(trimmed, endMarker):
			in = false
		case in:
			generated++
		default:
			handWritten++
		}
	}
	return handWritten, generated
}

// MaxConcurrencyRange is the range ScalingConfig.MaximumConcurrency
// accepts (Lambda's API): the generated concurrency parameters' bounds.
var MaxConcurrencyRange = [2]int{2, 1000}

func writeConcurrencyParameter(b *bytes.Buffer, f Function) {
	lo, hi := MaxConcurrencyRange[0], MaxConcurrencyRange[1]
	fmt.Fprintf(b, "  %s:\n", f.ConcurrencyParameter())
	fmt.Fprintf(b, "    Type: Number\n    Default: 10\n    MinValue: %d\n    MaxValue: %d\n", lo, hi)
	fmt.Fprintf(b, "    Description: Most %s invocations at once (the SQS event source's MaximumConcurrency).\n", f.Name)
}

// writeFunction writes f's function resource and log group.
func (c *checker) writeFunction(b *bytes.Buffer, f Function) error {
	id := f.LogicalID()
	base := strings.TrimSuffix(id, "Function")
	policies, err := c.choosePolicies(f)
	if err != nil {
		return err
	}
	timeout := f.timeoutExpr()
	fmt.Fprintf(b, "\n  %s:\n", id)
	b.WriteString("    Type: AWS::Serverless::Function\n")
	fmt.Fprintf(b, "    Metadata: {BuildMethod: %s, ContextPath: ., ProjectRootDirectory: .}\n", BuildMethod)
	b.WriteString("    Properties:\n")
	fmt.Fprintf(b, "      FunctionName: !Sub \"sluice-${Stage}-%s\"\n", f.Name)
	fmt.Fprintf(b, "      Description: %s\n", strconv.Quote(f.description()))
	fmt.Fprintf(b, "      CodeUri: functions/%s/\n", f.Name)
	fmt.Fprintf(b, "      MemorySize: %d\n", f.Memory)
	if timeout != "" {
		fmt.Fprintf(b, "      Timeout: %s\n", timeout)
	}
	if c.reservable(base) {
		fmt.Fprintf(b, "      ReservedConcurrentExecutions: !If [%sReserved, !Ref %sReservedConcurrency, !Ref AWS::NoValue]\n", base, base)
	}
	fmt.Fprintf(b, "      LoggingConfig: {LogGroup: !Ref %sLogs}\n", base)
	fmt.Fprintf(b, "      Policies: [%s]\n", strings.Join(policies, ", "))
	b.WriteString("      Events:\n")
	switch {
	case f.Schedule != "":
		b.WriteString("        Schedule:\n          Type: Schedule\n")
		fmt.Fprintf(b, "          Properties: {Schedule: %s, Description: !Sub \"sluice ${Stage}: %s\"}\n", f.Schedule, f.Name)
	case f.Queue != "":
		b.WriteString("        Queue:\n          Type: SQS\n          Properties:\n")
		fmt.Fprintf(b, "            Queue: !GetAtt %s.Arn\n", f.Queue)
		fmt.Fprintf(b, "            BatchSize: %d\n", f.Batch)
		if f.BatchWindow > 0 {
			fmt.Fprintf(b, "            MaximumBatchingWindowInSeconds: %d\n", int(f.BatchWindow/time.Second))
		}
		b.WriteString("            FunctionResponseTypes: [ReportBatchItemFailures]\n")
		fmt.Fprintf(b, "            ScalingConfig: {MaximumConcurrency: !Ref %s}\n", f.ConcurrencyParameter())
	default:
		if err := f.writeRouteEvents(b); err != nil {
			return err
		}
	}
	fmt.Fprintf(b, "  %sLogs:\n", base)
	b.WriteString("    Type: AWS::Logs::LogGroup\n    DeletionPolicy: Delete\n    UpdateReplacePolicy: Delete\n")
	fmt.Fprintf(b, "    Properties: {LogGroupName: !Sub \"/aws/lambda/sluice-${Stage}-%s\", RetentionInDays: !Ref LogRetentionDays}\n", f.Name)
	return nil
}

// MaxAlarmMetrics is how many metrics one CloudWatch alarm's metric math
// may read (PutMetricAlarm).
const MaxAlarmMetrics = 10

// JobErrorsAlarmID names the i-th (from 0) alarm on the jobs' errors.
func JobErrorsAlarmID(i int) string {
	if i == 0 {
		return "JobErrors"
	}
	return "JobErrors" + strconv.Itoa(i+1)
}

// writeJobErrorAlarms writes one metric-math alarm over the Errors of the
// jobs (at most MaxAlarmMetrics each): a job has no API in front whose 5XX
// alarm would show its failures. CloudWatch bills an alarm per metric it
// reads, so one alarm per function and metric is what an idle stack paid
// most for (docs/deploy-aws.md, "What it costs").
func writeJobErrorAlarms(b *bytes.Buffer, fns []Function) {
	var jobs []Function
	for _, f := range fns {
		if len(f.Routes) == 0 {
			jobs = append(jobs, f)
		}
	}
	for i := 0; len(jobs) > 0; i++ {
		n := min(len(jobs), MaxAlarmMetrics)
		group := jobs[:n]
		jobs = jobs[n:]
		names := make([]string, n)
		ids := make([]string, n)
		for j, f := range group {
			names[j] = f.Name
			ids[j] = "FILL(e" + strconv.Itoa(j) + ", 0)"
		}
		fmt.Fprintf(b, "\n  # Any error of a job (a failed run, a timeout, a crash).\n")
		fmt.Fprintf(b, "  %s:\n", JobErrorsAlarmID(i))
		b.WriteString("    Type: AWS::CloudWatch::Alarm\n    Properties:\n")
		fmt.Fprintf(b, "      AlarmDescription: !Sub \"sluice ${Stage}: a job failed (%s): see its log group\"\n", strings.Join(names, ", "))
		b.WriteString("      Metrics:\n")
		for j, f := range group {
			fmt.Fprintf(b, "        - {Id: e%d, ReturnData: false, MetricStat: {Metric: {Namespace: AWS/Lambda, MetricName: Errors, Dimensions: [{Name: FunctionName, Value: !Ref %s}]}, Period: 300, Stat: Sum}}\n", j, f.LogicalID())
		}
		fmt.Fprintf(b, "        - {Id: errors, Expression: %q, Label: job errors, ReturnData: true}\n", strings.Join(ids, " + "))
		b.WriteString("      EvaluationPeriods: 1\n      Threshold: 1\n      ComparisonOperator: GreaterThanOrEqualToThreshold\n")
		b.WriteString("      TreatMissingData: notBreaching\n      AlarmActions: [!Ref Alarms]\n")
	}
}

// timeoutExpr is f's Timeout as the template writes it: !Ref its parameter,
// its declared seconds, or "" for the Globals default.
func (f Function) timeoutExpr() string {
	if p, ok := TimeoutParameters[f.Name]; ok {
		return "!Ref " + p
	}
	if f.Timeout > 0 {
		return strconv.Itoa(int(f.Timeout / time.Second))
	}
	return ""
}

// description says what f serves: its routes, grouped by pattern, or its
// job's trigger (Lambda takes at most 256 characters).
func (f Function) description() string {
	var s string
	switch {
	case f.Schedule != "":
		s = "job on " + f.Schedule
	case f.Queue != "":
		s = "job on the queue " + f.Queue
	default:
		var patterns []string
		methods := map[string][]string{}
		for _, r := range f.Routes {
			if methods[r.Pattern] == nil {
				patterns = append(patterns, r.Pattern)
			}
			methods[r.Pattern] = append(methods[r.Pattern], r.Method)
		}
		parts := make([]string, len(patterns))
		for i, p := range patterns {
			parts[i] = strings.Join(methods[p], ", ") + " " + p
		}
		s = strings.Join(parts, "; ")
	}
	if r := []rune(s); len(r) > 256 {
		s = string(r[:255]) + "…"
	}
	return s
}

// writeRouteEvents writes one Api event per route.
func (f Function) writeRouteEvents(b *bytes.Buffer) error {
	taken := map[string]bool{}
	for _, r := range f.Routes {
		path, err := APIPath(r.Pattern)
		if err != nil {
			return fmt.Errorf("function %s: %w", f.Name, err)
		}
		name := EventName(r.Method, r.Pattern)
		for n := 1; taken[name]; n++ {
			name = EventName(r.Method, r.Pattern) + "Alias"
			if n > 1 {
				name += strconv.Itoa(n)
			}
		}
		taken[name] = true
		fmt.Fprintf(b, "        %s: {Type: Api, Properties: {RestApiId: !Ref %s, Path: %q, Method: %s", name, APIID, path, strings.ToLower(r.Method))
		if r.Stream {
			fmt.Fprintf(b, ", ResponseTransferMode: %s, TimeoutInMillis: %d", StreamMode, StreamIntegrationTimeout)
		}
		b.WriteString("}}\n")
	}
	return nil
}

// EventName names a route's event: the method and the path's literal
// segments in CamelCase, a {name} segment as By<Name>, a trailing
// {name...} left out (GET /v1/files/{file_id} → GetV1FilesByFileId).
func EventName(method, pattern string) string {
	var b strings.Builder
	b.WriteString(camel(strings.ToLower(method)))
	for _, seg := range strings.Split(strings.Trim(pattern, "/"), "/") {
		switch {
		case strings.HasSuffix(seg, "...}"):
		case strings.HasPrefix(seg, "{"):
			b.WriteString("By" + camel(strings.Trim(seg, "{}")))
		default:
			b.WriteString(camel(seg))
		}
	}
	return b.String()
}

// camel turns a-b_c into ABC-style CamelCase, dropping what is not a letter
// or digit.
func camel(s string) string {
	var b strings.Builder
	upper := true
	for _, r := range s {
		isAlnum := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
		switch {
		case !isAlnum:
			upper = true
		case upper:
			b.WriteString(strings.ToUpper(string(r)))
			upper = false
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// reservable: a function takes a reserved concurrency when the core
// declares the parameter <Base>ReservedConcurrency and the condition
// <Base>Reserved (0 reserves none).
func (c *checker) reservable(base string) bool {
	return get(c.t, "Parameters", base+"ReservedConcurrency") != nil && get(c.t, "Conditions", base+"Reserved") != nil
}
