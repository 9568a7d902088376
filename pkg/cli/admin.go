package cli

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// limits are the rpm/tpm flags a team or a key takes.
type limits struct{ rpm, tpm int64 }

func (l *limits) flags(cmd *cobra.Command) {
	cmd.Flags().Int64Var(&l.rpm, "rpm", 0, "requests per minute (0: no limit)")
	cmd.Flags().Int64Var(&l.tpm, "tpm", 0, "tokens per minute (0: no limit)")
}

func (l *limits) into(body map[string]any) {
	if l.rpm > 0 {
		body["rpm_limit"] = l.rpm
	}
	if l.tpm > 0 {
		body["tpm_limit"] = l.tpm
	}
}

// team is the part of a team the tables show.
type team struct {
	TeamID    string   `json:"team_id"`
	TeamAlias string   `json:"team_alias"`
	Models    []string `json:"models"`
	RPMLimit  *int64   `json:"rpm_limit"`
	TPMLimit  *int64   `json:"tpm_limit"`
	Spend     *float64 `json:"spend"`
	MaxBudget *float64 `json:"max_budget"`
	CreatedAt string   `json:"created_at"`
}

func optInt(p *int64) string {
	if p == nil || *p == 0 {
		return "-"
	}
	return count(*p)
}

func optUSD(p *float64) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf("$%.4f", *p)
}

func models(m []string) string {
	if len(m) == 0 {
		return "all"
	}
	return strings.Join(m, ",")
}

func (a *app) teamTable(ts []team) {
	rows := make([][]string, 0, len(ts))
	for _, t := range ts {
		rows = append(rows, []string{t.TeamID, t.TeamAlias, models(t.Models), optInt(t.RPMLimit), optInt(t.TPMLimit), optUSD(t.Spend), optUSD(t.MaxBudget)})
	}
	a.table([]string{"ID", "ALIAS", "MODELS", "RPM", "TPM", "SPEND", "BUDGET"}, rows)
}

func (a *app) teamCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "team", Short: "Create and list teams (master key)"}
	var alias string
	var ms []string
	var lim limits
	create := &cobra.Command{
		Use: "create", Short: "Create a team", Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			body := map[string]any{"team_alias": alias}
			if len(ms) > 0 {
				body["models"] = ms
			}
			lim.into(body)
			var t team
			raw, err := c.callInto(cmd.Context(), "POST", "/team/new", body, &t)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(raw)
			}
			a.teamTable([]team{t})
			return nil
		},
	}
	create.Flags().StringVar(&alias, "alias", "", "the team's name")
	create.Flags().StringSliceVar(&ms, "models", nil, "models the team may use (default: all)")
	lim.flags(create)
	list := &cobra.Command{
		Use: "list", Short: "List every team", Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			var ts []team
			raw, err := c.callInto(cmd.Context(), "GET", "/team/list", nil, &ts)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(raw)
			}
			a.teamTable(ts)
			return nil
		},
	}
	info := &cobra.Command{
		Use: "info [TEAM_ID]", Short: "Show a team (a team key: its own)", Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			id := ""
			if len(args) == 1 {
				id = args[0]
			}
			var out struct {
				TeamInfo team `json:"team_info"`
			}
			raw, err := c.callInto(cmd.Context(), "GET", "/team/info"+query("team_id", id), nil, &out)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(raw)
			}
			a.teamTable([]team{out.TeamInfo})
			return nil
		},
	}
	cmd.AddCommand(create, list, info)
	return cmd
}

// keyInfo is the part of a key's stored info the tables show.
type keyInfo struct {
	Token     string   `json:"token"`
	KeyAlias  string   `json:"key_alias"`
	KeyName   string   `json:"key_name"`
	TeamID    string   `json:"team_id"`
	Expires   *string  `json:"expires"`
	Models    []string `json:"models"`
	CreatedAt string   `json:"created_at"`
	LastUsed  *string  `json:"last_used_at"`
	Spend     *float64 `json:"spend"`
}

func day(s *string) string {
	if s == nil || *s == "" {
		return "-"
	}
	if t, err := time.Parse(time.RFC3339Nano, *s); err == nil {
		return t.UTC().Format("2006-01-02 15:04")
	}
	return *s
}

