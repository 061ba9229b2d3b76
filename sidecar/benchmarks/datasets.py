"""Benchmark datasets: folders ``<dataset_id>/`` with ``dataset.json``, ``cases.jsonl`` and (rag, optional for
agent) ``corpus.jsonl``, registered from the shipped ``datasets/`` folder and the data dir's ``datasets/`` (a host
import). Each is validated on load (``BENCHMARK_DATASET_INVALID`` names the file, line, case and field) and
identified by ``content_hash``: the sha256 of a canonical JSON form of the validated content (so whitespace and
key order in the files do not change it, any change of content does).

The API never takes a path: callers name a ``dataset_id`` (phase-2 §9.1).
"""

from __future__ import annotations

import hashlib
import json
import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ValidationError

from sidecar.core.common import ErrorInfo
from sidecar.core.errors import BadRequestError, NotFoundError

from .models import AgentCase, CorpusNote, DatasetInfo, DatasetManifest, DatasetProblem, RagCase

logger = logging.getLogger(__name__)

MAX_FILE_BYTES = 50 * 1024 * 1024
Source = Literal["builtin", "imported"]
M = TypeVar("M", bound=BaseModel)


def builtin_datasets_dir() -> Path:
    """The repository's ``datasets/`` (inside the binary: bundled beside the code)."""
    frozen = getattr(sys, "_MEIPASS", None)
    if frozen:
        return Path(frozen) / "datasets"
    return Path(__file__).resolve().parents[2] / "datasets"


def invalid(dataset_id: str, message: str, **details: Any) -> BadRequestError:
    return BadRequestError(message, code="BENCHMARK_DATASET_INVALID", details={"dataset_id": dataset_id, **details})


@dataclass
class Dataset:
    manifest: DatasetManifest
    cases: list[RagCase] | list[AgentCase]
    corpus: list[CorpusNote]
    content_hash: str
    source: Source
    path: Path = field(repr=False)

    @property
    def dataset_id(self) -> str:
        return self.manifest.dataset_id

    @property
    def kind(self) -> str:
        return self.manifest.kind

    def info(self) -> DatasetInfo:
        m = self.manifest
        return DatasetInfo(
            dataset_id=m.dataset_id,
            kind=m.kind,
            version=m.version,
            description=m.description,
            case_count=len(self.cases),
            content_hash=self.content_hash,
            source=self.source,
            note_count=len(self.corpus),
        )


def _read_text(dataset_id: str, path: Path) -> str:
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise invalid(dataset_id, f"{path.name} is larger than {MAX_FILE_BYTES} bytes.", file=path.name)
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise invalid(dataset_id, f"{path.name} is not UTF-8.", file=path.name) from None
    except OSError as exc:
        raise invalid(dataset_id, f"{path.name} cannot be read.", file=path.name, reason=exc.strerror) from None


def _field_errors(exc: ValidationError) -> list[dict[str, Any]]:
    return [{"field": ".".join(str(p) for p in e["loc"]), "type": e["type"], "message": e["msg"]} for e in exc.errors()]


def _validated(dataset_id: str, model: type[M], raw: Any, file: str, line: int | None) -> M:
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        errors = _field_errors(exc)
        case_id = raw.get("case_id") if isinstance(raw, dict) else None
        where = f"{file}" + (f" line {line}" if line else "") + (f" (case {case_id})" if case_id else "")
        raise invalid(
            dataset_id,
            f"{where}: field {errors[0]['field'] or '(root)'}: {errors[0]['message']}",
            file=file,
            line=line,
            case_id=case_id,
            field=errors[0]["field"],
            errors=errors[:20],
        ) from None


