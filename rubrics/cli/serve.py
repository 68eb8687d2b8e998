"""`rubric serve`: an OpenAI-compatible server on the in-process engine, for many grading workers to share.

    rubric serve --model M --host 127.0.0.1 --port 8000
    rubric grade rubric.yaml runs/ --judge openai --base-url http://127.0.0.1:8000/v1 --model M

Routes: GET /v1/models, POST /v1/completions, POST /v1/chat/completions (logprobs, top_logprobs, max_tokens,
temperature, top_p, stop, seed, stream), GET /metrics (engine and batching counters), GET /health. Request bodies
over --max-request-bytes (default 4 MiB) get 413; bodies over 64 KiB beyond --large-body-rate bytes per second
(default 1 MiB, all clients together) get 429. Connections have a header and a body timeout and caps in all and
per client, and a repeated log line is written once with a count (judge_engine.server.connections).
"""
from __future__ import annotations

import os
import sys

from rubrics.judges.fitted.calibration_file import QUANTIZATIONS

API_KEY_VARIABLE = "RUBRICS_SERVE_API_KEY"
# judge_engine.server.limits' defaults, repeated so that `rubric --help` needs no server extras
DEFAULT_MAX_REQUEST_BYTES = 4 * 1024 * 1024
DEFAULT_LARGE_BODY_RATE = 1024 * 1024
SERVE_INSTALL = "pip install 'agent-rubrics[engine,serve]'"


def register(subparsers) -> None:
    parser = subparsers.add_parser("serve", help="serve the judge engine over an OpenAI-compatible HTTP API",
                                   description="Serve one model on the judge engine over an OpenAI-compatible "
                                               "HTTP API; concurrent requests share the engine's batches.")
    parser.add_argument("--model", help="a catalog name (rubric model list), a local HF folder or .gguf file "
                                         "(default: the default judge model)")
    parser.add_argument("--served-model-name", help="the model id clients send (default: a catalog model's own name, "
                                                    "else --model)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port to bind (default: 8000)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda[:N] (default: cpu)")
    parser.add_argument("--dtype", default="float32", help="float32 or bfloat16 (default: float32)")
    parser.add_argument("--quantization", default="none", choices=["none", *QUANTIZATIONS],
                        help="int8: the model's linear maps in int8 on the CPU, activations float32; int8-weights: "
                             "int8 weights times float32 activations; weights quantized once into the cache "
                             "(default: none)")
    parser.add_argument("--max-num-seqs", type=int, default=256, help="most sequences in one batch")
    parser.add_argument("--max-num-batched-tokens", type=int, default=None,
                        help="token budget of one step (default: 128 on the CPU, where a step costs what its tokens "
                             "cost and a client arriving mid-step waits for it; 2048 on CUDA)")
    parser.add_argument("--long-prefill-tokens", type=int, default=None,
                        help="while a step serves a short request, a long prompt computes at most this many tokens' "
                             "worth in it (default: 16 on the CPU, 32 on CUDA)")
    parser.add_argument("--max-model-len", type=int, help="context length (default: the model's)")
    parser.add_argument("--kv-cache-bytes", type=int, help="KV cache size on CPU (default: the engine's)")
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--api-key", default=os.environ.get(API_KEY_VARIABLE),
                        help=f"require 'Authorization: Bearer KEY' on /v1 routes (default: ${API_KEY_VARIABLE}; "
                             f"none: open)")
    parser.add_argument("--max-request-bytes", type=positive_int, default=DEFAULT_MAX_REQUEST_BYTES,
                        help=f"largest request body accepted; larger ones get 413 (default: "
                             f"{DEFAULT_MAX_REQUEST_BYTES} = 4 MiB)")
    parser.add_argument("--large-body-rate", type=positive_float, default=DEFAULT_LARGE_BODY_RATE, metavar="BYTES",
                        help="bytes per second, all clients together, of request bodies over 64 KiB (reading them "
                             "holds up every other request); beyond it they get 429 with Retry-After (default: "
                             f"{DEFAULT_LARGE_BODY_RATE} = 1 MiB)")
    parser.add_argument("--log-level", default="warning", choices=["critical", "error", "warning", "info", "debug"])
    # judge_engine.server.connections' defaults, repeated so that `rubric --help` needs no server extras
    parser.add_argument("--header-timeout", type=positive_float, default=10.0, metavar="SECONDS",
                        help="close a connection that has not sent its request headers within this time (default: 10)")
    parser.add_argument("--body-timeout", type=positive_float, default=60.0, metavar="SECONDS",
                        help="close a connection whose request body has not arrived whole within this time of its "
                             "headers (default: 60)")
    parser.add_argument("--keep-alive-timeout", type=positive_float, default=5.0, metavar="SECONDS",
                        help="close an idle connection between requests after this time (default: 5)")
    parser.add_argument("--max-connections", type=positive_int, default=512,
                        help="open connections in all; one more is answered 503 and closed (default: 512)")
    parser.add_argument("--max-connections-per-client", type=positive_int, default=128,
                        help="open connections from one client address (default: 128)")
    parser.add_argument("--log-repeat-window", type=positive_float, default=60.0, metavar="SECONDS",
                        help="log a repeated warning or error once in this time, then with a count (default: 60)")
    parser.set_defaults(handler=run)


