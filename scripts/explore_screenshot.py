"""The README's screenshot of ``mdcr explore``: one query page of a result, taken with
Debian's headless chromium (the browser test's), as a PNG.

    python scripts/explore_screenshot.py [OUTPUT] --out docs/img/explore_query.png

OUTPUT is a report (default: the newest in the store, as ``mdcr explore`` takes it). The
query shown is the one of the first dataset-level setup where the first two retrievers
other than the baseline differ most (its MAP difference), with its abstract folded.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import urllib.parse
import urllib.request
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    from mdcr.cli.explore import _chosen
    from mdcr.core.home import find_home
    from mdcr.explore.app import serving
    from mdcr.explore.pages import Explorer
    from mdcr.explore.reads import Reader
    from mdcr.explore.result import open_result

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("output", nargs="?")
    ap.add_argument("--out", type=Path, default=Path("docs/img/explore_query.png"))
    ap.add_argument("--width", type=int, default=1400)
    ap.add_argument("--height", type=int, default=1050)
    args = ap.parse_args(argv)

    result = open_result(_chosen(find_home(None).path, args.output))
    explorer = Explorer(result, Reader(result))
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in (
        "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        f"--window-size={args.width},{args.height}", f"--user-data-dir={tempfile.mkdtemp()}",
    ):  # fmt: skip
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    try:
        with serving(explorer) as server:
            setup = next(s for s in result.setups.values() if s.setup == "dataset")
            others = [r for r in setup.retrievers if r != result.baseline]
            pick = urllib.parse.urlencode({"versus": others[0], "sort": f"diff:{others[0]}"})
            api = f"{server.url}api/queries/{setup.key}?{pick}"
            rows = json.loads(urllib.request.urlopen(api, timeout=60).read())["rows"]
            row = rows[0]
            query = urllib.parse.urlencode({"pool": row["pool_id"], "q": row["query_id"]})
            driver.get(f"{server.url}query?{query}")
            driver.execute_script("document.querySelector('details.abstract').open = false")
            args.out.parent.mkdir(parents=True, exist_ok=True)
            driver.save_screenshot(str(args.out))
    finally:
        driver.quit()
    print(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
