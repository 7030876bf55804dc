"""Collapse runs of ASCII whitespace to one space over Arrow string buffers (numba).

The same result as ``pyarrow.compute.replace_substring_regex(text, r"\\s+", " ")`` (RE2's
``\\s`` is ``[\\t\\n\\f\\r ]``, ASCII only) at memory speed instead of a regex per document:
these bytes never occur inside a multi-byte UTF-8 sequence, so the work is byte by byte.
"""

from __future__ import annotations

import numba as nb
import numpy as np
import pyarrow as pa

from curator.kernels.shingles import string_buffers


@nb.njit(nogil=True, cache=True)
def _collapse(data, starts, ends, out, offsets):
    w = 0
    for i in range(starts.shape[0]):
        offsets[i] = w
        in_run = False
        for p in range(starts[i], ends[i]):
            b = data[p]
            if b == 32 or b == 9 or b == 10 or b == 12 or b == 13:
                if not in_run:
                    out[w] = 32
                    w += 1
                    in_run = True
            else:
                out[w] = b
                w += 1
                in_run = False
    offsets[starts.shape[0]] = w


def collapse_whitespace(text: pa.Array | pa.ChunkedArray) -> pa.Array:
    """``text`` (string/large_string, sliced or chunked) with every run of ``[\\t\\n\\f\\r ]``
    replaced by one space, as a large_string array; nulls stay null."""
    if isinstance(text, pa.ChunkedArray):
        text = text.combine_chunks() if text.num_chunks != 1 else text.chunk(0)
    buf = string_buffers(text)
    n = len(buf.starts)
    out = np.empty(max(1, int((buf.ends - buf.starts).sum())), np.uint8)
    offsets = np.empty(n + 1, np.int64)
    _collapse(buf.data, buf.starts, buf.ends, out, offsets)
    validity = text.buffers()[0] if text.null_count else None
    if validity is not None and text.offset:
        validity = pa.array(text.is_valid().to_numpy(zero_copy_only=False)).buffers()[1]
    return pa.LargeStringArray.from_buffers(n, pa.py_buffer(offsets),
                                            pa.py_buffer(out[:offsets[-1]]),
                                            validity, text.null_count)
