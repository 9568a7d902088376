package files_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"

	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/files"
	"github.com/sluice-gateway/sluice/pkg/gateway/gatewaytest"
)

// quotaTeam creates a team whose files may hold at most quota bytes, and a
// key for it.
func quotaTeam(t *testing.T, g *gatewaytest.Gateway, quota int64) (team, key string) {
	t.Helper()
	team = g.NewTeam(map[string]any{"max_storage_bytes": quota})
	return team, g.NewKey(team, nil)
}

func wantUsage(t *testing.T, g *gatewaytest.Gateway, team string, want int64) {
	t.Helper()
	got, err := g.Services.Files.Usage(context.Background(), team)
	if err != nil || got != want {
		t.Errorf("team %s's storage usage: %d, %v; want %d", team, got, err, want)
	}
}

var quotaRefusal = apiErr{Status: http.StatusRequestEntityTooLarge, Code: "storage_quota_exceeded", Message: "max_storage_bytes"}

func TestTeamInfoShowsStorageQuota(t *testing.T) {
	t.Parallel()
	gatewaytest.Run(t, gatewaytest.Options{}, func(t *testing.T, g *gatewaytest.Gateway) {
		team, key := quotaTeam(t, g, 1000)
		var info struct {
			TeamInfo struct {
				MaxStorageBytes *int64 `json:"max_storage_bytes"`
			} `json:"team_info"`
		}
		r := g.Do("GET", "/team/info", key, nil)
		json.Unmarshal(r.Body, &info)
		if r.Status != 200 || info.TeamInfo.MaxStorageBytes == nil || *info.TeamInfo.MaxStorageBytes != 1000 {
			t.Errorf("/team/info of %s: %d %s; want max_storage_bytes 1000", team, r.Status, r.Body)
		}
		r = g.Do("POST", "/team/new", g.MasterKey, map[string]any{"max_storage_bytes": -1})
		checkErr(t, responseErr(t, r), apiErr{Status: 400, Code: "invalid_value", Param: "max_storage_bytes"})
	})
}

// Uploads past a team's quota are refused before their bytes are stored,
// whether the size is declared (Uploads API) or learnt while streaming.
func TestStorageQuotaRefusesWhatDoesNotFit(t *testing.T) {
	t.Parallel()
	gatewaytest.Run(t, gatewaytest.Options{}, func(t *testing.T, g *gatewaytest.Gateway) {
		ctx := context.Background()
		team, key := quotaTeam(t, g, 1000)
		c := sdk(g, key)
		first := upload(t, c, strings.Repeat("a", 600), "a.txt", openai.FilePurposeUserData)
		wantUsage(t, g, team, 600)
		for _, form := range [][]string{
			{"purpose", "user_data", "@file", strings.Repeat("b", 401)},
			{"@file", strings.Repeat("b", 401), "purpose", "user_data"},
		} {
			checkErr(t, responseErr(t, postForm(g, "/v1/files", key, form...)), quotaRefusal)
		}
		_, err := c.Uploads.New(ctx, openai.UploadNewParams{Bytes: 401, Filename: "u.txt", MimeType: "text/plain", Purpose: openai.FilePurposeUserData})
		wantErr(t, err, quotaRefusal)
		_, err = c.Uploads.New(ctx, openai.UploadNewParams{Bytes: 1001, Filename: "u.txt", MimeType: "text/plain", Purpose: openai.FilePurposeUserData})
		wantErr(t, err, quotaRefusal)
		wantUsage(t, g, team, 600)
		if ids := listIDs(t, c); !cmp.Equal(ids, []string{first.ID}) {
			t.Errorf("files after refusals: %v; want only %s", ids, first.ID)
		}
		// What fits exactly is taken; then nothing more fits.
		u, err := c.Uploads.New(ctx, openai.UploadNewParams{Bytes: 400, Filename: "u.txt", MimeType: "text/plain", Purpose: openai.FilePurposeUserData})
		if err != nil {
			t.Fatal(err)
		}
		wantUsage(t, g, team, 1000)
		checkErr(t, responseErr(t, postForm(g, "/v1/files", key, "purpose", "user_data", "@file", "x")), quotaRefusal)
		// The upload's parts need no more room: it has its declared bytes.
		p, err := c.Uploads.Parts.New(ctx, u.ID, openai.UploadPartNewParams{Data: strings.NewReader(strings.Repeat("u", 400))})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Uploads.Complete(ctx, u.ID, openai.UploadCompleteParams{PartIDs: []string{p.ID}}); err != nil {
			t.Fatal(err)
		}
		wantUsage(t, g, team, 1000)
		// Other teams, and the admin, are not bound by it.
		_, otherKey := g.TeamKey()
		upload(t, sdk(g, otherKey), strings.Repeat("o", 2000), "o.txt", openai.FilePurposeUserData)
		upload(t, sdk(g, g.MasterKey), strings.Repeat("m", 2000), "m.txt", openai.FilePurposeUserData)
	})
}

