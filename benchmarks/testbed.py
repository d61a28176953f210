"""The benchmark's test bed: real documentation sites from Debian packages, one per loopback
host, served by nginx with robots.txt variants and a millisecond access log.

Each ``Site`` is a directory tree some Debian package installs (thousands of interlinked pages
from different generators: Sphinx, DocBook, AsciiDoc, Apache's XSLT) plus the robots.txt rules
the benchmark serves for it. ``Testbed`` writes an nginx configuration into a run directory,
starts nginx in the foreground (so it dies with the benchmark), and parses the access log back
into requests with start and end times, from which ``benchmarks.server_metrics`` measures
politeness from the server's side.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

DOC = Path("/usr/share/doc")
HOST_BASE = 11  # sites listen on 127.0.0.11, 127.0.0.12, ...
LOG_FORMAT = ('$msec $request_time $server_addr:$server_port $status $body_bytes_sent '
              '"$request" "$http_user_agent"')
GZIP_TYPES = ("text/plain", "text/css", "text/xml", "application/xml", "application/json",
              "application/javascript", "application/rss+xml", "image/svg+xml")
NGINX_CANDIDATES = ("/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/local/nginx/sbin/nginx")


@dataclass(frozen=True)
class Site:
    """A documentation tree served on its own host, and the robots.txt rules it gets."""

    name: str
    package: str  # the Debian package that installs it
    root: Path  # served as the host's document root
    seed: str  # path of the seed page
    disallow: tuple[str, ...] = ()
    crawl_delay_in_polite_regime: bool = False  # robots.txt carries Crawl-delay: d
    sitemap_pages: int = 0  # > 0: serve /sitemap.xml with this many pages, named in robots.txt


FULL_SITES: tuple[Site, ...] = (
    Site("python", "python3-doc", DOC / "python3.11/html", "/index.html",
         disallow=("/_sources/", "/genindex")),
    Site("postgresql", "postgresql-doc-15", DOC / "postgresql-doc-15/html", "/index.html"),
    Site("django", "python-django-doc", DOC / "python-django-doc/html", "/index.html",
         disallow=("/_modules/",), sitemap_pages=300),
    Site("git", "git-doc", DOC / "git-doc", "/git.html", disallow=("/*.txt$",)),
    Site("apache", "apache2-doc", DOC / "apache2-doc/manual", "/en/index.html",
         disallow=tuple(f"/{lang}/" for lang in
                        ("da", "de", "es", "fr", "ja", "ko", "pt-br", "ru", "tr", "zh-cn")),
         crawl_delay_in_polite_regime=True),
)


@dataclass(frozen=True)
class HostedSite:
    site: Site
    address: str  # 127.0.0.x
    port: int

    @property
    def authority(self) -> str:
        return f"{self.address}:{self.port}"

    @property
    def base_url(self) -> str:
        return f"http://{self.authority}"

    @property
    def seed_url(self) -> str:
        return self.base_url + self.site.seed

    def robots_txt(self, delay: float | None) -> str:
        """The robots.txt served in a run; ``delay`` is the politeness regime's d (None when
        unthrottled, where no host asks for a Crawl-delay)."""
        lines = ["User-agent: *"]
        lines += [f"Disallow: {rule}" for rule in self.site.disallow] or ["Disallow:"]
        if delay is not None and self.site.crawl_delay_in_polite_regime:
            lines.append(f"Crawl-delay: {delay:g}")
        if self.site.sitemap_pages:
            lines.append(f"Sitemap: {self.base_url}/sitemap.xml")
        return "\n".join(lines) + "\n"

    def sitemap_xml(self) -> str:
        pages = sorted(p.relative_to(self.site.root).as_posix()
                       for p in self.site.root.rglob("*.html"))
        allowed = [p for p in pages if not any(("/" + p).startswith(rule)
                                               for rule in self.site.disallow)]
        urls = "".join(f"<url><loc>{self.base_url}/{p}</loc></url>"
                       for p in allowed[: self.site.sitemap_pages])
        return ('<?xml version="1.0" encoding="UTF-8"?>\n<urlset xmlns="http://www.sitemaps.org/'
                f'schemas/sitemap/0.9">{urls}</urlset>\n')


@dataclass(frozen=True)
class LoggedRequest:
    """One access-log line: times are epoch seconds, ``start`` is the end minus request time."""

    authority: str
    path: str
    status: int
    bytes: int
    start: float
    end: float
    user_agent: str


class TestbedError(RuntimeError):
    pass


def find_nginx() -> str | None:
    found = shutil.which("nginx")
    if found:
        return found
    return next((c for c in NGINX_CANDIDATES if os.access(c, os.X_OK)), None)


def missing_packages(sites: Sequence[Site], with_nginx: bool = True) -> list[str]:
    """Debian packages the sites (and nginx) need that are not installed."""
    missing = [s.package for s in sites if not s.root.is_dir()]
    if with_nginx and find_nginx() is None:
        missing.insert(0, "nginx-light")
    return sorted(set(missing), key=missing.index)


def install_packages(packages: Sequence[str]) -> None:
    """apt-get install (as root, or with sudo); a clear error says what to run otherwise."""
    if not packages:
        return
    prefix: list[str] = [] if os.geteuid() == 0 else (["sudo", "-n"] if shutil.which("sudo")
                                                      else [])
    if os.geteuid() != 0 and not prefix:
        raise TestbedError("the benchmark needs these Debian packages; install them as root: "
                           "apt-get install -y " + " ".join(packages))
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for attempt in (1, 2):
        proc = subprocess.run([*prefix, "apt-get", "install", "-y", "-q",
                               "--no-install-recommends", *packages],
                              env=env, capture_output=True, text=True)
        if proc.returncode == 0:
            return
        if attempt == 1:  # a fresh machine may have no package lists yet
            subprocess.run([*prefix, "apt-get", "update", "-q"], env=env, capture_output=True)
    raise TestbedError(f"apt-get install {' '.join(packages)} failed:\n{proc.stderr[-2000:]}")


def free_port(addresses: Sequence[str]) -> int:
    """A port that is free on every one of ``addresses``."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind((addresses[0], 0))
            port = int(probe.getsockname()[1])
        try:
            for address in addresses[1:]:
                with socket.socket() as other:
                    other.bind((address, port))
        except OSError:
            continue
        return port
    raise TestbedError("no port free on all the test-bed addresses")


