"""``mdcr explore`` in a real headless browser (Debian's chromium and chromedriver,
driven by Selenium; nothing is downloaded): open the overview, follow a table cell to its
queries, sort them, open a query and find its cited papers marked; and sort the
``--static`` queries page offline. Skipped, with the reason, where no browser is
installed (``.ci/run`` installs the two Debian packages where it can)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mdcr.explore.app import serving
from tests.integration.explore.conftest import DemoLike

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,1000",
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not (Path(CHROMIUM).is_file() and Path(CHROMEDRIVER).is_file()),
        reason="no browser: apt-get install chromium chromium-driver (Debian) to run it",
    ),
]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="mdcr-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def _column(driver: Any, header: str) -> list[float]:
    """The numbers of one column of the queries table, in the order shown."""
    from selenium.webdriver.common.by import By

    heads = driver.find_elements(By.CSS_SELECTOR, "#queries-table thead th")
    index = [h.find_element(By.TAG_NAME, "a").get_attribute("data-key") for h in heads]
    i = index.index(header) + 1
    cells = driver.find_elements(By.CSS_SELECTOR, f"#queries-table tbody tr td:nth-child({i})")
    return [float(c.get_attribute("data-v")) for c in cells if c.get_attribute("data-v")]


def test_overview_to_a_cell_to_sorted_queries_to_a_query_with_its_positives_marked(
    browser: Any, demo_like: DemoLike
) -> None:
    from selenium.webdriver.common.by import By

    with serving(demo_like.explorer) as server:
        browser.get(server.url)
        assert browser.find_element(By.TAG_NAME, "h1").text == "mdcr evaluation report"
        cell = browser.find_element(By.CSS_SELECTOR, "#table-dataset_test_ci tbody tr a.cell")
        cell.click()  # bm25's MAP on the pools of 800: its queries
        assert browser.find_element(By.TAG_NAME, "h1").text.startswith("Queries: dataset-level")
        assert "metric=map%40500" in browser.current_url or "metric=map@500" in browser.current_url
        browser.find_element(By.CSS_SELECTOR, "th a[data-key='value:minilm']").click()
        values = _column(browser, "value:minilm")
        assert len(values) == 12 and values == sorted(values, reverse=True)
        browser.find_element(By.CSS_SELECTOR, "th a[data-key='value:minilm']").click()
        values = _column(browser, "value:minilm")
        assert values == sorted(values)  # a second click: ascending
        browser.find_element(By.CSS_SELECTOR, "#queries-table th a[data-key='value:bm25']").click()
        browser.find_element(By.CSS_SELECTOR, "#queries-table tbody td.title a").click()
        # The query with bm25's best MAP: its cited papers are marked in the rankings.
        marked = browser.find_elements(By.CSS_SELECTOR, "section[data-retriever='bm25'] li.pos")
        assert marked and all("cited" in li.text for li in marked)
        cited = {
            row.get_attribute("data-paper")
            for row in browser.find_elements(By.CSS_SELECTOR, "table.landed tbody tr")
        }
        assert {li.get_attribute("data-paper") for li in marked} <= cited
        assert browser.find_elements(By.TAG_NAME, "mark")  # shared words highlighted


def test_the_static_queries_page_sorts_offline(
    browser: Any, demo_like: DemoLike, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By

    from mdcr.explore.static import write_static

    write_static(demo_like.explorer, tmp_path, "field-test-300", 10)
    browser.get((tmp_path / "queries-field-test-300.html").as_uri())
    browser.find_element(By.CSS_SELECTOR, "th a[data-key='positives']").click()
    counts = _column(browser, "positives")
    assert len(counts) > 10 and counts == sorted(counts, reverse=True)
    browser.find_element(By.CSS_SELECTOR, "#queries-table tbody td.title a").click()
    assert browser.find_elements(By.CSS_SELECTOR, "ol.ranking li")
