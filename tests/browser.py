"""A real headless browser for the tests: Chromium (Debian's `chromium`) driven over the DevTools protocol.

The protocol runs over a pipe (``--remote-debugging-pipe``: JSON messages ending in a NUL byte, read by
Chromium on fd 3 and written on fd 4), so no port is opened and nothing beyond the standard library is
needed. ``page_facts`` opens a file, waits for its load event and returns what the page holds: the
title, every image with its natural size and whether it decoded, every link target and element id,
and any script error.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

# Chromium as root in a container: no sandbox, no GPU, nothing fetched in the background.
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--remote-debugging-pipe")
MISSING = ("Chromium is not installed: the HTML report's browser test needs Debian's packages chromium and "
           "chromium-driver (.ci/install-services installs them)")

FACTS = """
(async () => {
  const images = [...document.images];
  const decoded = await Promise.allSettled(images.map(image => image.decode()));
  return JSON.stringify({
    title: document.title,
    ready: document.readyState,
    images: images.map((image, i) => ({alt: image.alt, src: image.getAttribute('src').slice(0, 30),
                                        width: image.naturalWidth, height: image.naturalHeight,
                                        decoded: decoded[i].status === 'fulfilled'})),
    links: [...document.querySelectorAll('a[href]')].map(a => a.getAttribute('href')),
    ids: [...document.querySelectorAll('[id]')].map(element => element.id),
    text: document.body ? document.body.innerText.length : 0,
  });
})()
"""


def chromium() -> str | None:
    """The Chromium executable, or None when it is not installed."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


class DevTools:
    """One Chromium process and its DevTools pipe."""

    def __init__(self, executable: str, profile: Path):
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        command = [executable, *FLAGS, f"--user-data-dir={profile}", "about:blank"]
        # fd 3 = what Chromium reads, fd 4 = what it writes
        self.process = subprocess.Popen(
            ["bash", "-c", f'exec "$@" 3<&{to_browser_r} 4>&{from_browser_w}', "chromium", *command],
            pass_fds=(to_browser_r, from_browser_w), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict] = []

    def send(self, method: str, params: dict | None = None, session: str | None = None,
             timeout: float = 60.0) -> dict:
        """Send one command and return its result (events that arrive meanwhile are kept in ``events``)."""
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._read(timeout)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method: str, timeout: float = 60.0) -> dict:
        """The first event named ``method`` (already received or next)."""
        deadline = time.monotonic() + timeout
        while True:
            for event in self.events:
                if event.get("method") == method:
                    self.events.remove(event)
                    return event
            self.events.append(self._read(max(0.1, deadline - time.monotonic())))

    def _read(self, timeout: float) -> dict:
        import select

        deadline = time.monotonic() + timeout
        while b"\0" not in self._buffer:
            ready, _, _ = select.select([self._from_browser], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise TimeoutError(f"no reply from Chromium in {timeout:.0f} s")
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise RuntimeError(f"Chromium closed the pipe: {self.process.stderr.read().decode()[-2000:]}")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout=10.0)
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._to_browser)
        os.close(self._from_browser)


def page_facts(page: Path, executable: str | None = None) -> dict:
    """Load ``page`` in headless Chromium; its title, images (natural size, decoded), links, ids, errors."""
    executable = executable or chromium()
    if executable is None:
        raise FileNotFoundError(MISSING)
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        browser = DevTools(executable, Path(profile))
        try:
            target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
            session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            browser.send("Page.enable", session=session)
            browser.send("Runtime.enable", session=session)
            browser.send("Page.navigate", {"url": Path(page).resolve().as_uri()}, session=session)
            browser.wait_for("Page.loadEventFired")
            result = browser.send("Runtime.evaluate", {"expression": FACTS, "awaitPromise": True,
                                                       "returnByValue": True}, session=session)
            facts = json.loads(result["result"]["value"])
            facts["errors"] = [event["params"] for event in browser.events
                               if event.get("method") == "Runtime.exceptionThrown"]
            return facts
        finally:
            browser.close()


def broken_links(page: Path, facts: dict) -> list[str]:
    """The page's links that lead nowhere: an anchor no element has, a relative file that does not exist
    next to the page. Web addresses are not fetched (the tests run offline)."""
    broken = []
    for href in facts["links"]:
        if href.startswith("#"):
            if href[1:] not in facts["ids"]:
                broken.append(href)
        elif not href.startswith(("http://", "https://", "mailto:")):
            if not (Path(page).parent / href.split("#", 1)[0]).exists():
                broken.append(href)
    return broken
