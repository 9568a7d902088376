package files

import (
	"bufio"
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"strings"
	"time"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/batchinput"
	"github.com/sluice-gateway/sluice/pkg/ids"
	"github.com/sluice-gateway/sluice/pkg/store"
)

// The Uploads API (ARCHITECTURE §10): in the cloud one request carries about
// 4.4 MB, so larger files arrive as parts, each its own blob object. The
// completed file is the manifest of the parts in the order part_ids gives:
// nothing is copied.
const (
	// UploadTTL is how long an upload accepts parts (OpenAI: one hour).
	UploadTTL = time.Hour
	// MaxPartBytes is the largest part (OpenAI's 64 MB; in the cloud the
	// request limit is lower still).
	MaxPartBytes = 64 << 20
	fieldData    = "data"
)

// Upload statuses.
const (
	uploadPending   = "pending"
	uploadCompleted = "completed"
	uploadCancelled = "cancelled"
	uploadExpired   = "expired"
)

// Upload is the OpenAI Upload object.
type Upload struct {
	ID        string `json:"id"`
	Object    string `json:"object"`
	Bytes     int64  `json:"bytes"`
	CreatedAt int64  `json:"created_at"`
	ExpiresAt int64  `json:"expires_at"`
	Filename  string `json:"filename"`
	Purpose   string `json:"purpose"`
	Status    string `json:"status"`
	File      *File  `json:"file"`
}

// UploadPart is the OpenAI Upload Part object.
type UploadPart struct {
	ID        string `json:"id"`
	Object    string `json:"object"`
	CreatedAt int64  `json:"created_at"`
	UploadID  string `json:"upload_id"`
}

// uploadDoc is an upload record's body.
type uploadDoc struct {
	ID         string `json:"id"`
	Team       string `json:"team"`
	Filename   string `json:"filename"`
	Purpose    string `json:"purpose"`
	MimeType   string `json:"mime_type"`
	Bytes      int64  `json:"bytes"`
	Created    int64  `json:"created_ns"`
	ExpiresAt  int64  `json:"expires_ns"`
	FileExpiry int64  `json:"file_expires_after_s,omitempty"`
	FileID     string `json:"file_id,omitempty"`
	FileObject *File  `json:"file,omitempty"`
	// Counted says Bytes count in the team's storage usage (taken at
	// creation; the completed file keeps them).
	Counted      bool  `json:"counted,omitempty"`
	partsCounted int64 // from the record's counters
	bytesCounted int64 // the parts' bytes, and those of parts arriving
}

// partDoc is an upload part record's body.
type partDoc struct {
	ID      string `json:"id"`
	Key     string `json:"key"`
	Size    int64  `json:"size"`
	Created int64  `json:"created_ns"`
}

// counterParts counts an upload's recorded parts; its counterBytes counts
// the bytes of its parts, those still arriving included.
const counterParts = "parts"

func (u uploadDoc) expiresAt() time.Time { return time.Unix(0, u.ExpiresAt) }

// status is the status a client sees: a pending upload past its expiry is
// expired.
func (u uploadDoc) status(recStatus string, now time.Time) string {
	if recStatus == uploadPending && !now.Before(u.expiresAt()) {
		return uploadExpired
	}
	return recStatus
}

func (u uploadDoc) object(status string) Upload {
	return Upload{
		ID: u.ID, Object: "upload", Bytes: u.Bytes, CreatedAt: time.Unix(0, u.Created).Unix(),
		ExpiresAt: u.expiresAt().Unix(), Filename: u.Filename, Purpose: u.Purpose, Status: status, File: u.FileObject,
	}
}

func uploadRecord(u uploadDoc, status string, gsi2 store.IndexKey) (store.Record, error) {
	body, err := json.Marshal(u)
	if err != nil {
		return store.Record{}, fmt.Errorf("files: encode upload %s: %w", u.ID, err)
	}
	return store.Record{
		Key: uploadKey(u.ID), GSI2: gsi2, Status: status, Body: body,
		ExpiresAt: u.expiresAt().Add(recordGrace),
	}, nil
}

