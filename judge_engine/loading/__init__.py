"""Getting weights in: the catalog and its pulls, GGUF conversion, safetensors loading, tokenizer, dtype choice, int8 quantization."""