def host_sites(sites: Sequence[Site], port: int | None = None) -> list[HostedSite]:
    addresses = [f"127.0.0.{HOST_BASE + i}" for i in range(len(sites))]
    port = port or free_port(addresses)
    return [HostedSite(site, address, port) for site, address in zip(sites, addresses, strict=True)]


def nginx_conf(hosted: Sequence[HostedSite], run_dir: Path) -> str:
    servers = []
    for h in hosted:
        extra = ""
        if h.site.sitemap_pages:
            extra = (f"        location = /sitemap.xml {{ alias {run_dir}/{h.site.name}"
                     f".sitemap.xml; }}\n")
        servers.append(
            f"    server {{\n        listen {h.authority};\n        root {h.site.root};\n"
            f"        index index.html;\n        autoindex on;\n"
            f"        location = /robots.txt {{ alias {run_dir}/{h.site.name}.robots.txt; }}\n"
            f"{extra}    }}\n")
    # As root, nginx would run its worker as nobody, which cannot read a private run folder
    # (pytest's tmp_path is 0700): keep the worker as the invoking user. Loopback only.
    user = f"user {pwd.getpwuid(os.geteuid()).pw_name};\n" if os.geteuid() == 0 else ""
    return (f"{user}worker_processes 1;\npid {run_dir}/nginx.pid;\n"
            f"error_log {run_dir}/error.log warn;\n"
            f"events {{ worker_connections 1024; }}\n"
            f"http {{\n    include /etc/nginx/mime.types;\n"
            f"    default_type application/octet-stream;\n"
            f"    log_format bench '{LOG_FORMAT}';\n"
            f"    access_log {run_dir}/access.log bench;\n"
            f"    client_body_temp_path {run_dir}/tmp;\n    proxy_temp_path {run_dir}/tmp;\n"
            f"    fastcgi_temp_path {run_dir}/tmp;\n    uwsgi_temp_path {run_dir}/tmp;\n"
            f"    scgi_temp_path {run_dir}/tmp;\n"
            f"    sendfile on;\n    keepalive_timeout 30;\n"
            # As a stock production nginx: text is compressed (text/html always is), so the
            # crawlers read robots.txt, sitemaps and pages gzip-encoded.
            f"    gzip on;\n    gzip_vary on;\n    gzip_types {' '.join(GZIP_TYPES)};\n"
            + "".join(servers) + "}\n")


