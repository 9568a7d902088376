package deploy

import (
	"maps"
	"slices"
	"strings"

	"github.com/sluice-gateway/sluice/pkg/store"
)

// AlarmTopicID is the one SNS topic every alarm notifies.
const AlarmTopicID = "Alarms" // AWS::SNS::Topic

// statefulTypes hold what a deployment must not lose: records, file bytes,
// the key that encrypts them, the secrets.
var statefulTypes = []string{"AWS::DynamoDB::Table", "AWS::S3::Bucket", "AWS::KMS::Key", "AWS::SecretsManager::Secret"}

// checkLifecycle: stateful resources outlive the stack and its updates, but
// not a failed first create (RetainExceptOnCreate): a rolled-back first
// deploy leaves no secret whose name would make the retry fail, and no
// orphaned table, bucket or key. Nothing uses plain Retain. A DependsOn
// never names a resource that may not exist.
func (c *checker) checkLifecycle() {
	for id := range c.resources {
		r := c.resources[id]
		stateful := slices.Contains(statefulTypes, c.typeOf(id))
		switch del := Render(get(r, "DeletionPolicy")); {
		case del == "Retain":
			c.fail("resource %s: DeletionPolicy Retain keeps it when a first deploy rolls back (the retry then fails on its name, or it is orphaned): use RetainExceptOnCreate", id)
		case stateful && del != "RetainExceptOnCreate":
			c.fail("resource %s (%s): DeletionPolicy %q, want RetainExceptOnCreate", id, c.typeOf(id), del)
		}
		if stateful && Render(get(r, "UpdateReplacePolicy")) != "Retain" {
			c.fail("resource %s (%s): UpdateReplacePolicy %q, want Retain (a replacement must not delete the data)", id, c.typeOf(id), Render(get(r, "UpdateReplacePolicy")))
		}
		own, _ := get(r, "Condition").(string)
		for _, dep := range renderList(get(r, "DependsOn")) {
			switch cond, _ := get(c.resources[dep], "Condition").(string); {
			case c.resources[dep] == nil:
				c.fail("resource %s: DependsOn %s, which is no resource of the template", id, dep)
			case cond != "" && cond != own:
				c.fail("resource %s: DependsOn %s, which exists only when %s (CloudFormation refuses the template when it does not): depend on a resource that refers to it under !If", id, dep, cond)
			}
		}
	}
}

// checkTable: the records table cannot be deleted by accident, and each
// index projects what its queries read (pkg/store: the sweep index keys
// only).
func (c *checker) checkTable() {
	p := c.props(TableID)
	// A protected table refuses the delete of a failed first create's
	// rollback (ROLLBACK_FAILED): protection follows a parameter that
	// defaults to on, and make deploy (infra/deploy.sh) creates the stack
	// with it off, then switches it on.
	args, _ := get(p, "DeletionProtectionEnabled", "Fn::If").([]any)
	if len(args) != 3 || args[1] != true || args[2] != false {
		c.fail("table %s: DeletionProtectionEnabled %s, want !If [condition, true, false] on a parameter that defaults to \"true\": a table protected on its first create refuses the rollback's delete (ROLLBACK_FAILED)",
			TableID, Render(get(p, "DeletionProtectionEnabled")))
	} else if param, def := c.conditionParameter(Render(args[0])); def != "true" {
		c.fail("table %s: DeletionProtectionEnabled follows %s, whose default %q is not \"true\"", TableID, param, def)
	}
	for _, g := range list(get(p, "GlobalSecondaryIndexes")) {
		ix := store.Index(Render(get(g, "IndexName")))
		want := "ALL"
		if ix.KeysOnly() {
			want = "KEYS_ONLY"
		}
		if got := Render(get(g, "Projection", "ProjectionType")); got != want {
			c.fail("table %s: index %s projects %s, want %s (what its queries read)", TableID, ix, got, want)
		}
	}
}

// checkDetailedMetrics: per-method API metrics (billed) are off unless the
// operator turns them on.
func (c *checker) checkDetailedMetrics(api any) {
	for _, s := range list(get(api, "MethodSettings")) {
		m := get(s, "MetricsEnabled")
		if m == nil || m == false {
			continue
		}
		args, _ := get(m, "Fn::If").([]any)
		if len(args) != 3 || args[1] != true || args[2] != false {
			c.fail("api: MetricsEnabled %s, want !If [condition, true, false] on a parameter that defaults to off", Render(m))
			continue
		}
		if param, def := c.conditionParameter(Render(args[0])); def != "false" {
			c.fail("api: MetricsEnabled follows %s, whose default %q is not \"false\" (detailed metrics are billed)", param, def)
		}
	}
}