# A served step on the CPU holds at most this many tokens, and a long prompt beside a short request this many
# of its own, so that a request arriving while a long prompt is computed waits a fraction of a second for the
# step under way and its own steps stay short (benchmarks/serve_floods.py: p99 2.3x the unloaded one under an
# 8,191-token flood with SmolLM2-135M, against 3.1x with 256 and 32).
SERVE_CPU_STEP_TOKENS = 128
SERVE_CPU_LONG_PREFILL_TOKENS = 16


def positive_float(text: str) -> float:
    import argparse
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text}")
    return value


def connection_limits(args):
    from judge_engine.server import ConnectionLimits

    return ConnectionLimits(header_timeout_s=args.header_timeout, body_timeout_s=args.body_timeout,
                            keep_alive_s=args.keep_alive_timeout, max_connections=args.max_connections,
                            max_connections_per_client=args.max_connections_per_client,
                            log_repeat_window_s=args.log_repeat_window)


def positive_int(text: str) -> int:
    import argparse

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def step_budget(args) -> int:
    return _step_option(args.max_num_batched_tokens, args.device, SERVE_CPU_STEP_TOKENS, "max_num_batched_tokens")


def long_prefill_tokens(args) -> int:
    return _step_option(args.long_prefill_tokens, args.device, SERVE_CPU_LONG_PREFILL_TOKENS, "long_prefill_tokens")


def _step_option(given: int | None, device: str, on_cpu: int, field: str) -> int:
    """The flag's value; else serving's own on the CPU; else the engine's default (EngineConfig's field)."""
    if given is not None:
        return given
    if device == "cpu":
        return on_cpu
    from judge_engine import EngineConfig

    return getattr(EngineConfig, field)


def engine_config(args):
    from judge_engine import EngineConfig

    from rubrics.cache_dir import rubrics_cache_dir

    options = {"model": served_model(args), "device": args.device, "dtype": args.dtype,
               "max_num_seqs": args.max_num_seqs, "max_num_batched_tokens": step_budget(args),
               "long_prefill_tokens": long_prefill_tokens(args),
               "cache_dir": str(rubrics_cache_dir())}
    if args.max_model_len:
        options["max_model_len"] = args.max_model_len
    if args.kv_cache_bytes:
        options["kv_cache_bytes"] = args.kv_cache_bytes
    if getattr(args, "quantization", "none") != "none":
        options["quantization"] = args.quantization
    return EngineConfig(**options)


def served_model(args) -> str:
    """--model, else the default judge model."""
    from rubrics.judges.fitted.judge_models import default_judge_model

    return args.model or default_judge_model()


def served_name(args) -> str:
    """A catalog model is served under its own name ("Qwen2.5-Coder-1.5B-Instruct"), so that an OpenAIJudge knows
    which shipped calibration is its."""
    from judge_engine import catalog_models

    if args.served_model_name:
        return args.served_model_name
    model = served_model(args)
    return next((entry.model for entry in catalog_models() if entry.name == model), model)


def run(args) -> int:
    try:
        import uvicorn

        from judge_engine import EngineConfigError, LLMEngine
        from judge_engine.server import create_app
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
    app = create_app(engine, name, api_key=args.api_key, max_request_bytes=args.max_request_bytes,
                     large_body_rate=args.large_body_rate)
    from judge_engine.server import install_repeat_filter, uvicorn_config

    limits = connection_limits(args)
    print(f"serving {name} on http://{args.host}:{args.port}/v1 (Ctrl-C stops)", file=sys.stderr, flush=True)
    config = uvicorn_config(app, args.host, args.port, limits, api_key=args.api_key, log_level=args.log_level,
                            timeout_graceful_shutdown=5)
    config.load()                       # uvicorn's loggers are configured by now; the filter goes on after
    repeats = install_repeat_filter(limits.log_repeat_window_s)

    class Server(uvicorn.Server):
        async def shutdown(self, sockets=None):
            try:
                await super().shutdown(sockets=sockets)
            finally:   # before uvicorn re-raises a SIGTERM it caught, which ends the process
                repeats.flush()   # how many repeated lines were left out since each was last written

    Server(config).run()
    return 0