@dataclass
class Testbed:
    """nginx serving ``hosted`` sites; one instance per crawler run, so each run has its own
    access log. Use as a context manager."""

    hosted: list[HostedSite]
    run_dir: Path
    delay: float | None = None  # the politeness regime's d, for robots.txt Crawl-delay
    process: subprocess.Popen[bytes] | None = field(default=None, init=False)

    @property
    def access_log(self) -> Path:
        return self.run_dir / "access.log"

    def start(self) -> Testbed:
        nginx = find_nginx()
        if nginx is None:
            raise TestbedError("nginx is not installed (apt-get install nginx-light)")
        self.run_dir.mkdir(parents=True, exist_ok=True)
        (self.run_dir / "tmp").mkdir(exist_ok=True)
        for h in self.hosted:
            (self.run_dir / f"{h.site.name}.robots.txt").write_text(h.robots_txt(self.delay))
            if h.site.sitemap_pages:
                (self.run_dir / f"{h.site.name}.sitemap.xml").write_text(h.sitemap_xml())
        conf = self.run_dir / "nginx.conf"
        conf.write_text(nginx_conf(self.hosted, self.run_dir.resolve()))
        self.process = subprocess.Popen(
            [nginx, "-p", str(self.run_dir.resolve()), "-c", str(conf.resolve()),
             "-g", "daemon off;"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                err = self.process.stderr.read().decode() if self.process.stderr else ""
                raise TestbedError(f"nginx exited at start: {err.strip()}")
            if all(_accepts(h.address, h.port) for h in self.hosted):
                return self
            time.sleep(0.05)
        self.stop()
        raise TestbedError("nginx did not start listening within 10 s")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()  # SIGTERM: fast shutdown, the log is flushed
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def __enter__(self) -> Testbed:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def requests(self) -> list[LoggedRequest]:
        return parse_access_log(self.access_log.read_text(errors="replace")
                                if self.access_log.exists() else "")


def _accepts(address: str, port: int) -> bool:
    try:
        with socket.create_connection((address, port), timeout=0.5):
            return True
    except OSError:
        return False


def parse_access_log(text: str) -> list[LoggedRequest]:
    """Lines in ``LOG_FORMAT``; malformed lines (a probe's bare connect logs nothing) skipped."""
    out = []
    for line in text.splitlines():
        try:
            msec, request_time, authority, status, size, rest = line.split(" ", 5)
            request, _, agent = rest.partition('" "')
            _method, target, *_ = request.strip('"').split(" ")
            end = float(msec)
            out.append(LoggedRequest(authority, target, int(status), int(size),
                                     end - float(request_time), end, agent.rstrip('"')))
        except ValueError:
            continue
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m benchmarks.testbed [--full]``: installs what is missing, nginx only by
    default (the smoke benchmark in the tests needs it), or also the documentation packages."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--full", action="store_true", help="also the documentation packages")
    args = parser.parse_args(argv)
    missing = missing_packages(FULL_SITES if args.full else ())
    if missing:
        print(f"installing Debian packages: {' '.join(missing)}", flush=True)
        install_packages(missing)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
