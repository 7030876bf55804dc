"""The n-gram index of the task texts: sorted uint64 key arrays, saved as ``.npy`` files that
every worker memory-maps (the pages are shared between processes) and probes through a bitmap
filter (8 bits per key) and a radix directory (``np.searchsorted`` over the top bits).

Entries are numbered: long key ``k`` is entry ``k``, short key ``k`` entry ``len(long) + k``;
``entry_item`` names the first task item (in task and file order) that holds the key."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
import pyarrow as pa

from curator.kernels.shingles import string_buffers
from curator.stages.decontaminate import ngrams
from curator.stages.decontaminate.normalise import unicode_tables

_ARRAYS = ("long_keys", "short_full", "short_suffix", "short_len", "entry_item")


@dataclass(frozen=True)
class NgramSizes:
    """N-gram sizes per mode (words, characters): ``n`` units; the share of CJK letters that
    makes a text a character-mode one; and how short a text may be and still be used whole.

    Each task has its own whole-text minimum per mode (GPT-3 set its n per task from the 5th
    percentile of the task's lengths, bounded): the ``percentile`` of the lengths of its texts
    of that mode, no more than ``min_*`` and no less than ``floor_*`` (``min_*`` when unset or
    larger). ``percentile`` None: every task uses ``min_*``."""

    n_word: int
    min_word: int
    n_char: int
    min_char: int
    cjk_threshold: float
    floor_word: int | None = None
    floor_char: int | None = None
    percentile: float | None = None

    def n(self) -> np.ndarray:
        return np.array([self.n_word, self.n_char], np.int64)

    def caps(self) -> np.ndarray:
        """The highest whole-text minimum per mode."""
        return np.array([self.min_word, self.min_char], np.int64)

    def mins(self) -> np.ndarray:
        """The fewest units of any text used whole, per mode (the suffix of a short key)."""
        floors = [self.min_word if self.floor_word is None else self.floor_word,
                  self.min_char if self.floor_char is None else self.floor_char]
        return np.minimum(np.array(floors, np.int64), self.caps())

    def task_minimum(self, lengths: np.ndarray, mode: int) -> int:
        """The whole-text minimum of a task whose texts of ``mode`` have ``lengths`` units."""
        cap, floor = int(self.caps()[mode]), int(self.mins()[mode])
        if self.percentile is None or not len(lengths):
            return cap
        return max(floor, min(cap, int(np.percentile(lengths, self.percentile,
                                                     method="lower"))))

    def powers(self) -> np.ndarray:
        return ngrams.powers(max(self.n_word, self.n_char))


def kernel_tables() -> tuple[np.ndarray, ...]:
    """The Unicode tables in the order the kernels take them."""
    t = unicode_tables()
    return (t.mapping, t.expansion_offsets, t.expansion_points, t.kinds, t.compose_keys,
            t.compose_values)


def text_modes(text: pa.Array | pa.ChunkedArray, modes: np.ndarray, threshold: float) -> np.ndarray:
    """Each text's mode (word or char), ``AUTO`` resolved by its script."""
    buf = string_buffers(text)
    return ngrams.resolve_modes(buf.data, buf.starts, buf.ends, modes.astype(np.int8),
                                unicode_tables().kinds, threshold)


@dataclass(frozen=True)
class NgramIndex:
    """Sorted keys and what each entry came from."""

    long_keys: np.ndarray  # uint64, sorted, unique
    short_full: np.ndarray  # uint64 (sorted by short_suffix)
    short_suffix: np.ndarray  # uint64, sorted
    short_len: np.ndarray  # int64
    entry_item: np.ndarray  # int32, one per entry

    @property
    def entries(self) -> int:
        return len(self.long_keys) + len(self.short_full)

    @property
    def nbytes(self) -> int:
        return sum(getattr(self, name).nbytes for name in _ARRAYS)

    def arrays(self) -> dict[str, np.ndarray]:
        """The arrays by file stem, as ``load`` reads them from ``<stem>.npy``."""
        return {name: getattr(self, name) for name in _ARRAYS}

    @classmethod
    def load(cls, folder: Path) -> NgramIndex:
        return cls(*(np.load(folder / f"{name}.npy", mmap_mode="r") for name in _ARRAYS))


def text_units(text: pa.Array, sizes: NgramSizes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The texts to key: every task text in the mode of its script, and a text mostly in
    other scripts that holds kana or CJK ideographs in character mode as well (a Japanese item
    that names ``YOSHIKI`` is quoted by Japanese pages, which are matched by characters).
    Returns, per text to key, the task text it is (an index into ``text``), its mode and its
    number of units."""
    auto = np.full(len(text), ngrams.AUTO, np.int8)
    modes = text_modes(text, auto, sizes.cjk_threshold)
    some_cjk = text_modes(text, auto, 1e-9) == ngrams.CHAR  # a kana or ideograph at all
    extra = np.flatnonzero((modes == ngrams.WORD) & some_cjk)
    rows = np.concatenate([np.arange(len(text)), extra]).astype(np.int64)
    modes = np.concatenate([modes, np.full(len(extra), ngrams.CHAR, np.int8)])
    buf = string_buffers(text.take(pa.array(rows)) if len(extra) else text)
    return rows, modes, ngrams.unit_counts(buf.data, buf.starts, buf.ends, modes,
                                           *kernel_tables())


def build_index(text: pa.Array, text_item: np.ndarray, least: np.ndarray, modes: np.ndarray,
                sizes: NgramSizes) -> tuple[NgramIndex, np.ndarray]:
    """The index of task texts (``text_item``: the item of each text, in item order;
    ``least``: the fewest units at which a text shorter than an n-gram is used whole, 0 for
    never; ``modes``: from :func:`text_units`); also each text's units."""
    buf = string_buffers(text)
    long_rows, short_rows, lengths = ngrams.text_keys(
        buf.data, buf.starts, buf.ends, modes, least.astype(np.int64), sizes.n(),
        sizes.mins(), sizes.powers(), *kernel_tables())
    long_item = text_item[long_rows[:, 1].astype(np.int64)]
    by_key = np.lexsort((long_item, long_rows[:, 0]))
    long_keys, first = np.unique(long_rows[by_key, 0], return_index=True)
    short_item = text_item[short_rows[:, 3].astype(np.int64)]
    by_full = np.lexsort((short_item, short_rows[:, 0]))
    _, first_short = np.unique(short_rows[by_full, 0], return_index=True)
    short = by_full[first_short]
    short = short[np.argsort(short_rows[short, 1], kind="stable")]
    index = NgramIndex(
        long_keys=long_keys,
        short_full=short_rows[short, 0].copy(),
        short_suffix=short_rows[short, 1].copy(),
        short_len=short_rows[short, 2].astype(np.int64),
        entry_item=np.concatenate([long_item[by_key][first],
                                   short_item[short]]).astype(np.int32))
    return index, lengths


def directory(keys: np.ndarray) -> tuple[np.ndarray, np.uint64]:
    """Radix directory over sorted keys: bucket ``b`` (the top bits) spans
    ``keys[dir[b]:dir[b + 1]]``, about four keys per bucket."""
    bits = max(1, int(np.ceil(np.log2(max(len(keys), 1)))) - 2)
    shift = np.uint64(64 - bits)
    edges = np.arange(2**bits + 1, dtype=np.uint64)
    bounds = np.searchsorted(keys >> shift, edges[:-1])
    return np.append(bounds, len(keys)).astype(np.int64), shift


def bitmap(keys: np.ndarray) -> np.ndarray:
    """A bit per ``key mod 2**b`` (about 8 bits per key, as uint64 words)."""
    bits = max(6, int(np.ceil(np.log2(max(len(keys), 1)))) + 3)
    words = np.zeros(2 ** (bits - 6), np.uint64)
    slots = keys & np.uint64(2**bits - 1)
    np.bitwise_or.at(words, (slots >> np.uint64(6)).astype(np.int64),
                     np.uint64(1) << (slots & np.uint64(63)))
    return words


@dataclass(frozen=True)
class LoadedIndex:
    """An index ready for ``ngrams.find_matches``."""

    index: NgramIndex
    long_dir: np.ndarray
    long_shift: np.uint64
    long_bits: np.ndarray
    short_dir: np.ndarray
    short_shift: np.uint64
    short_bits: np.ndarray


def load_index(folder: str) -> LoadedIndex:
    """The index in ``folder``, loaded once per process (again when it was rewritten)."""
    stat = (Path(folder) / "long_keys.npy").stat()
    return _load(folder, (stat.st_ino, stat.st_mtime_ns, stat.st_size))


@cache
def _load(folder: str, _version: tuple[int, int, int]) -> LoadedIndex:
    index = NgramIndex.load(Path(folder))
    long_dir, long_shift = directory(index.long_keys)
    short_dir, short_shift = directory(index.short_suffix)
    return LoadedIndex(index, long_dir, long_shift, bitmap(index.long_keys), short_dir,
                       short_shift, bitmap(index.short_suffix))


def find_matches(text: pa.Array | pa.ChunkedArray, modes: np.ndarray, sizes: NgramSizes,
                 loaded: LoadedIndex) -> tuple[np.ndarray, np.ndarray]:
    """Rows (document, entry, first code point, past-last code point) of every key occurrence,
    and each document's mode (``modes`` may hold ``AUTO``)."""
    buf = string_buffers(text)
    modes = text_modes(text, modes, sizes.cjk_threshold)
    ix = loaded.index
    return ngrams.find_matches(
        buf.data, buf.starts, buf.ends, modes, sizes.n(), sizes.mins(), sizes.powers(),
        *kernel_tables(), ix.long_keys, loaded.long_dir, loaded.long_shift, loaded.long_bits,
        ix.short_suffix, ix.short_full, ix.short_len, loaded.short_dir, loaded.short_shift,
        loaded.short_bits), modes