// endWrites are the writes that end a pending upload at version with
// status: its record, conditional on it still being that pending version,
// and the return of its bytes to the team's storage usage if they counted.
func endWrites(u uploadDoc, version int64, status string, gsi2 store.IndexKey) ([]store.Write, error) {
	rec, err := uploadRecord(u, status, gsi2)
	if err != nil {
		return nil, err
	}
	writes := []store.Write{{Kind: store.WriteUpdate, Record: rec, Cond: store.Cond{StatusIn: []string{uploadPending}, Version: version}}}
	if u.Counted && status != uploadCompleted {
		writes = append(writes, releaseUsage(u.Team, u.Bytes))
	}
	return writes, nil
}

// NewUpload is what POST /v1/uploads asks for.
type NewUpload struct {
	Filename string
	Purpose  string
	// Bytes is the size of the file: the parts must add up to it.
	Bytes    int64
	MimeType string
	// ExpiresAfter, when > 0, is the completed file's expiry (as
	// FileParams.ExpiresAfter).
	ExpiresAfter time.Duration
}

// check applies the rules of an upload, naming the JSON parameters.
func (s *Service) checkNewUpload(in NewUpload) error {
	if err := checkUploadPurpose(in.Purpose); err != nil {
		return err
	}
	switch {
	case in.Filename == "" || len(in.Filename) > maxFilenameBytes:
		return api.InvalidValue("filename", "Invalid filename: expected 1 to %d bytes.", maxFilenameBytes)
	case in.Bytes < 1:
		return api.InvalidValue("bytes", "Invalid bytes %d: a file holds at least 1 byte.", in.Bytes)
	case in.Bytes > s.opts.MaxFileSize:
		return api.TooLarge("The file would be %d bytes; the limit is %d bytes.", in.Bytes, s.opts.MaxFileSize)
	case in.Purpose == PurposeBatch && in.Bytes > batchinput.MaxBytes:
		return api.TooLarge("A batch input file may be at most %d bytes; this one would be %d.", batchinput.MaxBytes, in.Bytes)
	}
	if _, _, err := mime.ParseMediaType(in.MimeType); err != nil || len(in.MimeType) > 255 {
		return api.InvalidValue("mime_type", "Invalid mime_type %s: expected a media type such as text/jsonl.", api.Quote(in.MimeType))
	}
	if in.ExpiresAfter != 0 {
		return checkExpiresAfter("expires_after.seconds", in.ExpiresAfter)
	}
	return nil
}

// CreateUpload starts an upload for p's team. A team with a storage quota
// has the declared bytes taken from it now (413 if they do not fit), so
// the parts need no further check against it.
func (s *Service) CreateUpload(ctx context.Context, p auth.Principal, in NewUpload) (Upload, error) {
	if err := s.checkNewUpload(in); err != nil {
		return Upload{}, err
	}
	now := s.now()
	u := uploadDoc{
		ID: ids.New(ids.Upload), Team: p.TeamID, Filename: in.Filename, Purpose: in.Purpose, MimeType: in.MimeType,
		Bytes: in.Bytes, Created: now.UnixNano(), ExpiresAt: now.Add(UploadTTL).UnixNano(),
		FileExpiry: int64(in.ExpiresAfter / time.Second),
	}
	quota := quotaOf(p)
	u.Counted = quota > 0
	if u.Counted && u.Bytes > quota {
		return Upload{}, s.quotaError(ctx, u.Team, quota)
	}
	rec, err := uploadRecord(u, uploadPending, store.IndexKey{PK: expiresPK, SK: expirySK(u.expiresAt(), u.ID)})
	if err != nil {
		return Upload{}, err
	}
	writes := []store.Write{{Kind: store.WritePut, Record: rec, Cond: store.Cond{Absent: true}}}
	if u.Counted {
		writes = append(writes, takeUsage(u.Team, u.Bytes, quota))
	}
	err = s.records.Transact(ctx, writes)
	if errors.Is(err, store.ErrConditionFailed) && u.Counted {
		// The upload's id is new, so its Put cannot be what failed.
		return Upload{}, s.quotaError(ctx, u.Team, quota)
	}
	if err != nil {
		return Upload{}, fmt.Errorf("files: create upload: %w", err)
	}
	return u.object(uploadPending), nil
}

