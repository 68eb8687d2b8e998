"""Model layers: paged attention and its Triton kernels, RoPE, merged and int8 linear maps."""
