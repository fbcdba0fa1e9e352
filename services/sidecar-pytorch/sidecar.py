"""Shoal's PyTorch runtime sidecar: runs Hugging Face-format models for one worker.

    python sidecar.py --socket PATH [--device auto|cpu|cuda] [--dtype auto|fp32|fp16|bf16] [--threads N]

The worker listens on the Unix socket PATH and starts this process, which connects to it and
then answers the worker's frames in order (PROTOCOL.md): `load`, `run`, `unload`, `ping`. One
process serves all of a worker's sidecar models on one device, one call at a time, as a GPU
runs them. Embedders are pooled here (mean, CLS or last token, un-normalised, in float32: the worker
normalises); rerankers and classifiers return their logits.

On CUDA the default dtype is float16 and inputs are copied to the device through pinned memory.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time
import traceback

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from frames import FrameError, read_frame, write_frame  # noqa: E402

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
POOLINGS = ("mean", "cls", "lasttoken", "none")


class RequestError(Exception):
    """A request the sidecar refuses; `reason` is one of the worker's InferenceError reasons."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason


def pick_device(choice: str) -> torch.device:
    if choice == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if choice == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: PyTorch sees no CUDA device")
    return torch.device(choice)


def pick_dtype(choice: str, device: torch.device) -> torch.dtype:
    if choice == "auto":
        return torch.float16 if device.type == "cuda" else torch.float32
    return DTYPES[choice]


class Model:
    """One loaded model: the transformer, its pooling and the bytes it holds."""

    def __init__(self, path: str, pooling: str, device: torch.device, dtype: torch.dtype, seq_multiple: int = 1):
        from transformers import AutoModel, AutoModelForSequenceClassification

        if pooling not in POOLINGS:
            raise RequestError("invalid-input", f"pooling must be one of {POOLINGS} (got {pooling!r})")
        if not os.path.isfile(os.path.join(path, "config.json")):
            raise RequestError("load-failed", f"{path} has no config.json (a Hugging Face model folder is expected)")
        cls = AutoModelForSequenceClassification if pooling == "none" else AutoModel
        try:
            model = cls.from_pretrained(path)
        except Exception as err:  # a corrupt or foreign folder
            raise RequestError("load-failed", f"cannot load {path}: {err}") from err
        self.model = model.to(device=device, dtype=dtype).eval()
        self.pooling = pooling
        self.device = device
        self.seq_multiple = seq_multiple
        self.typed = getattr(model.config, "type_vocab_size", 0) > 1
        self.bytes = sum(t.numel() * t.element_size() for t in [*model.parameters(), *model.buffers()])
        self.dimensions = int(model.config.num_labels if pooling == "none" else model.config.hidden_size)

    def run(self, ids: np.ndarray, lengths: np.ndarray, types: np.ndarray | None) -> torch.Tensor:
        batch, seq = ids.shape
        if lengths.shape != (batch,) or (types is not None and types.shape != ids.shape):
            raise RequestError("invalid-input", f"lengths {lengths.shape} / types do not match ids {ids.shape}")
        if batch == 0 or seq == 0 or lengths.min() < 1 or lengths.max() > seq:
            raise RequestError("invalid-input", f"every sequence needs 1..{seq} tokens")
        cuda = self.device.type == "cuda"
        pad = -seq % self.seq_multiple
        if pad:
            # Fewer distinct shapes (each new one costs kernel selection) and tensor-core-friendly
            # lengths; the mask hides the extra positions, so results do not change.
            ids = np.pad(ids, ((0, 0), (0, pad)))
            types = None if types is None else np.pad(types, ((0, 0), (0, pad)))
            seq += pad
        ids_t = torch.from_numpy(ids)
        len_t = torch.from_numpy(lengths)
        if cuda:
            ids_t, len_t = ids_t.pin_memory(), len_t.pin_memory()
        ids_t = ids_t.to(self.device, non_blocking=cuda).long()
        len_t = len_t.to(self.device, non_blocking=cuda).long()
        mask = (torch.arange(seq, device=self.device)[None, :] < len_t[:, None]).long()
        kwargs = {"input_ids": ids_t, "attention_mask": mask}
        if self.typed:
            kwargs["token_type_ids"] = (
                torch.from_numpy(types).to(self.device).long() if types is not None else torch.zeros_like(ids_t)
            )
        out = self.model(**kwargs)
        if self.pooling == "none":
            return out.logits.float()
        hidden = out.last_hidden_state.float()
        if self.pooling == "cls":
            return hidden[:, 0]
        if self.pooling == "lasttoken":
            # Inputs are right-padded (ids then zeros), so a row's last real token is at length - 1.
            return hidden[torch.arange(batch, device=self.device), len_t - 1]
        m = mask.unsqueeze(-1).float()
        return (hidden * m).sum(1) / m.sum(1).clamp_min(1.0)


