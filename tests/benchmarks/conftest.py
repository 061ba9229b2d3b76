from __future__ import annotations

import json
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from sidecar.benchmarks.datasets import builtin_datasets_dir
from tests.support.bench_env import BenchEnv, bench_environment

SHIPPED = builtin_datasets_dir()


def write_dataset(
    root: Path, dataset_id: str, kind: str, cases: list[dict[str, Any]], corpus: list[dict[str, Any]] | None = None
) -> Path:
    folder = root / dataset_id
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "dataset.json").write_text(
        json.dumps({"dataset_id": dataset_id, "kind": kind, "version": "0.1.0", "description": "test"}),
        encoding="utf-8",
    )
    (folder / "cases.jsonl").write_text(
        "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in cases), encoding="utf-8"
    )
    if corpus is not None:
        (folder / "corpus.jsonl").write_text(
            "".join(json.dumps(n, ensure_ascii=False) + "\n" for n in corpus), encoding="utf-8"
        )
    return folder


@pytest.fixture
def datasets_root(tmp_path: Path) -> Path:
    """A copy of the shipped datasets (tests may add broken ones beside them)."""
    root = tmp_path / "shipped"
    shutil.copytree(SHIPPED, root)
    return root


@pytest.fixture
async def env(tmp_path: Path, datasets_root: Path) -> AsyncIterator[BenchEnv]:
    async with bench_environment(tmp_path / "data", tmp_path / "user-workspace", builtin_dir=datasets_root) as e:
        yield e
