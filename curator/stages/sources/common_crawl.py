"""The ``common_crawl`` source: WARC files of Common Crawl snapshots, downloaded then read."""

from __future__ import annotations

import gzip
import random
import tempfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
from pydantic import Field, field_validator

from curator.batch import InputUnavailable, Shard, SourceBatch
from curator.io.download import DownloadError, RetryPolicy
from curator.io.download_cache import DownloadCache, default_cache_dir
from curator.stages.base import Source

DEFAULT_BASE_URL = "https://data.commoncrawl.org/"


class CommonCrawl(Source):
    """Common Crawl WARC files, one shard per file: each snapshot's ``warc.paths.gz`` lists
    them, a deterministic subset is chosen, each is downloaded (retried, resumed, checked whole,
    cached) and its HTML responses read. A file that cannot be had whole raises
    ``InputUnavailable``: its shard is left for the next run."""

    type = "common_crawl"
    version = 3  # 3: a record with damaged framing is never kept; bounded records (WarcLimits)
    requires = {"fastwarc": "extract", "warcio": "extract", "resiliparse": "extract"}
    placement = frozenset({"cache_dir", "max_tries", "base_delay_s", "max_delay_s", "timeout_s",
                           "per_host_connections"})

    listing_params = frozenset({"snapshots", "base_url", "files", "sample", "seed", "max_files"})

    snapshots: list[str] = Field(min_length=1, description="Crawl names, e.g. CC-MAIN-2024-10.")
    base_url: str = Field(DEFAULT_BASE_URL, description="Where crawl-data/ lives: Common Crawl's "
                          "HTTPS endpoint, a mirror, or s3://commoncrawl/ (through fsspec).")
    files: str | None = Field(None, description="Range 'START:STOP' of each snapshot's WARC "
                              "listing (Python slice, e.g. '0:8').")
    sample: int | None = Field(None, gt=0, description="Choose this many WARC files of each "
                               "snapshot at random (with seed), after 'files'.")
    seed: int = Field(0, description="Seed of 'sample'.")
    max_files: int | None = Field(None, gt=0, description="At most this many WARC files per "
                                  "snapshot (the first ones of the choice).")
    cache_dir: str | None = Field(None, description="Download cache shared by runs and "
                                  "processes (checked before reuse; 'curate gc' trims it); "
                                  "default: .curator-cache beside the run directory.")
    max_tries: int = Field(8, gt=0, description="Consecutive failed attempts without progress "
                           "before a file is given up.")
    base_delay_s: float = Field(1.0, ge=0, description="First retry delay; doubles per failure, "
                                "with jitter.")
    max_delay_s: float = Field(60.0, ge=0, description="Longest wait between tries (Retry-After "
                               "included).")
    timeout_s: float = Field(60.0, gt=0, description="Seconds to connect, and between two reads "
                             "of a transfer, before it is retried.")
    per_host_connections: int = Field(4, gt=0, description="Downloads at once from one host, "
                                      "per worker process.")

    @field_validator("files")
    @classmethod
    def _check_range(cls, value: str | None) -> str | None:
        if value is not None:
            _slice(value)
        return value

    @field_validator("base_url")
    @classmethod
    def _slash(cls, value: str) -> str:
        return value if value.endswith("/") else value + "/"

    def policy(self) -> RetryPolicy:
        return RetryPolicy(self.max_tries, self.base_delay_s, self.max_delay_s, self.timeout_s)

    def shards(self) -> list[Shard]:
        shards: list[Shard] = []
        for snapshot in self.snapshots:
            for path in self.choose(self.listing(snapshot)):
                shards.append(Shard(len(shards), self.base_url + path, label=path))
        return shards

    def listing(self, snapshot: str) -> list[str]:
        """The WARC paths of ``snapshot`` (from its warc.paths.gz, kept in the cache when
        ``cache_dir`` is set: the run directory is not known yet)."""
        url = f"{self.base_url}crawl-data/{snapshot}/warc.paths.gz"
        with tempfile.TemporaryDirectory() as scratch:
            cache = DownloadCache(Path(self.cache_dir) if self.cache_dir else Path(scratch))
            try:
                with cache.fetching(url, self.policy(), self.per_host_connections) as got:
                    if got.damaged:
                        raise ValueError(f"common_crawl: {url}: {got.damaged}")
                    text = gzip.decompress(got.path.read_bytes()).decode()
            except DownloadError as err:
                raise ValueError(f"common_crawl: cannot list {snapshot}: {err}") from None
        return [line.strip() for line in text.splitlines() if line.strip()]

    def choose(self, paths: list[str]) -> list[str]:
        """The subset of one snapshot's listing this stage reads, in listing order."""
        if self.files is not None:
            paths = paths[_slice(self.files)]
        if self.sample is not None and self.sample < len(paths):
            picked = random.Random(self.seed).sample(range(len(paths)), self.sample)
            paths = [paths[i] for i in sorted(picked)]
        return paths[: self.max_files] if self.max_files else paths

    def read(self, shard: Shard, batch_bytes: int) -> Iterator[SourceBatch]:
        if not self.cache_dir:
            raise ValueError("common_crawl: cache_dir is needed outside a run")
        return self._read(shard, batch_bytes, DownloadCache(Path(self.cache_dir)))

    def read_in_run(self, shard: Shard, batch_bytes: int, run_dir: Path) -> Iterator[SourceBatch]:
        root = Path(self.cache_dir) if self.cache_dir else default_cache_dir(run_dir)
        return self._read(shard, batch_bytes, DownloadCache(root))

    def _read(self, shard: Shard, batch_bytes: int,
              cache: DownloadCache) -> Iterator[SourceBatch]:
        """The shard's WARC file fetched through ``cache`` and read while kept there."""
        from curator.io.warc import read_warc_batches

        url = shard.path
        try:
            with cache.fetching(url, self.policy(), self.per_host_connections) as got:
                if got.damaged:
                    raise InputUnavailable(url, f"served damaged twice: {got.damaged}")
                notes = Counter({"downloaded": 0 if got.cached else 1, "cached": int(got.cached),
                                 "download_requests": got.requests,
                                 "resumed_requests": got.resumed,
                                 "damaged_in_cache": got.damaged_in_cache})
                first = True
                for batch in read_warc_batches(replace(shard, path=str(got.path)), batch_bytes,
                                               self.name or self.type):
                    if first:
                        batch.notes.update(+notes)
                        first = False
                    yield batch
                if first:
                    yield SourceBatch(pa.table({}), notes=+notes)
        except DownloadError as err:
            raise InputUnavailable(url, str(err).removeprefix(f"{url}: ")) from None


def _slice(value: str) -> slice:
    """'START:STOP' (either may be empty) -> slice."""
    start, sep, stop = value.partition(":")
    try:
        if not sep:
            raise ValueError
        return slice(int(start) if start.strip() else None, int(stop) if stop.strip() else None)
    except ValueError:
        raise ValueError(f"files must be 'START:STOP' (e.g. '0:8'), got {value!r}") from None