func (a *app) keyCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "key", Short: "Create, list and delete keys"}
	var teamID, alias, duration string
	var ms []string
	var lim limits
	create := &cobra.Command{
		Use: "create", Short: "Create a key for a team (shown once)", Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if teamID == "" {
				return usageError{fmt.Errorf("--team is required")}
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			body := map[string]any{"team_id": teamID, "key_alias": alias}
			if duration != "" {
				body["duration"] = duration
			}
			if len(ms) > 0 {
				body["models"] = ms
			}
			lim.into(body)
			var k struct {
				Key     string  `json:"key"`
				Token   string  `json:"token"`
				Expires *string `json:"expires"`
			}
			raw, err := c.callInto(cmd.Context(), "POST", "/key/generate", body, &k)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(raw)
			}
			fmt.Fprintf(a.stdout, "%s\n\nThe key above is shown once: only its SHA-256 (%s) is stored. Expires: %s.\n", k.Key, k.Token, day(k.Expires))
			return nil
		},
	}
	create.Flags().StringVar(&teamID, "team", "", "the team's id (required)")
	create.Flags().StringVar(&alias, "alias", "", "the key's name")
	create.Flags().StringVar(&duration, "duration", "", "lifetime, e.g. 30d (default: none)")
	create.Flags().StringSliceVar(&ms, "models", nil, "models the key may use (default: the team's)")
	lim.flags(create)

	var listTeam string
	list := &cobra.Command{
		Use: "list", Short: "List a team's keys (a team key: its own team's)", Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			var page struct {
				Keys []keyInfo `json:"keys"`
			}
			raw, err := c.callInto(cmd.Context(), "GET", "/key/list"+query("team_id", listTeam, "size", "1000"), nil, &page)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(raw)
			}
			rows := make([][]string, 0, len(page.Keys))
			for _, k := range page.Keys {
				rows = append(rows, []string{k.Token, k.KeyAlias, k.KeyName, day(&k.CreatedAt), day(k.Expires), day(k.LastUsed), optUSD(k.Spend)})
			}
			a.table([]string{"TOKEN", "ALIAS", "KEY", "CREATED", "EXPIRES", "LAST USED", "SPEND"}, rows)
			return nil
		},
	}
	list.Flags().StringVar(&listTeam, "team", "", "the team's id (a team key: default its own)")
	del := &cobra.Command{
		Use: "delete KEY_OR_TOKEN...", Short: "Delete keys (master key)", Args: minArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			raw, err := c.call(cmd.Context(), "POST", "/key/delete", map[string]any{"keys": args})
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(raw)
			}
			fmt.Fprintf(a.stdout, "Deleted %d key(s).\n", len(args))
			return nil
		},
	}
	cmd.AddCommand(create, list, del)
	return cmd
}

func (a *app) filesCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "files", Short: "Upload, list, download and remove files"}
	var purpose string
	upload := &cobra.Command{
		Use: "upload FILE", Short: "Upload a file", Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			id, err := a.upload(cmd.Context(), c, args[0], purpose)
			if err != nil {
				return err
			}
			if a.json {
				raw, err := c.call(cmd.Context(), "GET", "/v1/files/"+url.PathEscape(id), nil)
				if err != nil {
					return err
				}
				return a.printJSON(raw)
			}
			return nil
		},
	}
	upload.Flags().StringVar(&purpose, "purpose", "batch", "the file's purpose")
	list := &cobra.Command{
		Use: "list", Short: "List files", Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			var page struct {
				Data []struct {
					ID        string `json:"id"`
					Filename  string `json:"filename"`
					Purpose   string `json:"purpose"`
					Bytes     int64  `json:"bytes"`
					CreatedAt int64  `json:"created_at"`
				} `json:"data"`
			}
			raw, err := c.callInto(cmd.Context(), "GET", "/v1/files", nil, &page)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(raw)
			}
			rows := make([][]string, 0, len(page.Data))
			for _, f := range page.Data {
				rows = append(rows, []string{f.ID, f.Filename, f.Purpose, byteSize(f.Bytes), when(f.CreatedAt)})
			}
			a.table([]string{"ID", "NAME", "PURPOSE", "SIZE", "CREATED"}, rows)
			return nil
		},
	}
	var out string
	download := &cobra.Command{
		Use: "download ID", Short: "Write a file's content (to -o, default ID)", Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			if out == "" {
				out = args[0]
			}
			if err := a.download(cmd.Context(), c, args[0], out); err != nil {
				os.Remove(out)
				return err
			}
			fmt.Fprintf(a.stderr, "Wrote %s\n", out)
			return nil
		},
	}
	download.Flags().StringVarP(&out, "output", "o", "", "where to write it")
	rm := &cobra.Command{
		Use: "rm ID", Short: "Remove a file", Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			raw, err := c.call(cmd.Context(), "DELETE", "/v1/files/"+url.PathEscape(args[0]), nil)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(raw)
			}
			fmt.Fprintf(a.stdout, "Removed %s.\n", args[0])
			return nil
		},
	}
	cmd.AddCommand(upload, list, download, rm)
	return cmd
}

