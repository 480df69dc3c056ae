"""The ecosystem tests run the real MTEB and BEIR (the ``ecosystem`` extra, which ``make
setup`` installs); without them they skip, naming the install line. Offline throughout:
Hugging Face ``datasets`` caches what MTEB loads under the test's own folder."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

try:
    import beir  # noqa: F401
    import mteb  # noqa: F401
except ImportError as exc:  # pragma: no cover - the extra is missing
    pytest.skip(
        f"needs MTEB and BEIR ({exc}); install them with: pip install 'mdcr[ecosystem]'",
        allow_module_level=True,
    )


@pytest.fixture(scope="session", autouse=True)
def _offline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    cache = tmp_path_factory.mktemp("hf-datasets")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setenv("HF_DATASETS_OFFLINE", "1")
        mp.setenv("HF_DATASETS_CACHE", str(cache))
        import datasets.config

        mp.setattr(datasets.config, "HF_DATASETS_CACHE", Path(cache))
        yield
