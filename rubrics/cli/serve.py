"""`rubric serve`: an OpenAI-compatible server on the in-process engine, for many grading workers to share.

    rubric serve --model M --host 127.0.0.1 --port 8000
    rubric grade rubric.yaml runs/ --judge openai --base-url http://127.0.0.1:8000/v1 --model M

Routes: GET /v1/models, POST /v1/completions, POST /v1/chat/completions (logprobs, top_logprobs, max_tokens,
temperature, top_p, stop, seed, stream), GET /metrics (engine and batching counters), GET /health. Request bodies
over --max-request-bytes (default 4 MiB) get 413.
"""
from __future__ import annotations

import os
import sys

API_KEY_VARIABLE = "RUBRICS_SERVE_API_KEY"
# judge_engine.server.limits.DEFAULT_MAX_REQUEST_BYTES, repeated so that `rubric --help` needs no server extras
DEFAULT_MAX_REQUEST_BYTES = 4 * 1024 * 1024
SERVE_INSTALL = "pip install 'agent-rubrics[engine,serve]'"


def register(subparsers) -> None:
    parser = subparsers.add_parser("serve", help="serve the judge engine over an OpenAI-compatible HTTP API",
                                   description="Serve one model on the judge engine over an OpenAI-compatible "
                                               "HTTP API; concurrent requests share the engine's batches.")
    parser.add_argument("--model", help="a local HF folder or .gguf file (default: the embedded SmolLM2-135M)")
    parser.add_argument("--served-model-name", help="the model id clients send (default: --model, or the "
                                                    "embedded model's name)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port to bind (default: 8000)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda[:N] (default: cpu)")
    parser.add_argument("--dtype", default="float32", help="float32 or bfloat16 (default: float32)")
    parser.add_argument("--max-num-seqs", type=int, default=256, help="most sequences in one batch")
    parser.add_argument("--max-num-batched-tokens", type=int, default=2048, help="token budget of one step")
    parser.add_argument("--max-model-len", type=int, help="context length (default: the model's)")
    parser.add_argument("--kv-cache-bytes", type=int, help="KV cache size on CPU (default: the engine's)")
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--api-key", default=os.environ.get(API_KEY_VARIABLE),
                        help=f"require 'Authorization: Bearer KEY' on /v1 routes (default: ${API_KEY_VARIABLE}; "
                             f"none: open)")
    parser.add_argument("--max-request-bytes", type=positive_int, default=DEFAULT_MAX_REQUEST_BYTES,
                        help=f"largest request body accepted; larger ones get 413 (default: "
                             f"{DEFAULT_MAX_REQUEST_BYTES} = 4 MiB)")
    parser.add_argument("--log-level", default="warning", choices=["critical", "error", "warning", "info", "debug"])
    parser.set_defaults(handler=run)


def positive_int(text: str) -> int:
    import argparse

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def engine_config(args):
    from judge_engine.config import EngineConfig

    from rubrics.model_cache import rubrics_cache_dir

    options = {"model": args.model, "device": args.device, "dtype": args.dtype, "max_num_seqs": args.max_num_seqs,
               "max_num_batched_tokens": args.max_num_batched_tokens, "cache_dir": str(rubrics_cache_dir())}
    if args.max_model_len:
        options["max_model_len"] = args.max_model_len
    if args.kv_cache_bytes:
        options["kv_cache_bytes"] = args.kv_cache_bytes
    return EngineConfig(**options)


def served_name(args) -> str:
    if args.served_model_name:
        return args.served_model_name
    if args.model:
        return args.model
    from judge_engine.weights import EMBEDDED_MODEL_NAME

    return EMBEDDED_MODEL_NAME


def run(args) -> int:
    try:
        import uvicorn

        from judge_engine.config import EngineConfigError
        from judge_engine.engine import LLMEngine
        from judge_engine.server.app import create_app
    except ImportError as exc:
        print(f"error: rubric serve needs the [engine] and [serve] extras ({exc.name!r} is not installed); "
              f"install them with: {SERVE_INSTALL}", file=sys.stderr)
        return 1
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    try:
        engine = LLMEngine(engine_config(args))
    except (EngineConfigError, FileNotFoundError, ValueError) as exc:
        print(f"error: cannot load the model: {exc}", file=sys.stderr)
        return 1
    name = served_name(args)
    app = create_app(engine, name, api_key=args.api_key, max_request_bytes=args.max_request_bytes)
    print(f"serving {name} on http://{args.host}:{args.port}/v1 (Ctrl-C stops)", file=sys.stderr, flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level, timeout_graceful_shutdown=5)
    return 0
