package main

import (
	"encoding/base64"
	"strings"
	"testing"
)

func TestReportOnlyComparesWithoutChecks(t *testing.T) {
	r := newScenarioReport("embeddings-titan", "test")
	r.reportOnly = true
	r.Measurements = []measurement{meas(1, "direct", 50, 1.0, 2.0), meas(1, "proxy", 100, 1.2, 2.5), meas(1, "sluice", 400, 3.0, 9.0)}
	r.summarize()
	if len(r.Checks) != 0 {
		t.Errorf("a report-only scenario got checks %+v", r.Checks)
	}
	if len(r.Comparisons) != 4 {
		t.Errorf("comparisons %+v, want cpu, cpu at the fixed rate, added p50, added p99", r.Comparisons)
	}
}

// embeddings-titan has a CPU target (issue 13) and no latency target.
func TestReportOnlyChecksItsCPULimit(t *testing.T) {
	for _, tc := range []struct {
		sluiceUS float64
		want     string
	}{{240, statusPass}, {260, statusFail}} {
		r := newScenarioReport("embeddings-titan", "test")
		r.reportOnly, r.cpuLimit = true, 2.5
		r.Measurements = []measurement{meas(1, "direct", 50, 1.0, 2.0), meas(1, "proxy", 100, 1.2, 2.5), meas(1, "sluice", tc.sluiceUS, 3.0, 9.0)}
		r.summarize()
		if len(r.Checks) != 1 || r.Checks[0].Status != tc.want || !strings.Contains(r.Checks[0].Name, "2.5×") {
			t.Errorf("sluice at %.0f µs against the proxy's 100: checks %+v, want one CPU check, %s", tc.sluiceUS, r.Checks, tc.want)
		}
	}
}

func TestReportTranslated(t *testing.T) {
	titan := newScenarioReport("embeddings-titan", "test")
	titan.reportOnly = true
	titan.Measurements = []measurement{meas(1, "direct", 50, 1, 2), meas(1, "proxy", 100, 1.2, 2.5), meas(1, "sluice", 600, 2, 4)}
	titan.summarize()
	pass := newScenarioReport("embeddings", "test")
	pass.Measurements = []measurement{meas(1, "direct", 50, 1, 2), meas(1, "proxy", 100, 1.2, 2.5), meas(1, "sluice", 200, 1.4, 3)}
	pass.summarize()

	reportTranslated([]*scenarioReport{pass, titan})
	if len(titan.Checks) != 1 {
		t.Fatalf("checks %+v, want one report line", titan.Checks)
	}
	c := titan.Checks[0]
	if c.Status != statusInfo || !strings.HasPrefix(c.Detail, "3.00×: translated 600.0 µs, pass-through 200.0 µs") {
		t.Errorf("report line %+v", c)
	}
	f, ok := titan.Extra.(*translatedFigure)
	if !ok || f.ProxyTitanUS != 100 || f.Ratio != 3 {
		t.Errorf("extra %+v", titan.Extra)
	}

	// Without the pass-through scenario the line says what is missing.
	alone := newScenarioReport("embeddings-titan", "test")
	alone.reportOnly = true
	alone.Measurements = titan.Measurements
	alone.summarize()
	reportTranslated([]*scenarioReport{alone})
	if len(alone.Checks) != 1 || alone.Checks[0].Status != statusInfo || !strings.Contains(alone.Checks[0].Detail, "pass-through not measured") {
		t.Errorf("checks %+v", alone.Checks)
	}

	// A sluice that failed is an error, not a figure.
	failed := newScenarioReport("embeddings-titan", "test")
	failed.reportOnly = true
	failed.Failed["sluice"] = "answers 500"
	failed.summarize()
	reportTranslated([]*scenarioReport{pass, failed})
	if len(failed.Checks) != 1 || failed.Checks[0].Status != statusError {
		t.Errorf("checks %+v", failed.Checks)
	}
}

func TestTitanCheck(t *testing.T) {
	vec := func(floats int) string {
		return `"` + base64.StdEncoding.EncodeToString(make([]byte, 4*floats)) + `"`
	}
	sl, direct := target{name: "sluice", sluice: true}, target{name: "direct"}
	for _, tc := range []struct {
		name string
		t    target
		n    int
		body string
		ok   bool
	}{
		{"direct titan answer", direct, 1, `{"embedding":[0.1,0.2],"inputTextTokenCount":3}`, true},
		{"direct without embedding", direct, 1, `{"message":"bad"}`, false},
		{"sluice base64", sl, 1, `{"object":"list","data":[{"object":"embedding","index":0,"embedding":` + vec(titanDims) + `}]}`, true},
		{"sluice two vectors", sl, 2, `{"data":[{"embedding":` + vec(titanDims) + `},{"embedding":` + vec(titanDims) + `}]}`, true},
		{"sluice wrong count", sl, 2, `{"data":[{"embedding":` + vec(titanDims) + `}]}`, false},
		{"sluice float answer", sl, 1, `{"data":[{"embedding":[0.1,0.2]}]}`, false},
		{"sluice short vector", sl, 1, `{"data":[{"embedding":` + vec(256) + `}]}`, false},
		{"sluice bad base64", sl, 1, `{"data":[{"embedding":"!!!"}]}`, false},
		{"sluice not JSON", sl, 1, `<html>`, false},
	} {
		err := titanCheck(tc.n, titanDims)(tc.t, nil, []byte(tc.body))
		if (err == nil) != tc.ok {
			t.Errorf("%s: err %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}

func TestSluiceConfigTitan(t *testing.T) {
	c := sluiceConfig("http://127.0.0.1:1", "")
	for _, want := range []string{
		"model_name: " + titanModel,
		"model: bedrock/amazon.titan-embed-text-v2:0",
		"aws_region_name: us-east-1, aws_access_key_id: AKIDBENCH, aws_secret_access_key: bench-secret, api_base: http://127.0.0.1:1}",
	} {
		if !strings.Contains(c, want) {
			t.Errorf("config lacks %q:\n%s", want, c)
		}
	}
	if strings.Contains(c, titanSlowModel) {
		t.Errorf("slow deployment without a slow upstream:\n%s", c)
	}
	c = sluiceConfig("http://127.0.0.1:1", "http://127.0.0.1:2")
	if !strings.Contains(c, "- model_name: "+titanSlowModel+"\n    litellm_params: {model: bedrock/amazon.titan-embed-text-v2:0, aws_region_name: us-east-1, aws_access_key_id: AKIDBENCH, aws_secret_access_key: bench-secret, api_base: http://127.0.0.1:2}\npassthrough:") {
		t.Errorf("slow deployment missing or misplaced:\n%s", c)
	}
}
