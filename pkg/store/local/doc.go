// Package local implements the storage interfaces of package store for one
// process on one machine: records and queues in a bbolt file, blobs as files,
// the bus, limiter and sealer in process. It is what `make run` starts and
// what most tests drive, so it honours every semantic the cloud adapters have
// (conditional writes, expiry, redelivery, dead letters) and the conformance
// suites in store/storetest hold it to them.
//
// The data directory holds:
//
//	sluice.db    records and queues (bbolt; locked, so one process at a time)
//	blobs/       blob objects, and in blobs/tmp the writes in progress (removed
//	             by Open: under the lock, any there is what a crash left)
//	sealer.key   the sealer's master key (32 bytes, mode 0600)
package local
