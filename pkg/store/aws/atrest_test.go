package awsstore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/config"
	"github.com/sluice-gateway/sluice/pkg/server"
	awsstore "github.com/sluice-gateway/sluice/pkg/store/aws"
	"github.com/sluice-gateway/sluice/pkg/store/aws/awstest"
)

// TestKeysAtRestAreHashes creates a key through the API on the AWS backend,
// then reads the whole DynamoDB table raw: the key appears nowhere, only its
// SHA-256.
func TestKeysAtRestAreHashes(t *testing.T) {
	cfg, res := awstest.Resources(t)
	ctx := context.Background()
	backend, err := awsstore.Open(ctx, cfg, res)
	if err != nil {
		t.Fatal(err)
	}
	master := auth.NewKey()
	settings, _ := config.SettingsFromEnv(func(string) string { return "" })
	svcs, err := server.NewServices(server.Deps{Settings: settings, Backend: backend, MasterKey: master,
		Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	h, err := server.Handler(svcs, server.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	post := func(path, body string) map[string]any {
		req, _ := http.NewRequest("POST", srv.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+master)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		var m map[string]any
		if resp.StatusCode != 200 || json.Unmarshal(data, &m) != nil {
			t.Fatalf("POST %s = %d %s", path, resp.StatusCode, data)
		}
		return m
	}
	team := post("/team/new", `{"team_alias":"at-rest"}`)["team_id"].(string)
	gen := post("/key/generate", `{"team_id":"`+team+`","key_alias":"k"}`)
	key, token := gen["key"].(string), gen["token"].(string)

	db := dynamodb.NewFromConfig(cfg)
	out, err := db.Scan(ctx, &dynamodb.ScanInput{TableName: &res.Table})
	if err != nil {
		t.Fatal(err)
	}
	var sawToken bool
	for _, item := range out.Items {
		for name, v := range item {
			var raw []byte
			switch v := v.(type) {
			case *types.AttributeValueMemberS:
				raw = []byte(v.Value)
			case *types.AttributeValueMemberB:
				raw = v.Value
			default:
				continue
			}
			if bytes.Contains(raw, []byte(key)) || bytes.Contains(raw, []byte(master)) {
				t.Errorf("attribute %s holds a raw key", name)
			}
			if bytes.Contains(raw, []byte(token)) {
				sawToken = true
			}
		}
	}
	if !sawToken {
		t.Error("the key's hash is not in the table either: the test read the wrong table")
	}
}
