"""The encode fingerprint hashes what makes the vectors and nothing else.

- settings (device, batch size, workers, reuse) never change it; the precision changes it
  only through its resolved value (``auto`` is ``fp32`` on the CPU);
- a local model's files, a ``py:`` encoder's source (and the user files it imports) and a
  hub model's resolved commit do change it, and the hub model is loaded at that commit.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mdcr.core.errors import ConfigError, UnresolvedIdentityError
from mdcr.core.inputs import resolve_inputs
from mdcr.core.store import Store
from mdcr.encoders.registry import identify_encoder
from mdcr.encoders.stage import SPEC, EncodeConfig
from mdcr.encoders.store import EmbeddingStore
from tests.integration.encoders.fixtures import make_tiny_bert, write_corpus

REPO = Path(__file__).resolve().parents[3]


def _fp(home: Path, **kw: object) -> str:
    cfg = EncodeConfig(**kw)  # type: ignore[arg-type]
    cfg.validate()
    return Store(home).plan(SPEC, cfg, resolve_inputs(cfg)).fingerprint


@pytest.fixture()
def corpus(tmp_path: Path) -> Path:
    write_corpus(tmp_path / "corpus", 12)
    return tmp_path / "corpus"


def test_settings_do_not_change_the_fingerprint(
    tmp_path: Path, corpus: Path, tiny_bert: Path
) -> None:
    base = {"corpus": str(corpus), "encoder": f"hf:{tiny_bert}"}
    fp = _fp(tmp_path, **base)
    same = [
        {"device": "cpu"},
        {"batch_tokens": 128},
        {"workers": 3},
        {"attention": "unpadded"},
        {"compile": True},
        {"reuse": False},
        {"precision": "fp32"},  # what "auto" resolves to on the CPU
    ]
    for extra in same:
        assert _fp(tmp_path, **base, **extra) == fp, extra
    for extra in ({"precision": "bf16"}, {"max_length": 32}, {"pooling": "mean"}):
        assert _fp(tmp_path, **base, **extra) != fp, extra


def test_local_model_files_are_hashed(tmp_path: Path, corpus: Path, tiny_bert: Path) -> None:
    model = tmp_path / "model"
    shutil.copytree(tiny_bert, model)
    spec = f"hf:{model}"
    fp = _fp(tmp_path, corpus=str(corpus), encoder=spec)
    (model / ".cache").mkdir()
    (model / ".cache" / "lock").write_text("x")  # hidden files do not count
    assert _fp(tmp_path, corpus=str(corpus), encoder=spec) == fp
    weights = model / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF
    weights.write_bytes(bytes(data))
    changed = _fp(tmp_path, corpus=str(corpus), encoder=spec)
    assert changed != fp
    with (model / "vocab.txt").open("a") as f:
        f.write("extra\n")
    assert _fp(tmp_path, corpus=str(corpus), encoder=spec) not in (fp, changed)


USER_HELPER = "SCALE = {scale}\n"
USER_MODULE = """
import numpy as np
from {helper} import SCALE

class Enc:
    name = "user-enc"
    dim = 4
    metric = "ip"
{version}
    def encode(self, texts):
        out = np.zeros((len(texts), 4), dtype=np.float32)
        for i, t in enumerate(texts):
            out[i] = [len(t.title), len(t.abstract), SCALE, 1.0]
        return out