// loadUpload reads an upload p may see (another team's is a 404).
func (s *Service) loadUpload(ctx context.Context, p auth.Principal, id string) (uploadDoc, store.Record, error) {
	missing := api.NotFound("No such Upload object: %s", id)
	if !ids.Valid(ids.Upload, id) {
		return uploadDoc{}, store.Record{}, missing
	}
	rec, err := s.records.Get(ctx, uploadKey(id))
	if errors.Is(err, store.ErrNotFound) {
		return uploadDoc{}, store.Record{}, missing
	}
	if err != nil {
		return uploadDoc{}, store.Record{}, fmt.Errorf("files: get upload %s: %w", id, err)
	}
	u, err := decodeUpload(rec)
	if err != nil {
		return uploadDoc{}, store.Record{}, err
	}
	if !p.CanAccessTeam(u.Team) {
		return uploadDoc{}, store.Record{}, missing
	}
	return u, rec, nil
}

func decodeUpload(rec store.Record) (uploadDoc, error) {
	var u uploadDoc
	if err := json.Unmarshal(rec.Body, &u); err != nil {
		return u, fmt.Errorf("files: decode upload %s: %w", rec.Key.PK, err)
	}
	u.partsCounted, u.bytesCounted = rec.Counters[counterParts], rec.Counters[counterBytes]
	return u, nil
}

// checkPending refuses work on an upload that no longer takes it.
func checkPending(u uploadDoc, status string) error {
	switch status {
	case uploadPending:
		return nil
	case uploadCompleted:
		return api.Conflict("Upload %s is already completed.", u.ID)
	case uploadCancelled:
		return api.Conflict("Upload %s was cancelled.", u.ID)
	}
	return api.Conflict("Upload %s expired at %s; create a new upload.", u.ID, u.expiresAt().UTC().Format(time.RFC3339))
}

// partRefusal explains a conditional write to upload id that failed: the
// upload stopped taking parts (409), or else the refusal format describes
// (400, naming param).
func (s *Service) partRefusal(ctx context.Context, id, param, format string, args ...any) error {
	rec, err := s.records.Get(ctx, uploadKey(id))
	if errors.Is(err, store.ErrNotFound) {
		return api.Conflict("Upload %s stopped taking parts while this one arrived.", id)
	}
	if err != nil {
		return fmt.Errorf("files: get upload %s: %w", id, err)
	}
	u, err := decodeUpload(rec)
	if err != nil {
		return err
	}
	if err := checkPending(u, u.status(rec.Status, s.now())); err != nil {
		return err
	}
	return api.InvalidValue(param, format, args...)
}

// AddPart streams one part of upload uploadID into its own blob object and
// records it: StagePart, then Commit.
func (s *Service) AddPart(ctx context.Context, p auth.Principal, uploadID string, c Content) (UploadPart, error) {
	sp, err := s.StagePart(ctx, p, uploadID, c)
	if err != nil {
		return UploadPart{}, err
	}
	return sp.Commit(ctx)
}

// StagedPart is a part's bytes in the blob store, their room taken in the
// upload, not yet one of its parts: Commit makes it one, Discard removes it.
type StagedPart struct {
	s    *Service
	u    uploadDoc
	part partDoc
	room *partBudget
}

// StagePart streams one part of upload uploadID into its own blob object.
// Room for the part's bytes is taken from the upload's declared bytes block
// by block, atomically, before each block is stored: parts arriving at
// once cannot add up to more than the upload was created for.
func (s *Service) StagePart(ctx context.Context, p auth.Principal, uploadID string, c Content) (*StagedPart, error) {
	u, rec, err := s.loadUpload(ctx, p, uploadID)
	if err != nil {
		return nil, err
	}
	now := s.now()
	if err := checkPending(u, u.status(rec.Status, now)); err != nil {
		return nil, err
	}
	// Early answers for the common refusals; the conditional writes are
	// what guarantee them.
	if u.partsCounted >= MaxParts {
		return nil, api.InvalidValue(fieldData, "Upload %s already has %d parts, the most one upload may have.", u.ID, MaxParts)
	}
	remaining := u.Bytes - u.bytesCounted
	if remaining <= 0 {
		return nil, api.InvalidValue(fieldData, "The parts of upload %s already hold all %d bytes it was created for.", u.ID, u.Bytes)
	}
	body := bufio.NewReaderSize(c.Body, readBufferSize)
	if _, err := body.Peek(1); err == io.EOF {
		return nil, api.InvalidValue(fieldData, "The part is empty.")
	} else if err != nil {
		return nil, err
	}
	sp := &StagedPart{s: s, u: u, part: partDoc{ID: ids.New(ids.Part), Created: now.UnixNano()}, room: &partBudget{s: s, u: u}}
	sp.part.Key = "uploads/" + u.ID + "/" + sp.part.ID
	limit := min(MaxPartBytes, remaining)
	lr := &limitReader{r: body, max: limit, tooBig: func() error {
		if remaining < MaxPartBytes {
			return api.InvalidValue(fieldData, "This part would take upload %s past the %d bytes it was created for.", u.ID, u.Bytes)
		}
		return api.TooLarge("A part may be at most %d bytes.", MaxPartBytes)
	}}
	n, err := s.blobs.Put(ctx, sp.part.Key, newReservingReader(ctx, lr, sp.room, limit))
	if err != nil {
		// A failed Put stores nothing.
		sp.room.release(context.WithoutCancel(ctx))
		return nil, uploadError(err)
	}
	sp.part.Size = n
	return sp, nil
}

