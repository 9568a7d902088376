package callbacks

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/sluice-gateway/sluice/pkg/api"
)

// AddCallback is the body of POST /team/{team_id}/callback.
type AddCallback struct {
	CallbackName string `json:"callback_name"`
	CallbackType string `json:"callback_type"`
	// CallbackVars values are strings; like LiteLLM, booleans and numbers
	// are taken as their text, and gcs_path_service_account may also be the
	// key as a JSON object.
	CallbackVars map[string]json.RawMessage `json:"callback_vars"`
}

// maxVarBytes bounds a var other than a service-account key.
const maxVarBytes = 4 << 10

// settings is a validated AddCallback: its vars split into what is stored
// in clear and what is sealed.
type settings struct {
	name, typ string
	vars      map[string]string
	secrets   map[string]string
}

func (s settings) has(k string) bool {
	_, clear := s.vars[k]
	_, secret := s.secrets[k]
	return clear || secret
}

func (s settings) secretNames() []string {
	return slices.Sorted(maps.Keys(s.secrets))
}

// gcsBucketPattern is a bucket name, optionally followed by an object
// prefix ("my-bucket/team-a/logs"), as LiteLLM accepts it.
var (
	gcsBucketPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{1,61}[a-z0-9]$`)
	gcsPrefixPattern = regexp.MustCompile(`^[A-Za-z0-9._=-]+(/[A-Za-z0-9._=-]+)*$`)
)

// validate checks in against the rules of its callback family and returns
// it normalized. Every refusal is a 400 naming the parameter.
func (s *Service) validate(ctx context.Context, in AddCallback) (settings, error) {
	out := settings{name: in.CallbackName, typ: in.CallbackType, vars: map[string]string{}, secrets: map[string]string{}}
	fam, known := families[in.CallbackName]
	switch {
	case in.CallbackName == "":
		return out, api.MissingParam("callback_name")
	case !known:
		return out, api.InvalidValue("callback_name", "Unknown callback_name %q: use one of %s.", in.CallbackName, strings.Join(Names(), ", "))
	case in.CallbackType == "":
		return out, api.MissingParam("callback_type")
	case !slices.Contains(types, in.CallbackType):
		return out, api.InvalidValue("callback_type", "Unknown callback_type %q: use one of %s.", in.CallbackType, strings.Join(types, ", "))
	case in.CallbackVars == nil:
		return out, api.MissingParam("callback_vars")
	}
	for _, k := range slices.Sorted(maps.Keys(in.CallbackVars)) {
		param := "callback_vars." + k
		if k != VarTurnOffMessageLogging && !slices.Contains(fam.vars, k) {
			if owner := familyOf(k); owner != "" {
				return out, api.InvalidValue(param, "Callback variable %s belongs to %s callbacks, not %s: a callback's variables must all be of its own destination.", k, owner, in.CallbackName)
			}
			return out, api.InvalidValue(param, "Invalid callback variable: %s. A %s callback takes %s.", k, in.CallbackName, strings.Join(append(slices.Clone(fam.vars), VarTurnOffMessageLogging), ", "))
		}
		v, present, err := varText(param, k, in.CallbackVars[k])
		if err != nil {
			return out, err
		}
		if !present {
			continue
		}
		if isSecret(in.CallbackName, k) {
			out.secrets[k] = v
		} else {
			out.vars[k] = v
		}
	}
	for _, req := range fam.required {
		if !slices.ContainsFunc(req, out.has) {
			return out, api.InvalidValue("callback_vars."+req[0], "A %s callback needs callback_vars.%s.", in.CallbackName, strings.Join(req, " or "))
		}
	}
	return out, s.checkValues(ctx, &out)
}

// checkValues checks and normalizes the values whose form matters.
func (s *Service) checkValues(ctx context.Context, out *settings) error {
	if v, ok := out.vars[VarTurnOffMessageLogging]; ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return api.InvalidValue("callback_vars."+VarTurnOffMessageLogging, "%s must be true or false.", VarTurnOffMessageLogging)
		}
		out.vars[VarTurnOffMessageLogging] = strconv.FormatBool(b)
	}
	for _, k := range []string{VarLangfuseHost, VarLangSmithBaseURL} {
		v, ok := out.vars[k]
		if !ok {
			continue
		}
		if _, err := s.guard.CheckURL(ctx, "callback_vars."+k, v); err != nil {
			return err
		}
		out.vars[k] = strings.TrimRight(v, "/")
	}
	if a, b := out.secrets[VarLangfuseSecretKey], out.secrets[VarLangfuseSecret]; a != "" && b != "" && a != b {
		return api.InvalidValue("callback_vars."+VarLangfuseSecret, "%s and %s are the same setting and differ; send one.", VarLangfuseSecretKey, VarLangfuseSecret)
	}
	if v, ok := out.vars[VarGCSBucketName]; ok {
		bucket, prefix, _ := strings.Cut(v, "/")
		if !gcsBucketPattern.MatchString(bucket) || strings.Contains(bucket, "..") {
			return api.InvalidValue("callback_vars."+VarGCSBucketName, "%q is not a bucket name: 3 to 63 lowercase letters, digits, '-', '_' or '.', starting and ending with a letter or digit (optionally followed by /an/object/prefix).", bucket)
		}
		if prefix != "" && (!gcsPrefixPattern.MatchString(strings.TrimSuffix(prefix, "/")) || slices.Contains(strings.Split(prefix, "/"), "..")) {
			return api.InvalidValue("callback_vars."+VarGCSBucketName, "The object prefix after the bucket name must be path segments of letters, digits, '.', '_', '=' or '-'.")
		}
	}
	if v, ok := out.secrets[VarGCSServiceAccount]; ok {
		if err := s.accounts.Check(ctx, v); err != nil {
			return err
		}
	}
	return nil
}

// varText returns a var's value as text: strings as they are, booleans and
// numbers as their JSON text, and for gcs_path_service_account an object as
// its compact JSON. null counts as absent. Values are bounded and free of
// control characters (but a key's JSON may span lines).
func varText(param, k string, raw json.RawMessage) (string, bool, error) {
	raw = bytes.TrimSpace(raw)
	limit := maxVarBytes
	if k == VarGCSServiceAccount {
		limit = maxServiceAccountBytes
	}
	if len(raw) > 2*limit+2 { // escapes may double a string's length; the text is checked below
		return "", false, api.InvalidValue(param, "%s is longer than %d bytes.", k, limit)
	}
	var v string
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return "", false, nil
	case raw[0] == '"':
		if err := json.Unmarshal(raw, &v); err != nil {
			return "", false, api.InvalidValue(param, "%s is not a valid JSON string.", k)
		}
	case raw[0] == '{' && k == VarGCSServiceAccount:
		var buf bytes.Buffer
		if err := json.Compact(&buf, raw); err != nil {
			return "", false, api.InvalidValue(param, "%s is not valid JSON.", k)
		}
		v = buf.String()
	case string(raw) == "true" || string(raw) == "false" || raw[0] == '-' || '0' <= raw[0] && raw[0] <= '9':
		v = string(raw)
	default:
		return "", false, api.InvalidValue(param, "Invalid type for '%s': expected a string.", param)
	}
	if strings.TrimSpace(v) == "" {
		return "", false, api.InvalidValue(param, "%s must not be empty.", k)
	}
	if len(v) > limit {
		return "", false, api.InvalidValue(param, "%s is longer than %d bytes.", k, limit)
	}
	if strings.ContainsFunc(v, func(r rune) bool {
		return unicode.IsControl(r) && !(k == VarGCSServiceAccount && (r == '\n' || r == '\r' || r == '\t'))
	}) {
		return "", false, api.InvalidValue(param, "%s must not contain control characters.", k)
	}
	return v, true, nil
}

// familyOf names the callback a var belongs to ("" for an unknown var).
func familyOf(k string) string {
	for _, name := range Names() {
		if slices.Contains(families[name].vars, k) {
			return name
		}
	}
	return ""
}