"""


def _write_user(folder: Path, name: str, *, scale: int = 1, version: str = "") -> None:
    """Module ``<name>_mod`` (class Enc) importing ``<name>_helper`` (SCALE)."""
    folder.mkdir(exist_ok=True)
    (folder / f"{name}_helper.py").write_text(USER_HELPER.format(scale=scale))
    line = f"    version = {version!r}\n" if version else ""
    (folder / f"{name}_mod.py").write_text(
        USER_MODULE.format(helper=f"{name}_helper", version=line)
    )


def test_py_encoder_source_and_imported_user_files_are_hashed(
    tmp_path: Path, corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mods = tmp_path / "mods"
    _write_user(mods, "hashed")
    monkeypatch.syspath_prepend(str(mods))
    spec = "py:hashed_mod:Enc"
    ident = identify_encoder(spec)
    # The module and the user file it imports; numpy and mdcr are not the user's.
    assert ident["files"] == ["hashed_helper", "hashed_mod"]
    fps = [_fp(tmp_path, corpus=str(corpus), encoder=spec)]
    _write_user(mods, "hashed", scale=22)  # the helper changes
    fps.append(_fp(tmp_path, corpus=str(corpus), encoder=spec))
    _write_user(mods, "hashed", scale=22, version="2.0")  # the module declares a version
    fps.append(_fp(tmp_path, corpus=str(corpus), encoder=spec))
    assert len(set(fps)) == 3
    assert identify_encoder(spec)["version"] == "2.0"


def test_py_encoder_that_cannot_be_imported_is_a_one_line_error(
    tmp_path: Path, corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "broken_enc_mod.py").write_text("import numpy\nraise RuntimeError('boom')\n")
    with pytest.raises(ConfigError, match=r"cannot import module 'broken_enc_mod'.*boom") as info:
        _fp(tmp_path, corpus=str(corpus), encoder="py:broken_enc_mod:Enc")
    assert "\n" not in str(info.value)
    with pytest.raises(ConfigError, match="cannot import module 'gone_enc_mod'"):
        _fp(tmp_path, corpus=str(corpus), encoder="py:gone_enc_mod:Enc")


def test_an_edited_module_runs_its_new_code_in_the_same_process(
    tmp_path: Path, corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A notebook edits its encoder and runs again: the new code runs, not the cached one,
    also where Python caches bytecode (its default) and the edit keeps the file's size
    within the second (the cache's own check would take the old bytecode for current)."""
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    mods = tmp_path / "mods"
    _write_user(mods, "edited", scale=1)
    monkeypatch.syspath_prepend(str(mods))
    kw = {"corpus": str(corpus), "encoder": "py:edited_mod:Enc"}
    cfg = EncodeConfig(**kw)  # type: ignore[arg-type]
    first = Store(tmp_path / "h").execute(SPEC, cfg, resolve_inputs(cfg), quiet=True)
    times = {f: f.stat().st_mtime_ns for f in mods.glob("*.py")}
    _write_user(mods, "edited", scale=7)
    for f, mtime in times.items():  # as if edited within the same second
        os.utime(f, ns=(mtime, mtime))
    second = Store(tmp_path / "h").execute(SPEC, cfg, resolve_inputs(cfg), quiet=True)
    assert not second.up_to_date and second.fingerprint != first.fingerprint
    a, b = EmbeddingStore(first.path), EmbeddingStore(second.path)
    assert set(a.vectors(np.arange(len(a)))[:, 2].tolist()) == {1.0}
    assert set(b.vectors(np.arange(len(b)))[:, 2].tolist()) == {7.0}


# -- hub models ------------------------------------------------------------------------------


def _hub_cache(root: Path, repo: str, snapshots: dict[str, int], main: str) -> Path:
    """A Hugging Face cache holding ``repo`` at the given commits (tiny BERTs by seed)."""
    base = root / ("models--" + repo.replace("/", "--"))
    for commit, seed in snapshots.items():
        make_tiny_bert(base / "snapshots" / commit, seed=seed)
    (base / "refs").mkdir(parents=True, exist_ok=True)
    (base / "refs" / "main").write_text(main)
    return root


def test_hub_commit_is_resolved_from_the_cache_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from huggingface_hub import constants

    a, b = "a" * 40, "b" * 40
    cache = tmp_path / "hub"
    base = cache / "models--allenai--specter" / "refs"
    base.mkdir(parents=True)
    (base / "main").write_text(a)
    (base / "v1").write_text(b)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert identify_encoder("specter") == {"model_id": "allenai/specter", "commit": a}
    from mdcr.encoders.registry import EncoderOptions

    assert identify_encoder("specter", EncoderOptions(revision="v1"))["commit"] == b
    c = "c" * 40
    assert identify_encoder("specter", EncoderOptions(revision=c))["commit"] == c
    with pytest.raises(UnresolvedIdentityError, match="revision='<40-hex commit>'") as info:
        identify_encoder("scincl")
    assert "\n" not in str(info.value) and "malteos/scincl" in str(info.value)


