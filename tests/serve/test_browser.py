"""``curate serve``'s pages in a real headless Chromium (Playwright): a running ``curate run``
listed with its progress moving (the test moves it, one shard at a time, through a gate stage);
the document browser finding a removed document by reason and by id and showing its text; the
``pii`` rewrite shown as a diff; the report in its tab; a submitted YAML becoming a run; a run
name with markup shown as text. Screenshots land in the test's tmp dir, and in
``$CURATOR_SCREENSHOTS`` when set."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import write_shards
from tests.serve.helpers import (
    EMAIL,
    ODD_IDS,
    SHORT,
    TOKEN,
    Server,
    curate,
    gated_pipeline,
    make_run,
    wait_for,
    write_inputs,
)

CHROMIUM = shutil.which("chromium")
pytestmark = [pytest.mark.browser, pytest.mark.slow,
              pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary on PATH")]
sync_api = pytest.importorskip("playwright.sync_api")
SHARDS = 40
MARKUP_NAME = "<i onmouseover=alert(1)>run"


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield chromium
        chromium.close()


@pytest.fixture()
def page(browser):
    context = browser.new_context(viewport={"width": 1300, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    yield page
    context.close()
    # no script error, no CSP refusal, no failed request (but a refused submission's 400)
    assert not [e for e in errors if "status of 400" not in e], errors


def shot(page, tmp_path: Path, name: str) -> None:
    """A screenshot in the test's folder, copied to $CURATOR_SCREENSHOTS when set."""
    path = tmp_path / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    if os.environ.get("CURATOR_SCREENSHOTS"):
        folder = Path(os.environ["CURATOR_SCREENSHOTS"])
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, folder / path.name)


def value(page, selector: str) -> float | None:
    found = page.query_selector(selector)
    return found.evaluate("e => e.value") if found else None


class Gates:
    """Lets a gated run's batches through one at a time."""

    def __init__(self, folder: Path) -> None:
        self.folder, self.opened = folder, 0

    def waiting(self) -> bool:
        return (self.folder / f"arrived-{self.opened + 1}").exists()

    def open_next(self) -> None:
        """Let the waiting batch through, once it waits."""
        wait_for(self.waiting, message=f"batch {self.opened + 1} at its gate")
        self.opened += 1
        (self.folder / f"open-{self.opened}").touch()

    def open_all(self) -> None:
        for n in range(1, SHARDS * 4):
            (self.folder / f"open-{n}").touch()


def moves(page, gates: Gates, selector: str, before: float, status: str | None = None) -> bool:
    """One step of a run held at its gates: True once the page shows more progress than
    ``before`` (with ``status``, a selector, still there); else the next batch is let through
    once the page has had its chance to show the last one (progress.json is written at most
    once a second, so a step without news makes the next batch's figures written)."""
    shown = value(page, selector)
    if shown is not None and shown > before:
        return status is None or page.query_selector(status) is not None
    try:
        page.wait_for_function("([s, v]) => (document.querySelector(s) || {}).value > v",
                               arg=[selector, before], timeout=2500, polling=200)
    except sync_api.TimeoutError:
        gates.open_next()
    return False


def test_the_runs_list_shows_a_running_run_whose_progress_moves(page, tmp_path):
    inputs = tmp_path / "in"
    write_shards(inputs, SHARDS)
    root = tmp_path / "runs"
    gates = Gates(tmp_path / "gates")
    config = gated_pipeline(tmp_path, inputs, root / "gated", gates.folder)
    proc = curate("run", str(config), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                  text=True)
    server = Server([root])
    try:
        wait_for(gates.waiting, message="the run's first batch at its gate")
        page.goto(f"{server.base}/?token={TOKEN}")
        assert page.url == f"{server.base}/"  # the token left the address bar
        row = "tr[data-run=gated]"
        page.wait_for_selector(f"{row} td.status-running", timeout=60_000)
        wait_for(lambda: value(page, f"{row} progress") is not None, message="a progress bar")
        first = value(page, f"{row} progress")
        shot(page, tmp_path, "runs-running-before")
        wait_for(lambda: moves(page, gates, f"{row} progress", first, f"{row} td.status-running"),
                 message="the runs list to show the progress move")
        assert page.text_content(f"{row} td:nth-child(2)") == "running"
        shot(page, tmp_path, "runs-running-moved")

        page.click(f"{row} a")
        page.wait_for_url(f"{server.base}/runs/gated")
        page.wait_for_function("() => document.getElementById('status').textContent "
                               "=== 'running'")
        page.evaluate("() => { window.notReloaded = true; }")
        start = value(page, "#bar")
        wait_for(lambda: moves(page, gates, "#bar", start), message="the run page's bar to move")
        assert page.evaluate("() => window.notReloaded === true")  # moved without a reload
        assert "tasks" in page.inner_text("#progress-text")
        shot(page, tmp_path, "run-page-progress")

        gates.open_all()
        assert proc.wait(300) == 0, proc.stdout.read()
        page.wait_for_function("() => document.getElementById('status').textContent === 'done'",
                               timeout=60_000)
        assert value(page, "#bar") == 1
    finally:
        gates.open_all()
        proc.kill()
        proc.wait(60)
        server.close()


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    base = tmp_path_factory.mktemp("browse")
    root = base / "runs"
    make_run(write_inputs(base / "in"), root / "served")
    shutil.copytree(root / "served", root / MARKUP_NAME)
    server = Server([root])
    yield server
    server.close()


