package tokenizer

//go:generate go run ./internal/gen -o o200k_base.ranks.gz