@pytest.mark.slow
def test_hub_model_is_loaded_at_the_commit_the_fingerprint_hashes(tmp_path: Path) -> None:
    """A cached hub model, offline, through the real CLI: moving ``main`` to another commit
    gives a new fingerprint and the other commit's vectors."""
    a, b = "1" * 40, "2" * 40
    cache = _hub_cache(tmp_path / "hub", "mdcr-test/tiny", {a: 0, b: 1}, main=a)
    write_corpus(tmp_path / "corpus", 12)
    env = dict(os.environ, HF_HUB_CACHE=str(cache), HF_HUB_OFFLINE="1", MDCR_QUIET="1")
    argv = [
        sys.executable,
        "-m",
        "mdcr.cli",
        "encode",
        "--corpus",
        str(tmp_path / "corpus"),
        "--encoder",
        "hf:mdcr-test/tiny",
        "--max-length",
        "64",
        "--home",
        str(tmp_path / "home"),
    ]

    def encode() -> Path:
        done = subprocess.run(argv, env=env, capture_output=True, text=True, cwd=REPO)
        assert done.returncode == 0, done.stderr
        return Path(done.stdout.strip().splitlines()[-1])

    first = encode()
    manifest = json.loads((first / "manifest.json").read_text())
    assert manifest["identity"]["encoder"] == {"model_id": "mdcr-test/tiny", "commit": a}
    assert manifest["info"]["revision"] == a  # the model that ran is that commit
    (cache / "models--mdcr-test--tiny" / "refs" / "main").write_text(b)
    second = encode()
    assert second != first
    assert json.loads((second / "manifest.json").read_text())["info"]["revision"] == b
    va, vb = EmbeddingStore(first), EmbeddingStore(second)
    assert not np.allclose(va.vectors(np.arange(12)), vb.vectors(np.arange(12)))


