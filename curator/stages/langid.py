"""Language identification with a fastText model (default: ``lid.176.ftz``, shipped inside
curator: ``curator.stages.lid_model``; never downloaded). Writes ``lang`` (ISO 639-1 where one
exists) and ``lang_score``; with ``languages`` it removes the other documents."""

from __future__ import annotations

import difflib
import importlib.util
import os
import re
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field, field_validator

from curator.batch import TEXT, BatchResult, split_by_reason
from curator.counts import ScoreBins
from curator.stages.base import Filter
from curator.stages.filtering import apply_rules
from curator.stages.lid_model import bundled_model  # the default model (imported from here too)

LANG = "lang"
LANG_SCORE = "lang_score"
_FASTTEXT_MAGIC = 793712314  # first int32 of every fastText .bin/.ftz file

# ISO 639-3 (and the 639-2/T codes it shares) -> ISO 639-1, from the iso-codes tables; plus the
# individual languages that GlotLID/OpenLID (FLORES codes) use for a macrolanguage with a
# 639-1 code.
_ISO3 = dict(pair.split(":") for pair in (  # noqa: SIM905
    "aar:aa abk:ab afr:af aka:ak amh:am ara:ar arg:an asm:as ava:av ave:ae aym:ay aze:az bak:ba "
    "bam:bm bel:be ben:bn bis:bi bod:bo bos:bs bre:br bul:bg cat:ca ces:cs cha:ch che:ce chu:cu "
    "chv:cv cor:kw cos:co cre:cr cym:cy dan:da deu:de div:dv dzo:dz ell:el eng:en epo:eo est:et "
    "eus:eu ewe:ee fao:fo fas:fa fij:fj fin:fi fra:fr fry:fy ful:ff gla:gd gle:ga glg:gl glv:gv "
    "grn:gn guj:gu hat:ht hau:ha hbs:sh heb:he her:hz hin:hi hmo:ho hrv:hr hun:hu hye:hy ibo:ig "
    "ido:io iii:ii iku:iu ile:ie ina:ia ind:id ipk:ik isl:is ita:it jav:jv jpn:ja kal:kl kan:kn "
    "kas:ks kat:ka kau:kr kaz:kk khm:km kik:ki kin:rw kir:ky kom:kv kon:kg kor:ko kua:kj kur:ku "
    "lao:lo lat:la lav:lv lim:li lin:ln lit:lt ltz:lb lub:lu lug:lg mah:mh mal:ml mar:mr mkd:mk "
    "mlg:mg mlt:mt mon:mn mri:mi msa:ms mya:my nau:na nav:nv nbl:nr nde:nd ndo:ng nep:ne nld:nl "
    "nno:nn nob:nb nor:no nya:ny oci:oc oji:oj ori:or orm:om oss:os pan:pa pli:pi pol:pl por:pt "
    "pus:ps que:qu roh:rm ron:ro run:rn rus:ru sag:sg san:sa sin:si slk:sk slv:sl sme:se smo:sm "
    "sna:sn snd:sd som:so sot:st spa:es sqi:sq srd:sc srp:sr ssw:ss sun:su swa:sw swe:sv tah:ty "
    "tam:ta tat:tt tel:te tgk:tg tgl:tl tha:th tir:ti ton:to tsn:tn tso:ts tuk:tk tur:tr twi:tw "
    "uig:ug ukr:uk urd:ur uzb:uz ven:ve vie:vi vol:vo wln:wa wol:wo xho:xh yid:yi yor:yo zha:za "
    "zho:zh zul:zu "
    # 639-2/B codes, and individual languages of a macrolanguage
    "alb:sq arm:hy baq:eu bur:my chi:zh cze:cs dut:nl fre:fr geo:ka ger:de gre:el ice:is mac:mk "
    "mao:mi may:ms per:fa rum:ro slo:sk tib:bo wel:cy "
    "arb:ar cmn:zh zsm:ms pes:fa prs:fa swh:sw ekk:et lvs:lv npi:ne khk:mn uzn:uz azj:az plt:mg "
    "ory:or gaz:om ydd:yi quy:qu als:sq kmr:ku ckb:ku pbt:ps lug:lg"
).split())
_CONTROL = re.compile(r"[\x00-\x1f\x7f\x85\u2028\u2029]+")


def normalise_label(label: str) -> str:
    """``__label__en`` -> ``en``; ``__label__eng_Latn`` -> ``en``; a code without an ISO 639-1
    equivalent stays as the model wrote it (``yue``, ``sh``), script suffix dropped."""
    code = label.removeprefix("__label__")
    base = code.split("_")[0].split("-")[0].lower()
    if len(base) == 2:
        return base
    return _ISO3.get(base, base)


