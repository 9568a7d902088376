package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"time"
)

// Targets for large files, from the issues.
const (
	uploadRSSLimitMB     = 64
	uploadThroughputFrac = 0.5
)

// uploadFigures is the upload scenario's Extra.
type uploadFigures struct {
	SizeMB int           `json:"size_mb"`
	Dir    string        `json:"disk_dir"`
	Rounds []uploadRound `json:"rounds"`
	// Medians over rounds (RSS growth: the largest).
	DiskWriteMBps     float64 `json:"disk_write_mbps"`
	DiskWriteSyncMBps float64 `json:"disk_write_fsync_mbps"`
	DiskReadMBps      float64 `json:"disk_read_mbps"`
	UploadMBps        float64 `json:"upload_mbps,omitempty"`
	DownloadMBps      float64 `json:"download_mbps,omitempty"`
	UploadRSSMB       float64 `json:"upload_rss_growth_mb,omitempty"`
	DownloadRSSMB     float64 `json:"download_rss_growth_mb,omitempty"`
}

// uploadRound is one round: the disk baseline, then sluice when measured.
type uploadRound struct {
	DiskWriteMBps     float64 `json:"disk_write_mbps"`
	DiskWriteSyncMBps float64 `json:"disk_write_fsync_mbps"`
	DiskReadMBps      float64 `json:"disk_read_mbps"`
	UploadMBps        float64 `json:"upload_mbps,omitempty"`
	DownloadMBps      float64 `json:"download_mbps,omitempty"`
	UploadRSSMB       float64 `json:"upload_rss_growth_mb,omitempty"`
	DownloadRSSMB     float64 `json:"download_rss_growth_mb,omitempty"`
}

func (u *uploadFigures) print(w io.Writer) {
	fmt.Fprintf(w, "   %d MB on %s, medians over %d rounds:\n", u.SizeMB, u.Dir, len(u.Rounds))
	fmt.Fprintf(w, "   direct disk write %.0f MB/s (page cache), %.0f MB/s with fsync; read back %.0f MB/s\n",
		u.DiskWriteMBps, u.DiskWriteSyncMBps, u.DiskReadMBps)
	if u.UploadMBps > 0 {
		fmt.Fprintf(w, "   sluice upload %.0f MB/s (RSS +%.1f MB), download %.0f MB/s (RSS +%.1f MB)\n",
			u.UploadMBps, u.UploadRSSMB, u.DownloadMBps, u.DownloadRSSMB)
	}
}

// runUpload measures a large upload and download through sluice against
// writing and reading the same bytes on the same disk directly.
func (b *bench) runUpload(ctx context.Context) *scenarioReport {
	size := int64(b.cfg.uploadMB) << 20
	rep := newScenarioReport("upload", fmt.Sprintf("%d MB via POST /v1/files (multipart) and GET /v1/files/{id}/content, vs a direct disk write", b.cfg.uploadMB))
	rssCheck := fmt.Sprintf("%d MB upload: RSS growth ≤ %d MB", b.cfg.uploadMB, uploadRSSLimitMB)
	thrCheck := fmt.Sprintf("%d MB upload: throughput ≥ %.0f%% of a direct disk write (fsync)", b.cfg.uploadMB, 100*uploadThroughputFrac)

	dir := b.cfg.outDir
	var files *filesClient
	if b.sluice == nil {
		rep.Skipped["sluice"] = b.sluiceSkip
	} else {
		dir = b.sluice.dataDir
		fc := filesClient{client: b.client, base: b.sluice.base, key: b.sluice.key}
		if err := fc.probeFiles(ctx, b.cfg.uploadPurpose); err != nil {
			rep.exclude("sluice", err)
		} else {
			files = &fc
		}
	}
	fig := &uploadFigures{SizeMB: b.cfg.uploadMB, Dir: dir}
	rep.Extra = fig
	data := newPattern(uint64(size))
	for round := 1; round <= b.cfg.rounds && ctx.Err() == nil; round++ {
		var r uploadRound
		if err := diskBaseline(filepath.Join(dir, "bench-direct.bin"), size, data, &r); err != nil {
			rep.Failed["direct"] = err.Error()
			break
		}
		if files != nil {
			if err := b.uploadRound(ctx, *files, size, data, &r); err != nil {
				rep.Failed["sluice"] = err.Error()
				files = nil
			}
		}
		fig.Rounds = append(fig.Rounds, r)
		b.logf("  %-18s round %d disk %.0f MB/s (fsync %.0f)  sluice up %.0f MB/s (+%.1f MB RSS) down %.0f MB/s",
			"upload", round, r.DiskWriteMBps, r.DiskWriteSyncMBps, r.UploadMBps, r.UploadRSSMB, r.DownloadMBps)
	}
	var dw, ds, dr, up, down []float64
	for _, r := range fig.Rounds {
		dw, ds, dr = append(dw, r.DiskWriteMBps), append(ds, r.DiskWriteSyncMBps), append(dr, r.DiskReadMBps)
		if r.UploadMBps > 0 {
			up, down = append(up, r.UploadMBps), append(down, r.DownloadMBps)
			fig.UploadRSSMB = max(fig.UploadRSSMB, r.UploadRSSMB)
			fig.DownloadRSSMB = max(fig.DownloadRSSMB, r.DownloadRSSMB)
		}
	}
	fig.DiskWriteMBps, fig.DiskWriteSyncMBps, fig.DiskReadMBps = median(dw), median(ds), median(dr)
	fig.UploadMBps, fig.DownloadMBps = median(up), median(down)

	if len(up) == 0 {
		rep.Checks = append(rep.Checks, notMeasured(rep, rssCheck), notMeasured(rep, thrCheck))
		return rep
	}
	st := statusPass
	if fig.UploadRSSMB > uploadRSSLimitMB || fig.DownloadRSSMB > uploadRSSLimitMB {
		st = statusFail
	}
	rep.Checks = append(rep.Checks, check{Scenario: rep.Name, Name: rssCheck, Status: st,
		Detail: fmt.Sprintf("upload +%.1f MB, download +%.1f MB (largest over rounds)", fig.UploadRSSMB, fig.DownloadRSSMB)})
	st = statusPass
	if fig.UploadMBps < uploadThroughputFrac*fig.DiskWriteSyncMBps {
		st = statusFail
	}
	rep.Checks = append(rep.Checks, check{Scenario: rep.Name, Name: thrCheck, Status: st,
		Detail: fmt.Sprintf("%.0f%%: upload %.0f MB/s, disk %.0f MB/s with fsync (%.0f without)",
			100*fig.UploadMBps/fig.DiskWriteSyncMBps, fig.UploadMBps, fig.DiskWriteSyncMBps, fig.DiskWriteMBps)})
	return rep
}