// A file's or an upload's bytes leave the usage when it ends: deleted,
// cancelled, or expired and swept.
func TestStorageQuotaIsGivenBack(t *testing.T) {
	t.Parallel()
	clk := &clock{}
	gatewaytest.Run(t, gatewaytest.Options{Now: clk.Now}, func(t *testing.T, g *gatewaytest.Gateway) {
		ctx := context.Background()
		team, key := quotaTeam(t, g, 1000)
		c := sdk(g, key)
		a := upload(t, c, strings.Repeat("a", 600), "a.txt", openai.FilePurposeUserData)
		u, err := c.Uploads.New(ctx, openai.UploadNewParams{Bytes: 400, Filename: "u.txt", MimeType: "text/plain", Purpose: openai.FilePurposeUserData})
		if err != nil {
			t.Fatal(err)
		}
		wantUsage(t, g, team, 1000)

		if _, err := c.Files.Delete(ctx, a.ID); err != nil {
			t.Fatal(err)
		}
		wantUsage(t, g, team, 400)
		upload(t, c, strings.Repeat("b", 600), "b.txt", openai.FilePurposeUserData)

		if _, err := c.Uploads.Cancel(ctx, u.ID); err != nil {
			t.Fatal(err)
		}
		wantUsage(t, g, team, 600)

		// An expiring file and an upload left to expire fill the rest.
		expiring, err := c.Files.New(ctx, openai.FileNewParams{
			File: openai.File(strings.NewReader(strings.Repeat("e", 200)), "e.txt", "text/plain"), Purpose: openai.FilePurposeUserData,
			ExpiresAfter: openai.FileNewParamsExpiresAfter{Seconds: 3600},
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Uploads.New(ctx, openai.UploadNewParams{Bytes: 200, Filename: "x.txt", MimeType: "text/plain", Purpose: openai.FilePurposeUserData}); err != nil {
			t.Fatal(err)
		}
		wantUsage(t, g, team, 1000)
		clk.Advance(2 * time.Hour)
		defer clk.Advance(-2 * time.Hour)
		res, err := g.Services.Files.Sweep(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(files.SweepResult{Files: 1, Uploads: 2}, res); diff != "" {
			t.Errorf("sweep (-want +got):\n%s", diff)
		}
		wantUsage(t, g, team, 600)
		noSuchObject(t, g, "files/"+expiring.ID)
		// Sweeping again gives nothing back twice.
		if _, err := g.Services.Files.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		wantUsage(t, g, team, 600)
		upload(t, c, strings.Repeat("c", 400), "c.txt", openai.FilePurposeUserData)
		wantUsage(t, g, team, 1000)
	})
}

// Uploads racing for the last room cannot take the team past its quota:
// exactly as many are stored as fit.
func TestStorageQuotaHoldsUnderConcurrentUploads(t *testing.T) {
	t.Parallel()
	gatewaytest.Run(t, gatewaytest.Options{}, func(t *testing.T, g *gatewaytest.Gateway) {
		team, key := quotaTeam(t, g, 1000)
		const uploads, size = 8, 300
		statuses := make([]int, uploads)
		var wg sync.WaitGroup
		for i := range uploads {
			wg.Go(func() {
				body, ct := multipartBody("purpose", "user_data", "@file", strings.Repeat("q", size))
				req, _ := http.NewRequest("POST", g.URL+"/v1/files", bytes.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+key)
				req.Header.Set("Content-Type", ct)
				resp, err := g.Client.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				statuses[i] = resp.StatusCode
			})
		}
		wg.Wait()
		count := map[int]int{}
		for _, s := range statuses {
			count[s]++
		}
		if diff := cmp.Diff(map[int]int{200: 3, 413: 5}, count); diff != "" {
			t.Errorf("answers to %d concurrent uploads of %d bytes under a quota of 1000 (-want +got):\n%s", uploads, size, diff)
		}
		wantUsage(t, g, team, 3*size)
		if ids := listIDs(t, sdk(g, key)); len(ids) != 3 {
			t.Errorf("files stored: %v; want 3", ids)
		}
	})
}

// An upload a crash interrupted leaves a hold on the team's quota; the
// sweep gives it back once it is due, and deletes the bytes.
func TestSweepUndoesTheHoldOfAnInterruptedUpload(t *testing.T) {
	t.Parallel()
	clk := &clock{}
	gatewaytest.Run(t, gatewaytest.Options{Now: clk.Now}, func(t *testing.T, g *gatewaytest.Gateway) {
		ctx := context.Background()
		svc := g.Services.Files
		quota := int64(1000)
		p := auth.Principal{TeamID: "crashing", Team: &auth.Team{TeamID: "crashing", MaxStorageBytes: &quota}}
		// Staged and never committed nor discarded: the process died.
		crashed, err := svc.Stage(ctx, p, "user_data", files.Content{Filename: "a.txt", Body: strings.NewReader(strings.Repeat("a", 700))})
		if err != nil {
			t.Fatal(err)
		}
		late, err := svc.Stage(ctx, p, "user_data", files.Content{Filename: "b.txt", Body: strings.NewReader(strings.Repeat("b", 300))})
		if err != nil {
			t.Fatal(err)
		}
		wantUsage(t, g, "crashing", 1000)
		if _, err := svc.Upload(ctx, p, files.FileParams{Purpose: "user_data"}, files.Content{Body: strings.NewReader("x")}); err == nil {
			t.Fatal("an upload past the holds succeeded")
		}
		if res, err := svc.Sweep(ctx); err != nil || res != (files.SweepResult{}) {
			t.Fatalf("sweep before the holds are due: %+v, %v", res, err)
		}
		clk.Advance(25 * time.Hour)
		defer clk.Advance(-25 * time.Hour)
		res, err := svc.Sweep(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(files.SweepResult{Holds: 2}, res); diff != "" {
			t.Errorf("sweep (-want +got):\n%s", diff)
		}
		wantUsage(t, g, "crashing", 0)
		noSuchObject(t, g, "files/"+crashed.ID())
		noSuchObject(t, g, "files/"+late.ID())
		// An upload that outlived its hold cannot become a file.
		if _, err := late.Commit(ctx, files.FileParams{Purpose: "user_data"}); err == nil {
			t.Error("a staged upload whose hold was swept committed")
		}
		wantUsage(t, g, "crashing", 0)
		page, _, err := svc.List(ctx, p, files.ListParams{Limit: 10})
		if err != nil || len(page) != 0 {
			t.Errorf("files after the sweep: %v, %v; want none", page, err)
		}
		if res, err := svc.Sweep(ctx); err != nil || res != (files.SweepResult{}) {
			t.Errorf("a second sweep: %+v, %v", res, err)
		}
		if _, err := svc.Upload(ctx, p, files.FileParams{Purpose: "user_data"}, files.Content{Body: strings.NewReader(strings.Repeat("c", 1000))}); err != nil {
			t.Errorf("the whole quota after the sweep: %v", err)
		}
	})
}
