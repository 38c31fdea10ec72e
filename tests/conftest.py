"""Shared fixtures: the real catalog, tiny workloads, a private studies folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from knobtune.knobs import Catalog, load_catalog
from knobtune.storage import StudyStore, open_store
from knobtune.workloads import Workload, load_workload

CORPUS = Path(__file__).parent / "corpus"


@pytest.fixture(scope="session")
def rocksdb() -> Catalog:
    return load_catalog("rocksdb")


@pytest.fixture()
def store(tmp_path: Path) -> StudyStore:
    return open_store(tmp_path / "studies")


def tiny(name: str, records: int) -> Workload:
    """A shipped workload shrunk to ``records`` at full size (seconds, not minutes)."""
    return load_workload(name).scaled(records)


@pytest.fixture()
def tiny_pgd() -> Workload:
    return tiny("put-get-delete", 4000)
