"""The ecosystem tests run the real MTEB and BEIR (the ``ecosystem`` extra, which ``make
setup`` installs); without them they skip, naming the install line. Offline throughout:
Hugging Face ``datasets`` caches what MTEB loads under the test's own folder."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path

import pytest

# Found, not imported: MTEB's import takes seconds, paid by the tests that use it alone.
_MISSING = [name for name in ("beir", "mteb") if importlib.util.find_spec(name) is None]
if _MISSING:  # pragma: no cover - the extra is missing
    pytest.skip(
        f"needs MTEB and BEIR ({', '.join(_MISSING)} missing); install them with: "
        "pip install 'mdcr[ecosystem]'",
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