def _jsonl(dataset_id: str, path: Path, model: type[M]) -> list[M]:
    items: list[M] = []
    for n, line in enumerate(_read_text(dataset_id, path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            raise invalid(dataset_id, f"{path.name} line {n}: not JSON ({exc.msg}).", file=path.name, line=n) from None
        items.append(_validated(dataset_id, model, raw, path.name, n))
    return items


def _duplicates(ids: list[str]) -> list[str]:
    seen: set[str] = set()
    return sorted({i for i in ids if i in seen or seen.add(i)})  # type: ignore[func-returns-value]


def _check_rag(dataset_id: str, cases: list[RagCase], corpus: list[CorpusNote]) -> None:
    if not corpus:
        raise invalid(dataset_id, "a rag dataset needs a non-empty corpus.jsonl.", file="corpus.jsonl")
    notes = {n.note_id: {b.block_id for b in n.blocks} for n in corpus}
    blocks = [b.block_id for n in corpus for b in n.blocks]
    for what, ids in (("note_id", [n.note_id for n in corpus]), ("block_id", blocks)):
        dup = _duplicates(ids)
        if dup:
            raise invalid(dataset_id, f"corpus.jsonl: duplicate {what} {dup[0]}.", file="corpus.jsonl", field=what)
    owner = {b: n for n, bs in notes.items() for b in bs}
    for c in cases:
        for note_id in c.expected_note_ids:
            if note_id not in notes:
                raise invalid(
                    dataset_id,
                    f"case {c.case_id}: expected note {note_id} is not in the corpus.",
                    file="cases.jsonl",
                    case_id=c.case_id,
                    field="expected_note_ids",
                )
        for block_id in c.expected_block_ids:
            if owner.get(block_id) not in c.expected_note_ids:
                raise invalid(
                    dataset_id,
                    f"case {c.case_id}: expected block {block_id} is not a block of an expected note.",
                    file="cases.jsonl",
                    case_id=c.case_id,
                    field="expected_block_ids",
                )


def _check_agent(dataset_id: str, cases: list[AgentCase], tool_names: set[str] | None) -> None:
    if tool_names is None:
        return
    for c in cases:
        for fld in ("allowed_tools", "expected_tools"):
            unknown = sorted(set(getattr(c, fld) or ()) - tool_names)
            if unknown:
                raise invalid(
                    dataset_id,
                    f"case {c.case_id}: unknown tool {unknown[0]} in {fld}.",
                    file="cases.jsonl",
                    case_id=c.case_id,
                    field=fld,
                )
        if c.mock_script is not None:
            from sidecar.providers.mock import MockScript

            try:
                MockScript.model_validate(c.mock_script)
            except ValidationError as exc:
                first = _field_errors(exc)[0]
                raise invalid(
                    dataset_id,
                    f"case {c.case_id}: mock_script.{first['field']}: {first['message']}",
                    file="cases.jsonl",
                    case_id=c.case_id,
                    field=f"mock_script.{first['field']}",
                ) from None


def canonical_hash(manifest: DatasetManifest, cases: list[Any], corpus: list[CorpusNote]) -> str:
    doc = {
        "dataset": manifest.model_dump(mode="json"),
        "cases": [c.model_dump(mode="json") for c in cases],
        "corpus": [n.model_dump(mode="json") for n in corpus],
    }
    text = json.dumps(doc, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def load_dataset(folder: Path, source: Source, tool_names: set[str] | None = None) -> Dataset:
    """Read and validate one dataset folder (``BENCHMARK_DATASET_INVALID`` on any problem)."""
    dataset_id = folder.name
    manifest_path = folder / "dataset.json"
    try:
        raw = json.loads(_read_text(dataset_id, manifest_path))
    except json.JSONDecodeError as exc:
        raise invalid(dataset_id, f"dataset.json: not JSON ({exc.msg}).", file="dataset.json") from None
    manifest = _validated(dataset_id, DatasetManifest, raw, "dataset.json", None)
    if manifest.dataset_id != dataset_id:
        raise invalid(
            dataset_id,
            f"dataset.json names {manifest.dataset_id!r} but the folder is {dataset_id!r}.",
            file="dataset.json",
            field="dataset_id",
        )
    case_model: type[RagCase] | type[AgentCase] = RagCase if manifest.kind == "rag" else AgentCase
    cases: list[Any] = _jsonl(dataset_id, folder / "cases.jsonl", case_model)
    if not cases:
        raise invalid(dataset_id, "cases.jsonl holds no case.", file="cases.jsonl")
    dup = _duplicates([c.case_id for c in cases])
    if dup:
        raise invalid(dataset_id, f"duplicate case_id {dup[0]}.", file="cases.jsonl", case_id=dup[0], field="case_id")
    corpus_path = folder / "corpus.jsonl"
    corpus = _jsonl(dataset_id, corpus_path, CorpusNote) if corpus_path.exists() else []
    if manifest.kind == "rag":
        _check_rag(dataset_id, cases, corpus)
    else:
        _check_agent(dataset_id, cases, tool_names)
    return Dataset(manifest, cases, corpus, canonical_hash(manifest, cases, corpus), source, folder)


class DatasetRegistry:
    """The datasets of the shipped folder and of the data dir's ``datasets/`` (read on each call: an import
    is a folder the host copies there). A shipped dataset wins over an imported one of the same id."""

    def __init__(self, roots: list[tuple[Path, Source]], tool_names: set[str] | None = None) -> None:
        self._roots = roots
        self._tool_names = tool_names

    def _folders(self) -> dict[str, tuple[Path, Source]]:
        found: dict[str, tuple[Path, Source]] = {}
        for root, source in self._roots:
            if not root.is_dir():
                continue
            for folder in sorted(root.iterdir()):
                if (folder / "dataset.json").is_file() and folder.name not in found:
                    found[folder.name] = (folder, source)
        return found

    def scan(self) -> tuple[list[Dataset], list[DatasetProblem]]:
        good: list[Dataset] = []
        bad: list[DatasetProblem] = []
        for dataset_id, (folder, source) in self._folders().items():
            try:
                good.append(load_dataset(folder, source, self._tool_names))
            except BadRequestError as exc:
                logger.warning("benchmark dataset %s is invalid: %s", dataset_id, exc.message)
                bad.append(
                    DatasetProblem(
                        dataset_id=dataset_id,
                        source=source,
                        error=ErrorInfo(code=exc.code, message=exc.message, details=exc.details),
                    )
                )
        return good, bad

    def get(self, dataset_id: str) -> Dataset:
        entry = self._folders().get(dataset_id)
        if entry is None:
            raise NotFoundError(
                "Benchmark dataset was not found.",
                code="BENCHMARK_DATASET_NOT_FOUND",
                details={"dataset_id": dataset_id},
            )
        return load_dataset(entry[0], entry[1], self._tool_names)
