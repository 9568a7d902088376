// Package files owns the Files API and the Uploads API: file records, the
// streaming of uploads into the blob store (validating batch input lines as
// they pass), listing with cursors, content downloads with Range, deletion,
// expiry and the sweep that removes expired bytes.
//
// A file is a manifest: an ordered list of blob objects (ARCHITECTURE §4).
// An ordinary upload is one object; a file made by the Uploads API is its
// parts, in the order the client gave; a batch's output file is its chunk
// objects. Reads stream across the list; nothing is ever concatenated by
// copying.
package files

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/batchinput"
	"github.com/sluice-gateway/sluice/pkg/ids"
	"github.com/sluice-gateway/sluice/pkg/store"
)

// Purposes.
const (
	PurposeBatch       = "batch"
	PurposeBatchOutput = "batch_output"
)

// uploadPurposes are the purposes a client may upload with.
var uploadPurposes = []string{"assistants", "batch", "fine-tune", "vision", "user_data", "evals"}

// objectPurposes are the purposes a stored file may have (the list filter
// accepts these).
var objectPurposes = []string{"assistants", "assistants_output", "batch", "batch_output", "fine-tune", "fine-tune-results", "vision", "user_data", "evals"}

// Limits and defaults.
const (
	// DefaultBatchExpiry is how long a batch input file lives when the upload
	// names no expiry (OpenAI's default).
	DefaultBatchExpiry = 30 * 24 * time.Hour
	// MinExpiresAfter and MaxExpiresAfter bound expires_after[seconds], as
	// OpenAI does.
	MinExpiresAfter = 3600
	MaxExpiresAfter = 2592000
	// MaxParts bounds the blob objects of one file, so its manifest fits in
	// one record (DynamoDB items are at most 400 KB; a part costs about 50
	// bytes of manifest).
	MaxParts = 5000
	// recordGrace keeps an expired file's record (invisible to every read,
	// which check expires_at themselves) so the sweep can still find it and
	// remove its bytes; the store's own TTL removes the record after that,
	// should the sweep never run.
	recordGrace = 7 * 24 * time.Hour
	// defaultListLimit and maxListLimit are OpenAI's for GET /v1/files.
	defaultListLimit = 10000
	maxListLimit     = 10000
)

// File is the OpenAI File object.
type File struct {
	ID            string  `json:"id"`
	Object        string  `json:"object"`
	Bytes         int64   `json:"bytes"`
	CreatedAt     int64   `json:"created_at"`
	Filename      string  `json:"filename"`
	Purpose       string  `json:"purpose"`
	Status        string  `json:"status"`
	StatusDetails *string `json:"status_details"`
	ExpiresAt     *int64  `json:"expires_at"`
}

// Deleted is the answer to DELETE /v1/files/{file_id}.
type Deleted struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Deleted bool   `json:"deleted"`
}

// Part is one blob object of a file's manifest.
type Part struct {
	Key  string `json:"k"`
	Size int64  `json:"n"`
}

// BatchInputs tells whether a file is the input of a batch that is still
// running. The batch engine implements it; files declares it because files
// is what asks: a delete of such a file is refused (409), and the sweep
// keeps the bytes of such a file when it expires, until the batch ends.
type BatchInputs interface {
	// InUse returns the id of a running batch that reads fileID, or "".
	InUse(ctx context.Context, fileID string) (batchID string, err error)
}

// Options configure a Service.
type Options struct {
	// MaxFileSize is the largest file (413 beyond); 0 means 512 MiB.
	MaxFileSize int64
	// MaxLineBytes bounds one batch input line; 0 means
	// batchinput.DefaultMaxLineBytes.
	MaxLineBytes int
	// Now is the clock (tests move it); nil means time.Now.
	Now func() time.Time
	// Batches, when set, refuses deleting the input of a running batch
	// (batches.Inputs); nil means no file is ever in use.
	Batches BatchInputs
}

// Service is the files capability over a records table and a blob store.
// It knows nothing of HTTP: Handlers serve it, and any caller in process
// (the batch engine) uses the same methods, under the same rules.
type Service struct {
	records store.Records
	blobs   store.Blobs
	opts    Options
}

