"""A batch's results file (transforms.stores.results_file): the JSON Lines it writes, and the
link a done notification carries, with and without credentials that can sign. Nothing here
touches the network: signing with a service-account key is local, and a client without such
a key gets the path alone."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from urllib.parse import parse_qs, urlsplit

import google.cloud.storage as storage
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from google.auth.credentials import AnonymousCredentials
from google.oauth2 import service_account

from transforms.stores.results_file import (
    MAX_LINK_SECONDS,
    result_line,
    results_jsonl,
    results_link,
    split_gcs_path,
    write_results,
)

FETCHED_AT = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC).timestamp()
URLS: dict[str, dict[str, object]] = {
    "https://b.example/page": {"o": "fetched", "at": FETCHED_AT + 1, "s": 200, "f": FETCHED_AT,
                               "w": "gs://crawl/warc/0001.warc.gz", "off": 1234},
    "https://a.example/": {"o": "cached", "at": FETCHED_AT + 2, "s": 200, "f": FETCHED_AT - 60,
                           "w": "gs://crawl/warc/0000.warc.gz", "off": 0},
    "https://c.example/gone": {"o": "gone", "at": FETCHED_AT + 3, "s": 404, "f": FETCHED_AT},
    "notaurl": {"o": "invalid", "at": FETCHED_AT, "d": "no scheme"},
}
FIELDS = ["url", "outcome", "status", "fetched_at", "warc_file", "warc_offset", "detail"]


def test_the_file_has_one_line_per_url_sorted_by_url(tmp_path):
    path = tmp_path / "results" / "b-1.jsonl"  # the folder does not exist yet

    count = write_results(str(path), URLS)

    lines = path.read_text().splitlines()
    rows = [json.loads(line) for line in lines]
    assert count == len(lines) == 4
    assert [r["url"] for r in rows] == sorted(URLS)
    assert all(list(r) == FIELDS for r in rows)
    assert path.read_bytes().endswith(b"\n")


def test_each_line_carries_the_outcome_cell_as_named_fields():
    by_url = {r["url"]: r for r in map(json.loads, results_jsonl(URLS).splitlines())}

    assert by_url["https://b.example/page"] == {
        "url": "https://b.example/page", "outcome": "fetched", "status": 200,
        "fetched_at": "2024-05-01T12:00:00.000Z", "warc_file": "gs://crawl/warc/0001.warc.gz",
        "warc_offset": 1234, "detail": ""}
    assert by_url["https://a.example/"]["warc_offset"] == 0
    assert by_url["https://c.example/gone"] == {
        "url": "https://c.example/gone", "outcome": "gone", "status": 404,
        "fetched_at": "2024-05-01T12:00:00.000Z", "warc_file": None, "warc_offset": None,
        "detail": ""}
    assert by_url["notaurl"] == {
        "url": "notaurl", "outcome": "invalid", "status": None, "fetched_at": None,
        "warc_file": None, "warc_offset": None, "detail": "no scheme"}


def test_writing_twice_gives_the_same_bytes(tmp_path):
    path = tmp_path / "b-1.jsonl"
    write_results(str(path), URLS)
    first = path.read_bytes()
    write_results(str(path), dict(reversed(list(URLS.items()))))

    assert path.read_bytes() == first


def test_non_ascii_urls_and_details_are_written_as_utf8():
    data = results_jsonl({"https://b.example/ü": {"o": "error", "d": "naïve"}})

    assert "ü".encode() in data and "naïve".encode() in data
    assert json.loads(data) == result_line("https://b.example/ü", {"o": "error", "d": "naïve"})


def test_an_empty_batch_writes_an_empty_file(tmp_path):
    path = tmp_path / "empty.jsonl"

    assert write_results(str(path), {}) == 0
    assert path.read_bytes() == b""


def test_a_local_path_links_to_itself(tmp_path):
    path = str(tmp_path / "b-1.jsonl")

    assert results_link(path) == {"path": path}


def test_a_gcs_path_without_signing_credentials_links_to_the_path_only():
    client = storage.Client(project="test", credentials=AnonymousCredentials())

    assert results_link("gs://bucket/results/b-1.jsonl", client=client) == {
        "path": "gs://bucket/results/b-1.jsonl"}


def test_under_the_emulator_the_default_client_cannot_sign(monkeypatch):
    # An unused port: the client must not need it to decide that it cannot sign.
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", "http://127.0.0.1:9")

    assert results_link("gs://bucket/b-1.jsonl") == {"path": "gs://bucket/b-1.jsonl"}


def _service_account_client() -> storage.Client:
    """A client with a service account's key made here: it signs, locally, like a worker's."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    credentials = service_account.Credentials.from_service_account_info({
        "type": "service_account", "client_email": "crawler@test.iam.gserviceaccount.com",
        "private_key": pem, "private_key_id": "k1", "token_uri": "https://oauth2.invalid/token",
    })
    return storage.Client(project="test", credentials=credentials)


def test_service_account_credentials_sign_a_v4_url():
    link = results_link("gs://bucket/results/b-1.jsonl", 3600, client=_service_account_client())

    assert link["path"] == "gs://bucket/results/b-1.jsonl"
    url = urlsplit(link["signed_url"])
    query = parse_qs(url.query)
    assert url.path == "/bucket/results/b-1.jsonl"
    assert query["X-Goog-Algorithm"] == ["GOOG4-RSA-SHA256"]
    assert query["X-Goog-Expires"] == ["3600"]
    assert query["X-Goog-Credential"][0].startswith("crawler@test.iam.gserviceaccount.com/")
    assert len(query["X-Goog-Signature"][0]) == 512  # hex of a 2048-bit RSA signature


@pytest.mark.parametrize("seconds", [0, -1, MAX_LINK_SECONDS + 1])
def test_a_link_lives_at_most_seven_days(seconds):
    with pytest.raises(ValueError, match="expires_seconds"):
        results_link("/tmp/b-1.jsonl", seconds)


@pytest.mark.parametrize(("path", "expected"), [
    ("gs://bucket/a/b.jsonl", ("bucket", "a/b.jsonl")),
    ("gs://bucket/b.jsonl", ("bucket", "b.jsonl")),
])
def test_gcs_paths_split_into_bucket_and_object(path, expected):
    assert split_gcs_path(path) == expected


@pytest.mark.parametrize("path", ["gs://bucket", "gs://bucket/", "gs:///x", "/local/x"])
def test_gcs_paths_without_an_object_are_refused(path):
    with pytest.raises(ValueError):
        split_gcs_path(path)
