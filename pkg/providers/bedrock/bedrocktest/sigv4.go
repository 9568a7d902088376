// Package bedrocktest checks, in a test upstream, that a request reached it
// exactly as it was SigV4-signed: it recomputes the signature from what
// arrived (method, escaped path, query, signed headers, body hash) with the
// secret key and compares.
package bedrocktest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// Signature is a parsed SigV4 Authorization header.
type Signature struct {
	AccessKeyID   string
	Date          string // yyyymmdd
	Region        string
	Service       string
	SignedHeaders []string
	Signature     string
}

// ParseAuthorization parses "AWS4-HMAC-SHA256 Credential=…, SignedHeaders=…, Signature=…".
func ParseAuthorization(v string) (Signature, error) {
	rest, ok := strings.CutPrefix(v, "AWS4-HMAC-SHA256 ")
	if !ok {
		return Signature{}, fmt.Errorf("not a SigV4 Authorization: %q", v)
	}
	var s Signature
	for _, part := range strings.Split(rest, ",") {
		k, val, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "Credential":
			f := strings.Split(val, "/")
			if len(f) != 5 || f[4] != "aws4_request" {
				return Signature{}, fmt.Errorf("credential scope %q", val)
			}
			s.AccessKeyID, s.Date, s.Region, s.Service = f[0], f[1], f[2], f[3]
		case "SignedHeaders":
			s.SignedHeaders = strings.Split(val, ";")
		case "Signature":
			s.Signature = val
		}
	}
	if s.AccessKeyID == "" || len(s.SignedHeaders) == 0 || s.Signature == "" {
		return Signature{}, fmt.Errorf("incomplete Authorization: %q", v)
	}
	return s, nil
}

// Verify recomputes the signature of r (whose body was body) with the secret
// of its access key and reports any mismatch. It returns the parsed signature.
// secret returns the secret access key and session token of an access key id
// (ok false: unknown key).
func Verify(r *http.Request, body []byte, secret func(accessKeyID string) (key, token string, ok bool)) (Signature, error) {
	sig, err := ParseAuthorization(r.Header.Get("Authorization"))
	if err != nil {
		return sig, err
	}
	key, token, ok := secret(sig.AccessKeyID)
	if !ok {
		return sig, fmt.Errorf("unknown access key id %q", sig.AccessKeyID)
	}
	if token != r.Header.Get("X-Amz-Security-Token") {
		return sig, fmt.Errorf("X-Amz-Security-Token %q, want the session token", r.Header.Get("X-Amz-Security-Token"))
	}
	when, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return sig, fmt.Errorf("X-Amz-Date: %w", err)
	}
	if d := time.Since(when); d > 15*time.Minute || d < -15*time.Minute {
		return sig, fmt.Errorf("X-Amz-Date %s is too far from now", when)
	}
	if !contains(sig.SignedHeaders, "host") {
		return sig, fmt.Errorf("host is not signed: %v", sig.SignedHeaders)
	}
	// Rebuild the request from what arrived, keeping only the signed headers.
	u := &url.URL{Path: r.URL.Path, RawPath: r.URL.RawPath, RawQuery: r.URL.RawQuery}
	re := &http.Request{Method: r.Method, URL: u, Host: r.Host, Header: http.Header{}, ContentLength: int64(len(body))}
	for _, h := range sig.SignedHeaders {
		switch h {
		case "host", "content-length":
			continue
		}
		vs, ok := r.Header[http.CanonicalHeaderKey(h)]
		if !ok {
			return sig, fmt.Errorf("signed header %q did not arrive", h)
		}
		re.Header[http.CanonicalHeaderKey(h)] = vs
	}
	if contains(sig.SignedHeaders, "content-length") != (len(body) > 0) {
		return sig, fmt.Errorf("content-length signed = %v with a %d-byte body", contains(sig.SignedHeaders, "content-length"), len(body))
	}
	sum := sha256.Sum256(body)
	creds := aws.Credentials{AccessKeyID: sig.AccessKeyID, SecretAccessKey: key, SessionToken: token}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, re, hex.EncodeToString(sum[:]), sig.Service, sig.Region, when); err != nil {
		return sig, err
	}
	want, err := ParseAuthorization(re.Header.Get("Authorization"))
	if err != nil {
		return sig, err
	}
	if strings.Join(want.SignedHeaders, ";") != strings.Join(sig.SignedHeaders, ";") {
		return sig, fmt.Errorf("signed headers %v, recomputed %v", sig.SignedHeaders, want.SignedHeaders)
	}
	if want.Signature != sig.Signature {
		return sig, fmt.Errorf("signature mismatch: the request was changed after signing (path %q, query %q, signed headers %v)", r.URL.EscapedPath(), r.URL.RawQuery, sig.SignedHeaders)
	}
	return sig, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