// notMeasured is a check that could not run, saying why.
func notMeasured(rep *scenarioReport, name string) check {
	if reason, ok := rep.Failed["sluice"]; ok {
		return check{Scenario: rep.Name, Name: name, Status: statusError, Detail: "sluice: " + reason}
	}
	reason, ok := rep.Skipped["sluice"]
	if !ok {
		reason = "not measured"
	}
	return check{Scenario: rep.Name, Name: name, Status: statusSkipped, Detail: "sluice: " + reason}
}

// diskBaseline writes size bytes to path (timing the write, then the
// fsync), reads them back, and removes the file.
func diskBaseline(path string, size int64, data io.Reader, r *uploadRound) error {
	buf := make([]byte, 1<<20)
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("disk baseline: %w", err)
	}
	defer os.Remove(path)
	start := time.Now()
	_, err = io.CopyBuffer(f, io.LimitReader(data, size), buf)
	wrote := time.Since(start)
	if err == nil {
		err = f.Sync()
	}
	synced := time.Since(start)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("disk baseline write: %w", err)
	}
	f, err = os.Open(path)
	if err != nil {
		return fmt.Errorf("disk baseline: %w", err)
	}
	defer f.Close()
	start = time.Now()
	n, err := io.CopyBuffer(io.Discard, f, buf)
	if err != nil {
		return fmt.Errorf("disk baseline read: %w", err)
	}
	r.DiskWriteMBps, r.DiskWriteSyncMBps, r.DiskReadMBps = mbps(size, wrote), mbps(size, synced), mbps(n, time.Since(start))
	return nil
}

// uploadRound uploads and downloads size bytes through sluice, measuring
// throughput and sluice's peak RSS above its resident size before each.
func (b *bench) uploadRound(ctx context.Context, f filesClient, size int64, data io.Reader, r *uploadRound) error {
	p := b.sluice.child.proc
	if err := p.resetPeak(); err != nil {
		return err
	}
	before, err := p.sample()
	if err != nil {
		return err
	}
	up := crc32.NewIEEE()
	start := time.Now()
	status, body, err := f.upload(ctx, b.cfg.uploadPurpose, "bench-upload.bin", size, io.TeeReader(data, up))
	elapsed := time.Since(start)
	if err != nil {
		return err
	}
	if status/100 != 2 {
		return fmt.Errorf("POST /v1/files (%d MB) answers %d: %s", size>>20, status, clip(body))
	}
	after, err := p.sample()
	if err != nil {
		return err
	}
	var fa fileAnswer
	if err := json.Unmarshal(body, &fa); err != nil || fa.ID == "" {
		return fmt.Errorf("POST /v1/files: no file id in %s", clip(body))
	}
	defer f.delete(ctx, fa.ID)
	r.UploadMBps, r.UploadRSSMB = mbps(size, elapsed), mb(max(0, after.HWM-before.RSS))

	if err := p.resetPeak(); err != nil {
		return err
	}
	if before, err = p.sample(); err != nil {
		return err
	}
	down := crc32.NewIEEE()
	start = time.Now()
	status, n, err := f.download(ctx, fa.ID, down)
	elapsed = time.Since(start)
	if err != nil {
		return err
	}
	if after, err = p.sample(); err != nil {
		return err
	}
	switch {
	case status != 200:
		return fmt.Errorf("GET /v1/files/%s/content answers %d", fa.ID, status)
	case n != size || down.Sum32() != up.Sum32():
		return errors.New("downloaded content differs from the upload")
	}
	r.DownloadMBps, r.DownloadRSSMB = mbps(n, elapsed), mb(max(0, after.HWM-before.RSS))
	return nil
}
