"""The search page in a real browser: Debian's headless Chromium driven by selenium through chromedriver.

No browser is downloaded: the tests use /usr/bin/chromium and /usr/bin/chromedriver (the Debian
packages chromium and chromium-driver, which .ci/run installs) and skip, saying so, only where
those are absent. A test server holds the corpus of the API tests plus a hostile document, and a
citation rule maps the docs to a loopback site the test serves, so a mapped link can be followed.
The results page is saved as bench/out/search-page.png (KNOWLEDGE_UPDATE_SCREENSHOT=1: docs/images/search-page.png,
the screenshot the README shows).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from query.serve.http_api import build_app
from tests.query.stores import DOCS, build_store, store_settings
from tests.query.test_http_api import TOKEN, Running
from tests.query.test_page import EXPOSED, HOSTILE
from tests.webserver import WebSite

CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")
ROOT = Path(__file__).resolve().parents[2]
# Every run saves the results page under bench/out/ (ignored by git); KNOWLEDGE_UPDATE_SCREENSHOT=1
# saves it as the README's docs/images/search-page.png instead, so a test run never dirties the tree.
SCREENSHOT = (ROOT / "docs" / "images" / "search-page.png" if os.environ.get("KNOWLEDGE_UPDATE_SCREENSHOT") == "1"
              else ROOT / "bench" / "out" / "search-page.png")

pytestmark = pytest.mark.skipif(
    CHROMIUM is None or CHROMEDRIVER is None,
    reason="needs Debian's chromium and chromium-driver (apt-get install -y chromium chromium-driver); "
           f"found chromium={CHROMIUM}, chromedriver={CHROMEDRIVER}",
)

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is in the test extra: pip install -e '.[test]'")
from selenium.common.exceptions import NoAlertPresentException  # noqa: E402
from selenium.webdriver.chromium.webdriver import ChromiumDriver  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support import expected_conditions  # noqa: E402
from selenium.webdriver.support.wait import WebDriverWait  # noqa: E402


def chrome(javascript: bool = True) -> ChromiumDriver:
    """A headless Chromium from the Debian packages, logging the browser console."""
    os.environ.setdefault("SE_OFFLINE", "true")  # never let selenium fetch a browser or driver
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                     "--window-size=1100,900", "--force-color-profile=srgb", "--hide-scrollbars"):
        options.add_argument(argument)
    if not javascript:
        options.add_experimental_option("prefs", {"profile.managed_default_content_settings.javascript": 2})
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=webdriver.ChromeService(executable_path=str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(30)
    return driver


@pytest.fixture(scope="module")
def mapped_site() -> Iterator[WebSite]:
    site = WebSite().start()
    site.html("/handbook/api/", "<!doctype html><title>Handbook: API</title><h1>The API handbook page</h1>")
    try:
        yield site
    finally:
        site.stop()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, mapped_site: WebSite) -> Iterator[str]:
    rules = [{"pattern": r"^docs/(.+)\.md$", "replace": mapped_site.url("/handbook/$1/")}]
    settings = build_store(store_settings(tmp_path_factory.mktemp("browser"), citations=rules, expose=EXPOSED),
                           {**DOCS, **HOSTILE})
    with Running(build_app(settings, "127.0.0.1", TOKEN, warn=lambda m: None)) as url:
        yield url


@pytest.fixture(scope="module")
def browser(served: str) -> Iterator[ChromiumDriver]:
    driver = chrome()
    try:
        driver.get(served + "/")
        driver.find_element(By.ID, "token").send_keys(TOKEN + Keys.ENTER)
        WebDriverWait(driver, 10).until(expected_conditions.presence_of_element_located((By.ID, "q")))
        yield driver
    finally:
        driver.quit()


def severe(driver: ChromiumDriver) -> list[str]:
    """The console's errors since the last call (CSP violations and failed loads among them)."""
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def search_for(driver: ChromiumDriver, words: str) -> list[str]:
    """From the home page, type words into the search box, submit with Enter, and return the result headings."""
    base = driver.current_url.split("/", 3)
    driver.get("/".join(base[:3]) + "/")
    box = driver.find_element(By.ID, "q")
    box.clear()
    box.send_keys(words + Keys.ENTER)
    WebDriverWait(driver, 10).until(expected_conditions.presence_of_element_located((By.ID, "results-heading")))
    return [h.text for h in driver.find_elements(By.CSS_SELECTOR, "ol.results h3")]


def test_signing_in_then_searching_reads_ranked_sections_with_marked_words(browser: ChromiumDriver) -> None:
    severe(browser)
    headings = search_for(browser, "retention policy")
    assert "Retention policy" in headings
    marks = {m.text.lower() for m in browser.find_elements(By.CSS_SELECTOR, "ol.results mark")}
    assert {"retention", "policy"} <= marks
    assert browser.find_element(By.CSS_SELECTOR, "p.tier").text.startswith("tier: lexical")
    assert "q=retention+policy" in browser.current_url and TOKEN not in browser.current_url
    assert severe(browser) == []
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    assert browser.save_screenshot(str(SCREENSHOT))


