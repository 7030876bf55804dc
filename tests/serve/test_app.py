"""``curate serve`` over real HTTP on loopback: the JSON API on real runs, and each safety rule
(token, cookie, origin, traversal, links out of a run, malformed queries, headers, submission
checks) proven by requests sent exactly as written."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path
from urllib.parse import quote

import psutil
import pytest

from curator.serve import auth
from tests.serve.helpers import (
    EMAIL,
    ODD_IDS,
    SHORT,
    TOKEN,
    Server,
    bearer,
    curate,
    make_run,
    request,
    serve_subprocess,
    wait_for,
    write_inputs,
)

SECRET = "SECRET-do-not-serve-4d61"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A served folder with one finished run ``served``, a secret file beside it, a run folder
    that is a link to a run outside, and a run whose report is a link out."""
    base = tmp_path_factory.mktemp("serve")
    inputs = write_inputs(base / "in")
    root = base / "runs"
    run = make_run(inputs, root / "served")
    (base / "secret.txt").write_text(SECRET, encoding="utf-8")
    outside = base / "elsewhere" / "outside-run"
    shutil.copytree(run, outside)
    (root / "linked-run").symlink_to(outside, target_is_directory=True)
    leaky = root / "leaky"
    shutil.copytree(run, leaky)
    (leaky / "report.html").unlink()
    (leaky / "report.html").symlink_to(base / "secret.txt")
    server = Server([root])
    yield server, root, base
    server.close()


def get(server: Server, path: str, **kw):
    return request(server.port, path, headers=bearer(), **kw)


# ---------------------------------------------------------------------------- the API
def test_runs_list_and_a_run_with_its_plan_stats_and_log(site):
    server, root, _ = site
    runs = get(server, "/api/runs").json()
    assert {r["name"] for r in runs["runs"]} == {"served", "leaky"}  # the link out is not listed
    assert runs["submit"] is False
    served = next(r for r in runs["runs"] if r["name"] == "served")
    stats = json.loads((root / "served" / "stats.json").read_text())
    assert served["status"] == "done"
    assert served["docs_in"] == stats["stages"][0]["in"] == len(
        [line for f in (root.parent / "in").glob("*.jsonl") for line in f.open()])
    assert served["docs_kept"] == stats["stages"][-1]["kept"]
    detail = get(server, "/api/runs/served").json()
    assert [s["type"] for s in detail["plan"]] == ["read_jsonl", "pii", "length_filter",
                                                   "write_parquet"]
    assert detail["stats"]["stages"][2]["removed_by_reason"] == stats["stages"][2][
        "removed_by_reason"]
    assert any("run finished" in line for line in detail["log_tail"])
    progress = get(server, "/api/runs/served/progress").json()
    assert progress["state"] == "finished" and progress["fraction"] == 1.0


def test_stages_and_documents_of_a_run(site):
    server, _, _ = site
    stages = {s["name"]: s for s in get(server, "/api/runs/served/stages").json()["stages"]}
    assert set(stages) >= {"pii", "length_filter"}
    removed = get(server, "/api/runs/served/documents?stage=length_filter&removed=true"
                  "&reason=too_short&limit=50").json()
    ids = {d["id"] for d in removed["documents"]}
    assert ODD_IDS[0] in ids and removed["matched"] == len(ids)
    kept = get(server, "/api/runs/served/documents?stage=length_filter&removed=false&q="
               + quote(EMAIL.split("@")[0])).json()
    assert kept["matched"] == 0  # pii replaced the address before the filter


@pytest.mark.parametrize("doc_id", [*ODD_IDS, "000025/207_ruby"])
def test_a_document_by_an_id_with_any_character_percent_encoded_as_one_segment(site, doc_id):
    server, _, _ = site
    found = get(server, f"/api/runs/served/documents/{quote(doc_id, safe='')}")
    assert found.status == 200, found.body
    assert found.json()["id"] == doc_id
    if doc_id == ODD_IDS[0]:
        assert found.json()["text"] == SHORT
        assert "too_short" in json.dumps(found.json())


def test_a_rewritten_document_shows_its_text_before_and_after(site):
    server, _, _ = site
    doc = get(server, "/api/runs/served/documents/mail-1").json()
    assert EMAIL not in doc["text"]
    [step] = [h for h in doc["history"] if h["stage"] == "pii"]
    assert EMAIL in step["before"] and step["after"] == doc["text"]
    assert ["-", EMAIL] in step["diff"] or any(op == "-" and EMAIL in text
                                                for op, text in step["diff"])
    assert "".join(t for op, t in step["diff"] if op != "+") == step["before"]
    assert "".join(t for op, t in step["diff"] if op != "-") == step["after"]