// Commit records the part in its upload, provided the upload is still
// pending and has room for another part, or else discards it.
func (sp *StagedPart) Commit(ctx context.Context) (UploadPart, error) {
	if err := sp.s.recordPart(ctx, sp.u, sp.part); err != nil {
		sp.Discard(ctx)
		return UploadPart{}, err
	}
	return UploadPart{ID: sp.part.ID, Object: "upload.part", CreatedAt: time.Unix(0, sp.part.Created).Unix(), UploadID: sp.u.ID}, nil
}

// Discard removes a staged part's bytes and gives their room in the upload
// back. It cleans up after a refusal, so it logs rather than returns its
// own failures, and carries on if ctx has ended.
func (sp *StagedPart) Discard(ctx context.Context) {
	ctx = context.WithoutCancel(ctx)
	sp.s.deleteBlobs(ctx, []Part{{Key: sp.part.Key}})
	sp.room.release(ctx)
}

// recordPart adds a stored part, whose bytes are already counted, to its
// upload: atomically with the part counter, provided the upload is still
// pending and has room for another part.
func (s *Service) recordPart(ctx context.Context, u uploadDoc, part partDoc) error {
	body, err := json.Marshal(part)
	if err != nil {
		return fmt.Errorf("files: encode part: %w", err)
	}
	err = s.records.Transact(ctx, []store.Write{
		{Kind: store.WriteAdd, Record: store.Record{Key: uploadKey(u.ID), Counters: map[string]int64{counterParts: 1}},
			Cond: store.Cond{StatusIn: []string{uploadPending}, AtMost: map[string]int64{counterParts: MaxParts - 1}}},
		{Kind: store.WritePut, Record: store.Record{Key: partKey(u.ID, part.ID), Body: body, ExpiresAt: u.expiresAt().Add(recordGrace)},
			Cond: store.Cond{Absent: true}},
	})
	if errors.Is(err, store.ErrConditionFailed) {
		return s.partRefusal(ctx, u.ID, fieldData, "Upload %s already has %d parts, the most one upload may have.", u.ID, MaxParts)
	}
	if err != nil {
		return fmt.Errorf("files: record part of %s: %w", u.ID, err)
	}
	return nil
}

// uploadParts reads every part record of an upload.
func (s *Service) uploadParts(ctx context.Context, uploadID string) ([]partDoc, error) {
	var parts []partDoc
	q := store.Query{PK: uploadPrefix + uploadID, SKPrefix: partPrefix, Limit: queryPage}
	for {
		page, err := s.records.Query(ctx, q)
		if err != nil {
			return nil, fmt.Errorf("files: parts of %s: %w", uploadID, err)
		}
		for _, rec := range page.Records {
			var p partDoc
			if err := json.Unmarshal(rec.Body, &p); err != nil {
				return nil, fmt.Errorf("files: decode part %s/%s: %w", rec.Key.PK, rec.Key.SK, err)
			}
			parts = append(parts, p)
		}
		if !page.More || len(page.Records) == 0 {
			return parts, nil
		}
		q.After = page.Records[len(page.Records)-1].Key.SK
	}
}

