package auth

import (
	"net/http"
	"strings"
)

// keyHeaders are the headers a key may arrive in, in the order they are
// tried after x-sluice-api-key, x-litellm-api-key and Authorization.
var keyHeaders = []string{"Api-Key", "X-Api-Key", "X-Goog-Api-Key", "Ocp-Apim-Subscription-Key"}

// ExtractKey finds the caller's sluice key (ARCHITECTURE §3), first match wins:
// x-sluice-api-key, x-litellm-api-key, Authorization: Bearer, api-key,
// x-api-key, x-goog-api-key, Ocp-Apim-Subscription-Key and, when allowQuery
// (passthrough routes only), the key query parameter. An Authorization value
// that is not Bearer — a SigV4 signature, a Google OAuth token under another
// scheme — is skipped, not rejected, so the key can come in another header.
func ExtractKey(r *http.Request, allowQuery bool) string {
	h := r.Header
	if v := headerValue(h, "X-Sluice-Api-Key"); v != "" {
		return v
	}
	if v := headerValue(h, "X-Litellm-Api-Key"); v != "" {
		return v
	}
	if v := bearer(headerValue(h, "Authorization")); v != "" {
		return v
	}
	for _, name := range keyHeaders {
		if v := headerValue(h, name); v != "" {
			return v
		}
	}
	if allowQuery {
		if v := strings.TrimSpace(r.URL.Query().Get("key")); v != "" {
			return v
		}
	}
	return ""
}

func headerValue(h http.Header, name string) string {
	vs := h[name] // names are canonical: skip the canonicalisation in Get
	if len(vs) == 0 {
		return ""
	}
	return strings.TrimSpace(vs[0])
}

// bearer returns the credential of a "Bearer <credential>" value, or "".
func bearer(v string) string {
	scheme, cred, ok := strings.Cut(v, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(cred)
}
