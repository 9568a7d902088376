// Package storetest holds one conformance suite per storage interface of
// package store. Both adapter packages (pkg/store/local and pkg/store/aws) run
// every suite unchanged against their own backends: the suites are where the
// semantics one backend has natively (DynamoDB's conditional writes, SQS's
// redelivery) are pinned down for the other.
//
// The open functions the suites take must:
//   - return a fresh, isolated instance on every call (the suites still use
//     random keys, names and scopes, so an instance that other tests share
//     also works);
//   - be safe to call concurrently: most subtests call t.Parallel, because
//     queue and limiter subtests spend their time waiting for timeouts;
//   - register their own cleanup with t.Cleanup.
//
// Every wait is bounded and counted in whole seconds (SQS counts visibility
// and long polls in seconds). BlobsWith measures the process's heap while it
// writes a 100 MB object: call it from a test that does not call t.Parallel,
// so no other test allocates meanwhile.
//
// The suites use only the standard library.
package storetest