// callbacksAnswer is the callbacks API's answer.
type callbacksAnswer struct {
	Data struct {
		Callbacks []struct {
			Name string            `json:"callback_name"`
			Type string            `json:"callback_type"`
			Vars map[string]string `json:"callback_vars"`
			// Delivery is the delivery health: GET answers it, add and
			// rm do not.
			Delivery *struct {
				Delivered    int64      `json:"delivered"`
				Retrying     int64      `json:"retrying"`
				DeadLettered int64      `json:"dead_lettered"`
				LastError    string     `json:"last_error"`
				LastErrorAt  *time.Time `json:"last_error_at"`
			} `json:"delivery"`
		} `json:"callbacks"`
	} `json:"data"`
}

func (a *app) callbackTable(raw json.RawMessage) error {
	if a.json {
		return a.printJSON(raw)
	}
	var cb callbacksAnswer
	if err := json.Unmarshal(raw, &cb); err != nil {
		return fmt.Errorf("unexpected callbacks answer: %w", err)
	}
	health := false
	for _, c := range cb.Data.Callbacks {
		health = health || c.Delivery != nil
	}
	rows := make([][]string, 0, len(cb.Data.Callbacks))
	for _, c := range cb.Data.Callbacks {
		names := make([]string, 0, len(c.Vars))
		for k, v := range c.Vars {
			names = append(names, k+"="+v)
		}
		sort.Strings(names)
		row := []string{c.Name, c.Type, strings.Join(names, " ")}
		if d := c.Delivery; health && d != nil {
			last := "-"
			if d.LastError != "" {
				last = d.LastError
				if d.LastErrorAt != nil {
					last = d.LastErrorAt.UTC().Format("2006-01-02 15:04") + " " + last
				}
			}
			row = append(row, count(d.Delivered), count(d.Retrying), count(d.DeadLettered), last)
		} else if health {
			row = append(row, "", "", "", "")
		}
		rows = append(rows, row)
	}
	header := []string{"NAME", "TYPE", "VARS (secrets masked)"}
	if health {
		header = append(header, "DELIVERED", "RETRYING", "DEAD-LETTERED", "LAST ERROR (UTC)")
	}
	a.table(header, rows)
	return nil
}