// CompleteUpload makes the listed parts, in that order, the file. Their
// bytes must add up to the upload's; md5 (32 hex digits, or "" for none)
// and, for a batch file, every line are checked in one streaming pass
// across the parts. Unlisted parts are deleted.
func (s *Service) CompleteUpload(ctx context.Context, p auth.Principal, uploadID string, partIDs []string, md5sum string) (Upload, error) {
	if len(partIDs) == 0 || len(partIDs) > MaxParts {
		return Upload{}, api.InvalidValue("part_ids", "Invalid part_ids: list 1 to %d part ids, in file order.", MaxParts)
	}
	wantMD5 := strings.ToLower(md5sum)
	if b, err := hex.DecodeString(wantMD5); md5sum != "" && (err != nil || len(b) != md5.Size) {
		return Upload{}, api.InvalidValue("md5", "Invalid md5 %s: expected 32 hexadecimal digits.", api.Quote(md5sum))
	}
	u, rec, err := s.loadUpload(ctx, p, uploadID)
	if err != nil {
		return Upload{}, err
	}
	if err := checkPending(u, u.status(rec.Status, s.now())); err != nil {
		return Upload{}, err
	}
	manifest, err := s.manifest(ctx, u, partIDs)
	if err != nil {
		return Upload{}, err
	}
	if wantMD5 != "" || u.Purpose == PurposeBatch {
		if err := s.verify(ctx, u, manifest, wantMD5); err != nil {
			return Upload{}, err
		}
	}
	fileExpiry := time.Duration(u.FileExpiry) * time.Second
	if fileExpiry == 0 && u.Purpose == PurposeBatch {
		fileExpiry = DefaultBatchExpiry
	}
	// The file keeps the bytes the upload counted.
	f, writes, err := s.newFileWrites(NewFile{
		Team: u.Team, Filename: u.Filename, Purpose: u.Purpose, ContentType: u.MimeType,
		Provider: defaultProvider, Parts: manifest, ExpiresAfter: fileExpiry,
	}, u.Counted)
	if err != nil {
		return Upload{}, err
	}
	u.FileID, u.FileObject = f.ID, &f.File
	done, err := endWrites(u, rec.Version, uploadCompleted, store.IndexKey{})
	if err != nil {
		return Upload{}, err
	}
	if err := s.records.Transact(ctx, append(writes, done...)); err != nil {
		if errors.Is(err, store.ErrConditionFailed) {
			return Upload{}, api.Conflict("Upload %s changed while completing (it was completed or cancelled meanwhile).", u.ID)
		}
		return Upload{}, fmt.Errorf("files: complete upload %s: %w", u.ID, err)
	}
	// The file owns the listed parts' objects now; the rest go, and the part
	// records have served their purpose.
	keep := make(map[string]bool, len(manifest))
	for _, p := range manifest {
		keep[p.Key] = true
	}
	if err := s.purgeParts(context.WithoutCancel(ctx), u.ID, keep); err != nil {
		slog.WarnContext(ctx, "files: completed upload left part records behind", "upload", u.ID, "error", err)
	}
	return u.object(uploadCompleted), nil
}

// manifest turns part_ids into the file's parts, in order, checking that
// each part is the upload's, listed once, and that they add up to its bytes.
func (s *Service) manifest(ctx context.Context, u uploadDoc, partIDs []string) ([]Part, error) {
	stored, err := s.uploadParts(ctx, u.ID)
	if err != nil {
		return nil, err
	}
	byID := make(map[string]partDoc, len(stored))
	for _, p := range stored {
		byID[p.ID] = p
	}
	seen := make(map[string]bool, len(partIDs))
	out := make([]Part, 0, len(partIDs))
	var total int64
	for _, id := range partIDs {
		p, ok := byID[id]
		switch {
		case seen[id]:
			return nil, api.InvalidValue("part_ids", "part_ids lists %s more than once.", api.Quote(id))
		case !ok:
			return nil, api.InvalidValue("part_ids", "Upload %s has no part %s.", u.ID, api.Quote(id))
		}
		seen[id] = true
		out = append(out, Part{Key: p.Key, Size: p.Size})
		total += p.Size
	}
	if total != u.Bytes {
		return nil, api.InvalidValue("part_ids", "The listed parts hold %d bytes, but upload %s was created for %d bytes.", total, u.ID, u.Bytes)
	}
	return out, nil
}

