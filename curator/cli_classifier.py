"""``curate classifier``: train a fastText quality classifier for ``classifier_filter``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from curator.cli_errors import USAGE, fail

classifier_app = typer.Typer(help="Quality classifiers for the classifier_filter stage.",
                             no_args_is_help=True)


def _figure(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


@classifier_app.command("train")
def train(
    positive: Annotated[Path, typer.Option(help="JSONL (.gz) of good documents.")],
    negative: Annotated[Path, typer.Option(help="JSONL (.gz) of bad documents.")],
    output: Annotated[Path, typer.Option(help="Model file to write (.bin); its preprocessing "
                                         "goes beside it as OUTPUT.json.")],
    text_field: Annotated[str, typer.Option(help="Field holding the text.")] = "text",
    epochs: Annotated[int, typer.Option(min=1)] = 10,
    lr: Annotated[float, typer.Option(min=0.0, help="Learning rate.")] = 0.5,
    word_ngrams: Annotated[int, typer.Option(min=1, help="Word n-grams (CJK: characters).")] = 2,
    dim: Annotated[int, typer.Option(min=1, help="Vector size.")] = 32,
    bucket: Annotated[int, typer.Option(
        min=1, help="Hashed n-gram rows (model size ~ bucket x dim x 4 bytes).")] = 200_000,
    valid_fraction: Annotated[float, typer.Option(
        min=0.0, max=0.9, help="Share of each class held out for the figures.")] = 0.1,
    seed: Annotated[int, typer.Option(min=0)] = 0,
    lowercase: Annotated[bool, typer.Option(help="Lower-case text before the model.")] = True,
    cjk_chars: Annotated[bool, typer.Option(
        help="One token per Han/kana character (Japanese and Chinese have no spaces).")] = True,
) -> None:
    """Train on positive and negative JSONL; print held-out AUC, precision and recall at 0.5."""
    from curator.stages.filters.classifier_fasttext import Preprocessing
    from curator.stages.filters.classifier_training import TrainOptions, read_texts
    from curator.stages.filters.classifier_training import train as train_model

    try:
        good = read_texts(positive, text_field)
        bad = read_texts(negative, text_field)
    except ValueError as err:
        fail(str(err), USAGE)
    options = TrainOptions(epochs=epochs, lr=lr, word_ngrams=word_ngrams, dim=dim, bucket=bucket,
                           valid_fraction=valid_fraction, seed=seed)
    prep = Preprocessing(lowercase=lowercase, cjk_chars=cjk_chars)
    try:
        m = train_model(good, bad, output, options, prep,
                        {"positive": str(positive), "negative": str(negative)})
    except (OSError, ValueError) as err:
        fail(f"{type(err).__name__}: {err}", USAGE)
    typer.echo(f"trained on {m.train_positive} positive and {m.train_negative} negative "
               "documents")
    typer.echo(f"held out: {m.valid_positive} positive, {m.valid_negative} negative; "
               f"AUC {_figure(m.auc)}; at 0.5: precision {_figure(m.precision)}, "
               f"recall {_figure(m.recall)}")
    typer.echo(f"wrote {output} and {output}.json  (use it as  model: {output})")


@classifier_app.command("eval")
def evaluate(
    model: Annotated[Path, typer.Option(help="A model classifier_filter takes (fastText, Hugging "
                                        "Face directory, NeMo checkpoint).")],
    labelled: Annotated[Path, typer.Option(help="JSONL (.gz) of documents with a label.")],
    positive: Annotated[str, typer.Option(help="The label value of good documents.")] = "good",
    label_field: Annotated[str, typer.Option(help="Field holding the label.")] = "label",
    text_field: Annotated[str, typer.Option(help="Field holding the text.")] = "text",
    label: Annotated[str | None, typer.Option(
        help="The model's label whose probability is the score (classifier_filter's label).")]
        = None,
) -> None:
    """Score labelled documents as classifier_filter does; print the AUC of the score against
    the labels (documents without text are left out and counted)."""
    import numpy as np

    from curator import ClassifierFilter
    from curator.stages.filters.classifier_training import labelled_texts, roc_auc

    try:
        texts, good = labelled_texts(labelled, text_field, label_field, positive)
        stage = ClassifierFilter(model=str(model), **({"label": label} if label else {}))
        stage.check()
    except ValueError as err:
        fail(str(err), USAGE)
    import pyarrow as pa

    batch = pa.table({"id": [str(i) for i in range(len(texts))], "text": texts})
    scores = stage.scores(batch)[stage.score_field].to_numpy(zero_copy_only=False)
    scored = ~np.isnan(scores)
    auc = roc_auc(good[scored].astype(int), scores[scored])
    typer.echo(f"AUC {_figure(auc)} on {int(scored.sum()):,} labelled documents "
               f"({int(good[scored].sum()):,} {positive}, {int((~good[scored]).sum()):,} other; "
               f"{int((~scored).sum()):,} without text left out)")
