package awsstore

import (
	"fmt"
	"strings"
)

// Resources names the AWS resources one sluice deployment runs on. The SAM
// template passes them to every function as the SLUICE_* variables of Env.
type Resources struct {
	Table            string // DynamoDB table (records and limiter windows)
	Bucket           string // S3 bucket (file bytes, claim checks)
	WorkQueueURL     string // SQS batch work queue
	WorkDLQURL       string // its dead-letter queue (optional for Open)
	TopicARN         string // SNS topic of log events
	DeliveryQueueURL string // SQS queue subscribed to the topic
	DeliveryDLQURL   string // its dead-letter queue (the delivery worker sends what it gives up on there)
	KMSKeyID         string // KMS key sealing team secrets (id, ARN or alias)
}

// envVar pairs a variable name with the field it fills.
type envVar struct {
	name     string
	field    func(*Resources) *string
	required bool
}

var envVars = []envVar{
	{"SLUICE_TABLE", func(r *Resources) *string { return &r.Table }, true},
	{"SLUICE_BUCKET", func(r *Resources) *string { return &r.Bucket }, true},
	{"SLUICE_WORK_QUEUE_URL", func(r *Resources) *string { return &r.WorkQueueURL }, true},
	{"SLUICE_WORK_DLQ_URL", func(r *Resources) *string { return &r.WorkDLQURL }, false},
	{"SLUICE_TOPIC_ARN", func(r *Resources) *string { return &r.TopicARN }, true},
	{"SLUICE_DELIVERY_QUEUE_URL", func(r *Resources) *string { return &r.DeliveryQueueURL }, true},
	{"SLUICE_DELIVERY_DLQ_URL", func(r *Resources) *string { return &r.DeliveryDLQURL }, true},
	{"SLUICE_KMS_KEY_ID", func(r *Resources) *string { return &r.KMSKeyID }, true},
}

// ResourcesFromEnv reads the resources from the SLUICE_* variables of Env
// through getenv (the composition root passes the process's os.Getenv; the
// adapter reads no environment itself). The work queue's dead-letter queue
// URL is optional (only tools read it); any other missing variable is an
// error that names every one missing.
func ResourcesFromEnv(getenv func(string) string) (Resources, error) {
	var r Resources
	var missing []string
	for _, v := range envVars {
		val := strings.TrimSpace(getenv(v.name))
		if val == "" && v.required {
			missing = append(missing, v.name)
		}
		*v.field(&r) = val
	}
	if len(missing) > 0 {
		return Resources{}, fmt.Errorf("aws backend: missing environment variable(s) %s (run infra/provision to create the resources and print them)",
			strings.Join(missing, ", "))
	}
	return r, nil
}

// Env renders r as NAME=value lines, in a fixed order, that ResourcesFromEnv
// reads back. Empty optional values are left out.
func (r Resources) Env() []string {
	var lines []string
	for _, v := range envVars {
		if val := *v.field(&r); val != "" || v.required {
			lines = append(lines, v.name+"="+val)
		}
	}
	return lines
}
