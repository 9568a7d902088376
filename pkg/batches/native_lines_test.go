package batches

import "testing"

// The copy's tee splits the provider's bytes into lines however they are
// cut, skips lines over the bound, and adds up each line's usage once.
func FuzzLineEvents(f *testing.F) {
	f.Add([]byte(`{"custom_id":"a","response":{"status_code":200,"body":{"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}}}`+"\n"+`{"custom_id":"b"}`), uint8(7))
	f.Add([]byte("\n\n{\n"), uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, cut uint8) {
		whole := &lineEvents{usage: &Usage{}}
		whole.Write(data)
		whole.end()
		parts := &lineEvents{usage: &Usage{}}
		step := int(cut)%16 + 1
		for i := 0; i < len(data); i += step {
			parts.Write(data[i:min(i+step, len(data))])
		}
		parts.end()
		if *whole.usage != *parts.usage {
			t.Fatalf("usage %+v whole, %+v in pieces of %d", *whole.usage, *parts.usage, step)
		}
	})
}