#: Seconds a trial load of a configured model may take (a truncated model makes fastText spin).
PROBE_SECONDS = 300.0
_PROBED: set[tuple[str, int, int]] = set()


def check_model_file(path: str | Path, load: bool = True) -> Path:
    """The path, if it is a fastText model that loads; else a one-line ValueError. The trial load
    runs once per file version in a child process, so a corrupt file cannot hang the caller."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise ValueError(f"fastText model {str(path)!r} does not exist")
    with open(path, "rb") as f:
        head = f.read(4)
    if len(head) < 4 or struct.unpack("<i", head)[0] != _FASTTEXT_MAGIC:
        raise ValueError(f"{str(path)!r} is not a fastText model (.bin or .ftz)")
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if not load or key in _PROBED or importlib.util.find_spec("fasttext") is None:
        return path
    code = "import sys, fasttext; fasttext.load_model(sys.argv[1])"
    try:
        done = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True,
                              text=True, timeout=PROBE_SECONDS, env={**os.environ,
                                                                     "OMP_NUM_THREADS": "1"})
    except subprocess.TimeoutExpired:
        raise ValueError(f"{str(path)!r} did not load within {PROBE_SECONDS:g} s: a truncated "
                         "or corrupt fastText model?") from None
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        raise ValueError(f"{str(path)!r} is not a loadable fastText model: {why}")
    _PROBED.add(key)
    return path


_LABELS: dict[tuple[str, int, int], tuple[str, ...]] = {}


def model_labels(path: str | Path) -> tuple[str, ...]:
    """The labels of a fastText model as written in it (``__label__en``), read from the
    dictionary at the head of the file: no fastText needed, nothing loaded; cached per file
    version. A one-line ValueError for a file that is not a fastText model."""
    path = Path(path).expanduser()
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _LABELS:
        _LABELS[key] = _read_labels(path)
    return _LABELS[key]


def _read_labels(path: Path) -> tuple[str, ...]:
    # magic, version; 12 int32 arguments and a double; the dictionary: size, nwords, nlabels
    # (int32), ntokens, pruneidx_size (int64), then per entry: the word NUL-terminated, its count
    # (int64) and its type (int8: 0 word, 1 label).
    head_bytes = 8 + 12 * 4 + 8
    with open(path, "rb") as f:
        head = f.read(head_bytes + 12 + 16)
        if len(head) < head_bytes + 28 or struct.unpack_from("<i", head)[0] != _FASTTEXT_MAGIC:
            raise ValueError(f"{str(path)!r} is not a fastText model (.bin or .ftz)")
        size, _, nlabels = struct.unpack_from("<iii", head, head_bytes)
        labels: list[str] = []
        buffer, start, entries = b"", 0, 0
        while entries < size and len(labels) < nlabels:
            end = buffer.find(b"\0", start)
            if end < 0 or end + 10 > len(buffer):
                chunk = f.read(1 << 20)
                if not chunk:
                    raise ValueError(f"{str(path)!r}: a truncated fastText model (its "
                                     "dictionary ends early)")
                buffer, start = buffer[start:] + chunk, 0
                continue
            if buffer[end + 9] == 1:
                labels.append(buffer[start:end].decode("utf-8", "replace"))
            start, entries = end + 10, entries + 1
    return tuple(labels)


#: Codes and names that are not ISO 639-1 codes but are often written for one: country codes,
#: retired codes, English names.
_MISTAKES = dict(pair.split(":") for pair in (  # noqa: SIM905
    "jp:ja cn:zh kr:ko gr:el dk:da se:sv cz:cs ua:uk il:he iw:he in:id ji:yi jw:jv vn:vi ir:fa "
    "us:en gb:en at:de mx:es tw:zh hk:zh by:be kz:kk al:sq ge:ka rs:sr "
    "english:en japanese:ja nihongo:ja chinese:zh mandarin:zh korean:ko german:de french:fr "
    "spanish:es portuguese:pt italian:it russian:ru arabic:ar hindi:hi dutch:nl polish:pl "
    "turkish:tr vietnamese:vi thai:th indonesian:id malay:ms persian:fa farsi:fa hebrew:he "
    "greek:el swedish:sv danish:da norwegian:no finnish:fi czech:cs ukrainian:uk "
    "romanian:ro hungarian:hu bengali:bn tamil:ta urdu:ur catalan:ca"
).split())


def language_hint(code: str, model_codes: dict[str, str]) -> str | None:
    """``did you mean 'ja'?`` for a code the model does not have (``model_codes``: language
    code -> the model's label for it); None without a likely guess."""
    guess = _MISTAKES.get(code.lower())
    if guess not in model_codes:
        close = difflib.get_close_matches(code.lower(), list(model_codes), n=1, cutoff=0.6)
        guess = close[0] if close else None
    if guess is None:
        return None
    label = model_codes[guess]
    named = f" (the model's {label})" if label != guess else ""
    return f"did you mean {guess!r}{named}?"


def check_languages(model: str | None, wanted: dict[str, list[str]]) -> None:
    """A one-line ValueError naming every language the model never predicts, each with a
    guess: ``wanted`` maps each parameter (``languages``, ``min_score``) to its codes, as
    normalised by the stage."""
    path = check_model_file(model, load=False) if model else bundled_model()
    model_codes: dict[str, str] = {}
    for label in model_labels(path):
        model_codes.setdefault(normalise_label(label), label.removeprefix("__label__"))
    unknown = [(parameter, code) for parameter, codes in wanted.items() for code in codes
               if code not in model_codes]
    if not unknown:
        return
    hints = {code: language_hint(code, model_codes) for _, code in unknown}
    if len(unknown) == 1:
        (parameter, code), = unknown
        what = (f"{parameter}: {code!r} is not a language of {path.name}: it would match no "
                "document" + (f"; {hints[code]}" if hints[code] else ""))
    else:
        named = "; ".join(
            f"{parameter}: " + ", ".join(repr(c) + (f" ({hints[c]})" if hints[c] else "")
                                         for p, c in unknown if p == parameter)
            for parameter in dict.fromkeys(p for p, _ in unknown))
        what = f"not languages of {path.name}, so they would match no document: {named}"
    if not all(hints.values()):
        codes = sorted(model_codes)
        what += (f"; its {len(codes)} languages: {', '.join(codes[:40])}"
                 + (", ..." if len(codes) > 40 else ""))
    raise ValueError(what)


def checked_model(value: str | None) -> str | None:
    """Validator of a stage's ``model``: a configured path is checked (and trial-loaded) when the
    configuration is read; None means the bundled model."""
    if value is not None:
        check_model_file(value)
    return value


def normalised_languages(value: list[str] | None) -> list[str] | None:
    """Validator of a stage's ``languages``: each as ISO 639-1 where one exists."""
    return None if value is None else [normalise_label(v) for v in value]


def model_requirements(requires: dict[str, str], model: str | None) -> dict[str, str]:
    """A language-ID stage's packages: the same with or without ``model`` (the default model
    ships inside curator)."""
    return dict(requires)


def windows(text: str, size: int, count: int) -> list[str]:
    """Up to ``count`` windows of ``size`` characters spread evenly over ``text`` (the whole
    text when it is shorter than ``size``), control characters and newlines made spaces."""
    n = len(text)
    if n <= size or count == 1:
        starts = [0]
    else:
        last = n - size
        k = min(count, -(-n // size))
        starts = [round(i * last / (k - 1)) for i in range(k)] if k > 1 else [0]
    return [_CONTROL.sub(" ", text[s:s + size]) for s in starts]


class LangId(Filter):
    """Identify each document's language with fastText; write ``lang`` and ``lang_score``.

    Newlines and control characters become spaces (fastText reads one line). A document longer
    than ``window_chars`` is read as ``windows`` evenly spaced windows of that many characters
    (start, middle, end): its language is the one with the highest summed probability, its score
    that sum over the number of windows. A document with no letter gets ``lang`` null and score 0.
    By default every document is kept; with ``languages``, the others are removed
    (``lang_not_wanted``), then those under ``min_score`` (``lang_score_low``)."""

    type = "langid"
    requires: ClassVar[dict[str, str]] = {"fasttext": "langid"}
    score_bins: ClassVar[dict[str, ScoreBins]] = {LANG_SCORE: ScoreBins(0.0, 1.0, 20)}
    decision_params: ClassVar[frozenset[str]] = frozenset({"keep_scores", "languages",
                                                           "min_score"})
    libraries: ClassVar[tuple[str, ...]] = ("fasttext-numpy2-wheel",)

    keep_scores: bool = Field(False, description="No effect: lang and lang_score are always "
                              "written.")
    model: str | None = Field(None, description="Path of a fastText language-ID model (lid.176, "
                              "GlotLID, OpenLID; labels are normalised to ISO 639-1); default: "
                              "lid.176.ftz, shipped inside curator.")
    languages: list[str] | None = Field(None, description="Keep only these languages (ISO 639-1, "
                                        "e.g. [ja, en]); default: keep every document.")
    min_score: float | dict[str, float] = Field(
        0.0, description="Lowest lang_score kept: one value, or one per language (languages "
        "not named: 0); applies with or without languages.")
    window_chars: int = Field(2000, gt=0, description="Characters per window read by the model.")
    windows: int = Field(3, ge=1, description="Windows read from a document longer than "
                         "window_chars (spread evenly from start to end).")

    _model: Any = None

    _check_model = field_validator("model")(checked_model)
    _check_languages = field_validator("languages")(normalised_languages)

    def thresholds(self) -> dict[str, list[float]]:
        floors = sorted(set(self.min_score.values())) if isinstance(self.min_score, dict) \
            else [self.min_score]
        cuts = [float(f) for f in floors if f > 0]
        return {LANG_SCORE: cuts} if cuts else {}

    def side_inputs(self) -> list[str]:
        return [self.model] if self.model else []

    def requirements(self) -> dict[str, str]:
        return model_requirements(self.requires, self.model)

    def check(self) -> None:
        super().check()
        if self.languages == []:
            raise ValueError("languages: an empty list keeps no document; leave it out to keep "
                             "every language")
        wanted = {"languages": self.languages or []}
        if isinstance(self.min_score, dict):
            wanted["min_score"] = [normalise_label(k) for k in self.min_score]
        check_languages(self.model, wanted)

    def setup(self) -> None:
        import fasttext

        # the configuration checked (and trial-loaded) the file when it was read
        path = check_model_file(self.model, load=False) if self.model else bundled_model()
        try:
            self._model = fasttext.load_model(str(path))
        except ValueError as err:
            raise ValueError(f"{path}: cannot load the fastText model: {err}") from None

    def predict(self, texts: list[str | None]) -> tuple[list[str | None], np.ndarray]:
        """(language or None, score) per text."""
        if self._model is None:
            self.setup()
        # fasttext-predict's list call (multilinePredict) returns labels without probabilities,
        # so each window is one native call; the per-call cost is a few microseconds.
        predict = self._model.f.predict
        langs: list[str | None] = []
        scores = np.zeros(len(texts))
        for i, text in enumerate(texts):
            if not text:
                langs.append(None)
                continue
            pieces = windows(text, self.window_chars, self.windows)
            total: dict[str, float] = {}
            for piece in pieces:
                for prob, label in predict(piece + "\n", 1, 0.0, "replace"):
                    total[label] = total.get(label, 0.0) + prob
            if not total:
                langs.append(None)
                continue
            label = max(total, key=total.__getitem__)
            langs.append(normalise_label(label))
            scores[i] = min(1.0, total[label] / len(pieces))
        return langs, scores

    def scores(self, batch: pa.Table) -> dict[str, pa.Array]:
        text = batch.column(TEXT)
        has_letter = pc.fill_null(pc.match_substring_regex(text, r"\pL"), False)
        texts = pc.if_else(has_letter, text, pa.scalar(None, text.type)).to_pylist()
        langs, scores = self.predict(texts)
        return {LANG: pa.array(langs, pa.string()), LANG_SCORE: pa.array(scores, pa.float64())}

    def rules(self, scores: dict[str, pa.Array]) -> dict[str, pa.Array]:
        lang, score = scores[LANG], scores[LANG_SCORE]
        rules = {}
        if self.languages is not None:
            wanted = pc.is_in(lang, pa.array(self.languages, pa.string()))
            rules["lang_not_wanted"] = pc.invert(pc.fill_null(wanted, False))
        if isinstance(self.min_score, dict):
            floors = {normalise_label(k): v for k, v in self.min_score.items()}
            keys = pa.array(list(floors), pa.string())
            index = pc.index_in(lang, keys)
            floor = pc.fill_null(pc.take(pa.array(list(floors.values()), pa.float64()), index),
                                 0.0)
        else:
            floor = pa.scalar(float(self.min_score))
        rules["lang_score_low"] = pc.less(score, floor)
        return rules

    def decide(self, batch: pa.Table, scores: dict[str, pa.Array]) -> BatchResult:
        # lang and lang_score are the stage's output: always kept
        verdict = apply_rules(batch, self.rules(scores), scores, True)
        result = split_by_reason(verdict.table, verdict.reasons)
        result.rule_failures = verdict.failures
        result.scores = {LANG_SCORE: scores[LANG_SCORE]}
        result.signals = scores
        return result
