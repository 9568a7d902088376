package awsstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/sluice-gateway/sluice/pkg/store"
)

// throttlingCodes are error codes by which a service says "not now": for the
// caller they mean the same as no answer at all (503, try again later).
var throttlingCodes = map[string]bool{
	"ProvisionedThroughputExceededException": true,
	"RequestLimitExceeded":                   true,
	"ThrottlingException":                    true,
	"Throttling":                             true,
	"ThrottledException":                     true,
	"TooManyRequestsException":               true,
	"SlowDown":                               true,
	"RequestThrottled":                       true,
	"KMSInternalException":                   true,
	"InternalServerError":                    true,
	"InternalFailure":                        true,
	"ServiceUnavailable":                     true,
}

// unavailable reports whether err means the service did not answer usefully:
// the request could not be sent, the retry budget ran out, the service failed
// (5xx) or throttled. A cancelled or expired context is the caller's doing
// and is not counted.
func unavailable(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var sendErr *smithyhttp.RequestSendError
	if errors.As(err, &sendErr) {
		return true
	}
	var quotaErr ratelimit.QuotaExceededError
	if errors.As(err, &quotaErr) {
		return true
	}
	var respErr *awshttp.ResponseError
	if errors.As(err, &respErr) && respErr.HTTPStatusCode() >= 500 {
		return true
	}
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		return throttlingCodes[apiErr.ErrorCode()]
	}
	return false
}

// wrap annotates err with what was being done and puts the store sentinel it
// means in front of it, so callers can test errors.Is(err, store.ErrUnavailable)
// and still reach the SDK error with errors.As.
func wrap(err error, format string, args ...any) error {
	what := fmt.Sprintf(format, args...)
	if unavailable(err) {
		return fmt.Errorf("%s: %w: %w", what, store.ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// wrapAs is wrap for an error already known to mean sentinel.
func wrapAs(sentinel, err error, format string, args ...any) error {
	return fmt.Errorf("%s: %w: %w", fmt.Sprintf(format, args...), sentinel, err)
}

// apiCode returns the service's error code, or "" when err carries none.
func apiCode(err error) string {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode()
	}
	return ""
}
