"""Downstream tasks: the ready-made specs (which fields of which published file format hold the
texts) and the items they yield.

An item's texts are the values of its prompt fields (question, context), of its answer fields
(choices, answers), and all of them joined in field order (a question followed by its choices
or answer is found across the field boundary). A text shorter than an n-gram is used whole,
except an answer alone: short answers and choices are names and common phrases. A spec lists
the layouts a benchmark is shipped in (publisher files, Hugging Face Parquet, the llm-foundry
copies); each file is read with the first layout whose fields its first record has.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from curator.stages.decontaminate.readers import (
    MissingField,
    Record,
    TaskFileError,
    csv_rows,
    field_values,
    file_format,
    read_records,
)

Texts = Callable[[dict[str, Any], str, str], tuple[list[str], list[str]]]


@dataclass(frozen=True)
class Layout:
    """One way a benchmark is shipped: its prompt and answer fields (dotted paths; lists are
    traversed), its id field, where the records are in a JSON document, the columns of a
    headerless CSV, or a function that makes the (prompt, answer) texts of a record."""

    fields: tuple[str, ...]
    answers: tuple[str, ...] = ()
    id: str | None = None
    records: str | None = None
    columns: tuple[str, ...] | None = None
    texts: Texts | None = None

    def fits(self, fmt: str) -> bool:
        """Whether files of format ``fmt`` may be shipped in this layout."""
        if self.records is not None:
            return fmt == "json"
        return self.columns is None or fmt in ("csv", "tsv")


def _winogrande_filled(value: dict[str, Any], where: str,
                       display: str) -> tuple[list[str], list[str]]:
    """The sentence with its blank filled by each option (publisher format)."""
    sentence = field_values(value, "sentence", where, display)[0]
    return [sentence.replace("_", option) for name in ("option1", "option2")
            for option in field_values(value, name, where, display)], []


def _winogrande_options(value: dict[str, Any], where: str,
                        display: str) -> tuple[list[str], list[str]]:
    """Each context option followed by the continuation (llm-foundry format)."""
    tail = " ".join(field_values(value, "continuation", where, display))
    return [f"{option} {tail}" for option in
            field_values(value, "context_options", where, display)], []


def _jsquad(value: dict[str, Any], where: str, display: str) -> tuple[list[str], list[str]]:
    """The Wikipedia paragraph without JGLUE's ``<title> [SEP]`` prefix and the questions;
    the answers."""
    paragraph = field_values(value, "context", where, display)[0].split("[SEP]", 1)[-1]
    return ([paragraph.strip(), *field_values(value, "qas.question", where, display)],
            field_values(value, "qas.answers.text", where, display))


_MC = Layout(("query",), ("choices",))  # llm-foundry's multiple-choice copies
_SQUAD = (Layout(("context", "qas.question"), ("qas.answers.text",), id="qas.id",
                 records="data.paragraphs"),
          Layout(("context", "question"), ("answers.text",), id="id"))
_HEADERLESS_MMLU = ("question", "A", "B", "C", "D", "answer")

SPECS: dict[str, tuple[Layout, ...]] = {
    "mmlu": (Layout(("question",), ("choice0", "choice1", "choice2", "choice3")),
             Layout(("question",), ("A", "B", "C", "D"), columns=_HEADERLESS_MMLU),
             Layout(("question",), ("choices",))),
    "gsm8k": (Layout(("question",), ("answer",)),),
    "hellaswag": (Layout(("ctx",), ("endings",), id="ind"), _MC),
    "piqa": (Layout(("goal",), ("sol1", "sol2")), _MC),
    "winogrande": (Layout(("sentence", "option1", "option2"), id="qID",
                          texts=_winogrande_filled),
                   Layout(("context_options", "continuation"), texts=_winogrande_options)),
    "arc": (Layout(("question.stem",), ("question.choices.text",), id="id"),
            Layout(("question",), ("choices.text",), id="id"), _MC),
    "triviaqa": (Layout(("Question",), ("Answer.Value",), id="QuestionId", records="Data"),
                 Layout(("question",), ("answer.value",), id="question_id"),
                 Layout(("context",), ("answer",))),
    "squad": _SQUAD,
    "lambada": (Layout(("text",)), Layout(("context",), ("continuation",))),
    "humaneval": (Layout(("prompt",), ("canonical_solution",), id="task_id"),),
    "truthfulqa": (Layout(("Question",), ("Best Answer", "Correct Answers",
                                          "Incorrect Answers")),
                   Layout(("question",), ("best_answer", "correct_answers",
                                          "incorrect_answers"))),
    "jcommonsenseqa": (Layout(("question",), ("choice0", "choice1", "choice2", "choice3",
                                              "choice4"), id="q_id"),),
    "jsquad": (Layout(("context", "qas.question"), ("qas.answers.text",), id="qas.id",
                      records="data.paragraphs", texts=_jsquad),),
    "jaquad": _SQUAD,
    "jnli": (Layout(("sentence1", "sentence2"), id="sentence_pair_id"),),
    "jemhopqa": (Layout(("question",), ("answer",), id="qid"),),
    "niilc": (Layout(("text",), ("answers.answer",), id="id"),),
    "jmmlu": (Layout(("question",), ("A", "B", "C", "D"), columns=_HEADERLESS_MMLU),),
}


class Task(BaseModel):
    """A downstream task: a ready-made spec named by ``name`` (or ``spec``), or ``fields``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="Name in the report; the spec too when it names one.")
    path: str | list[str] = Field(description="Task file(s): paths, globs or URLs.")
    spec: str | None = Field(None, description="Ready-made spec to read the files with.")
    fields: list[str] | None = Field(None, description="Text fields (dotted paths) of a "
                                     "custom task.")
    id_field: str | None = Field(None, description="Item id field of a custom task.")

    @model_validator(mode="after")
    def _known(self) -> Task:
        if self.fields is not None:
            if not self.fields:
                raise ValueError(f"task {self.name!r}: 'fields' is empty")
            return self
        spec = self.spec or self.name
        if spec not in SPECS:
            close = difflib.get_close_matches(spec, list(SPECS), n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ValueError(f"task {self.name!r}: no ready-made spec {spec!r}; {hint}give "
                             f"'fields', or one of: {', '.join(SPECS)}")
        return self

    def layouts(self) -> tuple[Layout, ...]:
        if self.fields is not None:
            return (Layout(tuple(self.fields), id=self.id_field),)
        return SPECS[self.spec or self.name]

    def paths(self) -> list[str]:
        return [self.path] if isinstance(self.path, str) else list(self.path)


@dataclass(frozen=True)
class Item:
    """A task item: texts that may be used whole when short (prompts, the joined item), and
    answers (n-grams only)."""

    id: str
    texts: list[str]
    answers: list[str]


def _header_fits(layout: Layout, header: list[str]) -> bool:
    return all(field.split(".")[0] in header for field in layout.fields + layout.answers)


def _values(record: Record, fields: tuple[str, ...], display: str) -> list[str]:
    return [v for field in fields for v in field_values(record.value, field, record.where,
                                                        display)]


def _item(layout: Layout, record: Record, display: str, label: str) -> Item:
    if layout.texts is not None:
        texts, answers = layout.texts(record.value, record.where, display)
    else:
        texts, answers = _values(record, layout.fields, display), \
            _values(record, layout.answers, display)
        if len(texts) + len(answers) > 1:
            texts = [*texts, " ".join(texts + answers)]
    item_id = f"{label} {record.where}"
    if layout.id is not None:
        item_id = next(iter(field_values(record.value, layout.id, record.where, display)),
                       item_id)
    return Item(item_id, [t for t in texts if t.strip()], [a for a in answers if a.strip()])


def _candidates(task: Task, local: Path,
                display: str) -> Iterator[tuple[Layout, Iterator[Record]]]:
    """Each of the task's layouts that suits the file's format (a headerless CSV layout only
    when the first row is not a header and has its column count), with its records."""
    fmt = file_format(display)
    header = None
    if fmt in ("csv", "tsv"):
        header = next(csv_rows(local, display, "," if fmt == "csv" else "\t"), (0, []))[1]
    for layout in task.layouts():
        if not layout.fits(fmt):
            continue
        if header is not None and layout.columns is not None and \
                (len(header) != len(layout.columns) or _header_fits(layout, header)):
            continue
        yield layout, read_records(local, display, fmt, layout.records, layout.columns)


def task_items(task: Task, local: Path, display: str) -> Iterator[Item]:
    """The items of one task file (``local``: its local copy; ``display``: its name)."""
    label = display.rsplit("/", 1)[-1]
    first_error: MissingField | None = None
    for layout, records in _candidates(task, local, display):
        try:
            first = next(records, None)
            if first is None:
                raise TaskFileError(f"{display}: no records")
            item = _item(layout, first, display, label)
        except MissingField as err:
            first_error = first_error or err
            continue
        yield item
        for record in records:
            try:
                yield _item(layout, record, display, label)
            except MissingField as err:
                raise _explained(err, task, (layout,)) from None
        return
    if first_error is None:
        raise TaskFileError(f"{display}: task {task.name!r} cannot read this format "
                            f"({file_format(display)})")
    raise _explained(first_error, task, task.layouts())


def _explained(err: TaskFileError, task: Task, layouts: tuple[Layout, ...]) -> TaskFileError:
    shapes = " or ".join(", ".join(layout.fields + layout.answers) for layout in layouts)
    return TaskFileError(f"{err} (task {task.name!r} reads {shapes})")
