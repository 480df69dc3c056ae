from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.integration.encoders.fixtures import make_tiny_bert

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Folder of a tiny random BERT built offline once per session."""
    return make_tiny_bert(tmp_path_factory.mktemp("tiny-bert"))
