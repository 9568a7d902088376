package files

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/sluice-gateway/sluice/pkg/store"
	"github.com/sluice-gateway/sluice/pkg/store/sortkey"
)

// Records layout (ARCHITECTURE §4):
//
//	file        FILE#<id> / FILE     gsi1 OWNER#<team>#FILE / <created>#<id>   gsi2 EXPIRES / <expires>#<id>
//	admin list  FILE#<id> / ALL      gsi1 ALL#FILE / <created>#<id>
//	upload      UPLOAD#<id> / UPLOAD gsi2 EXPIRES / <expires>#<id> (while it holds parts to clean up)
//	upload part UPLOAD#<id> / PART#<part id>
//	usage       USAGE#<team> / STORAGE  counter bytes (teams with a storage quota)
//	hold        HOLD#<file id> / HOLD    gsi2 EXPIRES / <due>#<file id>; counter bytes
//
// One record cannot sit in two gsi1 partitions, so every file has a second,
// small item that places it in the admin's all-files listing; the two are
// written and deleted in one transaction. Times in sort keys are
// sortkey.Time: fixed-width Unix nanoseconds, so byte order is time order and
// files created within one second still page in a stable order.
const (
	filePrefix     = "FILE#"
	fileSK         = "FILE"
	allSK          = "ALL"
	ownerPrefix    = "OWNER#"
	ownerSuffix    = "#FILE"
	allFilesPK     = "ALL#FILE"
	expiresPK      = "EXPIRES"
	uploadPrefix   = "UPLOAD#"
	uploadSK       = "UPLOAD"
	partPrefix     = "PART#"
	statusLive     = "processed"
	statusDeleting = "deleting"
)

func fileKey(id string) store.Key    { return store.Key{PK: filePrefix + id, SK: fileSK} }
func fileAllKey(id string) store.Key { return store.Key{PK: filePrefix + id, SK: allSK} }
func ownerPK(team string) string     { return ownerPrefix + team + ownerSuffix }
func uploadKey(id string) store.Key  { return store.Key{PK: uploadPrefix + id, SK: uploadSK} }
func partKey(upload, part string) store.Key {
	return store.Key{PK: uploadPrefix + upload, SK: partPrefix + part}
}

func listSK(f Stored) string { return sortkey.Time(f.Created) + "#" + f.ID }

func expirySK(t time.Time, id string) string { return sortkey.Time(t) + "#" + id }

// fileDoc is a file record's body.
type fileDoc struct {
	ID          string `json:"id"`
	Team        string `json:"team"`
	Bytes       int64  `json:"bytes"`
	Created     int64  `json:"created_ns"`
	Filename    string `json:"filename"`
	Purpose     string `json:"purpose"`
	ExpiresAt   int64  `json:"expires_ns,omitempty"`
	ContentType string `json:"content_type,omitempty"`
	Provider    string `json:"provider,omitempty"`
	Parts       []Part `json:"parts,omitempty"` // absent from the admin-listing item
	Counted     bool   `json:"counted,omitempty"`
}

// fileRecords builds a file's item and its admin-listing item.
func fileRecords(f Stored) (main, all store.Record, err error) {
	doc := fileDoc{
		ID: f.ID, Team: f.Team, Bytes: f.Bytes, Created: f.Created.UnixNano(), Filename: f.Filename,
		Purpose: f.Purpose, ContentType: f.ContentType, Provider: f.Provider, Parts: f.Parts, Counted: f.counted,
	}
	var storeExpiry time.Time
	var gsi2 store.IndexKey
	if !f.ExpiresAt.IsZero() {
		doc.ExpiresAt = f.ExpiresAt.UnixNano()
		storeExpiry = f.ExpiresAt.Add(recordGrace)
		gsi2 = store.IndexKey{PK: expiresPK, SK: expirySK(f.ExpiresAt, f.ID)}
	}
	body, err := json.Marshal(doc)
	if err != nil {
		return main, all, fmt.Errorf("files: encode %s: %w", f.ID, err)
	}
	doc.Parts = nil
	allBody, err := json.Marshal(doc)
	if err != nil {
		return main, all, fmt.Errorf("files: encode %s: %w", f.ID, err)
	}
	sk := listSK(f)
	main = store.Record{
		Key:       fileKey(f.ID),
		GSI1:      store.IndexKey{PK: ownerPK(f.Team), SK: sk},
		GSI2:      gsi2,
		Status:    statusLive,
		Body:      body,
		ExpiresAt: storeExpiry,
	}
	all = store.Record{
		Key:       fileAllKey(f.ID),
		GSI1:      store.IndexKey{PK: allFilesPK, SK: sk},
		Status:    statusLive,
		Body:      allBody,
		ExpiresAt: storeExpiry,
	}
	return main, all, nil
}

// decodeFile reads a file item (or its admin-listing item, without parts).
func decodeFile(rec store.Record) (Stored, error) {
	var d fileDoc
	if err := json.Unmarshal(rec.Body, &d); err != nil {
		return Stored{}, fmt.Errorf("files: decode %s/%s: %w", rec.Key.PK, rec.Key.SK, err)
	}
	created := time.Unix(0, d.Created)
	f := Stored{
		File: File{
			ID: d.ID, Object: "file", Bytes: d.Bytes, CreatedAt: created.Unix(),
			Filename: d.Filename, Purpose: d.Purpose, Status: "processed",
		},
		Team: d.Team, ContentType: d.ContentType, Provider: d.Provider, Parts: d.Parts, Created: created,
		counted: d.Counted,
	}
	if d.ExpiresAt != 0 {
		f.ExpiresAt = time.Unix(0, d.ExpiresAt)
		exp := f.ExpiresAt.Unix()
		f.File.ExpiresAt = &exp
	}
	return f, nil
}
