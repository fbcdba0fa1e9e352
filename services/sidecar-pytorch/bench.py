"""Throughput of the PyTorch sidecar as the worker drives it: the device check's bench mode.

    python bench.py --model DIR [--device auto|cpu|cuda] [--quick] [--out DIR]

This script stands in for the worker (no Node.js, no Kafka: an in-process queue of pre-tokenized
batches): it listens on a Unix socket, starts sidecar.py as the worker does, loads the model
and sends `run` frames of the protocol, so every figure includes the socket hop and framing.

It prints, at batch sizes 32–1024 and sequence lengths 16–256, tokens/s, p50/p99 milliseconds
per batch (wall, as the worker sees it) and GPU utilisation sampled through NVML; then a mixed
workload of log-normal lengths in length-sorted batches (useful vs padded tokens/s); then the
fit of the simulator's cost model a + b·B·L + c·B·L² to the sidecar's compute times, written
as a profile (profile.json) for the dispatch benchmark.

DIR is a Shoal model directory with a `torch/` Hugging Face folder and `tokenizer.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from frames import read_frame, write_frame  # noqa: E402

CLAIM_TOKENS_PER_S = 682_000
T0 = time.monotonic()


def log(msg: str) -> None:
    print(f"[{time.monotonic() - T0:6.1f} s] {msg}", flush=True)


class Client:
    """The worker's side of the protocol, minimal: one request at a time."""

    def __init__(self, args: argparse.Namespace):
        self.dir = tempfile.mkdtemp(prefix="shoal-sidecar-")
        path = os.path.join(self.dir, "sock")
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(path)
        server.listen(1)
        cmd = [sys.executable, "-B", str(HERE / "sidecar.py"), "--socket", path, "--device", args.device, "--dtype", args.dtype,
               "--cudnn-attention", args.cudnn_attention]
        if args.threads:
            cmd += ["--threads", str(args.threads)]
        self.proc = subprocess.Popen(cmd)
        server.settimeout(120)
        self.sock, _ = server.accept()
        server.close()
        self.next_id = 1
        hello, _ = read_frame(self.sock)
        self.hello = hello
        log(f"sidecar up: {hello}")

    def call(self, meta: dict, tensors: dict | None = None):
        rid = str(self.next_id)
        self.next_id += 1
        write_frame(self.sock, {"id": rid, **meta}, tensors)
        reply, out = read_frame(self.sock)
        if reply.get("id") != rid:
            raise RuntimeError(f"reply {reply.get('id')} for request {rid}")
        if reply.get("op") == "error":
            raise RuntimeError(f"sidecar error ({reply.get('reason')}): {reply.get('message')}")
        return reply, out

    def run(self, ids: np.ndarray, lengths: np.ndarray):
        return self.call({"op": "run", "model": "m", "groups": 1}, {"g0.ids": ids, "g0.lengths": lengths})

    def close(self) -> None:
        self.sock.close()
        self.proc.wait(timeout=30)


class GpuSampler:
    """GPU utilisation (NVML's percent of time a kernel ran) sampled every 20 ms while on."""

    def __init__(self, device_kind: str):
        self.handle = None
        self.samples: list[int] = []
        self.on = False
        if device_kind != "cuda":
            return
        try:
            import pynvml

            pynvml.nvmlInit()
            self.nvml = pynvml
            self.handle = pynvml.nvmlDeviceGetHandleByIndex(0)
            threading.Thread(target=self._loop, daemon=True).start()
        except Exception as err:  # noqa: BLE001
            log(f"no NVML ({err}): GPU utilisation not sampled")

    def _loop(self) -> None:
        while True:
            if self.on:
                self.samples.append(self.nvml.nvmlDeviceGetUtilizationRates(self.handle).gpu)
            time.sleep(0.02)

    def start(self) -> None:
        self.samples = []
        self.on = True

    def stop(self) -> float | None:
        self.on = False
        return float(np.mean(self.samples)) if self.samples else None


def random_batch(rng: np.random.Generator, batch: int, seq: int, vocab: int) -> tuple[np.ndarray, np.ndarray]:
    ids = rng.integers(1000, vocab, size=(batch, seq), dtype=np.int32)
    ids[:, 0] = 101  # [CLS]
    ids[:, -1] = 102  # [SEP]
    return ids, np.full(batch, seq, dtype=np.int32)


def time_point(client: Client, ids, lengths, min_runs: int, max_runs: int, min_s: float):
    for _ in range(2):
        client.run(ids, lengths)
    wall, compute = [], []
    start = time.perf_counter()
    while len(wall) < max_runs and (len(wall) < min_runs or time.perf_counter() - start < min_s):
        t = time.perf_counter()
        reply, _ = client.run(ids, lengths)
        wall.append((time.perf_counter() - t) * 1000)
        compute.append(float(reply["ms"]))
    return np.array(wall), np.array(compute)


