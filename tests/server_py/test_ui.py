#!/usr/bin/env python3
"""The page at GET / in a real browser: headless Chromium (Debian's chromium and
chromium-driver) driven by Selenium against `hypic serve --api-key KEY` on hypic-tiny. The
page is loaded, the key typed in, two documents added, a question asked (both documents are
segments built: 2 missed), the documents reordered and the question asked again (both reused:
2 hit), then once more in full mode (nothing reused); the answers and the figures are read
from the DOM. A model that reasons (--reasoning on) has its thinking shown apart from the
answer. A screenshot goes to build/artifacts/ui.png
(not committed). Without selenium or the browser the suite reports SKIP (exit 77), except
in CI (CI=true), where it fails.

    python tests/server_py/test_ui.py --hypic-bin build/hypic [--source-dir .]
"""
import os
import re
import shutil
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from raw_http import fetch  # noqa: E402
from server_proc import Process, parse_own_args  # noqa: E402

OPTS, UNITTEST_ARGV = parse_own_args(sys.argv)
MODEL_DIR = os.path.join(OPTS["source_dir"], "models", "hypic-tiny")
KEY = "ui-key-5"
PORT_RE = re.compile(r"hypic serve: model '[^']*' on http://[0-9.]+:(\d+)")
DOCS = [("Brennwick", "The mayor of Brennwick is Tova Lindqvar. Brennwick lies on the river Asel."),
        ("Harrowgate Mills", "Harrowgate Mills makes paper. Its founder is Edda Voss, and it employs 340 people.")]
QUESTION = "Who is the mayor of Brennwick?"


def browser():
    """A headless Chromium under Selenium, or None (with why) when either is missing."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        return None, "selenium is missing (scripts/install.sh installs it in .venv)"
    chrome = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not chrome or not driver:
        return None, "chromium or chromedriver is missing (scripts/install.sh installs Debian's)"
    o = webdriver.ChromeOptions()
    o.binary_location = chrome
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,1000"):
        o.add_argument(a)
    return webdriver.Chrome(service=Service(driver), options=o), ""


class PageCase(unittest.TestCase):
    """A browser and a server (`hypic serve` with SERVER_ARGS) per class."""
    SERVER_ARGS = ("--model", MODEL_DIR, "--api-key", KEY)

    @classmethod
    def setUpClass(cls):
        cls.driver, why = browser()
        if cls.driver is None:
            raise unittest.SkipTest(why)
        cls.srv = Process([OPTS["hypic_bin"], "serve", "--port", "0", "--dtype", "f32", *cls.SERVER_ARGS],
                          prefix="hypic-ui-")
        cls.srv.spawn(PORT_RE, 1, 60.0, lambda: (fetch(cls.srv.port, "GET", "/health", timeout=2) or
                                                  type("R", (), {"status": 0})).status == 200)

    @classmethod
    def tearDownClass(cls):
        cls.driver.quit()
        cls.srv.cleanup()

    def wait(self, cond, what, timeout=60):
        from selenium.webdriver.support.ui import WebDriverWait
        try:
            return WebDriverWait(self.driver, timeout, poll_frequency=0.1).until(lambda d: cond())
        except Exception:
            self.fail("%s did not happen within %ds; page text:\n%s" % (
                what, timeout, self.driver.find_element("tag name", "body").text[:2000]))

    def by_id(self, i):
        return self.driver.find_element("id", i)

    def rows(self):
        return [[td.text for td in tr.find_elements("tag name", "td")]
                for tr in self.driver.find_elements("css selector", "#figures tbody tr")]

    def ask(self, mode):
        n = len(self.rows())
        self.driver.find_element("css selector", "input[name=mode][value=%s]" % mode).click()
        self.by_id("ask").click()
        self.wait(lambda: len(self.rows()) == n + 1 or "error" in self.by_id("answer").get_attribute("class"),
                  "an answer")
        self.assertNotIn("error", self.by_id("answer").get_attribute("class"), self.by_id("answer").text)
        return self.by_id("answer").text, self.rows()[0]  # newest first



class Page(PageCase):
    def test_documents_reordered_are_reused(self):
        d = self.driver
        d.get("http://127.0.0.1:%d/" % self.srv.port)
        self.assertIn("hypic", d.title)
        self.wait(lambda: "enter the API key" in self.by_id("model").text, "the page asking for the key")
        self.by_id("key").send_keys(KEY + "\t")  # change event: the page loads /props with it
        self.wait(lambda: self.by_id("model").text.startswith("hypic-tiny"), "the model's name from /props")
        for title, text in DOCS:
            self.by_id("doc-title").send_keys(title)
            self.by_id("doc-text").send_keys(text)
            self.by_id("add-doc").click()
        titles = lambda: [e.get_attribute("data-title") for e in d.find_elements("css selector", "#docs .doc")]
        self.assertEqual(titles(), [t for t, _ in DOCS])
        self.by_id("question").send_keys(QUESTION)

        first, row = self.ask("hypic")
        # columns: #, mode, documents, hit, missed, reused, recomputed, server TTFT, page TTFT
        self.assertEqual((row[1], row[3], row[4]), ("hypic", "0", "2"), row)
        self.assertTrue(first.strip())

        d.find_elements("css selector", "#docs .doc button.down")[0].click()  # Brennwick goes second
        self.assertEqual(titles(), [t for t, _ in reversed(DOCS)])
        second, row = self.ask("hypic")
        self.assertEqual((row[1], row[2], row[3], row[4]), ("hypic", "Harrowgate Mills, Brennwick", "2", "0"), row)
        self.assertGreater(int(row[5]), 0, row)  # tokens reused
        self.assertTrue(second.strip())
        self.assertGreater(float(row[7]), 0, row)

        _, row = self.ask("full")  # the baseline: nothing reused
        self.assertEqual((row[1], row[5]), ("full", "0"), row)
        self.assertNotIn(KEY, d.current_url)  # the key travels in a header only
        os.makedirs(os.path.join(OPTS["source_dir"], "build", "artifacts"), exist_ok=True)
        d.save_screenshot(os.path.join(OPTS["source_dir"], "build", "artifacts", "ui.png"))


class ReasoningPage(PageCase):
    """A model that reasons (--reasoning on, the test model): its thinking streams into the
    reasoning box, apart from the answer."""
    SERVER_ARGS = ("--model", os.path.join(OPTS["source_dir"], "tests", "models", "qwen3_5_dense"), "--reasoning", "on")

    def test_reasoning_is_shown_apart(self):
        self.driver.get("http://127.0.0.1:%d/" % self.srv.port)
        self.wait(lambda: self.by_id("model").text.startswith("qwen3_5_dense"), "the model's name from /props")
        self.assertFalse(self.by_id("thinking-box").is_displayed())
        self.by_id("question").send_keys("Why?")
        self.ask("hypic")
        self.assertTrue(self.by_id("thinking-box").is_displayed())
        self.by_id("thinking-box").click()  # open the <details>
        self.wait(lambda: self.by_id("thinking").text.strip(), "the reasoning text")


if __name__ == "__main__":
    if not OPTS["hypic_bin"] or not os.access(OPTS["hypic_bin"], os.X_OK):
        print("ERROR: the hypic binary is missing: pass --hypic-bin PATH")
        sys.exit(2)
    r = unittest.main(argv=UNITTEST_ARGV, exit=False).result
    if r.skipped and not r.testsRun - len(r.skipped):
        if os.environ.get("CI"):
            print("ERROR: skipped in CI: " + r.skipped[0][1])
            sys.exit(1)
        sys.exit(77)
    sys.exit(0 if r.wasSuccessful() else 1)
