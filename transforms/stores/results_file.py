"""A finished batch's per-URL results as a JSON Lines file, and a link a client can fetch it by.

The done notification says where the results are (``notification_body(..., results=...)``):
the ``gs://`` path always, and a V4 signed URL when the worker's credentials can sign one, so a
client without access to the crawler's bucket can still download its results for a week.

One line per URL, sorted by URL so two writes of the same batch give the same bytes::

    {"url": ..., "outcome": ..., "status": 200, "fetched_at": "2024-05-01T12:00:00.000Z",
     "warc_file": "gs://.../x.warc.gz", "warc_offset": 1234, "detail": ""}

Files go to Google Cloud Storage through ``google.cloud.storage`` (which honours
``STORAGE_EMULATOR_HOST``, so the local stack's emulator works as for the WARC files) and to
the local file system otherwise. Not through Beam's ``FileSystems``: ``transforms/stores`` holds
the blocking Google Cloud clients and imports no Beam (``tests/unit/test_layout.py``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path

import google.cloud.storage as storage

from transforms.formats.rows import iso

_LOG = logging.getLogger(__name__)

GCS_SCHEME = "gs://"
RESULTS_CONTENT_TYPE = "application/x-ndjson"
MAX_LINK_SECONDS = 7 * 24 * 3600  # the longest a V4 signed URL may live


def result_line(url: str, doc: Mapping[str, object]) -> dict[str, object]:
    """One URL's line, from its ``u:<url>`` cell as ``BatchRecord.urls`` holds it
    (``{"o", "at", "s", "f", "w", "off", "d"}``, absent keys meaning "none")."""
    fetched = doc.get("f")
    return {
        "url": url,
        "outcome": doc.get("o"),
        "status": doc.get("s"),
        "fetched_at": iso(float(fetched)) if isinstance(fetched, int | float) else None,
        "warc_file": doc.get("w") or None,
        "warc_offset": doc.get("off") if doc.get("w") else None,
        "detail": doc.get("d") or "",
    }


def results_jsonl(record_urls: Mapping[str, Mapping[str, object]]) -> bytes:
    """The file's bytes: one compact JSON object per line, sorted by URL, newline-terminated."""
    lines = [json.dumps(result_line(url, record_urls[url]), ensure_ascii=False,
                        separators=(",", ":")) for url in sorted(record_urls)]
    return "".join(line + "\n" for line in lines).encode("utf-8")


def split_gcs_path(path: str) -> tuple[str, str]:
    """``gs://bucket/a/b`` -> ``("bucket", "a/b")``.

    Raises:
        ValueError: not a ``gs://`` path, or no bucket or object name.
    """
    if not path.startswith(GCS_SCHEME):
        raise ValueError(f"{path!r} is not a gs:// path")
    bucket, _, name = path[len(GCS_SCHEME):].partition("/")
    if not bucket or not name:
        raise ValueError(f"{path!r} needs a bucket and an object name")
    return bucket, name


def write_results(path: str, record_urls: Mapping[str, Mapping[str, object]], *,
                  client: storage.Client | None = None) -> int:
    """Writes the batch's results file at ``path`` (replacing any earlier one).

    Args:
        path: ``gs://bucket/object`` or a local file path (parent folders are created).
        record_urls: ``BatchRecord.urls``: URL -> its outcome cell.
        client: the storage client to write with (a DoFn makes one in ``setup()``); a new
            default client when None.

    Returns:
        The number of lines (URLs) written.

    Raises:
        ValueError: a ``gs://`` path without an object name.
        google.api_core.exceptions.GoogleAPICallError: the upload failed.
        OSError: a local write failed.
    """
    data = results_jsonl(record_urls)
    if path.startswith(GCS_SCHEME):
        _blob(path, client).upload_from_string(data, content_type=RESULTS_CONTENT_TYPE)
    else:
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return len(record_urls)


def results_link(path: str, expires_seconds: int = MAX_LINK_SECONDS, *,
                 client: storage.Client | None = None) -> dict[str, str]:
    """Where a client finds the results: ``{"path": ...}``, plus ``"signed_url"`` for a
    ``gs://`` path when the credentials can sign.

    Signing is local (the credentials' private key), so only service-account credentials
    can do it; the emulator's anonymous credentials, a developer's user credentials and a
    VM's metadata-server credentials cannot, and then the link is the path alone: the
    notification still goes out, and a client with access to the bucket reads it there.

    Args:
        path: the results file, as given to :func:`write_results`.
        expires_seconds: how long the signed URL works, at most 7 days (V4's limit).
        client: the storage client whose credentials sign; a new default client when None.

    Raises:
        ValueError: ``expires_seconds`` outside 1 .. 7 days, or a ``gs://`` path without an
            object name.
    """
    if not 0 < expires_seconds <= MAX_LINK_SECONDS:
        raise ValueError(f"expires_seconds {expires_seconds}: must be 1-{MAX_LINK_SECONDS}")
    link = {"path": path}
    if not path.startswith(GCS_SCHEME):
        return link
    signed = signed_url(_blob(path, client), expires_seconds)
    if signed:
        link["signed_url"] = signed
    return link


def signed_url(blob: storage.Blob, expires_seconds: int) -> str | None:
    """A V4 GET URL for ``blob``, or None when its client's credentials cannot sign.

    ``generate_signed_url`` documents ``AttributeError`` for credentials that are not
    ``google.auth.credentials.Signing``, raised before any network use, so asking costs
    nothing when the answer is no.
    """
    try:
        url: str = blob.generate_signed_url(version="v4", method="GET",
                                            expiration=timedelta(seconds=expires_seconds))
    except AttributeError as exc:
        _LOG.info("results link without a signed URL: the credentials cannot sign",
                  extra={"path": f"{GCS_SCHEME}{blob.bucket.name}/{blob.name}",
                         "reason": str(exc)[:200]})
        return None
    return url


def _blob(path: str, client: storage.Client | None) -> storage.Blob:
    bucket, name = split_gcs_path(path)
    return (client or storage.Client()).bucket(bucket).blob(name)
