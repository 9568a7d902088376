package api

import (
	"context"
	"errors"
	"net/http"
)

// StatusClientClosed is the status a request whose client went away before
// its answer is logged with (nginx's 499, "client closed request"). It is
// never sent: nobody is there to read it.
const StatusClientClosed = 499

// ClientClosed is the error of a request whose client went away; err is
// what the server saw of it (a cancelled call, a body cut short).
func ClientClosed(err error) *Error {
	return &Error{
		Status: StatusClientClosed, Type: TypeInvalidRequest, Code: "client_closed",
		Message: "The client closed the request before its answer was delivered.", Err: err,
	}
}

// ClientGone is the one place a failure is recognised as the client's
// leaving: given ctx, the request's (or call's) context, it returns err —
// or, when ctx was cancelled, a 499 ClientClosed with err as its cause.
// Whatever a request failed with once its client left (a provider call cut
// off, a body that ended early, a store call abandoned) is then logged as
// what it is, not as a server fault that would page someone. Two kinds of
// error stay as they are: a 499 already, and the server's own verdict on the
// request (a 4xx *Error: a body too slow is a 408 even though the read it
// failed cancelled the context). A context past its deadline (a Lambda's
// timeout) is the server's limit, not the client leaving.
func ClientGone(ctx context.Context, err error) error {
	if err == nil || !errors.Is(ctx.Err(), context.Canceled) {
		return err
	}
	var e *Error
	if errors.As(err, &e) && e.Status < http.StatusInternalServerError {
		return err
	}
	return ClientClosed(err)
}
