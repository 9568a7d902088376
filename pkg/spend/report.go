package spend

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/store"
)

// MaxReportDays bounds the days one report reads (one partition query a day).
const MaxReportDays = 366

// Report is the answer of GET /global/spend/report.
type Report struct {
	Object    string      `json:"object"`
	StartDate string      `json:"start_date"`
	EndDate   string      `json:"end_date"`
	GroupBy   string      `json:"group_by"`
	Data      []ReportRow `json:"data"`
	Total     Totals      `json:"total"`
}

// ReportRow is one group's spend on one day.
type ReportRow struct {
	Date       string `json:"date"`
	Group      string `json:"group"`
	GroupAlias string `json:"group_alias"`
	Totals
}

// Totals are spend, tokens and requests.
type Totals struct {
	Spend        float64 `json:"spend"`
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	Requests     int64   `json:"requests"`
	nanos        int64
}

func (t *Totals) add(counters map[string]int64) {
	t.nanos += counters[counterCost]
	t.Spend = usd(t.nanos)
	t.InputTokens += counters[counterInput]
	t.OutputTokens += counters[counterOutput]
	t.Requests += counters[counterRequests]
}

// Names gives the aliases of keys and teams (auth.Service).
type Names interface {
	KeyInfo(ctx context.Context, p auth.Principal, keyOrToken string) (*auth.KeyInfo, error)
	Team(ctx context.Context, p auth.Principal, id string) (*auth.Team, error)
}

// Reports reads the daily counters.
type Reports struct {
	Records store.Records
	Names   Names
}

// Report sums p's spend (the admin: every team's; a team key: its team's)
// per day and group between two UTC dates, both included.
func (r Reports) Report(ctx context.Context, p auth.Principal, startDate, endDate, groupBy string) (*Report, error) {
	start, err := time.Parse(time.DateOnly, startDate)
	if err != nil {
		return nil, api.InvalidValue("start_date", "start_date must be a date, YYYY-MM-DD.")
	}
	end, err := time.Parse(time.DateOnly, endDate)
	if err != nil {
		return nil, api.InvalidValue("end_date", "end_date must be a date, YYYY-MM-DD.")
	}
	if end.Before(start) {
		return nil, api.InvalidValue("end_date", "end_date must not be before start_date.")
	}
	if days := int(end.Sub(start).Hours()/24) + 1; days > MaxReportDays {
		return nil, api.InvalidValue("end_date", "A report covers at most %d days; this one asks for %d.", MaxReportDays, days)
	}
	if groupBy == "" {
		groupBy = "team"
	}
	kind := map[string]string{"team": "team#", "api_key": "key#", "model": "model#"}[groupBy]
	if kind == "" {
		return nil, api.InvalidValue("group_by", "group_by must be team, api_key or model.")
	}
	prefix := kind
	if !p.Admin {
		prefix += p.TeamID
		if groupBy != "team" {
			prefix += "#"
		}
	}
	rep := &Report{Object: "spend.report", StartDate: startDate, EndDate: endDate, GroupBy: groupBy, Data: []ReportRow{}}
	aliases := map[string]string{}
	for d := start; !d.After(end); d = d.AddDate(0, 0, 1) {
		day := d.Format(time.DateOnly)
		rows := map[string]*ReportRow{}
		q := store.Query{PK: "SPEND#DAY#" + day, SKPrefix: prefix, Limit: 1000}
		for {
			page, err := r.Records.Query(ctx, q)
			if err != nil {
				return nil, fmt.Errorf("spend: read the spend of %s: %w", day, err)
			}
			for _, rec := range page.Records {
				group, ok := groupOf(rec.Key.SK, groupBy, p)
				if !ok {
					continue
				}
				row := rows[group]
				if row == nil {
					row = &ReportRow{Date: day, Group: group}
					rows[group] = row
				}
				row.add(rec.Counters)
				rep.Total.add(rec.Counters)
			}
			if !page.More || len(page.Records) == 0 {
				break
			}
			q.After = page.Records[len(page.Records)-1].Key.SK
		}
		groups := make([]string, 0, len(rows))
		for g := range rows {
			groups = append(groups, g)
		}
		sort.Strings(groups)
		for _, g := range groups {
			row := rows[g]
			row.GroupAlias = r.alias(ctx, groupBy, g, aliases)
			rep.Data = append(rep.Data, *row)
		}
	}
	return rep, nil
}

// groupOf is the group a day record's sort key counts for: "team#<team>",
// "key#<team>#<token>", "model#<team>#<model>". A team key reads its own
// team's exactly (the prefix of "team#a" also matches "team#ab").
func groupOf(sk, groupBy string, p auth.Principal) (string, bool) {
	_, rest, _ := strings.Cut(sk, "#")
	if groupBy == "team" {
		return rest, p.Admin || rest == p.TeamID
	}
	team, group, ok := strings.Cut(rest, "#")
	return group, ok && (p.Admin || team == p.TeamID)
}

// alias is a group's alias: the team's or key's, "" for a model or when
// gone.
func (r Reports) alias(ctx context.Context, groupBy, group string, cache map[string]string) string {
	if r.Names == nil || groupBy == "model" {
		return ""
	}
	if a, ok := cache[group]; ok {
		return a
	}
	admin := auth.Principal{Admin: true, TeamID: auth.AdminTeam}
	var a string
	switch groupBy {
	case "team":
		if t, err := r.Names.Team(ctx, admin, group); err == nil {
			a = t.TeamAlias
		}
	case "api_key":
		if k, err := r.Names.KeyInfo(ctx, admin, group); err == nil {
			a = k.KeyAlias
		}
	}
	cache[group] = a
	return a
}

// Handler serves GET /global/spend/report.
func (r Reports) Handler(w http.ResponseWriter, req *http.Request) error {
	q := req.URL.Query()
	for _, name := range []string{"start_date", "end_date"} {
		if q.Get(name) == "" {
			return api.MissingParam(name)
		}
	}
	rep, err := r.Report(req.Context(), auth.FromContext(req.Context()), q.Get("start_date"), q.Get("end_date"), q.Get("group_by"))
	if err != nil {
		return err
	}
	api.WriteJSON(w, http.StatusOK, rep)
	return nil
}
