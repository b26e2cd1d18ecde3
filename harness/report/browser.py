"""Open an HTML page in headless Chromium, the way a person would, and say what they would see.

Why a real browser: a report can render as valid HTML and still be broken for its reader (a
script that throws, a figure that does not decode, a section that is empty). Tests call
:func:`check_page` on a report and assert on what came back; the screenshot it saves is what a
reviewer (or the docs) looks at.

Uses Selenium with Debian's ``chromium`` and ``chromium-driver`` (installed by ``bootstrap.sh``);
nothing is downloaded at run time: Selenium's driver manager is bypassed by naming both binaries.
"""

from __future__ import annotations

import base64
import os
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

CHROMIUM = os.environ.get("KAFKA_HARNESS_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("KAFKA_HARNESS_CHROMEDRIVER", "/usr/bin/chromedriver")
#: Longest screenshot taken of a full page: Chromium cannot capture arbitrarily tall pages.
MAX_HEIGHT = 16000


class BrowserUnavailable(RuntimeError):
    """Chromium or its driver is not installed (``bootstrap.sh`` installs both as root)."""


@dataclass
class PageCheck:
    """What a reader of the page got.

    ``errors``: console errors and uncaught script errors (SEVERE browser log entries; a page
    that works has none). ``text``: the page's visible text (``document.body.innerText``).
    ``counts``: for each CSS selector asked for, how many elements match. ``title``: the
    document title. ``height``: the page's full height in CSS pixels. ``screenshot``: the PNG.
    """

    errors: list[str]
    text: str
    counts: dict[str, int] = field(default_factory=dict)
    title: str = ""
    height: int = 0
    screenshot: Path | None = None


def _binaries() -> tuple[str, str]:
    chromium = shutil.which(CHROMIUM) or shutil.which("chromium")
    driver = shutil.which(CHROMEDRIVER) or shutil.which("chromedriver")
    if not chromium or not driver:
        raise BrowserUnavailable(
            "headless Chromium needs Debian's chromium and chromium-driver "
            "(apt-get install chromium chromium-driver; bootstrap.sh does this as root)"
        )
    return chromium, driver


def check_page(
    html: Path | str,
    screenshot: Path | str,
    *,
    width: int = 1400,
    height: int | None = None,
    selectors: Iterable[str] = (),
) -> PageCheck:
    """Load ``html`` (a file path) in headless Chromium, save a PNG to ``screenshot``.

    ``width`` is the viewport width in CSS pixels; ``height`` crops the screenshot to the top
    of the page (default: the whole page, up to :data:`MAX_HEIGHT`). ``selectors`` are CSS
    selectors whose match counts land in ``PageCheck.counts``. Returns once the page's load
    event has fired (Selenium waits for it), so images embedded as data URLs are decoded.
    """
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium, driver_bin = _binaries()
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for arg in (
        "--headless=new",
        "--no-sandbox",  # root in a container has no user namespaces for the sandbox
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--hide-scrollbars",
        f"--window-size={width},900",
    ):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # Chromium leaves a directory of its own in TMPDIR after every run: give it one to remove.
    scratch = tempfile.mkdtemp(prefix="kh-chromium-")
    service = Service(executable_path=driver_bin, env={**os.environ, "TMPDIR": scratch})
    try:
        driver = webdriver.Chrome(options=opts, service=service)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    try:
        driver.get(Path(html).resolve().as_uri())
        full = int(driver.execute_script("return document.documentElement.scrollHeight"))
        shot_h = max(1, min(height or full, full, MAX_HEIGHT))
        driver.execute_cdp_cmd(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": shot_h, "deviceScaleFactor": 1, "mobile": False},
        )
        clip = {"x": 0, "y": 0, "width": width, "height": shot_h, "scale": 1}
        png = driver.execute_cdp_cmd(
            "Page.captureScreenshot",
            {"format": "png", "captureBeyondViewport": True, "clip": clip},
        )["data"]
        out = Path(screenshot)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(base64.b64decode(png))
        counts = {
            s: int(
                driver.execute_script("return document.querySelectorAll(arguments[0]).length", s)
            )
            for s in selectors
        }
        # Broken images are not script errors but a reader sees them as broken: report them.
        broken = driver.execute_script(
            "return Array.from(document.images)"
            ".filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.id || i.alt || i.src)"
        )
        errors = [
            e.get("message", str(e))
            for e in driver.get_log("browser")
            if e.get("level") == "SEVERE"
        ] + [f"image did not load: {str(b)[:120]}" for b in broken]
        return PageCheck(
            errors=errors,
            text=driver.execute_script("return document.body.innerText"),
            counts=counts,
            title=driver.title,
            height=full,
            screenshot=out,
        )
    finally:
        driver.quit()
        shutil.rmtree(scratch, ignore_errors=True)
