"""Where the store is: one per user by default, the same from any folder.

The first of these that applies names the store (:func:`find_home`):

1. ``--home`` on the command line, ``home=`` in the Python API;
2. ``$MDCR_HOME``;
3. ``[pipeline] home`` of the pipeline file ``mdcr run`` runs (relative to the current
   folder, as before);
   or, for ``mdcr evaluate --pools``/``--benchmark`` (``pools=``/``benchmark=`` in the API)
   given a stage output, the store that holds it, so that the pools' earlier retrievers
   and encodings are found from any folder;
4. the nearest marker in the current folder or above it: a file ``mdcr.toml`` whose
   ``[store] home`` names the store (relative to the file's folder; ``.mdcr`` beside the
   file when left out), or a folder ``.mdcr``, which is the store itself. In one folder,
   ``mdcr.toml`` comes first;
5. the user's cache: ``$XDG_CACHE_HOME/mdcr`` (when set to an absolute path), else
   ``~/.cache/mdcr``.

So ``mdcr evaluate`` run from any folder of a project finds the project's store, and
from anywhere else the user's one store, never a new ``./data/mdcr-home`` of wherever it
was started. The path found is absolute.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

from mdcr.core.errors import ConfigError

MARKER_FILE = "mdcr.toml"
MARKER_DIR = ".mdcr"
_STORE_KEYS = ("home",)


@dataclass(frozen=True)
class Home:
    """A store folder and how it was found (for messages: ``store: PATH (SOURCE)``)."""

    path: Path
    source: str

    def describe(self) -> str:
        return f"{self.path} ({self.source})"


def _absolute(path: Path | str) -> Path:
    return Path(os.path.abspath(Path(path).expanduser()))


def read_marker(path: Path) -> Path:
    """The store an ``mdcr.toml`` names: ``[store] home`` relative to the file's folder,
    else ``.mdcr`` beside it."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8-sig"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read '{path}': {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc}); fix it or remove the file") from None
    unknown = sorted(set(data) - {"store"})
    if unknown:
        raise ConfigError(f"{path}: unknown table '{unknown[0]}'; valid: store")
    store = data.get("store", {})
    if not isinstance(store, dict):
        raise ConfigError(f"{path}: 'store' must be a table, e.g. [store] home = \"data/mdcr\"")
    bad = sorted(set(store) - set(_STORE_KEYS))
    if bad:
        raise ConfigError(f"{path}: unknown key 'store.{bad[0]}'; valid: home")
    home = store.get("home", MARKER_DIR)
    if not isinstance(home, str) or not home:
        raise ConfigError(
            f"{path}: store.home must be a non-empty string (a folder, relative to the file)"
        )
    return _absolute(path.parent / Path(home).expanduser())


def find_marker(start: Path | None = None) -> Home | None:
    """The store named by the nearest ``mdcr.toml`` or ``.mdcr`` in ``start`` (default:
    the current folder) or a folder above it; None when there is none."""
    here = _absolute(start or Path.cwd())
    for folder in (here, *here.parents):
        marker = folder / MARKER_FILE
        if marker.is_file():
            return Home(read_marker(marker), f"from {marker}")
        if (folder / MARKER_DIR).is_dir():
            return Home(folder / MARKER_DIR, f"the {MARKER_DIR} folder in {folder}")
    return None


def user_cache_dir() -> tuple[Path, str]:
    """The user's cache folder and how it is written, the XDG rule in one place:
    ``$XDG_CACHE_HOME`` when it is an absolute path (the XDG spec ignores a relative one),
    else ``~/.cache``. Every user-level cache of mdcr lies in its ``mdcr`` folder
    (:func:`user_cache_home`): the user's store, the record of stores written recently
    (:mod:`mdcr.core.recent`) and numba's compiled code (:mod:`mdcr.measures`)."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if xdg and os.path.isabs(xdg):
        return Path(xdg), "$XDG_CACHE_HOME"
    return _absolute("~/.cache"), "~/.cache"


def user_cache_home() -> Home:
    """``$XDG_CACHE_HOME/mdcr`` (an absolute ``XDG_CACHE_HOME`` only, as the XDG spec
    says), else ``~/.cache/mdcr`` (:func:`user_cache_dir`)."""
    folder, written = user_cache_dir()
    return Home(folder / "mdcr", f"the user cache, {written}/mdcr")


def holding_store(output: Path | str | None) -> Path | None:
    """The store an output folder ``<home>/<stage>/<fingerprint>`` lies in, or None when
    ``output`` is not a finished stage output (no manifest naming that stage)."""
    import json

    if output is None or not str(output):
        return None
    folder = _absolute(output)
    try:
        manifest = json.loads((folder / "manifest.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(manifest, dict) or manifest.get("stage") != folder.parent.name:
        return None
    return folder.parent.parent


def find_home(
    explicit: Path | str | None = None,
    *,
    pipeline: Path | str | None = None,
    start: Path | None = None,
    holding: Path | str | None = None,
) -> Home:
    """The store to use: ``explicit`` (``--home``), ``$MDCR_HOME``, a pipeline file's
    ``home`` or the store holding the output ``holding`` (the pools or benchmark that
    ``evaluate`` scores on), the nearest marker up from ``start`` (default: the current
    folder), the user cache; see the module docstring."""
    return checked(_find_home(explicit, pipeline, start, holding))


def _find_home(
    explicit: Path | str | None,
    pipeline: Path | str | None,
    start: Path | None,
    holding: Path | str | None,
) -> Home:
    if explicit is not None and str(explicit):
        return Home(_absolute(explicit), "--home")
    env = os.environ.get("MDCR_HOME", "")
    if env:
        return Home(_absolute(env), "$MDCR_HOME")
    if pipeline is not None and str(pipeline):
        return Home(_absolute(pipeline), "the pipeline file's home")
    held = holding_store(holding)
    if held is not None:
        return Home(held, f"the store holding '{holding}'")
    return find_marker(start) or user_cache_home()


_FIXES = {
    "--home": "give --home a folder",
    "$MDCR_HOME": "set $MDCR_HOME to a folder",
    "the pipeline file's home": "set the pipeline file's [pipeline] home to a folder",
}


def checked(home: Home) -> Home:
    """``home``, or a one-line error when it is a file or lies under one (``--home
    /etc/passwd/x``): no store can be made there."""
    for folder in (home.path, *home.path.parents):
        if folder.exists() or folder.is_symlink():
            if folder.is_dir():
                return home
            what = "is a file" if folder == home.path else f"lies under '{folder}', a file"
            fix = _FIXES.get(home.source, "name a folder as the store")
            if home.source.startswith("from "):  # a marker file: its [store] home
                fix = f"set [store] home in {home.source[5:]} to a folder"
            raise ConfigError(
                f"store '{home.path}' ({home.source}) {what}, not a folder; {fix} (one that "
                "exists or can be made)"
            )
    return home