def configure(device: torch.device, cudnn_attention: bool) -> None:
    if device.type != "cuda":
        return
    torch.backends.cuda.enable_cudnn_sdp(cudnn_attention)
    torch.backends.cuda.matmul.allow_tf32 = True


class Sidecar:
    def __init__(self, device: torch.device, dtype: torch.dtype, seq_multiple: int):
        self.device = device
        self.dtype = dtype
        self.seq_multiple = seq_multiple
        self.models: dict[str, Model] = {}

    def handle(self, meta: dict[str, str], tensors: dict[str, np.ndarray]):
        op = meta.get("op")
        if op == "run":
            return self.run(meta, tensors)
        if op == "load":
            t0 = time.perf_counter()
            name = meta["model"]
            model = Model(meta["path"], meta.get("pooling", "mean"), self.device, self.dtype, self.seq_multiple)
            self.models[name] = model
            return {
                "op": "loaded",
                "bytes": model.bytes,
                "dimensions": model.dimensions,
                "ms": f"{(time.perf_counter() - t0) * 1000:.1f}",
            }, None
        if op == "unload":
            self.models.pop(meta["model"], None)
            if self.device.type == "cuda":
                torch.cuda.empty_cache()
            return {"op": "unloaded"}, None
        if op == "ping":
            allocated = torch.cuda.memory_allocated(self.device) if self.device.type == "cuda" else 0
            return {"op": "pong", "models": len(self.models), "allocated": allocated}, None
        raise RequestError("invalid-input", f"unknown op {op!r}")

    def run(self, meta: dict[str, str], tensors: dict[str, np.ndarray]):
        model = self.models.get(meta.get("model", ""))
        if model is None:
            raise RequestError("invalid-input", f"model {meta.get('model')!r} is not loaded")
        groups = int(meta.get("groups", "0"))
        if groups < 1:
            raise RequestError("invalid-input", "a run needs at least one group")
        t0 = time.perf_counter()
        outs = []
        with torch.inference_mode():
            for g in range(groups):
                ids = tensors.get(f"g{g}.ids")
                lengths = tensors.get(f"g{g}.lengths")
                if ids is None or lengths is None or ids.ndim != 2:
                    raise RequestError("invalid-input", f"group {g} needs ids [batch, seq] and lengths [batch]")
                outs.append(model.run(ids, lengths, tensors.get(f"g{g}.types")))
            result = torch.cat(outs).cpu().numpy()
        ms = (time.perf_counter() - t0) * 1000
        return {"op": "result", "ms": f"{ms:.3f}"}, {"output": result}


def serve(sock: socket.socket, sidecar: Sidecar) -> None:
    while True:
        frame = read_frame(sock)
        if frame is None:
            return
        meta, tensors = frame
        rid = meta.get("id", "0")
        try:
            reply, out = sidecar.handle(meta, tensors)
        except RequestError as err:
            reply, out = {"op": "error", "reason": err.reason, "message": str(err)}, None
        except torch.cuda.OutOfMemoryError as err:
            torch.cuda.empty_cache()
            reply, out = {"op": "error", "reason": "run-failed", "message": f"out of device memory: {err}"}, None
        except Exception as err:  # noqa: BLE001 - any failure is answered, the sidecar keeps serving
            traceback.print_exc(file=sys.stderr)
            reason = "load-failed" if meta.get("op") == "load" else "run-failed"
            reply, out = {"op": "error", "reason": reason, "message": f"{type(err).__name__}: {err}"}, None
        write_frame(sock, {"id": rid, **reply}, out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--socket", required=True)
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    parser.add_argument("--dtype", default="auto", choices=["auto", *DTYPES])
    parser.add_argument("--threads", type=int, default=0, help="CPU threads for PyTorch (0: its default)")
    parser.add_argument("--seq-multiple", type=int, default=0, help="pad lengths to a multiple of this (default 16 on CUDA, 1 on CPU)")
    parser.add_argument(
        "--cudnn-attention", choices=["on", "off"], default="off",
        help="let SDPA use cuDNN attention (off by default: it plans each new shape, ~100 ms apiece)",
    )
    args = parser.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    device = pick_device(args.device)
    dtype = pick_dtype(args.dtype, device)
    configure(device, args.cudnn_attention == "on")
    seq_multiple = args.seq_multiple or (16 if device.type == "cuda" else 1)
    sidecar = Sidecar(device, dtype, seq_multiple)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(args.socket)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    write_frame(
        sock,
        {
            "id": "0",
            "op": "hello",
            "pid": os.getpid(),
            "device": device.type,
            "deviceName": name,
            "dtype": str(dtype).removeprefix("torch."),
            "torch": torch.__version__,
        },
    )
    try:
        serve(sock, sidecar)
    except FrameError as err:
        print(f"sidecar: bad frame from the worker: {err}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
