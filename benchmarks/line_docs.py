# ruff: noqa: RUF001  (Japanese shop boilerplate is the point here)
"""Web pages for the line-dedup benchmarks (bench_line_dedup.py, bench_dedup_memory.py --stage
line): mostly unique text with the boilerplate sites repeat.

Each page belongs to a site (sites drawn Zipf-like, 40 pages per site on average); 25 % are
Japanese. Body: paragraphs of 1 to 5 real sentences of the corpus's pool (bench_dedup_product's:
books, speeches, reviews, Wikipedia, Aozora), one paragraph per line, until a length drawn from
the Common Crawl log-normal (classifier_docs.py) is reached. Boilerplate, as its site repeats it:
a navigation line (70 % of a site's pages), a "related" block of three of the site's ten titles
(40 %), a footer line naming the site (80 %), one footer line shared by every site (30 % of
all pages), a cookie notice of two sentences (5 % of all) and, on Japanese shop sites, three
lines of EC boilerplate (60 % of their pages). Every line but the body's ends a sentence, so
that sentence splitters see the same units as line splitters there.
"""

from __future__ import annotations

import math
import multiprocessing as mp
import random
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from bench_dedup_product import build_pool
from classifier_docs import MAX_CHARS, MEDIAN_CHARS, MIN_CHARS, SIGMA

PAGES_PER_SITE = 40
JAPANESE = 0.25
SHARED_FOOTER = "Privacy Policy. Terms of Use. Cookie Settings."
COOKIES = ("We use cookies to improve your experience on our site. "
           "By continuing to browse, you agree to our use of cookies.")
SHOP_JA = ["送料無料（一部地域を除く）。", "カートに入れる。", "ご注文は24時間受け付けております。"]
POOL: dict[str, list[str]] = {}  # sentences per language, set before the workers fork


def _site(seed: int, site: int) -> dict:
    """A site's boilerplate: navigation, ten titles, footer (and shop lines if Japanese)."""
    rng = random.Random(seed * 3_000_017 + site)
    japanese = rng.random() < JAPANESE
    pool = POOL["ja" if japanese else "en"]
    words = [w.strip(".,;:!?\"'()「」、。").title() for w in rng.choice(POOL["en"]).split()]
    words = [w for w in words if w.isalpha()][:5] or ["News"]
    name = f"{words[0]} {rng.choice(['Daily', 'Times', 'Review', 'Journal', 'Hub'])} {site}"
    titles = [rng.choice(pool)[:90].rstrip() for _ in range(10)]
    titles = [t if t.endswith((".", "。", "!", "?")) else t + ("。" if japanese else ".")
              for t in titles]
    if japanese:
        nav = f"{name}トップ。新着記事。ランキング。お問い合わせ。"
        footer = f"Copyright © {name}。無断転載を禁じます。"
    else:
        nav = "Home. " + ". ".join(words[1:4] or ["Sections"]) + ". Contact us."
        footer = f"Copyright © 2024 {name}. All rights reserved."
    return {"japanese": japanese, "nav": nav, "titles": titles, "footer": footer,
            "shop": japanese and rng.random() < 0.5}


def _site_of(rng: random.Random, sites: int) -> int:
    """A site drawn Zipf-like (weight 1 / (rank + 1) ** 0.8) by inverting its continuous CDF."""
    u = rng.random()
    a = 0.2  # 1 - 0.8
    return min(sites - 1, int(((u * ((sites + 1) ** a - 1)) + 1) ** (1 / a) - 1))


def page(seed: int, part: int, k: int, sites: int) -> tuple[str, str]:
    """Page ``k`` of part ``part``: (language, text)."""
    rng = random.Random(seed * 1_000_003 + part * 10_000_019 + k)
    site = _site(seed, _site_of(rng, sites))
    japanese = site["japanese"]
    pool, joiner = (POOL["ja"], "") if japanese else (POOL["en"], " ")
    length = min(MAX_CHARS, max(MIN_CHARS, rng.lognormvariate(math.log(MEDIAN_CHARS), SIGMA)))
    if japanese:
        length /= 3  # a Japanese character carries about three English ones
    lines = [site["nav"]] if rng.random() < 0.7 else []
    body, size = [], 0
    while size < length:
        paragraph = joiner.join(rng.choices(pool, k=rng.randint(1, 5)))
        body.append(paragraph)
        size += len(paragraph) + 1
    lines += body
    if rng.random() < 0.05:
        lines.insert(min(len(lines), 1 + rng.randrange(3)), COOKIES)
    if rng.random() < 0.4:
        lines += ["関連記事。" if japanese else "Related posts.", *rng.sample(site["titles"], 3)]
    if site["shop"] and rng.random() < 0.6:
        lines += SHOP_JA
    if rng.random() < 0.8:
        lines.append(site["footer"])
    if rng.random() < 0.3:
        lines.append(SHARED_FOOTER)
    return ("ja" if japanese else "en"), "\n".join(lines)


@dataclass(frozen=True)
class _PartJob:
    part: int
    docs: int
    sites: int
    seed: int
    folder: str


def _write_part(job: _PartJob) -> int:
    made = [page(job.seed, job.part, k, job.sites) for k in range(job.docs)]
    table = pa.table({"id": [f"p{job.part:05d}-{k:07d}" for k in range(job.docs)],
                      "lang": [lang for lang, _ in made],
                      "text": pa.array([text for _, text in made], pa.large_string())})
    pq.write_table(table, Path(job.folder) / f"part-{job.part:05d}.parquet",
                   row_group_size=16384, compression="zstd")
    return sum(len(text.encode()) for _, text in made)


def make_corpus(folder: Path, gb: float, part_mb: float, seed: int, corpus: Path,
                processes: int, pool: dict[str, list[str]] | None = None) -> dict:
    """Parquet parts (``id``, ``lang``, ``text``) of about ``gb`` GB of text in ``folder``
    (sentences from ``pool``, by default the corpus's)."""
    global POOL
    POOL = pool or build_pool(corpus)
    sites = 1_000_000  # enough that a probe draws from the same distribution as the corpus
    probe = [len(page(seed, 999_999, k, sites)[1].encode()) for k in range(400)]
    total = max(1, int(gb * 1e9 / (sum(probe) / len(probe))))
    parts = max(1, round(gb * 1e3 / part_mb))
    per_part = -(-total // parts)
    sites = max(1, total // PAGES_PER_SITE)
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    started = time.perf_counter()
    jobs = [_PartJob(p, per_part, sites, seed, str(folder)) for p in range(parts)]
    with mp.get_context("fork").Pool(processes) as pool:
        sizes = pool.map(_write_part, jobs, chunksize=1)
    return {"parts": parts, "docs": parts * per_part, "bytes": sum(sizes), "sites": sites,
            "seconds": time.perf_counter() - started}
