"""Requests per minute through deploy/launch.py's nginx, for sizing a deployment (README "Serving many people").

    python deploy/throughput.py --replicas 1 --clients 4 --seconds 60 -- --models models/fastvlm
    python deploy/throughput.py --replicas 2 --clients 4 --seconds 60 -- --models models/fastvlm

Starts the stack on 127.0.0.1 (its own ports and run folder), then `--clients` clients each ask one question about
a new image (640x480 JPEG, never seen before: no embedding reuse), wait for the whole answer, and ask again, for
`--seconds` after a warm-up round. Prints one JSON line: answered and busy per minute, latency p50/p90.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import signal
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import numpy as np
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parent))
import launch  # noqa: E402 - a script beside this one

KEY = "throughput-key"


def image_url(seed: int) -> str:
    """A smooth random picture (small as a JPEG, different every time)."""
    small = np.random.default_rng(seed).integers(0, 256, (6, 8, 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(small).resize((640, 480), Image.BICUBIC).save(buf, "JPEG", quality=85)
    return "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode()


def ask(url: str, seed: int, max_tokens: int) -> tuple[int, float, float]:
    """(status, seconds, when it ended)."""
    body = {"max_tokens": max_tokens, "temperature": 0, "messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": image_url(seed)}}, {"type": "text", "text": "What is this?"}]}]}
    t = time.perf_counter()
    r = httpx.post(url + "/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {KEY}"}, timeout=300)
    return r.status_code, time.perf_counter() - t, time.monotonic()


def measure(url: str, clients: int, seconds: float, max_tokens: int) -> dict:
    results: list[tuple[int, float, float]] = []
    end = time.monotonic() + seconds
    seeds = iter(range(10**6))
    lock = threading.Lock()

    def client():
        while time.monotonic() < end:
            with lock:
                seed = next(seeds)
            results.append(ask(url, seed, max_tokens))

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    within = [(code, s) for code, s, ended in results if ended <= end]  # answers still running at the end: not counted
    ok = sorted(s for code, s in within if code == 200)
    return {"answered_per_min": round(len(ok) * 60 / seconds, 1),
            "busy_per_min": round(sum(code == 503 for code, _ in within) * 60 / seconds, 1),
            "other_statuses": sorted({code for code, _, _ in results} - {200, 503}),
            "latency_p50_s": round(statistics.median(ok), 2) if ok else None,
            "latency_p90_s": round(ok[int(0.9 * (len(ok) - 1))], 2) if ok else None}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python deploy/throughput.py", description=__doc__.split("\n")[0])
    p.add_argument("--replicas", type=int, default=2)
    p.add_argument("--clients", type=int, default=4, help="clients asking at once, each again when answered")
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--max-tokens", type=int, default=32)
    p.add_argument("--threads", type=int, help="CPU threads per replica (default: cores / replicas)")
    p.add_argument("--first-port", type=int, default=18861)
    p.add_argument("app_args", nargs="*", help="after --: arguments for every app.py (the models)")
    args = p.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # the replicas are stopped on the way out
    with tempfile.TemporaryDirectory(prefix="fastvlm-throughput-") as run_dir:
        config = launch.StackConfig(args.replicas, f"127.0.0.1:{args.first_port}", args.first_port + 1,
                                    run_dir=Path(run_dir), app_args=(*args.app_args, "--no-voice"),
                                    threads=args.threads)
        stack = launch.Stack(config, env={"FASTVLM_API_KEY": KEY})
        try:
            stack.start().wait_ready()
            url = f"http://127.0.0.1:{args.first_port}"
            measure(url, args.clients, 1.0, args.max_tokens)  # warm-up: every replica has answered once
            result = measure(url, args.clients, args.seconds, args.max_tokens)
        finally:
            stack.stop()
    print(json.dumps({"replicas": args.replicas, "clients": args.clients, "max_tokens": args.max_tokens,
                      "threads_per_replica": config.threads_per_replica, **result}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