// verify streams the parts once, checking md5 (if wanted) and, for a batch
// file, every line.
func (s *Service) verify(ctx context.Context, u uploadDoc, parts []Part, wantMD5 string) error {
	rc, err := s.Open(ctx, Stored{File: File{ID: u.ID, Bytes: u.Bytes}, Parts: parts}, 0, -1)
	if err != nil {
		return err
	}
	defer rc.Close()
	sum := md5.New()
	var dst io.Writer = sum
	var v *batchinput.Validator
	if u.Purpose == PurposeBatch {
		v = batchinput.NewValidator(batchinput.Options{MaxLineBytes: s.opts.MaxLineBytes})
		dst = io.MultiWriter(v, sum)
	}
	if _, err := io.CopyBuffer(dst, rc, make([]byte, copyBufferSize)); err != nil {
		return uploadError(err)
	}
	if v != nil {
		if err := batchError(v.Close()); err != nil {
			return err
		}
	}
	if got := hex.EncodeToString(sum.Sum(nil)); wantMD5 != "" && got != wantMD5 {
		return api.InvalidValue("md5", "The parts, in the order given, have MD5 %s, not %s.", got, wantMD5)
	}
	return nil
}

// purgeParts deletes an upload's part records, and the objects of parts not
// in keep.
func (s *Service) purgeParts(ctx context.Context, uploadID string, keep map[string]bool) error {
	parts, err := s.uploadParts(ctx, uploadID)
	if err != nil {
		return err
	}
	for _, p := range parts {
		if !keep[p.Key] {
			if err := s.blobs.Delete(ctx, p.Key); err != nil {
				return fmt.Errorf("files: delete part %s: %w", p.Key, err)
			}
		}
		if err := s.records.Delete(ctx, partKey(uploadID, p.ID), store.Cond{}); err != nil {
			return fmt.Errorf("files: delete part record %s: %w", p.ID, err)
		}
	}
	return nil
}

// CancelUpload cancels a pending upload: its bytes leave the team's storage
// usage at once, and its parts go. Should deleting them fail, the upload
// stays due in the expiry index and the sweep finishes it.
func (s *Service) CancelUpload(ctx context.Context, p auth.Principal, uploadID string) (Upload, error) {
	u, rec, err := s.loadUpload(ctx, p, uploadID)
	if err != nil {
		return Upload{}, err
	}
	now := s.now()
	if err := checkPending(u, u.status(rec.Status, now)); err != nil {
		return Upload{}, err
	}
	writes, err := endWrites(u, rec.Version, uploadCancelled, store.IndexKey{PK: expiresPK, SK: expirySK(now, u.ID)})
	if err != nil {
		return Upload{}, err
	}
	err = s.records.Transact(ctx, writes)
	if errors.Is(err, store.ErrConditionFailed) {
		return Upload{}, api.Conflict("Upload %s changed while cancelling (it was completed or cancelled meanwhile).", u.ID)
	}
	if err != nil {
		return Upload{}, fmt.Errorf("files: cancel upload %s: %w", u.ID, err)
	}
	if err := s.purgeParts(context.WithoutCancel(ctx), u.ID, nil); err != nil {
		slog.WarnContext(ctx, "files: cancel left parts for the sweep", "upload", u.ID, "error", err)
	}
	return u.object(uploadCancelled), nil
}

// sweepUpload removes the parts and the record of an upload that expired or
// was cancelled. An expired one is first marked expired, conditionally (and
// its bytes given back to the team's usage in the same write), so a
// completion racing the sweep wins or loses cleanly.
func (s *Service) sweepUpload(ctx context.Context, rec store.Record, now time.Time) error {
	u, err := decodeUpload(rec)
	if err != nil {
		return err
	}
	switch u.status(rec.Status, now) {
	case uploadPending, uploadCompleted:
		return nil // not due, or no longer in need of a sweep
	case uploadExpired:
		if rec.Status == uploadPending {
			writes, err := endWrites(u, rec.Version, uploadExpired, rec.GSI2)
			if err != nil {
				return err
			}
			err = s.records.Transact(ctx, writes)
			if errors.Is(err, store.ErrConditionFailed) {
				return nil // completed or cancelled meanwhile: its own path cleans up
			}
			if err != nil {
				return fmt.Errorf("files: expire upload %s: %w", u.ID, err)
			}
		}
	}
	if err := s.purgeParts(ctx, u.ID, nil); err != nil {
		return err
	}
	if err := s.records.Delete(ctx, uploadKey(u.ID), store.Cond{}); err != nil {
		return fmt.Errorf("files: delete upload %s: %w", u.ID, err)
	}
	return nil
}
