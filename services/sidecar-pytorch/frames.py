"""Frames of the sidecar protocol (PROTOCOL.md): a 4-byte little-endian length, then a blob in the
safetensors layout (8-byte little-endian header length, a JSON header naming each tensor's dtype,
shape and byte range plus a `__metadata__` map of strings, then the tensors' bytes).

Tensors are read as numpy views of the received buffer (no copy) and written from contiguous
arrays' own memory.
"""

from __future__ import annotations

import json
import socket
import struct

import numpy as np

DTYPES: dict[str, np.dtype] = {
    "I32": np.dtype("<i4"),
    "I64": np.dtype("<i8"),
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "U8": np.dtype("u1"),
}
NAMES = {v: k for k, v in DTYPES.items()}
# Larger than any batch the worker sends (1024 × 512 int32 ids and types is 4 MiB).
MAX_FRAME_BYTES = 1 << 30


class FrameError(Exception):
    """A frame that does not follow PROTOCOL.md."""


def _read_exact(sock: socket.socket, n: int) -> bytearray | None:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            if got == 0:
                return None
            raise FrameError(f"connection closed {got} bytes into a {n}-byte read")
        got += k
    return buf


def read_frame(sock: socket.socket) -> tuple[dict[str, str], dict[str, np.ndarray]] | None:
    """The next frame, or None at a clean end of stream."""
    head = _read_exact(sock, 4)
    if head is None:
        return None
    (length,) = struct.unpack("<I", head)
    if length < 8 or length > MAX_FRAME_BYTES:
        raise FrameError(f"frame length {length} out of range")
    body = _read_exact(sock, length)
    if body is None:
        raise FrameError("connection closed inside a frame")
    return decode(body)


def decode(body: bytearray) -> tuple[dict[str, str], dict[str, np.ndarray]]:
    (header_len,) = struct.unpack_from("<Q", body, 0)
    if 8 + header_len > len(body):
        raise FrameError(f"header length {header_len} exceeds the frame")
    header = json.loads(bytes(body[8 : 8 + header_len]))
    meta = header.pop("__metadata__", {}) or {}
    data = memoryview(body)[8 + header_len :]
    tensors: dict[str, np.ndarray] = {}
    for name, info in header.items():
        dtype = DTYPES.get(info.get("dtype"))
        if dtype is None:
            raise FrameError(f"tensor {name}: unsupported dtype {info.get('dtype')!r}")
        shape = [int(d) for d in info["shape"]]
        start, end = (int(x) for x in info["data_offsets"])
        count = int(np.prod(shape)) if shape else 1
        if not (0 <= start <= end <= len(data)) or end - start != count * dtype.itemsize:
            raise FrameError(f"tensor {name}: byte range {start}..{end} does not hold {shape} {info['dtype']}")
        tensors[name] = np.frombuffer(data[start:end], dtype=dtype).reshape(shape)
    return {str(k): str(v) for k, v in meta.items()}, tensors


def write_frame(sock: socket.socket, meta: dict[str, object], tensors: dict[str, np.ndarray] | None = None) -> None:
    header: dict[str, object] = {"__metadata__": {k: str(v) for k, v in meta.items()}}
    arrays = []
    offset = 0
    for name, arr in (tensors or {}).items():
        arr = np.ascontiguousarray(arr)
        dtype = NAMES.get(arr.dtype.newbyteorder("<") if arr.dtype.byteorder == ">" else arr.dtype)
        if dtype is None:
            raise FrameError(f"tensor {name}: unsupported dtype {arr.dtype}")
        header[name] = {"dtype": dtype, "shape": list(arr.shape), "data_offsets": [offset, offset + arr.nbytes]}
        offset += arr.nbytes
        arrays.append(arr)
    head = json.dumps(header, separators=(",", ":")).encode()
    # Pad the header so tensor data starts 8-byte aligned, as safetensors recommends.
    head += b" " * (-(len(head)) % 8)
    prefix = struct.pack("<IQ", 8 + len(head) + offset, len(head))
    sock.sendall(prefix + head)
    for arr in arrays:
        sock.sendall(memoryview(arr).cast("B"))