def test_a_mapped_citation_is_a_link_that_leads_to_the_mapped_page(browser: ChromiumDriver,
                                                                 mapped_site: WebSite) -> None:
    search_for(browser, "deprecated")
    link = browser.find_element(By.CSS_SELECTOR, "a.mapped[href$='/handbook/api/']")
    link.click()
    WebDriverWait(browser, 10).until(expected_conditions.title_is("Handbook: API"))
    assert browser.find_element(By.TAG_NAME, "h1").text == "The API handbook page"
    assert mapped_site.hits("/handbook/api/") >= 1
    referers = [h.get("referer") for p, h in mapped_site.requests if p == "/handbook/api/"]
    assert referers and all(r is None for r in referers)  # the query does not leak to the mapped site
    browser.back()
    severe(browser)  # the mapped site has no favicon: its 404 is not the page's


def test_opening_a_section_shows_its_text_and_walks_to_its_neighbour(browser: ChromiumDriver) -> None:
    severe(browser)
    search_for(browser, "audit records")
    browser.find_element(By.CSS_SELECTOR, "ol.results h3 a").click()
    assert browser.find_element(By.TAG_NAME, "h1").text == "Retention policy > Exceptions"
    assert "Audit records are deprecated" in browser.find_element(By.CSS_SELECTOR, "div.content").text
    browser.find_element(By.CSS_SELECTOR, "a[rel=prev]").click()
    assert browser.find_element(By.TAG_NAME, "h1").text == "Retention policy"
    assert browser.current_url.endswith("/show/docs/retention.md%230")
    assert severe(browser) == []


def test_a_hostile_document_is_shown_as_text_with_no_script_run(browser: ChromiumDriver) -> None:
    severe(browser)
    headings = search_for(browser, "tricks")
    assert "Evil <script>alert('heading')</script> guide" in headings
    snippet = browser.find_element(By.CSS_SELECTOR, "ol.results p.snippet").text
    assert "<script>alert('body')</script>" in snippet and "<img src=x onerror=alert(1)>" in snippet
    with pytest.raises(NoAlertPresentException):
        browser.switch_to.alert.text  # noqa: B018 - reading it is the check
    browser.find_element(By.CSS_SELECTOR, "ol.results h3 a").click()
    assert browser.find_element(By.TAG_NAME, "h1").text == "Evil <script>alert('heading')</script> guide"
    assert not browser.find_elements(By.CSS_SELECTOR, "main script, main img")
    with pytest.raises(NoAlertPresentException):
        browser.switch_to.alert.text  # noqa: B018
    assert severe(browser) == []


def test_the_keyboard_reaches_the_box_and_which_documents_contain_lists_every_match(browser: ChromiumDriver) -> None:
    browser.get("/".join(browser.current_url.split("/", 3)[:3]) + "/")
    browser.find_element(By.TAG_NAME, "body").send_keys("/")
    assert browser.switch_to.active_element.get_attribute("id") == "q"
    browser.switch_to.active_element.send_keys("retention")
    browser.find_element(By.CSS_SELECTOR, "input[name=mode][value=match]").click()
    browser.find_element(By.CSS_SELECTOR, "form.search button[type=submit]").click()
    heading = WebDriverWait(browser, 10).until(
        expected_conditions.presence_of_element_located((By.ID, "results-heading")))
    assert heading.text.startswith("4 documents contain")
    assert len(browser.find_elements(By.CSS_SELECTOR, "ol.results > li")) == 4


def test_sources_and_stats_are_tables_one_tab_away(browser: ChromiumDriver) -> None:
    browser.find_element(By.LINK_TEXT, "Sources").click()
    rows = browser.find_elements(By.CSS_SELECTOR, "table tbody tr")
    assert len(rows) == 6
    browser.find_element(By.LINK_TEXT, "Stats").click()
    facts = {r.find_elements(By.TAG_NAME, "td")[0].text: r.find_elements(By.TAG_NAME, "td")[1].text
             for r in browser.find_elements(By.CSS_SELECTOR, "table tbody tr")}
    assert facts["documents"] == "6"
    assert severe(browser) == []


def test_with_javascript_off_the_page_still_searches(served: str) -> None:
    driver = chrome(javascript=False)
    try:
        driver.get(served + "/")
        driver.find_element(By.ID, "token").send_keys(TOKEN + Keys.ENTER)
        WebDriverWait(driver, 10).until(expected_conditions.presence_of_element_located((By.ID, "q")))
        assert "Retention policy" in search_for(driver, "retention")
    finally:
        driver.quit()


def test_at_390_px_wide_the_first_result_starts_above_the_fold_and_the_filters_unfold(browser: ChromiumDriver) -> None:
    size = browser.get_window_size()
    browser.set_window_size(390, 844)
    try:
        search_for(browser, "retention policy")
        first = browser.find_element(By.CSS_SELECTOR, "ol.results > li")
        top = browser.execute_script("return arguments[0].getBoundingClientRect().top", first)
        assert top < browser.execute_script("return window.innerHeight") - 100  # its heading and excerpt in view
        path = browser.find_element(By.ID, "f-path")
        assert not path.is_displayed()  # folded away until asked for
        browser.find_element(By.CSS_SELECTOR, "details.options summary").click()
        assert path.is_displayed()
    finally:
        browser.set_window_size(size["width"], size["height"])
