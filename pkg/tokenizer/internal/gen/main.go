// Command gen writes o200k_base.ranks.gz, the compact form of OpenAI's
// o200k_base ranks that pkg/tokenizer embeds (go generate ./pkg/tokenizer).
// It reads o200k_base.tiktoken from the module that vendors it,
// github.com/pkoukk/tiktoken-go-loader, fetched through the Go module proxy
// (go mod download), and refuses a file whose SHA-256 is not the one
// OpenAI's tiktoken expects.
//
// The form, gzip-compressed: the number of tokens n (4 bytes, big endian),
// n bytes each the length of the token of that rank, then the tokens' bytes
// in rank order. Ranks are the tokens' positions: the file lists every
// rank from 0 without a gap, which gen checks.
package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

const (
	loader = "github.com/pkoukk/tiktoken-go-loader@v0.0.2"
	// The hash tiktoken (openai/tiktoken, tiktoken_ext/openai_public.py)
	// checks o200k_base.tiktoken against.
	o200kSHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
)

func main() {
	out := flag.String("o", "o200k_base.ranks.gz", "output file")
	flag.Parse()
	src, err := tiktokenFile("o200k_base.tiktoken")
	if err != nil {
		log.Fatal(err)
	}
	if sum := sha256.Sum256(src); hex.EncodeToString(sum[:]) != o200kSHA256 {
		log.Fatalf("gen: o200k_base.tiktoken has SHA-256 %x, want %s", sum, o200kSHA256)
	}
	form, err := compact(src)
	if err != nil {
		log.Fatal(err)
	}
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := zw.Write(form); err != nil {
		log.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(*out, buf.Bytes(), 0o644); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("gen: %s: %d bytes (%d uncompressed)\n", *out, buf.Len(), len(form))
}

// tiktokenFile reads name from the loader module's assets.
func tiktokenFile(name string) ([]byte, error) {
	cmd := exec.Command("go", "mod", "download", "-json", loader)
	cmd.Stderr = os.Stderr
	js, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("gen: go mod download %s: %w", loader, err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(js, &mod); err != nil || mod.Dir == "" {
		return nil, fmt.Errorf("gen: go mod download %s answered %q: %v", loader, js, err)
	}
	b, err := os.ReadFile(filepath.Join(mod.Dir, "assets", name))
	if err != nil {
		return nil, fmt.Errorf("gen: read %s: %w", name, err)
	}
	return b, nil
}

// compact turns the tiktoken file (a "base64-token rank" line per token)
// into the form the package reads.
func compact(src []byte) ([]byte, error) {
	var lens, toks []byte
	sc := bufio.NewScanner(bytes.NewReader(src))
	for n := 0; sc.Scan(); n++ {
		tok, rank, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			return nil, fmt.Errorf("gen: line %d: %q is not a token and its rank", n+1, sc.Text())
		}
		if r, err := strconv.Atoi(rank); err != nil || r != n {
			return nil, fmt.Errorf("gen: line %d: rank %q, want %d (ranks without a gap)", n+1, rank, n)
		}
		b, err := base64.StdEncoding.DecodeString(tok)
		if err != nil || len(b) == 0 || len(b) > 255 {
			return nil, fmt.Errorf("gen: line %d: token %q: %d bytes, %v", n+1, tok, len(b), err)
		}
		lens = append(lens, byte(len(b)))
		toks = append(toks, b...)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("gen: read the ranks: %w", err)
	}
	form := binary.BigEndian.AppendUint32(nil, uint32(len(lens)))
	return append(append(form, lens...), toks...), nil
}
