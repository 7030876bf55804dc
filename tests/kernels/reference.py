"""Slow pure-Python reference of the shingle, MinHash and band hashes (the spec, executed).

Written from the definitions in ``curator.kernels.shingles``/``minhash``/``lsh`` docstrings,
without calling them, so that a kernel that drifts from the spec fails the tests.
"""

from __future__ import annotations

M64 = (1 << 64) - 1
CHAR_BASE = 0x9E3779B97F4A7C15
WORD_BASE = 0xBF58476D1CE4E5B9
BAND_BASE = 0xD6E8FEB86659FD93


def fmix64(x: int) -> int:
    x ^= x >> 33
    x = (x * 0xFF51AFD7ED558CCD) & M64
    x ^= x >> 33
    x = (x * 0xC4CEB9FE1A85EC53) & M64
    return x ^ (x >> 33)


def decode(raw: bytes) -> list[int]:
    """Code points by the kernels' rule (ordinary UTF-8 decoding for valid input)."""
    out: list[int] = []
    i = 0
    while i < len(raw):
        b = raw[i]
        v = b if b < 0x80 else b & 0x1F if b < 0xE0 else b & 0x0F if b < 0xF0 else b & 0x07
        i += 1
        while i < len(raw) and raw[i] & 0xC0 == 0x80:
            v = ((v << 6) | (raw[i] & 0x3F)) & 0xFFFFFFFF
            i += 1
        out.append(v)
    return out


def is_sep(c: int) -> bool:
    ranges = [
        (0, 0x2F),
        (0x3A, 0x40),
        (0x5B, 0x60),
        (0x7B, 0x7F),
        (0x85, 0x85),
        (0xA0, 0xA0),
        (0x1680, 0x1680),
        (0x2000, 0x200A),
        (0x2010, 0x205F),
        (0x3000, 0x303F),
        (0xFF01, 0xFF0F),
        (0xFF1A, 0xFF20),
        (0xFF3B, 0xFF40),
        (0xFF5B, 0xFF65),
    ]
    return any(lo <= c <= hi for lo, hi in ranges)


def lower(c: int) -> int:
    if 0x41 <= c <= 0x5A or (0xC0 <= c <= 0xDE and c != 0xD7):
        return c + 32
    if (0x391 <= c <= 0x3AB and c != 0x3A2) or 0x410 <= c <= 0x42F:
        return c + 32
    if 0x400 <= c <= 0x40F:
        return c + 80
    return c


def poly(xs: list[int], base: int) -> int:
    h = 0
    for x in xs:
        h = (h * base + x) & M64
    return h


def shingles(raw: bytes, n: int, mode: str) -> list[int]:
    cps = decode(raw)
    if mode == "char":
        items = cps
        if not items:
            return []
        size = min(n, len(items))
        return [
            fmix64((poly(items[k : k + size], CHAR_BASE) + size) & M64)
            for k in range(len(items) - size + 1)
        ]
    tokens: list[list[int]] = [[]]
    for c in cps:
        if is_sep(c):
            if tokens[-1]:
                tokens.append([])
        else:
            tokens[-1].append(lower(c))
    toks = [fmix64((poly(t, CHAR_BASE) + len(t)) & M64) for t in tokens if t]
    if not toks:
        return []
    size = min(n, len(toks))
    return [
        fmix64((poly(toks[k : k + size], WORD_BASE) + size) & M64)
        for k in range(len(toks) - size + 1)
    ]


def permutations(num_perm: int, seed: int) -> list[tuple[int, int]]:
    state = seed & M64

    def nxt() -> int:
        nonlocal state
        state = (state + 0x9E3779B97F4A7C15) & M64
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        return z ^ (z >> 31)

    out = []
    for _ in range(num_perm):
        a = (nxt() & 0xFFFFFFFF) | 1
        out.append((a, nxt() & 0xFFFFFFFF))
    return out


def signature(raw: bytes, n: int, mode: str, num_perm: int, seed: int) -> list[int]:
    hs = shingles(raw, n, mode)
    return [
        min(((a * (h >> 32) + b) & 0xFFFFFFFF for h in hs), default=0xFFFFFFFF)
        for a, b in permutations(num_perm, seed)
    ]


def band_hash(sig: list[int], band: int, rows: int) -> int:
    h = band + 1
    for v in sig[band * rows : (band + 1) * rows]:
        h = (h * BAND_BASE + v) & M64
    return fmix64(h)


# ------------------------------------------------------------------ line dedup
def dropped_pieces(units: list[int], unit: str, span: int) -> set[int]:
    """The pieces that removing ``units`` (unit indexes) removes."""
    if unit != "sentence_span":
        return set(units)
    return {j + k for j in units for k in range(span)}


def rebuild(text: str, spans: list[tuple[int, int]], drop: set[int]) -> str:
    """``text`` without the pieces ``drop``: the head, each kept piece after the separator
    before it (the first kept one after none), the tail; "" if no piece is left. A removed
    line takes the line break before it; a removed run of sentences the space before it."""
    kept = [i for i in range(len(spans)) if i not in drop]
    if not kept:
        return ""
    out = [text[:spans[0][0]], text[slice(*spans[kept[0]])]]
    out += [text[spans[i - 1][1]:spans[i][1]] for i in kept[1:]]
    out.append(text[spans[-1][1]:])
    return "".join(out)