def test_an_unresolvable_hub_model_is_planned_and_refused_in_one_line(
    tmp_path: Path, corpus: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """Offline with an empty cache: the dry run says which fingerprints cannot be known
    yet (the step and its dependants); a real run stops with one line naming the fix."""
    from huggingface_hub import constants

    from mdcr.cli import main

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    pipeline = tmp_path / "p.toml"
    pipeline.write_text(
        f"""
[[step]]
stage = "encode"
id = "enc"
corpus = "{corpus}"
encoder = "specter"

[[step]]
stage = "encode"
id = "rnd"
corpus = "{corpus}"
encoder = "random"
"""
    )
    home = ["--home", str(tmp_path / "home")]
    assert main(["run", str(pipeline), "--dry-run", *home]) == 0
    out = capsys.readouterr().out
    enc = next(line for line in out.splitlines() if line.startswith("enc "))
    rnd = next(line for line in out.splitlines() if line.startswith("rnd "))
    assert "????????????????  fingerprint unknown" in enc and "allenai/specter" in enc
    assert "will run" in rnd and "?" not in rnd
    assert main(["run", str(pipeline), *home, "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    # in the syntax of the pipeline file the user ran
    assert len(err) == 1 and 'revision = "<40-hex commit>"` in the encode step' in err[0]


def test_a_module_in_a_namespace_package_is_hashed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A user package without __init__.py: its module is still the user's and hashed."""
    pkg = tmp_path / "nspkg_enc"
    pkg.mkdir()
    (pkg / "enc.py").write_text(USER_MODULE.format(helper="nspkg_enc.helper", version=""))
    (pkg / "helper.py").write_text(USER_HELPER.format(scale=1))
    monkeypatch.syspath_prepend(str(tmp_path))
    ident = identify_encoder("py:nspkg_enc.enc:Enc")
    assert ident["files"] == ["nspkg_enc.enc", "nspkg_enc.helper"]
    (pkg / "helper.py").write_text(USER_HELPER.format(scale=2))
    assert identify_encoder("py:nspkg_enc.enc:Enc")["code"] != ident["code"]


# -- py: encoders whose helpers are loaded by name or by path --------------------------------

DYNAMIC_MODULE = """
import numpy as np
{load}

class Enc:
    name = "dyn-enc"
    dim = 4
    metric = "ip"

    def encode(self, texts):
        out = np.zeros((len(texts), 4), dtype=np.float32)
        for i, t in enumerate(texts):
            out[i] = [len(t.title), len(t.abstract), helper.SCALE, 1.0]
        return out
"""
LOADS = {
    "byname": 'import importlib\nhelper = importlib.import_module("{name}_" + "helper")',
    "dunder": 'NAME = "{name}_" + "helper"\nhelper = __import__(NAME)',
    "bypath": (
        "import importlib.util, pathlib\n"
        "_spec = importlib.util.spec_from_file_location(\n"
        '    "{name}_loaded", pathlib.Path(__file__).parent / "{name}_helper.py")\n'
        "helper = importlib.util.module_from_spec(_spec)\n"
        "_spec.loader.exec_module(helper)"
    ),
}


@pytest.mark.parametrize("how", sorted(LOADS))
def test_a_helper_loaded_by_name_or_path_is_hashed_and_reloaded(
    tmp_path: Path, corpus: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """importlib.import_module, __import__ and spec_from_file_location of a file beside the
    module: editing the helper gives a new fingerprint and its new numbers."""
    name = f"dyn_{how}"
    mods = tmp_path / "mods"
    mods.mkdir()
    (mods / f"{name}_mod.py").write_text(DYNAMIC_MODULE.format(load=LOADS[how].format(name=name)))
    (mods / f"{name}_helper.py").write_text("SCALE = 1\n")
    monkeypatch.syspath_prepend(str(mods))
    spec = f"py:{name}_mod:Enc"
    files = identify_encoder(spec)["files"]  # the helper under the name it was loaded as
    assert len(files) == 2 and f"{name}_mod" in files
    cfg = EncodeConfig(corpus=str(corpus), encoder=spec)
    first = Store(tmp_path / "h").execute(SPEC, cfg, resolve_inputs(cfg), quiet=True)
    (mods / f"{name}_helper.py").write_text("SCALE = 22\n")
    second = Store(tmp_path / "h").execute(SPEC, cfg, resolve_inputs(cfg), quiet=True)
    assert not second.up_to_date and second.fingerprint != first.fingerprint
    a, b = EmbeddingStore(first.path), EmbeddingStore(second.path)
    assert set(a.vectors(np.arange(len(a)))[:, 2].tolist()) == {1.0}
    assert set(b.vectors(np.arange(len(b)))[:, 2].tolist()) == {22.0}
    third = Store(tmp_path / "h").execute(SPEC, cfg, resolve_inputs(cfg), quiet=True)
    assert third.up_to_date and third.fingerprint == second.fingerprint


def test_a_helper_outside_the_folder_is_hashed_through_the_module_globals(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file elsewhere, loaded by path at import: found through what the module keeps."""
    (tmp_path / "mods").mkdir()
    (tmp_path / "shared").mkdir()
    far = tmp_path / "shared" / "far_helper.py"
    far.write_text("SCALE = 1\n")
    load = (
        LOADS["bypath"]
        .format(name="far")
        .replace('pathlib.Path(__file__).parent / "far_helper.py"', repr(str(far)))
    )
    (tmp_path / "mods" / "far_mod.py").write_text(DYNAMIC_MODULE.format(load=load))
    monkeypatch.syspath_prepend(str(tmp_path / "mods"))
    ident = identify_encoder("py:far_mod:Enc")
    assert ident["files"] == ["far_loaded", "far_mod"]
    far.write_text("SCALE = 333\n")
    assert identify_encoder("py:far_mod:Enc")["code"] != ident["code"]


LATE_MODULE = """
import importlib
import numpy as np

class Enc:
    name = "late-enc"
    dim = 2
    metric = "ip"

    def encode(self, texts):
        scale = 1
        if texts[0].paper_id.startswith("p"):  # a branch the probe papers never take
            scale = importlib.import_module(("late" + "_far_helper").strip()).SCALE
        return np.array([[len(t.abstract), scale] for t in texts], dtype=np.float32)
"""


def test_code_loaded_only_while_encoding_is_named_in_a_warning_and_the_manifest(
    tmp_path: Path, corpus: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """Code on a path the probe papers do not take is loaded only by the run: it is named
    in a warning, in the manifest, and again on every run that reuses the output."""
    (tmp_path / "mods").mkdir()
    (tmp_path / "shared").mkdir()
    (tmp_path / "mods" / "late_mod.py").write_text(LATE_MODULE)
    (tmp_path / "shared" / "late_far_helper.py").write_text("SCALE = 5\n")
    monkeypatch.syspath_prepend(str(tmp_path / "mods"))
    monkeypatch.syspath_prepend(str(tmp_path / "shared"))
    cfg = EncodeConfig(corpus=str(corpus), encoder="py:late_mod:Enc")
    done = Store(tmp_path / "h").execute(SPEC, cfg, resolve_inputs(cfg), quiet=True)
    err = [line for line in capsys.readouterr().err.splitlines() if "late_far_helper" in line]
    assert len(err) == 1 and "not hashed" in err[0] and "version" in err[0]
    manifest = json.loads((done.path / "manifest.json").read_text())
    far = str((tmp_path / "shared" / "late_far_helper.py").resolve())
    assert manifest["info"]["unhashed_user_files"] == [far]
    for _ in range(2):
        again = Store(tmp_path / "h").execute(SPEC, cfg, resolve_inputs(cfg), quiet=True)
        assert again.up_to_date
        err = [line for line in capsys.readouterr().err.splitlines() if "late_far_helper" in line]
        assert len(err) == 1 and "not hashed" in err[0]


def test_a_literal_import_module_call_is_followed_like_an_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``importlib.import_module("name")`` inside a method, of a module in another folder."""
    (tmp_path / "mods").mkdir()
    (tmp_path / "shared").mkdir()
    (tmp_path / "mods" / "lit_mod.py").write_text(
        LATE_MODULE.replace('("late" + "_far_helper").strip()', '"lit_far_helper"')
    )
    (tmp_path / "shared" / "lit_far_helper.py").write_text("SCALE = 5\n")
    monkeypatch.syspath_prepend(str(tmp_path / "mods"))
    monkeypatch.syspath_prepend(str(tmp_path / "shared"))
    assert identify_encoder("py:lit_mod:Enc")["files"] == ["lit_far_helper", "lit_mod"]


def test_the_packages_of_a_module_are_hashed_and_nothing_is_left_unnamed(
    tmp_path: Path, corpus: Path
) -> None:
    """``py:pkg.sub.enc`` in a fresh process: pkg/__init__.py and pkg/sub/__init__.py run on
    import, so they are hashed, and the run warns of no unhashed code."""
    sub = tmp_path / "proj" / "pkgenc" / "sub"
    sub.mkdir(parents=True)
    (sub.parent / "__init__.py").write_text("import os\n")
    (sub / "__init__.py").write_text("")
    load = "import types\nhelper = types.SimpleNamespace(SCALE=3)"
    (sub / "enc.py").write_text(DYNAMIC_MODULE.format(load=load))
    (sub.parent / "other.py").write_text("")  # not imported, not in the module's folder
    spec = "py:pkgenc.sub.enc:Enc"
    env = dict(os.environ, PYTHONPATH=f"{tmp_path / 'proj'}{os.pathsep}{REPO}", MDCR_QUIET="1")
    argv = [sys.executable, "-m", "mdcr.cli", "encode", "--corpus", str(corpus)]
    argv += ["--encoder", spec, "--home", str(tmp_path / "home")]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "warning" not in done.stderr
    manifest = json.loads(
        (Path(done.stdout.strip().splitlines()[-1]) / "manifest.json").read_text()
    )
    ident = manifest["identity"]["encoder"]
    assert ident["files"] == ["pkgenc", "pkgenc.sub", "pkgenc.sub.enc"]
    assert manifest["info"]["unhashed_user_files"] == []


def test_files_the_encoder_does_not_load_are_neither_hashed_nor_imported(
    tmp_path: Path, corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A scratch file beside the encoder, and one with a syntax error: editing the first
    re-encodes nothing, and the second does not block the encoder."""
    mods = tmp_path / "mods"
    mods.mkdir()
    load = "import types\nhelper = types.SimpleNamespace(SCALE=4)"
    (mods / "side_mod.py").write_text(DYNAMIC_MODULE.format(load=load))
    (mods / "notes.py").write_text("# scratch\n")
    (mods / "broken_draft.py").write_text("def oops(:\n")
    monkeypatch.syspath_prepend(str(mods))
    cfg = EncodeConfig(corpus=str(corpus), encoder="py:side_mod:Enc")
    first = Store(tmp_path / "h").execute(SPEC, cfg, resolve_inputs(cfg), quiet=True)
    assert identify_encoder("py:side_mod:Enc")["files"] == ["side_mod"]
    (mods / "notes.py").write_text("# scratch, edited\nx = 1\n")
    again = Store(tmp_path / "h").execute(SPEC, cfg, resolve_inputs(cfg), quiet=True)
    assert again.up_to_date and again.fingerprint == first.fingerprint


def test_each_encoder_of_one_command_names_the_unhashed_code_it_ran(
    tmp_path: Path, corpus: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """Two encoders in one process share a helper on a path the probe does not take: the
    second one, which finds it already imported, still names it."""
    (tmp_path / "mods").mkdir()
    (tmp_path / "shared").mkdir()
    for name in ("twin_a", "twin_b"):
        text = LATE_MODULE.replace('("late" + "_far_helper")', '("twin" + "_far_helper")')
        (tmp_path / "mods" / f"{name}.py").write_text(text.replace("late-enc", name))
    (tmp_path / "shared" / "twin_far_helper.py").write_text("SCALE = 5\n")
    monkeypatch.syspath_prepend(str(tmp_path / "mods"))
    monkeypatch.syspath_prepend(str(tmp_path / "shared"))
    far = str((tmp_path / "shared" / "twin_far_helper.py").resolve())
    for name in ("twin_a", "twin_b"):
        cfg = EncodeConfig(corpus=str(corpus), encoder=f"py:{name}:Enc")
        done = Store(tmp_path / "h").execute(SPEC, cfg, resolve_inputs(cfg), quiet=True)
        manifest = json.loads((done.path / "manifest.json").read_text())
        assert manifest["info"]["unhashed_user_files"] == [far], name
        assert "twin_far_helper" in capsys.readouterr().err


def test_a_profiler_in_place_stays_and_the_encoder_is_still_identified(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under cProfile (a C profile hook mdcr cannot chain), identifying a py: encoder leaves
    the profiler in place; its code and probe vectors are still hashed."""
    import cProfile

    (tmp_path / "mods").mkdir()
    load = "import types\nhelper = types.SimpleNamespace(SCALE=2)"
    (tmp_path / "mods" / "prof_mod.py").write_text(DYNAMIC_MODULE.format(load=load))
    monkeypatch.syspath_prepend(str(tmp_path / "mods"))
    plain = identify_encoder("py:prof_mod:Enc")
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        profiled = identify_encoder("py:prof_mod:Enc")
        assert sys.getprofile() is profiler
    finally:
        profiler.disable()
    assert profiled == plain
