"""``crawl serve`` in a real headless browser: Debian's chromium, driven through chromedriver
by Selenium. Each view loads with no console error (a CSP violation is one), the chart is
drawn with the stylesheet applied, search results are shown, and a crawled title made of
markup is shown as text with no script run. Skipped without chromium, chromedriver and
selenium, except under ``CI=true`` (``.ci/run`` installs them).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from tests.e2e.test_serve import HOSTILE_TITLE, crawled, serving  # noqa: F401 (a fixture)
from tests.proxies import need


@pytest.fixture(scope="module")
def served(crawled: tuple[str, str]) -> Iterator[tuple[str, str]]:  # noqa: F811
    """``crawl serve`` of the crawled database, as a user starts it: (its address, the site)."""
    db, site = crawled
    with serving(db) as address:
        yield address, site


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    chromium = need("chromium")
    driver_path = need("chromedriver")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail("selenium is not installed (CI=true: the test extra has it)")
        pytest.skip("selenium is not installed")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--window-size=1280,1000", "--no-first-run", "--disable-extensions"):  # fmt: skip
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def load(browser: Any, url: str) -> list[dict[str, Any]]:
    """Open ``url``; the console's errors and warnings while it loaded."""
    browser.get_log("browser")  # what earlier pages left
    browser.get(url)
    return [
        entry for entry in browser.get_log("browser") if entry["level"] in ("SEVERE", "WARNING")
    ]


def test_the_overview_loads_clean_and_draws_its_chart(browser: Any, served: tuple[str, str],
                                                      tmp_path: Path) -> None:  # fmt: skip
    from selenium.webdriver.common.by import By

    address, _ = served
    assert load(browser, address + "/") == []
    assert browser.title == "Overview · crawl serve"
    line = browser.find_element(By.CSS_SELECTOR, "svg.chart polyline.line.pages")
    assert line.size["width"] > 300  # drawn across the plot (a steady rate is flat)
    assert len(line.get_attribute("points").split()) >= 2
    assert line.value_of_css_property("fill") == "none"  # the stylesheet applies
    assert line.value_of_css_property("stroke") not in ("none", "")
    runs = browser.find_elements(By.CSS_SELECTOR, "table.runs tbody tr")
    assert len(runs) == 1 and "finished" in runs[0].text
    assert browser.get_screenshot_as_png().startswith(b"\x89PNG")


def test_a_hostile_title_is_text_in_search_and_on_its_page(browser: Any,
                                                           served: tuple[str, str]) -> None:  # fmt: skip
    from selenium.webdriver.common.by import By

    address, site = served
    assert load(browser, address + "/search?q=zebracorn+quaggafish") == []
    results = browser.find_elements(By.CSS_SELECTOR, "ol.results > li")
    assert results, browser.page_source[:2000]
    assert results[0].find_element(By.CSS_SELECTOR, "h2").text == HOSTILE_TITLE
    assert results[0].find_elements(By.CSS_SELECTOR, "mark")
    assert browser.find_elements(By.CSS_SELECTOR, "main img, main script") == []
    assert browser.execute_script("return typeof window.__pwned") == "undefined"
    assert load(browser, f"{address}/page?url={quote(site + '/evil.html', safe='')}") == []
    assert browser.find_element(By.CSS_SELECTOR, "h1").text == HOSTILE_TITLE
    assert browser.find_elements(By.CSS_SELECTOR, "main img, main script") == []
    assert browser.execute_script("return typeof window.__pwned") == "undefined"


def test_hosts_and_the_api_index_load_clean(browser: Any, served: tuple[str, str]) -> None:
    from selenium.webdriver.common.by import By

    address, site = served
    assert load(browser, address + "/hosts?sort=errors") == []
    rows = browser.find_elements(By.CSS_SELECTOR, "table.hosts tbody tr")
    assert len(rows) == 1 and site in rows[0].text and "0.01 s" in rows[0].text
    assert load(browser, address + "/api") == []
    assert "/api/search" in browser.find_element(By.CSS_SELECTOR, "main").text