func (a *app) callbackCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "callback", Short: "A team's logging callbacks"}
	var typ, varsFile string
	var vars []string
	add := &cobra.Command{
		Use: "add TEAM_ID NAME", Short: "Add a callback (langfuse, langsmith, gcs_bucket)", Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			cv := map[string]string{}
			if varsFile != "" {
				b, err := os.ReadFile(varsFile)
				if err != nil {
					return usageError{err}
				}
				if err := json.Unmarshal(b, &cv); err != nil {
					return usageError{fmt.Errorf("%s: want a JSON object of strings: %w", varsFile, err)}
				}
			}
			for _, v := range vars {
				k, val, ok := strings.Cut(v, "=")
				if !ok {
					return usageError{fmt.Errorf("--var %q: want name=value", v)}
				}
				cv[k] = val
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			raw, err := c.call(cmd.Context(), "POST", "/team/"+url.PathEscape(args[0])+"/callback",
				map[string]any{"callback_name": args[1], "callback_type": typ, "callback_vars": cv})
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(raw)
			}
			fmt.Fprintf(a.stdout, "Added %s to %s.\n", args[1], args[0])
			return nil
		},
	}
	add.Flags().StringVar(&typ, "type", "success_and_failure", "success, failure or success_and_failure")
	add.Flags().StringArrayVar(&vars, "var", nil, "a callback variable, name=value (repeat)")
	add.Flags().StringVar(&varsFile, "vars-file", "", "a JSON file of callback variables (keeps secrets out of shell history)")
	list := &cobra.Command{
		Use: "list TEAM_ID", Short: "List a team's callbacks", Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			raw, err := c.call(cmd.Context(), "GET", "/team/"+url.PathEscape(args[0])+"/callback", nil)
			if err != nil {
				return err
			}
			return a.callbackTable(raw)
		},
	}
	rm := &cobra.Command{
		Use: "rm TEAM_ID NAME", Short: "Remove a team's callbacks of a name", Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			raw, err := c.call(cmd.Context(), "DELETE", "/team/"+url.PathEscape(args[0])+"/callback/"+url.PathEscape(args[1]), nil)
			if err != nil {
				return err
			}
			return a.callbackTable(raw)
		},
	}
	cmd.AddCommand(add, list, rm)
	return cmd
}

// spendReport is /global/spend/report's answer (the agreed shape).
type spendReport struct {
	GroupBy string `json:"group_by"`
	Data    []struct {
		Date         string  `json:"date"`
		Group        string  `json:"group"`
		GroupAlias   string  `json:"group_alias"`
		Spend        float64 `json:"spend"`
		InputTokens  int64   `json:"input_tokens"`
		OutputTokens int64   `json:"output_tokens"`
		Requests     int64   `json:"requests"`
	} `json:"data"`
	Total struct {
		Spend        float64 `json:"spend"`
		InputTokens  int64   `json:"input_tokens"`
		OutputTokens int64   `json:"output_tokens"`
		Requests     int64   `json:"requests"`
	} `json:"total"`
}

func (a *app) spendCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "spend", Short: "Spend reports"}
	var start, end, groupBy string
	report := &cobra.Command{
		Use: "report", Short: "Spend per day by team, key or model", Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			if end == "" {
				end = time.Now().UTC().Format(time.DateOnly)
			}
			if start == "" {
				start = time.Now().UTC().AddDate(0, 0, -30).Format(time.DateOnly)
			}
			var r spendReport
			raw, err := c.callInto(cmd.Context(), "GET", "/global/spend/report"+query("start_date", start, "end_date", end, "group_by", groupBy), nil, &r)
			if isStatus(err, 404) {
				fmt.Fprintln(a.stdout, "no spend recorded (this gateway has no spend report)")
				return nil
			}
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(raw)
			}
			if len(r.Data) == 0 {
				fmt.Fprintf(a.stdout, "no spend recorded from %s to %s\n", start, end)
				return nil
			}
			rows := make([][]string, 0, len(r.Data)+1)
			for _, d := range r.Data {
				g := d.Group
				if d.GroupAlias != "" {
					g = d.GroupAlias + " (" + d.Group + ")"
				}
				rows = append(rows, []string{d.Date, g, fmt.Sprintf("$%.4f", d.Spend), count(d.Requests), count(d.InputTokens), count(d.OutputTokens)})
			}
			t := r.Total
			rows = append(rows, []string{"total", "", fmt.Sprintf("$%.4f", t.Spend), count(t.Requests), count(t.InputTokens), count(t.OutputTokens)})
			a.table([]string{"DATE", strings.ToUpper(groupBy), "SPEND", "REQUESTS", "INPUT TOKENS", "OUTPUT TOKENS"}, rows)
			return nil
		},
	}
	report.Flags().StringVar(&start, "start", "", "first day, YYYY-MM-DD (default: 30 days ago)")
	report.Flags().StringVar(&end, "end", "", "last day, YYYY-MM-DD (default: today)")
	report.Flags().StringVar(&groupBy, "group-by", "team", "team, api_key or model")
	cmd.AddCommand(report)
	return cmd
}
