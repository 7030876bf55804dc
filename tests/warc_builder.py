"""Build WARC files with warcio's writer, for tests and benchmarks (real WARC framing)."""

from __future__ import annotations

import io
from pathlib import Path

from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"


def response_record(writer: WARCWriter, url: str, payload: bytes,
                    content_type: str = "text/html", status: str = "200 OK"):
    http = StatusAndHeaders(status, [("Content-Type", content_type),
                                     ("Content-Length", str(len(payload)))],
                            protocol="HTTP/1.1")
    return writer.create_warc_record(url, "response", payload=io.BytesIO(payload),
                                     http_headers=http)


def write_warc(path: Path, pages: list[tuple[str, bytes, str]], gzip: bool = True) -> list[str]:
    """``pages`` (url, payload, content type) as response records; returns their record ids."""
    ids = []
    with open(path, "wb") as f:
        writer = WARCWriter(f, gzip=gzip)
        for url, payload, content_type in pages:
            record = response_record(writer, url, payload, content_type)
            ids.append(record.rec_headers.get_header("WARC-Record-ID"))
            writer.write_record(record)
    return ids
