// Package awsstore implements the store interfaces on AWS: records and limiter
// windows in one DynamoDB table, blobs in S3, the work queue on SQS, the event
// bus on SNS fanned out to an SQS delivery queue, and sealing on KMS.
//
// Every adapter talks to AWS only through the AWS SDK for Go v2, so the same
// code runs against AWS and against a wire-compatible emulator (moto_server)
// in tests: point the SDK at the emulator with AWS_ENDPOINT_URL, or with
// aws.Config.BaseEndpoint as pkg/store/aws/awstest does.
//
// Provision creates the resources (the way template.yaml describes them) and
// Open builds a store.Backend on them.
package awsstore