// NewService returns the files service.
func NewService(records store.Records, blobs store.Blobs, opts Options) *Service {
	if opts.MaxFileSize <= 0 {
		opts.MaxFileSize = 512 << 20
	}
	if opts.MaxLineBytes <= 0 {
		opts.MaxLineBytes = batchinput.DefaultMaxLineBytes
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Service{records: records, blobs: blobs, opts: opts}
}

func (s *Service) now() time.Time { return s.opts.Now() }

// Stored is a file as recorded: the File object plus what only sluice sees.
type Stored struct {
	File
	Team        string
	ContentType string
	// Provider is the custom_llm_provider the upload named (recorded only:
	// sluice keeps the bytes itself).
	Provider  string
	Parts     []Part
	Created   time.Time
	ExpiresAt time.Time // zero: never
	// counted says the bytes count in the team's storage usage (quota.go).
	counted bool
}

// expired reports whether the file has expired by now.
func (f Stored) expired(now time.Time) bool {
	return !f.ExpiresAt.IsZero() && !now.Before(f.ExpiresAt)
}

// NewFile describes a file made from blob objects already stored (a batch's
// output chunks, or an upload's parts).
type NewFile struct {
	Team        string
	Filename    string
	Purpose     string
	ContentType string
	Provider    string
	Parts       []Part
	// ExpiresAfter, when > 0, makes the file expire that long after its
	// creation.
	ExpiresAfter time.Duration
	// ID is the file's id; empty generates one.
	ID string
}

// Create records a file whose bytes are already in the blob store, as the
// manifest of parts, in order: the batch engine publishes its output and
// error files with it. The caller has stored the objects and vouches for
// them: Create does not read them, check their sizes or validate their
// content, and the file does not count against the team's storage quota.
// The file owns the objects from then on (a delete or the sweep removes
// them). A missing team or an empty or oversized manifest is an error; an
// ID already taken fails and changes nothing.
func (s *Service) Create(ctx context.Context, nf NewFile) (File, error) {
	if nf.Team == "" {
		return File{}, errors.New("files: create: a file needs a team")
	}
	f, writes, err := s.newFileWrites(nf, false)
	if err != nil {
		return File{}, err
	}
	if err := s.records.Transact(ctx, writes); err != nil {
		return File{}, fmt.Errorf("files: create %s: %w", f.ID, err)
	}
	return f.File, nil
}

// newFileWrites builds a file and the writes that record it: the file item
// (owner listing, expiry index) and its admin-listing item. counted says its
// bytes are already counted in the team's storage usage.
func (s *Service) newFileWrites(nf NewFile, counted bool) (Stored, []store.Write, error) {
	if len(nf.Parts) == 0 || len(nf.Parts) > MaxParts {
		return Stored{}, nil, fmt.Errorf("files: a file needs 1 to %d parts, got %d", MaxParts, len(nf.Parts))
	}
	id := nf.ID
	if id == "" {
		id = ids.New(ids.File)
	}
	var size int64
	for _, p := range nf.Parts {
		size += p.Size
	}
	created := s.now()
	f := Stored{
		File: File{
			ID: id, Object: "file", Bytes: size, CreatedAt: created.Unix(),
			Filename: nf.Filename, Purpose: nf.Purpose, Status: "processed",
		},
		Team: nf.Team, ContentType: nf.ContentType, Provider: nf.Provider,
		Parts: slices.Clone(nf.Parts), Created: created, counted: counted,
	}
	if nf.ExpiresAfter > 0 {
		f.ExpiresAt = created.Add(nf.ExpiresAfter)
		exp := f.ExpiresAt.Unix()
		f.File.ExpiresAt = &exp
	}
	main, all, err := fileRecords(f)
	if err != nil {
		return Stored{}, nil, err
	}
	return f, []store.Write{
		{Kind: store.WritePut, Record: main, Cond: store.Cond{Absent: true}},
		{Kind: store.WritePut, Record: all, Cond: store.Cond{Absent: true}},
	}, nil
}

// Get returns the file id as p may see it: another team's file, a missing
// one and an expired one all answer 404, so ids cannot be probed.
func (s *Service) Get(ctx context.Context, p auth.Principal, id string) (Stored, error) {
	f, _, err := s.load(ctx, id)
	if err != nil {
		return Stored{}, err
	}
	if !p.CanAccessTeam(f.Team) {
		return Stored{}, notFound(id)
	}
	return f, nil
}

// Recorded returns file id as recorded, expired or not, as long as it is
// neither deleted nor swept: the batch engine reads a running batch's input
// through it (the sweep keeps the bytes of an expired file a running batch
// reads, see BatchInputs). Anything else is a 404.
func (s *Service) Recorded(ctx context.Context, id string) (Stored, error) {
	if !ids.Valid(ids.File, id) {
		return Stored{}, notFound(id)
	}
	rec, err := s.records.Get(ctx, fileKey(id))
	if errors.Is(err, store.ErrNotFound) {
		return Stored{}, notFound(id)
	}
	if err != nil {
		return Stored{}, fmt.Errorf("files: get %s: %w", id, err)
	}
	if rec.Status != statusLive {
		return Stored{}, notFound(id)
	}
	return decodeFile(rec)
}

// load reads a live file by id, with its record version.
func (s *Service) load(ctx context.Context, id string) (Stored, int64, error) {
	if !ids.Valid(ids.File, id) {
		return Stored{}, 0, notFound(id)
	}
	rec, err := s.records.Get(ctx, fileKey(id))
	if errors.Is(err, store.ErrNotFound) {
		return Stored{}, 0, notFound(id)
	}
	if err != nil {
		return Stored{}, 0, fmt.Errorf("files: get %s: %w", id, err)
	}
	f, err := decodeFile(rec)
	if err != nil {
		return Stored{}, 0, err
	}
	if rec.Status != statusLive || f.expired(s.now()) {
		return Stored{}, 0, notFound(id)
	}
	return f, rec.Version, nil
}

func notFound(id string) error {
	return api.NotFound("No such File object: %s", id)
}
