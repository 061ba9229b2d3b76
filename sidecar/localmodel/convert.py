"""The one-time conversion, run in the worker (it imports gguf, numpy and openvino_genai).

openvino-genai cannot read the packaged GGUF's Q5_0 tensors, so they are rewritten as Q8_0 (deterministic, ~0.3 %
weight difference), the runtime then reads that GGUF once and saves its own model (``openvino_model.xml`` …), and
later loads read that saved model (about 2–3 s). Everything is built in a temporary folder and renamed into place.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from pathlib import Path
from typing import Any

from .assets import ModelFiles, Progress

OV_MARKER = "openvino_model.xml"
READABLE = {"F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q4_K", "Q6_K"}
"""GGUF tensor types openvino-genai reads (the others are re-quantised to Q8_0)."""


def block_telemetry() -> None:
    """Keep openvino's usage telemetry out (no network at run time): with no consent file it would send analytics
    from a forked ``multiprocessing`` child (seen: a fork of the worker left hanging). openvino falls back to its
    own no-op stub when ``openvino_telemetry`` cannot be imported. Call before importing openvino."""
    import sys

    sys.modules.setdefault("openvino_telemetry", None)  # type: ignore[arg-type]


def needs_requant(gguf_path: Path) -> list[str]:
    import gguf

    reader = gguf.GGUFReader(str(gguf_path))
    return sorted({t.tensor_type.name for t in reader.tensors} - READABLE)


def requantize(src: Path, dst: Path, progress: Progress | None = None) -> None:
    """Rewrite every tensor type the runtime cannot read as Q8_0; copy the rest and all metadata as is."""
    import gguf
    from gguf import GGMLQuantizationType as Q
    from gguf import quants

    reader = gguf.GGUFReader(str(src))
    arch = reader.fields[gguf.Keys.General.ARCHITECTURE].contents()
    writer = gguf.GGUFWriter(str(dst), arch=arch, endianess=reader.endianess)
    for field in reader.fields.values():
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue
        val_type = field.types[0]
        sub_type = field.types[-1] if val_type == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), val_type, sub_type=sub_type)
    tensors: list[tuple[str, Any, Any]] = []
    for t in reader.tensors:
        if t.tensor_type.name in READABLE:
            tensors.append((t.name, t.data, t.tensor_type))
        else:
            tensors.append((t.name, None, t))  # converted while writing (keeps peak memory down)
    for name, data, kind in tensors:
        if data is None:
            t = kind
            shape = quants.quant_shape_to_byte_shape(tuple(int(x) for x in reversed(t.shape)), Q.Q8_0)
            n_bytes = int(shape[-1]) * int(_prod(shape[:-1]))
            writer.add_tensor_info(name, shape, _u8(), n_bytes, Q.Q8_0)
        else:
            writer.add_tensor_info(name, data.shape, data.dtype, data.nbytes, kind)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    total = len(tensors)
    for i, (_name, data, kind) in enumerate(tensors):
        if data is None:
            t = kind
            data = quants.quantize(quants.dequantize(t.data, t.tensor_type), Q.Q8_0)
        writer.write_tensor_data(data, tensor_endianess=reader.endianess)
        if progress:
            progress("requantize", (i + 1) / total)
    writer.close()


def _prod(values: Any) -> int:
    n = 1
    for v in values:
        n *= int(v)
    return n


def _u8() -> Any:
    import numpy as np

    return np.uint8


def ensure_converted(files: ModelFiles, root: Path, progress: Progress | None = None) -> tuple[Path, dict[str, Any]]:
    """The runtime's saved model for ``files`` (built once, cached by sha256); (folder, what it cost)."""
    final = files.converted_dir(root)
    if (final / OV_MARKER).is_file():
        return final, {"cached": True}
    block_telemetry()
    import openvino_genai as ov_genai

    root.mkdir(parents=True, exist_ok=True)
    work = root / f"{final.name}.partial{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    cost: dict[str, Any] = {"cached": False}
    try:
        t0 = time.perf_counter()
        bad = needs_requant(files.gguf)
        src = work / "model.gguf"
        if bad:
            if progress:
                progress("requantize", 0.0)
            requantize(files.gguf, src, progress)
        else:
            os.symlink(files.gguf, src)
        cost["requantized"] = bad
        cost["requantize_s"] = round(time.perf_counter() - t0, 2)
        if progress:
            progress("convert", 0.0)
        t1 = time.perf_counter()
        pipe = ov_genai.LLMPipeline(str(src), "CPU", enable_save_ov_model=True)
        del pipe
        cost["convert_s"] = round(time.perf_counter() - t1, 2)
        if not (work / OV_MARKER).is_file():
            raise RuntimeError("the runtime did not save its converted model")
        src.unlink()
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(final)
        os.replace(work, final)
        if progress:
            progress("convert", 1.0)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return final, cost
