"""Fetching ``ftp://`` URLs with aioftp, for the crawler's fetcher registry.

``fetch_ftp`` turns one FTP URL into an ``FtpResponse`` that reads like an HTTP response: a file
is retrieved (RETR, at most ``max_bytes``), a directory is listed and its entries returned as
child URLs the crawler follows like links, and FTP reply codes become HTTP-like statuses:

======================================  ======  ==============================================
what happened                           status  ``error``
======================================  ======  ==============================================
file retrieved or directory listed      200     None
550 not found (or "is not retrievable") 404     None
550/553 permission denied               403     None
530/532 login refused                   401     None
421/425/426/450/451/452 (transient)     503     None
any other unexpected reply              502     None
no connection (refused, reset, DNS)     503     ``"connection"``
a reply or listing aioftp cannot parse  502     ``"protocol"``
the whole fetch exceeded ``timeout``    504     ``"timeout"``
the SSRF guard refused the address      403     ``"ssrf_blocked"`` (``transforms.fetchers.ssrf``)
not an ftp URL, or CR/LF in the path    400     ``"invalid_url"``
======================================  ======  ==============================================

When ``error`` is set there was no usable FTP reply: the caller records the error kind (and no
status), exactly like a failed HTTP request. ``detail`` holds the server's reply text or the
exception.

The URL path is taken relative to the login directory (RFC 1738), which for anonymous servers is
the root. A path ending in ``/`` (or with ``;type=d``) is listed; otherwise the fetcher asks for
the file's SIZE, and when that fails tries CWD to detect a directory before falling back to RETR.
The connection goes to an address the SSRF guard has vetted, and the data connection to that
same address: aioftp ignores the IP in a PASV reply (``trust_server_pasv_ipv4_address`` stays
False), so a server cannot point the crawler elsewhere (the FTP bounce).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import mimetypes
import socket
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from urllib.parse import quote, unquote, urlsplit

import aioftp

from transforms.core.links import is_html
from transforms.core.records import (
    OUTCOME_ERROR,
    OUTCOME_FETCHED,
    OUTCOME_NOT_STORED,
    CrawlRequest,
    FetchResult,
)
from transforms.fetchers.http import FetchConfig, RequestGate
from transforms.fetchers.ssrf import SSRF_ERROR_KIND, ForbiddenAddress, GuardedResolver

FTP_DEFAULT_PORT = 21
DIRECTORY_CONTENT_TYPE = "text/uri-list"  # RFC 2483: one URL per line, CRLF-separated

# FTP reply codes (RFC 959) that mean "try again later".
TRANSIENT_REPLIES = frozenset({"421", "425", "426", "450", "451", "452"})
_PERMISSION_WORDS = ("permission", "privilege", "denied", "not allowed", "forbidden")
_ENCODING_TYPES = {"gzip": "application/gzip", "bzip2": "application/x-bzip2",
                   "xz": "application/x-xz", "compress": "application/x-compress",
                   "br": "application/x-brotli"}


@dataclass(frozen=True)
class FtpResponse:
    """The outcome of fetching one FTP URL (see the module docstring for status and error).

    Attributes:
        status: an HTTP-like status code.
        body: the file's bytes (at most ``max_bytes``); for a directory, its child URLs as a
            ``text/uri-list``; None when nothing was read.
        size: the file's size as the server reported it (SIZE), else the bytes read; for a
            directory, the length of ``body``.
        truncated: the file (or listing) was longer than ``max_bytes``.
        content_type: guessed from the path with ``mimetypes`` (None when unknown);
            ``text/uri-list`` for a directory.
        is_directory: the URL named a directory.
        listing: absolute URLs of the directory's entries, subdirectories ending in ``/``.
        error: an error kind when there was no usable reply, else None.
        detail: the server's reply text or the exception, for the record.
    """

    status: int
    body: bytes | None
    size: int
    truncated: bool
    content_type: str | None
    is_directory: bool
    listing: tuple[str, ...]
    error: str | None
    detail: str = ""


@dataclass(frozen=True)
class _Target:
    base: str  # "ftp://[userinfo@]host[:port]", as the URL spelled it
    host: str
    port: int
    path: str  # percent-decoded, without the leading "/"
    directory: bool
    user: str
    password: str


async def fetch_ftp(url: str, *, timeout: float, max_bytes: int, user: str = "anonymous",
                    password: str = "anonymous@", allow_private_networks: bool = False,
                    want_body: Callable[[str | None], bool] | None = None) -> FtpResponse:
    """Fetches a file or lists a directory over FTP; never raises for network or server errors.

    Args:
        url: an ``ftp://`` URL; ``user:password@`` in it overrides ``user`` and ``password``.
        timeout: seconds for the whole fetch (connection, login, transfer).
        max_bytes: the most body bytes to read; a longer file is cut and marked truncated.
        user: the login name when the URL has none.
        password: the password when the URL has none.
        allow_private_networks: lets the SSRF guard pass loopback and private addresses.
        want_body: called with the guessed content type of a file; when it returns False the
            file is not retrieved (body None, size from SIZE), as for media over HTTP.

    Returns:
        The response; see ``FtpResponse`` and the module docstring.
    """
    try:
        target = _parse(url, user, password)
    except ValueError as exc:
        return _failure(400, "invalid_url", exc)
    try:
        return await asyncio.wait_for(
            _fetch(target, max_bytes, allow_private_networks, want_body), timeout)
    except TimeoutError:
        return _failure(504, "timeout", f"no complete answer within {timeout} s")
    except ForbiddenAddress as exc:
        return _failure(403, SSRF_ERROR_KIND, exc)
    except aioftp.StatusCodeError as exc:
        code = str(exc.received_codes[-1]) if exc.received_codes else ""
        return _reply(_status_for_reply(code, _info(exc)), code, exc)
    except ValueError as exc:  # a reply or line aioftp cannot parse (or an overlong one)
        return _failure(502, "protocol", exc)
    except (OSError, EOFError, aioftp.AIOFTPException) as exc:
        # OSError covers refused and reset connections and failed DNS lookups.
        return _failure(503, "connection", exc)


def _parse(url: str, user: str, password: str) -> _Target:
    parts = urlsplit(url)
    if parts.scheme.lower() != "ftp" or not parts.hostname:
        raise ValueError(f"not an ftp URL: {url!r}")
    path = parts.path.lstrip("/")
    directory = not path or path.endswith("/")
    if ";type=" in path:  # RFC 1738 typecode: d lists, a and i retrieve (always as binary)
        path, _, typecode = path.rpartition(";type=")
        directory = directory or typecode.lower() == "d"
    path = unquote(path)
    if any(c in path for c in "\r\n\x00"):
        raise ValueError("control characters in the path would inject FTP commands")
    return _Target(
        base=f"ftp://{parts.netloc}", host=parts.hostname, port=parts.port or FTP_DEFAULT_PORT,
        path=path.rstrip("/"), directory=directory,
        user=unquote(parts.username) if parts.username is not None else user,
        password=unquote(parts.password) if parts.password is not None else password)


async def _fetch(target: _Target, max_bytes: int, allow_private_networks: bool,
                 want_body: Callable[[str | None], bool] | None) -> FtpResponse:
    client = await _connect(target, allow_private_networks)
    try:
        await client.login(target.user, target.password)
        if target.directory:
            response = await _list(client, target, max_bytes)
        else:
            response = await _retrieve(client, target, max_bytes, want_body)
        await client.command("QUIT")  # polite, but the reply is not worth waiting for
        return response
    finally:
        client.close()


async def _connect(target: _Target, allow_private_networks: bool) -> aioftp.Client:
    """Connects to the first vetted address of the host that accepts (checked by the guard)."""
    resolver = GuardedResolver(allow_private_networks=allow_private_networks)
    try:
        answers = await resolver.resolve(target.host, target.port, family=socket.AF_UNSPEC)
    finally:
        await resolver.close()
    last: OSError | None = None
    for answer in answers:
        client = aioftp.Client()
        try:
            await client.connect(answer["host"], target.port)
        except OSError as exc:  # refused or reset: the next address may answer
            client.close()
            last = exc
            continue
        except BaseException:  # cancelled (the timeout), or a bad greeting
            client.close()
            raise
        return client
    raise last or OSError(f"no address for {target.host}")


async def _list(client: aioftp.Client, target: _Target, max_bytes: int,
                listed: str | None = None) -> FtpResponse:
    """Lists ``listed`` (default: the target's path) and returns its entries as child URLs.

    MLSD first (machine-readable), LIST when the server does not implement it.
    """
    prefix = f"{target.base}/{_quote(target.path)}/" if target.path else f"{target.base}/"
    path = target.path if listed is None else listed
    urls: list[str] = []
    size = 0
    truncated = False
    for command, parse in (("MLSD", client.parse_mlsx_line), ("LIST", client.parse_list_line)):
        try:
            async with _data_connection(client, f"{command} {path}".strip()) as reader:
                while line := await reader.readline():
                    try:
                        name, info = parse(line)
                    except ValueError:  # a line no parser understands: not an entry
                        continue
                    if name.name in ("", ".", "..") or info.get("type") in ("cdir", "pdir"):
                        continue
                    child = prefix + quote(name.name, safe="")
                    if info.get("type") == "dir":
                        child += "/"
                    size += len(child) + 2
                    if size > max_bytes:
                        truncated = True
                        break
                    urls.append(child)
        except aioftp.StatusCodeError as exc:
            if command == "MLSD" and exc.received_codes[-1].matches("50x"):
                continue  # not implemented: fall back to LIST
            raise
        if not truncated:
            await client.command(None, "2xx", "1xx")  # transfer complete
        break
    body = "".join(u + "\r\n" for u in urls).encode()
    return FtpResponse(status=200, body=body, size=len(body), truncated=truncated,
                       content_type=DIRECTORY_CONTENT_TYPE, is_directory=True,
                       listing=tuple(urls), error=None)


async def _retrieve(client: aioftp.Client, target: _Target, max_bytes: int,
                    want_body: Callable[[str | None], bool] | None) -> FtpResponse:
    await client.command("TYPE I", "200")  # SIZE is only meaningful in binary mode
    size_reply = await _ask(client, "SIZE " + target.path, "213")
    declared = _size(size_reply[-1]) if size_reply else None
    if declared is None and await _ask(client, "CWD " + target.path, "2xx") is not None:
        return await _list(client, target, max_bytes, listed="")  # now inside it
    ctype = guess_content_type(target.path)
    if want_body is not None and not want_body(ctype):
        return FtpResponse(status=200, body=None, size=declared or 0, truncated=False,
                           content_type=ctype, is_directory=False, listing=(), error=None)
    chunks: list[bytes] = []
    read = 0
    async with _data_connection(client, "RETR " + target.path) as reader:
        while read <= max_bytes:
            chunk = await reader.read(min(65536, max_bytes + 1 - read))
            if not chunk:
                break
            chunks.append(chunk)
            read += len(chunk)
    truncated = read > max_bytes
    if not truncated:  # a cut transfer gets 426; the control connection is closed next anyway
        await client.command(None, "2xx", "1xx")
    body = b"".join(chunks)[:max_bytes]
    return FtpResponse(status=200, body=body, size=declared if declared is not None else read,
                       truncated=truncated, content_type=ctype, is_directory=False,
                       listing=(), error=None)


@contextlib.asynccontextmanager
async def _data_connection(client: aioftp.Client, command: str,
                           ) -> AsyncIterator[asyncio.StreamReader]:
    """Opens a passive data connection, sends ``command`` (expecting 1xx) and yields the data
    stream; the data connection is closed on the way out, also when the command is refused
    (aioftp's own ``get_stream`` leaves it open then). The final reply is the caller's."""
    reader, writer = await client.get_passive_connection("I")
    try:
        await client.command(command, "1xx")
        yield reader
    finally:
        writer.close()


async def _ask(client: aioftp.Client, command: str, expected: str) -> list[str] | None:
    """Sends a probe command; its reply lines when the code is ``expected``, else None."""
    try:
        _, info = await client.command(command, expected)
    except aioftp.StatusCodeError:
        return None
    return info


def guess_content_type(path: str) -> str | None:
    """The content type ``mimetypes`` guesses from ``path``; a compressed file is reported as its
    compression format (``a.tar.gz`` is ``application/gzip``), since that is what its bytes are."""
    ctype, encoding = mimetypes.guess_type(path, strict=False)
    if encoding is not None:
        return _ENCODING_TYPES.get(encoding, "application/octet-stream")
    return ctype


def _status_for_reply(code: str, message: str) -> int:
    if code in ("530", "532"):
        return 401
    if code in ("550", "553"):
        lowered = message.lower()
        return 403 if any(word in lowered for word in _PERMISSION_WORDS) else 404
    if code in TRANSIENT_REPLIES:
        return 503
    return 502


def _size(line: str) -> int | None:
    text = line.strip()
    return int(text) if text.isdigit() else None


def _quote(path: str) -> str:
    return quote(path, safe="/")


def _info(exc: aioftp.StatusCodeError) -> str:
    info = exc.info
    return " ".join(s.strip() for s in info) if isinstance(info, list) else str(info)


def _reply(status: int, code: str, exc: aioftp.StatusCodeError) -> FtpResponse:
    return FtpResponse(status=status, body=None, size=0, truncated=False, content_type=None,
                       is_directory=False, listing=(), error=None,
                       detail=f"{code} {_info(exc)}".strip()[:500])


def _failure(status: int, error: str, exc: BaseException | str) -> FtpResponse:
    detail = exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}"
    return FtpResponse(status=status, body=None, size=0, truncated=False, content_type=None,
                       is_directory=False, listing=(), error=error, detail=detail[:500])


async def fetch_ftp_request(session: object, request: CrawlRequest, gate: RequestGate,
                            config: FetchConfig) -> FetchResult:
    """The ``ftp`` entry of the protocol registry: one FTP fetch through the lease's gate.

    HTML files are stored like HTTP pages (with synthesized ``Content-Type``/``Content-Length``
    headers); other files are recorded, not stored (their body is not even downloaded); a
    directory's entries come back in ``FetchResult.links`` so the crawler follows them.
    ``session`` is unused (FTP opens its own connection) but keeps the registry's signature.
    """
    left = await gate.acquire()
    fetched_at = time.time()
    try:
        response = await fetch_ftp(request.url, timeout=min(config.total_timeout, left),
                                   max_bytes=config.max_body_bytes,
                                   allow_private_networks=config.allow_private_networks,
                                   want_body=is_html)
    finally:
        gate.release()
    elapsed = time.time() - fetched_at
    base = FetchResult(request=request, host=gate.lease.host, fetched_at=fetched_at,
                       final_url=request.url, elapsed=elapsed)
    if response.error:
        return dataclasses.replace(base, error=response.error, error_detail=response.detail,
                                   outcome=OUTCOME_ERROR)
    headers = ((("Content-Type", response.content_type),) if response.content_type else ()) + (
        ("Content-Length", str(response.size)),)
    stored = response.status == 200 and is_html(response.content_type) and (
        response.body is not None and not response.is_directory)
    return dataclasses.replace(
        base, status=response.status, content_type=response.content_type, headers=headers,
        reason=response.detail[:100], body=response.body if stored else None,
        content_length=response.size, truncated=response.truncated,
        links=response.listing, outcome=OUTCOME_FETCHED if stored else OUTCOME_NOT_STORED)