def fit_profile(points: list[dict]) -> dict:
    """Least squares of compute ms on [1, B·L, B·L²] (the simulator's cost model)."""
    x = np.array([[1.0, p["batch"] * p["seq"], p["batch"] * p["seq"] ** 2] for p in points])
    y = np.array([p["compute_p50_ms"] for p in points])
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    pred = x @ coef
    r2 = 1 - float(np.sum((y - pred) ** 2) / np.sum((y - y.mean()) ** 2))
    return {"aMs": float(coef[0]), "bMsPerToken": float(coef[1]), "cMsPerToken2": float(coef[2]), "r2": r2}


def mixed_workload(client: Client, rng: np.random.Generator, vocab: int, batch: int, n: int, max_len: int):
    """Log-normal lengths (median 40 tokens), length-sorted into batches of `batch`, as the worker's padding plan does."""
    lengths = np.clip(np.round(rng.lognormal(np.log(40), 0.8, size=n)), 4, max_len).astype(np.int32)
    lengths.sort()
    batches = []
    for i in range(0, n, batch):
        ls = lengths[i : i + batch]
        seq = int(ls.max())
        ids = rng.integers(1000, vocab, size=(len(ls), seq), dtype=np.int32)
        ids[:, 0] = 101
        for r, length in enumerate(ls):
            ids[r, length - 1] = 102
            ids[r, length:] = 0
        batches.append((ids, ls.copy()))
    client.run(*batches[len(batches) // 2])
    t = time.perf_counter()
    for ids, ls in batches:
        client.run(ids, ls)
    seconds = time.perf_counter() - t
    useful = int(lengths.sum())
    padded = sum(ids.size for ids, _ in batches)
    return {"texts": n, "batch": batch, "useful_tokens": useful, "padded_tokens": padded, "seconds": seconds,
            "useful_tokens_per_s": useful / seconds, "padded_tokens_per_s": padded / seconds}


def parity(client: Client, args: argparse.Namespace, model_dir: Path) -> float | None:
    """Cosine of this device's vectors against float32 CPU vectors of the same model and texts."""
    if client.hello.get("device") != "cuda":
        return None
    import torch
    from tokenizers import Tokenizer
    from transformers import AutoModel

    tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tok.no_padding()
    tok.no_truncation()
    texts = ["A man is eating food.", "Kafka partitions are replicated across brokers.", "Hello!",
             "The quick brown fox jumps over the lazy dog, again and again, until the dog finally wakes up."]
    enc = [tok.encode(t).ids for t in texts]
    seq = max(map(len, enc))
    ids = np.zeros((len(enc), seq), dtype=np.int32)
    for i, e in enumerate(enc):
        ids[i, : len(e)] = e
    lengths = np.array([len(e) for e in enc], dtype=np.int32)
    _, out = client.run(ids, lengths)
    gpu = out["output"]
    ref = AutoModel.from_pretrained(str(model_dir / "torch")).float().eval()
    with torch.inference_mode():
        mask = torch.from_numpy((np.arange(seq)[None, :] < lengths[:, None]).astype(np.int64))
        h = ref(input_ids=torch.from_numpy(ids).long(), attention_mask=mask).last_hidden_state
        cpu = ((h * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)).numpy()
    cos = (gpu * cpu).sum(1) / (np.linalg.norm(gpu, axis=1) * np.linalg.norm(cpu, axis=1))
    return float(cos.min())


def profile_in_process(args: argparse.Namespace, model_dir: Path, vocab: int) -> None:
    """Where a call's time goes: the sidecar's model class in this process, under torch.profiler."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    import sidecar

    device = sidecar.pick_device(args.device)
    dtype = sidecar.pick_dtype(args.dtype, device)
    sidecar.configure(device, args.cudnn_attention == "on")
    model = sidecar.Model(str(model_dir / "torch"), "mean", device, dtype, 16 if device.type == "cuda" else 1)
    rng = np.random.default_rng(args.seed)
    cuda = device.type == "cuda"
    for batch, seq in [(32, 16), (1024, 256)] if not args.quick else [(8, 16)]:
        ids, lengths = random_batch(rng, batch, seq, vocab)
        with torch.inference_mode():
            for _ in range(3):
                model.run(ids, lengths, None).cpu()
            times = []
            for _ in range(10):
                t = time.perf_counter()
                out = model.run(ids, lengths, None)
                launched = time.perf_counter()
                out.cpu()
                times.append(((launched - t) * 1000, (time.perf_counter() - t) * 1000))
            launch, total = np.median(np.array(times), axis=0)
            log(f"in-process batch {batch} × seq {seq}: {total:.2f} ms per call, of which {launch:.2f} ms until the forward returned (CPU-side launch)")
            acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
            with profile(activities=acts) as prof:
                for _ in range(3):
                    model.run(ids, lengths, None).cpu()
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=14, max_name_column_width=48), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, type=Path)
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="a small grid (CPU smoke run)")
    parser.add_argument("--out", type=Path, default=None, help="folder for results.json and profile.json")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--batches", default="", help="comma-separated batch sizes (default 32..1024)")
    parser.add_argument("--seqs", default="", help="comma-separated sequence lengths (default 16..256)")
    parser.add_argument("--cudnn-attention", choices=["on", "off"], default="off")
    parser.add_argument("--profile", action="store_true", help="also profile two batches in-process (torch.profiler)")
    parser.add_argument("--mixed", type=int, default=32768, help="texts in the mixed-length workload (0: skip it)")
    args = parser.parse_args()

    model_dir: Path = args.model
    config = json.loads((model_dir / "torch" / "config.json").read_text())
    vocab = int(config["vocab_size"])
    batches = [8, 32] if args.quick else [32, 64, 128, 256, 512, 1024]
    seqs = [16, 64] if args.quick else [16, 32, 64, 128, 256]
    if args.batches:
        batches = [int(x) for x in args.batches.split(",")]
    if args.seqs:
        seqs = [int(x) for x in args.seqs.split(",")]
    min_runs, max_runs, min_s = (2, 3, 0.0) if args.quick else (5, 40, 0.4)

    log(f"host {platform.node()} python {platform.python_version()}")
    client = Client(args)
    reply, _ = client.call({"op": "load", "model": "m", "path": str(model_dir / "torch"), "pooling": "mean"})
    log(f"model loaded in {reply['ms']} ms: {int(reply['bytes']) / 2**20:.1f} MiB on {client.hello['deviceName']} ({client.hello['dtype']})")
    sampler = GpuSampler(client.hello["device"])
    rng = np.random.default_rng(args.seed)

    points = []
    total = len(batches) * len(seqs)
    print(f"\n{'batch':>6} {'seq':>5} {'tokens/s':>12} {'p50 ms':>9} {'p99 ms':>9} {'compute p50':>12} {'GPU util':>9}")
    for i, seq in enumerate(seqs):
        for j, batch in enumerate(batches):
            ids, lengths = random_batch(rng, batch, seq, vocab)
            sampler.start()
            wall, compute = time_point(client, ids, lengths, min_runs, max_runs, min_s)
            util = sampler.stop()
            tokens = batch * seq
            p = {
                "batch": batch, "seq": seq, "runs": len(wall),
                "tokens_per_s": tokens * len(wall) / (wall.sum() / 1000),
                "p50_ms": float(np.percentile(wall, 50)), "p99_ms": float(np.percentile(wall, 99)),
                "compute_p50_ms": float(np.percentile(compute, 50)), "gpu_util": util,
            }
            points.append(p)
            util_s = "-" if util is None else f"{util:.0f}%"
            print(f"{batch:>6} {seq:>5} {p['tokens_per_s']:>12,.0f} {p['p50_ms']:>9.2f} {p['p99_ms']:>9.2f} "
                  f"{p['compute_p50_ms']:>12.2f} {util_s:>9}   ({i * len(batches) + j + 1}/{total})", flush=True)

    best = max(points, key=lambda p: p["tokens_per_s"])
    log(f"peak {best['tokens_per_s']:,.0f} tokens/s at batch {best['batch']} × seq {best['seq']}: "
        f"{best['tokens_per_s'] / CLAIM_TOKENS_PER_S:.2f}× the talk's {CLAIM_TOKENS_PER_S:,} tokens/s")

    mixed = None
    if args.mixed > 0:
        sampler.start()
        mixed = mixed_workload(client, rng, vocab, batch=64 if args.quick else 512, n=min(args.mixed, 256) if args.quick else args.mixed, max_len=256)
        mixed["gpu_util"] = sampler.stop()
        log(f"mixed lengths (log-normal, median 40, length-sorted batches of {mixed['batch']}): "
            f"{mixed['useful_tokens_per_s']:,.0f} useful tokens/s ({mixed['padded_tokens_per_s']:,.0f} padded), "
            f"{mixed['useful_tokens_per_s'] / CLAIM_TOKENS_PER_S:.2f}× the claim; GPU util {mixed['gpu_util']}")

    profile = fit_profile(points)
    log(f"fitted cost model: a = {profile['aMs']:.3f} ms, b = {profile['bMsPerToken'] * 1e6:.2f} ns/token, "
        f"c = {profile['cMsPerToken2'] * 1e9:.3f} ps/token², R² = {profile['r2']:.4f}")
    cos = parity(client, args, model_dir)
    if cos is not None:
        log(f"parity: {client.hello['dtype']} on {client.hello['deviceName']} vs float32 on CPU, min cosine {cos:.6f}")
    client.close()
    if args.profile:
        profile_in_process(args, model_dir, vocab)

    results = {"hello": client.hello, "points": points, "mixed": mixed, "profile": profile, "parity_min_cosine": cos,
               "claim_tokens_per_s": CLAIM_TOKENS_PER_S, "seed": args.seed}
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
        (args.out / "profile.json").write_text(json.dumps(profile, indent=2) + "\n")
        log(f"wrote {args.out}/results.json and profile.json")


if __name__ == "__main__":
    main()
