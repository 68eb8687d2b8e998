"""The engine loop: scheduler, block manager, sequences, KV cache, model runner, sampling, output."""
