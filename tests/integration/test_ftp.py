"""``fetch_ftp`` against a real pyftpdlib server on 127.0.0.1.

The server (started once per module in a thread) serves a temporary directory read-only to
anonymous users, plus two named accounts: one that may read, one that may only list. Every
test goes through the SSRF guard with ``allow_private_networks=True``, except the ones that
check the guard itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from pyftpdlib.authorizers import DummyAuthorizer
from pyftpdlib.handlers import FTPHandler
from pyftpdlib.ioloop import IOLoop
from pyftpdlib.servers import FTPServer

from tests.integration.ftp_server import polled_in_thread
from transforms.core.links import is_html
from transforms.fetchers.ftp import FtpResponse, fetch_ftp

HTML = b"<!doctype html><html><head><title>FTP page</title></head><body>hi</body></html>\n"
BINARY = bytes(range(256)) * 400  # 102,400 bytes, every byte value
DEEP = b"deep text\n"
SPACED = b"a name with a space\n"
PASSWORD = "s3cr:t@"  # needs percent-encoding in a URL


@dataclass(frozen=True)
class FtpSite:
    port: int
    root: Path

    def url(self, path: str = "/", userinfo: str = "") -> str:
        return f"ftp://{userinfo}127.0.0.1:{self.port}{path}"


def _make_root(root: Path) -> Path:
    (root / "index.html").write_bytes(HTML)
    (root / "data.bin").write_bytes(BINARY)
    (root / "with space.txt").write_bytes(SPACED)
    (root / "sub").mkdir()
    (root / "sub" / "deep.txt").write_bytes(DEEP)
    return root


@contextlib.contextmanager
def _serving(root: Path, **handler_attrs: object) -> Iterator[FtpSite]:
    """Serves ``root`` from a pyftpdlib server on 127.0.0.1 (free port) in a thread."""
    authorizer = DummyAuthorizer()
    authorizer.add_anonymous(str(root))  # read-only: list and retrieve
    authorizer.add_user("alice", PASSWORD, str(root), perm="elr")
    authorizer.add_user("lister", "pw", str(root), perm="el")  # may list, not retrieve
    handler = type("Handler", (FTPHandler,), {"authorizer": authorizer,
                                              "auth_failed_timeout": 0.05, **handler_attrs})
    logging.getLogger("pyftpdlib").setLevel(logging.WARNING)
    # An IOLoop of its own: pyftpdlib's default is one per process, which two servers would share.
    server = FTPServer(("127.0.0.1", 0), handler, ioloop=IOLoop())
    with polled_in_thread(server, "ftp-server"):
        yield FtpSite(port=server.address[1], root=root)


@pytest.fixture(scope="module")
def ftp_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FtpSite]:
    with _serving(_make_root(tmp_path_factory.mktemp("ftp-root"))) as site:
        yield site


@pytest.fixture(scope="module")
def legacy_ftp_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FtpSite]:
    """A server that knows neither MLSD/MLST nor SIZE, as many old ones: the fetcher must fall
    back to LIST, and tell files from directories by CWD."""
    commands = {name: spec for name, spec in FTPHandler.proto_cmds.items()
                if name not in ("MLSD", "MLST", "SIZE")}
    with _serving(_make_root(tmp_path_factory.mktemp("ftp-legacy")),
                  proto_cmds=commands) as site:
        yield site


def _fetch(url: str, *, timeout: float = 5.0, max_bytes: int = 1 << 20,
           allow: bool = True, **kwargs) -> FtpResponse:
    return asyncio.run(fetch_ftp(url, timeout=timeout, max_bytes=max_bytes,
                                 allow_private_networks=allow, **kwargs))


def test_a_file_is_fetched_byte_for_byte(ftp_site: FtpSite) -> None:
    resp = _fetch(ftp_site.url("/index.html"))
    assert (resp.status, resp.error, resp.is_directory) == (200, None, False)
    assert resp.body == HTML
    assert (resp.size, resp.truncated) == (len(HTML), False)
    assert resp.content_type == "text/html" and is_html(resp.content_type)

    resp = _fetch(ftp_site.url("/data.bin"))
    assert resp.body == BINARY and resp.size == len(BINARY)
    assert resp.content_type == "application/octet-stream"

    resp = _fetch(ftp_site.url("/sub/deep.txt"))
    assert (resp.body, resp.content_type) == (DEEP, "text/plain")


def test_a_long_file_is_cut_at_max_bytes(ftp_site: FtpSite) -> None:
    resp = _fetch(ftp_site.url("/data.bin"), max_bytes=1000)
    assert resp.status == 200
    assert resp.body == BINARY[:1000]
    assert resp.truncated
    assert resp.size == len(BINARY)  # what the server declared, not what was read
    # Exactly max_bytes long is not truncated.
    resp = _fetch(ftp_site.url("/index.html"), max_bytes=len(HTML))
    assert (resp.body, resp.truncated) == (HTML, False)
    # The cut transfer left the server healthy.
    assert _fetch(ftp_site.url("/data.bin")).body == BINARY


def test_a_directory_lists_its_entries_as_child_urls(ftp_site: FtpSite) -> None:
    resp = _fetch(ftp_site.url("/"))
    assert (resp.status, resp.error, resp.is_directory) == (200, None, True)
    assert sorted(resp.listing) == sorted([
        ftp_site.url("/data.bin"), ftp_site.url("/index.html"), ftp_site.url("/sub/"),
        ftp_site.url("/with%20space.txt")])
    assert resp.content_type == "text/uri-list"
    assert resp.body is not None
    assert resp.body.decode().split("\r\n")[:-1] == list(resp.listing)
    assert resp.size == len(resp.body) and not resp.truncated

    # A directory named without the trailing slash is still a directory.
    for path in ("/sub/", "/sub"):
        resp = _fetch(ftp_site.url(path))
        assert resp.is_directory and resp.listing == (ftp_site.url("/sub/deep.txt"),)

    # The listed URLs are fetchable as they are.
    spaced = next(u for u in _fetch(ftp_site.url("/")).listing if "space" in u)
    assert _fetch(spaced).body == SPACED


def test_a_long_listing_is_cut_at_max_bytes(ftp_site: FtpSite) -> None:
    resp = _fetch(ftp_site.url("/"), max_bytes=len(ftp_site.url("/data.bin")) + 2)
    assert resp.is_directory and resp.truncated
    assert len(resp.listing) == 1


def test_missing_files_and_directories_are_404(ftp_site: FtpSite) -> None:
    for path in ("/missing.html", "/missing/", "/sub/missing.txt"):
        resp = _fetch(ftp_site.url(path))
        assert (resp.status, resp.error, resp.body) == (404, None, None), path
        assert resp.detail.startswith("550")


def test_url_credentials_are_used_and_refusals_mapped(ftp_site: FtpSite) -> None:
    alice = "alice:s3cr%3At%40@"
    assert _fetch(ftp_site.url("/index.html", alice)).body == HTML
    listing = _fetch(ftp_site.url("/sub/", alice)).listing
    assert listing == (ftp_site.url("/sub/deep.txt", alice),)  # children keep the login

    resp = _fetch(ftp_site.url("/index.html", "alice:wrong@"))
    assert (resp.status, resp.error) == (401, None)
    assert resp.detail.startswith("530")

    resp = _fetch(ftp_site.url("/index.html"), user="alice", password=PASSWORD)
    assert resp.body == HTML

    resp = _fetch(ftp_site.url("/index.html", "lister:pw@"))
    assert (resp.status, resp.error) == (403, None)  # 550 "Not enough privileges"


def test_want_body_false_skips_the_transfer(ftp_site: FtpSite) -> None:
    resp = _fetch(ftp_site.url("/data.bin"), want_body=is_html)
    assert (resp.status, resp.body, resp.size) == (200, None, len(BINARY))
    assert resp.content_type == "application/octet-stream"
    assert _fetch(ftp_site.url("/index.html"), want_body=is_html).body == HTML


def test_a_server_without_mlsd_and_size_is_listed_and_fetched(legacy_ftp_site: FtpSite) -> None:
    site = legacy_ftp_site
    resp = _fetch(site.url("/"))
    assert sorted(resp.listing) == sorted([
        site.url("/data.bin"), site.url("/index.html"), site.url("/sub/"),
        site.url("/with%20space.txt")])
    resp = _fetch(site.url("/sub"))  # no SIZE, so CWD tells it is a directory
    assert resp.is_directory and resp.listing == (site.url("/sub/deep.txt"),)
    resp = _fetch(site.url("/data.bin"))
    assert (resp.body, resp.size) == (BINARY, len(BINARY))  # size counted while reading
    resp = _fetch(site.url("/data.bin"), max_bytes=10)
    assert (resp.body, resp.size, resp.truncated) == (BINARY[:10], 11, True)
    assert _fetch(site.url("/missing.html")).status == 404


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_connection_refused_is_a_connection_error() -> None:
    resp = _fetch(f"ftp://127.0.0.1:{_free_port()}/index.html")
    assert (resp.status, resp.error, resp.body) == (503, "connection", None)
    assert "ConnectionRefusedError" in resp.detail


def test_a_silent_server_times_out() -> None:
    with socket.socket() as silent:  # accepts connections (backlog) but never says 220
        silent.bind(("127.0.0.1", 0))
        silent.listen(4)
        started = time.monotonic()
        resp = _fetch(f"ftp://127.0.0.1:{silent.getsockname()[1]}/x", timeout=0.5)
        elapsed = time.monotonic() - started
    assert (resp.status, resp.error) == (504, "timeout")
    assert 0.5 <= elapsed < 2.0


def test_the_ssrf_guard_refuses_private_addresses_by_default() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        listener.setblocking(False)
        port = listener.getsockname()[1]
        for host in ("127.0.0.1", "localhost", "[::1]", "0x7f.1"):
            resp = _fetch(f"ftp://{host}:{port}/index.html", allow=False)
            assert (resp.status, resp.error) == (403, "ssrf_blocked"), host
            assert "loopback" in resp.detail
        with pytest.raises(BlockingIOError):  # nobody ever connected
            listener.accept()


@pytest.mark.parametrize("url", [
    "http://127.0.0.1/index.html",
    "ftp:///index.html",
    "ftp://127.0.0.1/a%0d%0aDELE%20index.html",  # would inject a second FTP command
])
def test_unusable_urls_are_rejected_without_connecting(url: str) -> None:
    resp = _fetch(url)
    assert (resp.status, resp.error) == (400, "invalid_url")
