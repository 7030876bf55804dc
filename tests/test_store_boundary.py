"""The run store (``curator/store``) is the only code that knows the run directory's layout
and its record formats: no module outside it spells a run-directory name or reads a record
field by key; the task types carry a ``RunSpec``; ``run_dataset`` is typed."""

from __future__ import annotations

import ast
import dataclasses
import typing
from pathlib import Path

from curator.runtime.driver.phases import PhaseContext, _RemoveTask
from curator.runtime.worker.shard_task import ShardTask
from curator.stages.base import DatasetStage
from curator.stages.context import DatasetContext
from curator.store import run_dir as layout
from curator.store.spec import RunSpec

PACKAGE = Path(__file__).resolve().parents[1] / "curator"
#: Names of the run directory's own files and folders.
LAYOUT = {layout.RUN_FILE, layout.MANIFESTS, layout.WORK, layout.STORE, layout.STATS_FILE,
          layout.REPORT_FILE, layout.DONE, "unified.json", "phases.json"}
#: Fields only manifests and markers have (a writer's own facts use others).
RECORD_FIELDS = {"fingerprint", "intermediate", "rows_out"}


def _outside_the_store() -> list[Path]:
    return [p for p in sorted(PACKAGE.rglob("*.py")) if "store" not in p.relative_to(PACKAGE).parts]


def test_the_layout_and_the_record_fields_are_spelled_in_the_store_only():
    found = []
    for path in _outside_the_store():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Constant) and node.value in LAYOUT:
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {node.value!r}")
            key = None
            if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
                key = node.slice.value
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr == "get" and node.args \
                    and isinstance(node.args[0], ast.Constant):
                key = node.args[0].value
            if key in RECORD_FIELDS:
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: [{key!r}]")
    assert found == []


def test_the_check_finds_what_it_looks_for(tmp_path):
    """The scan above is not empty by construction: the store itself spells them."""
    store = [p for p in sorted(PACKAGE.rglob("*.py")) if "store" in p.parts]
    text = "\n".join(p.read_text() for p in store)
    assert all(repr(name) in text or f'"{name}"' in text for name in LAYOUT)


def test_tasks_carry_a_run_spec_and_run_dataset_is_typed():
    for task in (ShardTask, _RemoveTask, PhaseContext):
        fields = {f.name: f.type for f in dataclasses.fields(task)}
        assert fields.get("spec") in (RunSpec, "RunSpec"), task
        options = {f.name for f in dataclasses.fields(RunSpec)} - {"run_dir"}
        assert not options & set(fields), (task, options & set(fields))
    hints = typing.get_type_hints(DatasetStage.run_dataset)
    assert hints["ctx"] is DatasetContext


def test_the_runtime_groups_import_downwards_only():
    """driver → cluster → worker: code that runs in a worker never imports the driver's."""
    allowed = {"driver": {"driver", "cluster", "worker"}, "cluster": {"cluster", "worker"},
               "worker": {"worker"}}
    found = []
    for group, may in allowed.items():
        for path in sorted((PACKAGE / "runtime" / group).glob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.ImportFrom) and node.module \
                        and node.module.startswith("curator.runtime."):
                    target = node.module.split(".")[2]
                    if target in allowed and target not in may:
                        found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {node.module}")
    assert found == []