// conditionParameter reads a condition of the form !Equals [!Ref P,
// "true"]: the parameter and its default.
func (c *checker) conditionParameter(cond string) (param, def string) {
	args, _ := get(c.t, "Conditions", cond, "Fn::Equals").([]any)
	if len(args) != 2 || Render(args[1]) != "true" {
		return "", ""
	}
	param, _ = get(args[0], "Ref").(string)
	return param, Render(get(c.t, "Parameters", param, "Default"))
}

// checkAPIAccount: the account-wide API Gateway logging role is the
// template's only if a parameter says so (default: create it), so an
// account that has one keeps it.
func (c *checker) checkAPIAccount() {
	for _, id := range c.ofType("AWS::ApiGateway::Account") {
		cond, _ := get(c.resources[id], "Condition").(string)
		param, def := c.conditionParameter(cond)
		if param == "" || def != "true" {
			c.fail("resource %s: the account's API Gateway logging role must be optional: Condition on a parameter (!Equals [!Ref P, \"true\"], default \"true\")", id)
			continue
		}
		role := strings.TrimSuffix(strings.TrimPrefix(Render(get(c.props(id), "CloudWatchRoleArn")), "${"), ".Arn}")
		if c.typeOf(role) == "AWS::IAM::Role" {
			if rc, _ := get(c.resources[role], "Condition").(string); rc != cond {
				c.fail("resource %s: the logging role of %s must have its Condition, %s", role, id, cond)
			}
		}
	}
}

// checkAlarms: every alarm notifies the one alarm topic, and the stack has
// alarms on API Gateway's 5XX, on the account's Lambda throttles and on
// DynamoDB's throttling (the jobs' errors and the dead-letter queues have
// theirs).
func (c *checker) checkAlarms() {
	if c.typeOf(AlarmTopicID) != "AWS::SNS::Topic" {
		c.fail("alarms: no SNS topic %s", AlarmTopicID)
	}
	for _, a := range c.ofType("AWS::CloudWatch::Alarm") {
		if got := renderList(get(c.props(a), "AlarmActions")); !slices.Equal(got, []string{"${" + AlarmTopicID + "}"}) {
			c.fail("alarm %s: AlarmActions %v, want [!Ref %s] (one topic for every alarm)", a, got, AlarmTopicID)
		}
	}
	api := merge(get(c.t, "Globals", "Api"), c.props(APIID))
	apiDims := map[string]string{"ApiName": Render(get(api, "Name")), "Stage": Render(get(api, "StageName"))}
	if !c.alarmWatches(metricRef{"AWS/ApiGateway", "5XXError", apiDims}) {
		c.fail("alarms: none on AWS/ApiGateway 5XXError of the API (ApiName %s, Stage %s)", apiDims["ApiName"], apiDims["Stage"])
	}
	if !c.alarmWatches(metricRef{"AWS/Lambda", "Throttles", map[string]string{}}) {
		c.fail("alarms: none on AWS/Lambda Throttles of the account (no dimensions): a throttled function would go unnoticed")
	}
	for _, m := range []string{"ReadThrottleEvents", "WriteThrottleEvents"} {
		if !c.alarmWatches(metricRef{"AWS/DynamoDB", m, map[string]string{"TableName": "${" + TableID + "}"}}) {
			c.fail("alarms: none on AWS/DynamoDB %s of table %s", m, TableID)
		}
	}
}

// metricRef is a metric an alarm watches.
type metricRef struct {
	namespace, name string
	dims            map[string]string
}

// alarmWatches reports whether an alarm watches m: as its metric, or as a
// metric of its metric math.
func (c *checker) alarmWatches(want metricRef) bool {
	for _, a := range c.ofType("AWS::CloudWatch::Alarm") {
		p := c.props(a)
		metrics := []any{p}
		for _, q := range list(get(p, "Metrics")) {
			metrics = append(metrics, get(q, "MetricStat", "Metric"))
		}
		for _, m := range metrics {
			if Render(get(m, "Namespace")) != want.namespace || Render(get(m, "MetricName")) != want.name {
				continue
			}
			dims := map[string]string{}
			for _, d := range list(get(m, "Dimensions")) {
				dims[Render(get(d, "Name"))] = Render(get(d, "Value"))
			}
			if maps.Equal(dims, want.dims) {
				return true
			}
		}
	}
	return false
}