def test_unknown_runs_stages_and_documents_are_404_and_malformed_queries_400(site):
    server, _, _ = site
    for path in ("/api/runs/nope", "/api/runs/nope/progress", "/api/runs/nope/report",
                 "/runs/nope", "/api/runs/served/documents/no-such-id"):
        assert get(server, path).status == 404, path
    unknown_stage = get(server, "/api/runs/served/documents?stage=nope")
    assert unknown_stage.status in (400, 404)
    for query in ("limit=abc", "limit=-1", "removed=maybe", "score=nonsense",
                  "offset=x"):
        answer = get(server, f"/api/runs/served/documents?stage=length_filter&{query}")
        assert answer.status == 400, (query, answer.body)
        body = answer.json()
        assert list(body) == ["error"] and "\n" not in body["error"] and body["error"]


def test_the_report_is_served_with_a_strict_policy_and_a_link_out_is_not(site):
    server, root, _ = site
    report = get(server, "/api/runs/served/report")
    assert report.status == 200
    assert report.body == (root / "served" / "report.html").read_bytes()
    policy = report.headers["Content-Security-Policy"]
    assert "default-src 'none'" in policy and "sandbox" in policy
    assert "script-src" not in policy and "frame-ancestors 'self'" in policy
    assert report.headers["X-Frame-Options"] == "SAMEORIGIN"
    leaky = get(server, "/api/runs/leaky/report")
    assert leaky.status == 404 and SECRET.encode() not in leaky.body
    assert get(server, "/api/runs/linked-run").status == 404


# ---------------------------------------------------------------------------- the token
@pytest.mark.parametrize("path", ["/", "/runs/served", "/static/app.js", "/api/runs",
                                  "/api/runs/served/report", "/api/runs/served/documents/mail-1",
                                  "/no/such/page"])
def test_every_route_needs_the_token(site, path):
    server, _, _ = site
    for headers in ({}, bearer("wrong"), bearer(TOKEN[:-1]), bearer(TOKEN + "x"),
                    {"Authorization": TOKEN}, {"Cookie": f"{auth.COOKIE}=wrong"}):
        answer = request(server.port, path, headers=headers)
        assert answer.status == 401, (path, headers)
        assert b"mail" not in answer.body and SECRET.encode() not in answer.body
    assert request(server.port, f"{path}?token=wrong").status == 401


def test_the_token_in_the_address_becomes_a_strict_cookie_and_leaves_the_address(site):
    server, _, _ = site
    answer = request(server.port, f"/runs/served?token={TOKEN}&tab=report")
    assert answer.status == 303
    assert answer.headers["Location"] == "/runs/served?tab=report"
    cookie = answer.headers["Set-Cookie"]
    assert cookie.startswith(f"{auth.COOKIE}={TOKEN};")
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    jar = {"Cookie": f"{auth.COOKIE}={TOKEN}"}
    assert request(server.port, "/runs/served", headers=jar).status == 200
    assert request(server.port, "/api/runs", headers=jar).status == 200
    # a protocol-relative address would send the browser elsewhere: it stays on this server
    elsewhere = request(server.port, f"//evil.example/x?token={TOKEN}")
    assert elsewhere.headers["Location"] == "/evil.example/x"


