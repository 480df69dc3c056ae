"""``mdcr explore`` as a user runs it: it serves on 127.0.0.1 and a free port, prints the
URL, stops cleanly on ctrl-C, warns in one line on another host, takes the newest report
by default, and refuses what it cannot explore in one line; ``--static DIR`` writes pages
that link only to each other."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from mdcr.cli import main
from tests.integration.explore.conftest import DemoLike

pytestmark = pytest.mark.slow  # the session's demo-like store (about 15 s)


def _start(home: Path, *args: str, temp: Path | None = None
           ) -> tuple[subprocess.Popen[str], str]:  # fmt: skip
    """``mdcr explore`` in a child process (its temporary folder ``temp``, if given);
    returns it and the URL it printed."""
    env = {**os.environ, "MDCR_HOME": str(home)}
    if temp is not None:
        env["TMPDIR"] = str(temp)
    child = subprocess.Popen(
        [sys.executable, "-m", "mdcr.cli", "explore", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert child.stdout is not None
    for line in child.stdout:
        found = re.match(r"(http://\S+/)\s", line)
        if found:
            return child, found.group(1)
    child.wait(timeout=30)
    raise AssertionError(f"no URL printed; stderr: {child.stderr.read() if child.stderr else ''}")


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_explore_serves_the_newest_report_and_stops_cleanly_removing_its_copies(
    demo_like: DemoLike, tmp_path: Path, stop: signal.Signals
) -> None:
    child, url = _start(demo_like.home, temp=tmp_path)
    try:
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/", url)
        with urllib.request.urlopen(url, timeout=30) as page:
            html = page.read().decode()
        assert page.status == 200 and demo_like.report.name in html  # the newest report
        session = [p.name for p in tmp_path.iterdir()]
        assert len(session) == 1 and session[0].startswith("mdcr-explore-")  # the copies
    finally:
        child.send_signal(stop)  # ctrl-C, or `kill`
        _, err = child.communicate(timeout=60)
    assert child.returncode == 0, err
    assert "Traceback" not in err and err.strip().splitlines()[-1] == "stopped"
    assert list(tmp_path.iterdir()) == []  # the session's copies are removed


def test_explore_on_another_host_warns_in_one_line(demo_like: DemoLike) -> None:
    # 127.0.0.2 is a loopback address, but not one explore binds by default.
    child, url = _start(demo_like.home, str(demo_like.score), "--host", "127.0.0.2", "-q")
    child.send_signal(signal.SIGINT)
    _, err = child.communicate(timeout=30)
    assert url.startswith("http://127.0.0.2:")
    warnings = [line for line in err.splitlines() if "warning" in line]
    assert warnings == [
        "mdcr: warning: serving on 127.0.0.2: anyone who can reach this machine there can "
        "read this result"
    ]


def test_explore_refuses_what_it_cannot_explore_in_one_line(
    demo_like: DemoLike, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases = {
        str(demo_like.pools): "is a pools output; give a report, score or benchmark-score",
        str(tmp_path): "is not a store output",
        "ffff": "no output with fingerprint 'ffff'",
    }
    for ref, words in cases.items():
        assert main(["explore", ref, "--home", str(demo_like.home), "-q"]) == 2
        err = capsys.readouterr().err
        assert words in err and err.count("\n") == 1 and "Traceback" not in err
    args = ["explore", "--home", str(demo_like.home), "-q"]
    assert main([*args, "--setup", "mdcr-test"]) == 2
    assert "give --static DIR too" in capsys.readouterr().err
    assert main([*args, "--static", str(tmp_path / "s"), "--setup", "nope"]) == 2
    assert "valid: dataset-test-800, dataset-val-800" in capsys.readouterr().err
    assert main(["explore", "--home", str(tmp_path / "empty"), "-q"]) == 2
    assert "no finished report in the store" in capsys.readouterr().err


def test_a_missing_flask_names_the_install_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import importlib

    real = importlib.import_module

    def without_flask(name: str, *args: object) -> object:
        if name.split(".")[0] == "flask":
            raise ImportError(f"No module named '{name}'")
        return real(name, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(importlib, "import_module", without_flask)
    assert main(["explore", "-q"]) == 2
    err = capsys.readouterr().err
    assert "pip install 'mdcr[explore]'" in err and err.count("\n") == 1


def test_static_pages_link_only_to_each_other(demo_like: DemoLike, tmp_path: Path) -> None:
    out = tmp_path / "pages"
    args = ["explore", str(demo_like.report), "--home", str(demo_like.home), "-q"]
    assert main([*args, "--static", str(out), "--setup", "mdcr-test", "-k", "5"]) == 0
    result = demo_like.explorer.result
    units = result.setup_units("mdcr-test")
    written = sorted(p.name for p in out.iterdir())
    assert len(written) == len(units) + 3 and "index.html" in written
    for page in out.iterdir():
        html = page.read_text()
        assert "<script src" not in html and "http" not in html.replace("http-equiv", "")
        for href in re.findall(r'href="([^"]+)"', html):
            assert href == "#" or (out / href).is_file(), (page.name, href)
    query = (out / f"query-{int(units[0])}.html").read_text()
    assert query.count('<li class="') == 5 * len(result.setups["mdcr-test"].retrievers)
    assert '<li class="pos"' in query  # BM25 ranks a cited paper in its top 5
    queries = (out / "queries-mdcr-test.html").read_text()
    assert queries.count('<td class="title"') == len(units)