def open_documents(page, server: Server) -> None:
    page.goto(f"{server.base}/runs/served?token={TOKEN}")
    page.click("button[data-tab=documents]")
    page.wait_for_selector("#stage option[value=length_filter]", state="attached")


def test_the_document_browser_finds_a_removed_document_by_reason_and_by_id(page, served,
                                                                           tmp_path):
    open_documents(page, served)
    page.select_option("#stage", "length_filter")
    page.check("input[name=removed][value=true]")
    page.select_option("#reason", "too_short")
    page.click("#doc-form button[type=submit]")
    page.wait_for_selector(f"#doc-list button.link >> text={ODD_IDS[0]}")
    assert "matching" in page.inner_text("#doc-summary")
    page.click(f"#doc-list button.link >> text={ODD_IDS[0]}")
    page.wait_for_function("t => document.getElementById('doc-text').textContent === t",
                           arg=SHORT)
    assert "too_short" in page.inner_text("#doc-where")
    shot(page, tmp_path, "documents-by-reason")

    for doc_id in (ODD_IDS[1], "000025/207_ruby", ODD_IDS[0]):
        page.fill("#find", doc_id)
        page.click("#find-form button[type=submit]")
        page.wait_for_function("t => document.getElementById('doc-id').textContent === t",
                               arg=doc_id)
    assert page.inner_text("#doc-text") == SHORT
    shot(page, tmp_path, "documents-by-id")


def test_the_diff_view_shows_the_pii_replacement(page, served, tmp_path):
    open_documents(page, served)
    page.fill("#find", "mail-1")
    page.click("#find-form button[type=submit]")
    page.wait_for_selector("#doc-history del")
    assert EMAIL not in page.inner_text("#doc-text")
    assert "pii" in page.inner_text("#doc-history h3")
    deleted = page.inner_text("#doc-history del")
    inserted = page.inner_text("#doc-history ins")
    assert EMAIL in deleted and inserted and inserted in page.inner_text("#doc-text")
    look = page.eval_on_selector("#doc-history del", "e => [getComputedStyle(e).color, "
                                 "getComputedStyle(e).textDecorationLine]")
    assert look == ["rgb(176, 42, 55)", "line-through"]
    assert page.eval_on_selector("#doc-history ins", "e => getComputedStyle(e).color") \
        == "rgb(43, 138, 62)"
    page.locator("#doc-history").scroll_into_view_if_needed()
    shot(page, tmp_path, "documents-pii-diff")


def test_the_report_tab_and_markup_in_a_run_name_shown_as_text(page, served, tmp_path):
    page.goto(f"{served.base}/?token={TOKEN}")
    link = page.wait_for_selector("#runs a >> text=<i onmouseover")
    assert link.inner_text() == MARKUP_NAME and page.query_selector("#runs i") is None
    page.goto(f"{served.base}/runs/served")
    page.click("button[data-tab=report]")
    frame = page.frame_locator("#report")
    frame.locator("h1").first.wait_for()
    assert "served" in frame.locator("h1").first.inner_text()
    shot(page, tmp_path, "run-report-tab")


def test_a_submitted_yaml_appears_as_a_run(page, tmp_path):
    root = tmp_path / "served"
    inputs = write_inputs(root / "in", 2)
    server = Server([root], submit=True, cwd=tmp_path)
    try:
        page.goto(f"{server.base}/?token={TOKEN}")
        page.wait_for_selector("#submit:not([hidden])")
        page.fill("#yaml", f"name: from-browser\nexecutor: {{type: local}}\nstages:\n"
                  f"  - {{type: read_jsonl, path: '{inputs.relative_to(tmp_path)}/*.jsonl'}}\n"
                  f"  - {{type: length_filter, min_chars: 2000}}\n  - {{type: write_parquet}}\n")
        page.click("#submit-form button[type=submit]")
        page.wait_for_function("() => document.getElementById('submit-result').textContent"
                               ".startsWith('started from-browser')")
        page.wait_for_selector("tr[data-run=from-browser] td.status-done", timeout=180_000)
        shot(page, tmp_path, "submitted-run")
        page.fill("#yaml", "name: evil\nimports: [x.py]\nstages: [{type: write_parquet}]\n")
        page.click("#submit-form button[type=submit]")
        page.wait_for_function("() => document.getElementById('submit-result').textContent"
                               ".startsWith('refused: imports')")
    finally:
        server.close()