def test_the_stored_token_is_made_once_with_mode_0600(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    first = auth.stored_token()
    path = tmp_path / "config" / "curator" / "serve-token"
    assert auth.token_file() == path and len(first) >= 40
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert auth.stored_token() == first


# ---------------------------------------------------------------------------- paths
TRAVERSALS = [
    "/api/runs/..%2F..%2Fsecret.txt", "/api/runs/%2e%2e/report", "/api/runs/%2E%2E%2F%2E%2E",
    "/api/runs/..%252F..%252Fsecret.txt", "/api/runs/%252e%252e/report",
    "/api/runs/..%5C..%5Csecret.txt", "/api/runs/..\\..\\secret.txt",
    "/api/runs/%2Fetc%2Fpasswd", "/api/runs//etc/passwd", "/api/runs/served/../../secret.txt",
    "/api/runs/served/..%2F..%2Fsecret.txt/report", "/api/runs/served/documents/..%2Fstats.json",
    "/api/runs/served/documents/%2e%2e%2f%2e%2e%2fsecret.txt",
    "/static/..%2Fapp.py", "/static/%2e%2e/app.py", "/static/../app.py", "/static/..%5Capp.py",
    "/static/%252e%252e%252fapp.py", "/static//etc/passwd", "/runs/..%2F..%2Fsecret.txt",
    "/../secret.txt", "/%2e%2e/secret.txt", "/runs/%2e%2e", "/api/runs/elsewhere%2Foutside-run",
    "/api/runs/linked-run/report", "/api/runs/%2Ftmp/report",
]


@pytest.mark.parametrize("path", TRAVERSALS)
def test_paths_that_leave_the_served_folder_are_4xx_and_read_nothing(site, path):
    server, _, _ = site
    answer = get(server, path)
    assert 400 <= answer.status < 500, (path, answer.status, answer.body[:200])
    assert SECRET.encode() not in answer.body and b"import" not in answer.body


def test_pages_api_and_errors_carry_the_security_headers(site):
    server, _, _ = site
    for path in ("/", "/runs/served", "/static/app.js", "/api/runs", "/api/runs/nope",
                 "/static/nope"):
        headers = get(server, path).headers
        assert "default-src 'self'" in headers["Content-Security-Policy"], path
        assert headers["X-Content-Type-Options"] == "nosniff"
        assert headers["Referrer-Policy"] == "no-referrer"
        assert headers["X-Frame-Options"] == "SAMEORIGIN"
    assert get(server, "/api/runs").headers["Cache-Control"] == "no-store"
    assert request(server.port, "/api/runs").headers["X-Content-Type-Options"] == "nosniff"


# ---------------------------------------------------------------------------- submitting
@pytest.fixture()
def submitting(tmp_path):
    """A served folder with inputs inside it, the service with --submit, its cwd the folder's
    parent; a secret and a symlink out beside."""
    root = tmp_path / "served"
    inputs = write_inputs(root / "in", 2)
    (tmp_path / "secret.txt").write_text(f"{SECRET}.example.com\n", encoding="utf-8")
    (inputs / "escape.jsonl").symlink_to(tmp_path / "secret.txt")
    server = Server([root], submit=True, cwd=tmp_path)
    yield server, root, tmp_path
    server.close()


def post(server: Server, body: str, query: str = "", headers: dict | None = None):
    """POST /api/runs with ``headers`` (the bearer token when None)."""
    return request(server.port, f"/api/runs{query}", "POST",
                   headers=bearer() if headers is None else headers, body=body)


def yaml_for(name: str, path: str, extra_stage: str = "", top: str = "") -> str:
    return (f"name: {name}\n{top}executor: {{type: local}}\nstages:\n"
            f"  - {{type: read_jsonl, path: '{path}'}}\n{extra_stage}"
            f"  - {{type: write_parquet}}\n")


def test_a_submitted_pipeline_runs_under_the_first_served_folder(submitting):
    server, root, _ = submitting
    answer = post(server, yaml_for("submitted", "served/in/shard-*.jsonl"))
    assert answer.status == 202, answer.body
    body = answer.json()
    assert body["run"] == "submitted" and body["output"] == str((root / "submitted").resolve())
    assert Path(body["log"]).parent == (root / "submitted" / "jobs").resolve()

    def done():
        runs = {r["name"]: r for r in get(server, "/api/runs").json()["runs"]}
        return runs.get("submitted", {}).get("status") == "done" and runs["submitted"]

    run = wait_for(done, message="the submitted run to finish")
    assert run["docs_in"] == sum(1 for f in (root / "in").glob("shard-*.jsonl") for _ in f.open())
    assert (root / "submitted" / "write_parquet").is_dir()


@pytest.mark.parametrize(("body", "expected"), [
    ("name: x\nimports: [evil.py]\nstages: [{type: read_jsonl, path: 'served/in/*.jsonl'}]\n",
     "imports"),
    (yaml_for("x", "secret.txt"), "outside"),
    (yaml_for("x", "/etc/*"), "outside"),
    (yaml_for("x", "served/in/../../secret.txt"), "plain paths"),
    (yaml_for("x", "served/in/*.jsonl"), "leads outside"),  # escape.jsonl, a link out
    (yaml_for("x", "served/in"), "leads outside"),  # the folder holds the link
    (yaml_for("x", "~/in/*.jsonl"), "plain paths"),
    (yaml_for("x", "http://127.0.0.1:1/x.jsonl"), "plain paths"),
    (yaml_for("x", "served/in/shard-*.jsonl", top="output: elsewhere/x\n"), "outside"),
    (yaml_for("x", "served/in/shard-*.jsonl", top="output: served/a/b\n"), "directly under"),
    (yaml_for("../../x", "served/in/shard-*.jsonl"), "cannot name a folder"),
    (yaml_for("x", "served/in/shard-*.jsonl",
              "  - {type: url_filter, lists: [secret.txt]}\n"), "outside"),
    (yaml_for("x", "served/in/shard-*.jsonl",
              "  - {type: tokenize, tokenizer: {path: /etc/passwd}}\n"), "outside"),
    (yaml_for("x", "served/in/shard-*.jsonl", "  - {type: decontaminate, tasks: "
              "[{name: gsm8k, path: /etc/hostname}]}\n"), "outside"),
    (yaml_for("x", "served/in/shard-*.jsonl").replace(
        "{type: local}", "{type: dask, scheduler_file: /tmp/s.json}"), "outside"),
    (yaml_for("x", "served/in/shard-*.jsonl").replace(
        "{type: write_parquet}", "{type: write_parquet, path: served/other}"), "inside the run"),
    ("stages: [oops", "malformed YAML"),
    ("- a list", "expected a mapping"),
    (yaml_for("x", "served/in/shard-*.jsonl", "  - {type: no_such_stage}\n"), "unknown stage"),
])
def test_submissions_that_would_read_or_write_outside_are_refused(submitting, body, expected):
    server, root, _ = submitting
    answer = post(server, body)
    assert answer.status == 400, (answer.status, answer.body)
    error = answer.json()["error"]
    assert expected in error and "\n" not in error
    assert SECRET not in error  # no file was read to say why
    assert sorted(p.name for p in root.iterdir()) == ["in"]  # nothing started


def test_a_submission_into_a_folder_of_other_files_is_a_conflict(submitting):
    server, root, _ = submitting
    (root / "notes").mkdir()
    (root / "notes" / "todo.txt").write_text("mine")
    answer = post(server, yaml_for("notes", "served/in/shard-*.jsonl"))
    assert answer.status == 409 and "not a curator run" in answer.json()["error"]


def test_a_write_by_cookie_needs_this_origin_and_submission_needs_the_flag(submitting, site):
    server, _, _ = submitting
    cookie = {"Cookie": f"{auth.COOKIE}={TOKEN}"}
    body = "stages: [oops"  # malformed: a request that passes the checks gets a 400
    assert post(server, body, headers=cookie).status == 403
    assert post(server, body, headers={**cookie, "Origin": "http://evil.example"}).status == 403
    assert post(server, body, headers={**cookie, "Origin": "null"}).status == 403
    same = {**cookie, "Origin": server.base}
    assert post(server, body, headers=same).status == 400
    assert post(server, body, headers={"Origin": server.base}).status == 401
    assert request(server.port, f"/api/runs?token={TOKEN}", "POST", body=body).status == 401
    without_flag, _, _ = site
    refused = request(without_flag.port, "/api/runs", "POST", headers=bearer(), body=body)
    assert refused.status == 405 and "error" in refused.json()


def test_batch_submission_runs_curate_submit_with_checked_options(submitting, monkeypatch):
    server, root, tmp_path = submitting
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "sbatch-calls"
    (bin_dir / "sbatch").write_text(f"#!/bin/sh\necho \"$@\" >> {calls}\necho 'Submitted "
                                    "batch job 42'\n")
    (bin_dir / "sbatch").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    bad = post(server, yaml_for("batch", "served/in/shard-*.jsonl"),
               "?via=submit&system=slurm&nodes=1&walltime=--evil")
    assert bad.status == 400 and "walltime" in bad.json()["error"]
    assert post(server, yaml_for("batch", "served/in/shard-*.jsonl"),
                "?via=submit&system=slurm").status == 400
    answer = post(server, yaml_for("batch", "served/in/shard-*.jsonl"),
                  "?via=submit&system=slurm&nodes=1&walltime=0:10:00")
    assert answer.status == 202, answer.body
    script = wait_for(lambda: calls.exists() and calls.read_text().split()[-1],
                      message="curate submit to call sbatch")
    assert Path(script).parent == root.resolve() / "batch" / "jobs"
    assert "--time=0:10:00" in Path(script).read_text()


# ---------------------------------------------------------------------------- the command
def test_curate_serve_binds_loopback_prints_its_address_and_keeps_its_token(tmp_path, site):
    _, root, _ = site
    env = {"XDG_CONFIG_HOME": str(tmp_path / "config")}
    proc, line = serve_subprocess(str(root), env=env)
    try:
        _, host, port, token = line.groups()
        assert host == "127.0.0.1"
        stored = tmp_path / "config" / "curator" / "serve-token"
        assert stored.read_text().strip() == token
        assert stat.S_IMODE(stored.stat().st_mode) == 0o600
        listening = [c.laddr for c in psutil.Process(proc.pid).net_connections()
                     if c.status == psutil.CONN_LISTEN]
        assert [a.ip for a in listening] == ["127.0.0.1"] and listening[0].port == int(port)
        assert request(int(port), "/api/runs", headers=bearer(token)).status == 200
        assert request(int(port), "/api/runs").status == 401
    finally:
        proc.terminate()
        proc.wait(30)
    again, line = serve_subprocess(str(root), "--token", "given-token", env=env)
    again.terminate()
    again.wait(30)
    assert line.group(4) == "given-token"
    assert stored.read_text().strip() == token  # --token leaves the stored one alone


def test_curate_serve_refuses_a_folder_that_is_not_there(tmp_path):
    proc = curate("serve", str(tmp_path / "missing"), stdout=subprocess.PIPE,
                  stderr=subprocess.PIPE, text=True)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert err.strip() == f"error: {tmp_path / 'missing'}: no such folder"
