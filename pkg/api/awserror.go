package api

import "net/http"

// awsErrorTypes name, in AWS's JSON protocols, the error each status of
// sluice's own refusals stands for: the names the AWS SDKs map to their
// typed errors (bedrockruntime's ValidationException, AccessDeniedException,
// ThrottlingException, …).
var awsErrorTypes = map[int]string{
	http.StatusBadRequest:            "ValidationException",
	http.StatusUnauthorized:          "UnrecognizedClientException",
	http.StatusForbidden:             "AccessDeniedException",
	http.StatusNotFound:              "ResourceNotFoundException",
	http.StatusMethodNotAllowed:      "UnknownOperationException",
	http.StatusRequestTimeout:        "RequestTimeoutException",
	http.StatusConflict:              "ConflictException",
	http.StatusRequestEntityTooLarge: "ValidationException",
	http.StatusTooManyRequests:       "ThrottlingException",
	http.StatusInternalServerError:   "InternalServerException",
	http.StatusBadGateway:            "InternalServerException",
	http.StatusServiceUnavailable:    "ServiceUnavailableException",
	http.StatusGatewayTimeout:        "ModelTimeoutException",
}

// awsBody is AWS's JSON error body — a top-level message — with sluice's
// OpenAI error beside it: AWS SDKs read message (and the type from the
// X-Amzn-ErrorType header) and ignore the rest; other clients keep the
// members they know.
type awsBody struct {
	Message string `json:"message"`
	Error   Detail `json:"error"`
}

// WriteAWSError renders err as WriteError does, in the shape AWS's JSON
// protocols use (the Bedrock prefix: an AWS SDK reads nothing else): an
// X-Amzn-ErrorType header naming the error and a top-level message.
func WriteAWSError(w http.ResponseWriter, r *http.Request, err error) {
	e := prepareError(w, r, err)
	if e == nil {
		return
	}
	typ, ok := awsErrorTypes[e.Status]
	if !ok {
		typ = "ValidationException"
		if e.Status >= 500 {
			typ = "InternalServerException"
		}
	}
	w.Header().Set("X-Amzn-ErrorType", typ)
	WriteJSON(w, e.Status, awsBody{Message: e.Message, Error: e.Body().Error})
}
