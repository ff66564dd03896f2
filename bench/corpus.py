"""Real third-party pages for bench/bench_snapshot_tokens.py, installed from the package registries and served on
127.0.0.1 only (issue 23).

* Debian's Python documentation (the ``python3.11-doc`` package, HTML under /usr/share/doc/python3.11/html): the
  library index and two long module pages, argparse and os, served by a plain HTTP server.
* A Django admin (Django from PyPI, pinned, in a venv of its own under ``.venv-bench/``): a tiny project written to
  a temporary folder (sqlite, migrated), an ``Order`` model of eight columns with 60 rows, a superuser and a
  logged-in session whose cookie the bench puts into the browser. Pages: the changelist (60 rows x 8 columns on one
  page) and one order's change form (a file field's "Currently: ... Change:", date and time widgets with their
  "Today" / "Now" and icon links).
* A JupyterLab launcher (jupyterlab from PyPI, pinned, its own venv; only with ``full``: it installs about 240 MB),
  no token, no browser, a temporary root folder.

Every version is pinned here and the venvs live in ``.venv-bench/`` (git-ignored), so a second run installs
nothing. ``python bench/corpus.py [--full]`` installs alone; the bench calls ``ensure()`` itself.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# The venvs of the corpus; OPENAB_BENCH_CACHE moves them (a worktree of an older commit can share one).
CACHE = Path(os.environ.get("OPENAB_BENCH_CACHE", str(REPO / ".venv-bench")))
DEBIAN_DOC = "python3.11-doc"
DOC_ROOT = Path("/usr/share/doc/python3.11/html")
DJANGO = "5.2.19"
JUPYTERLAB = "4.6.6"
ROWS = 60
START_TIMEOUT = 120.0


@dataclass
class Page:
    """One page of the corpus: its name in the report, its URL, and a text to wait for where the page draws
    itself after its load (a script-built app)."""

    name: str
    url: str
    ready_text: str = ""


@dataclass
class Corpus:
    pages: list[Page] = field(default_factory=list)
    # Cookies for the browser (Playwright's add_cookies shape): the Django admin's logged-in session.
    cookies: list[dict[str, str]] = field(default_factory=list)
    versions: dict[str, str] = field(default_factory=dict)


def _venv(name: str, requirement: str) -> Path:
    """The python of ``.venv-bench/<name>`` with ``requirement`` installed; made on first use."""
    root = CACHE / name
    python = root / "bin" / "python"
    stamp = root / "openab-requirement.txt"
    if python.exists() and stamp.exists() and stamp.read_text(encoding="utf-8") == requirement:
        return python
    if root.exists():
        shutil.rmtree(root)
    root.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True)
    done = subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", requirement],
                          check=False)
    if done.returncode != 0:
        raise SystemExit(f"pip could not install {requirement} into {root}: see its output above")
    stamp.write_text(requirement, encoding="utf-8")
    return python


def _debian_doc() -> str:
    """The installed version of Debian's Python documentation, installing it with apt-get where it is missing."""
    if not (DOC_ROOT / "library" / "argparse.html").exists():
        if os.geteuid() != 0:
            raise SystemExit(f"Debian's {DEBIAN_DOC} is missing: sudo apt-get install {DEBIAN_DOC}")
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        installed = subprocess.run(["apt-get", "install", "-y", "-q", DEBIAN_DOC], env=env, check=False)
        if installed.returncode != 0:
            subprocess.run(["apt-get", "update", "-q"], env=env, check=True)
            subprocess.run(["apt-get", "install", "-y", "-q", DEBIAN_DOC], env=env, check=True)
    shown = subprocess.run(["dpkg-query", "-W", "-f=${Version}", DEBIAN_DOC], capture_output=True, text=True,
                           check=False)
    return shown.stdout.strip() or "unknown"


def ensure(full: bool = False) -> dict[str, str]:
    """Installs what the corpus needs (nothing on a second run); returns the versions it serves."""
    versions = {DEBIAN_DOC: _debian_doc()}
    _venv("django", f"django=={DJANGO}")
    versions["django"] = DJANGO
    if full:
        _venv("jupyterlab", f"jupyterlab=={JUPYTERLAB}")
        versions["jupyterlab"] = JUPYTERLAB
    return versions


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@contextlib.contextmanager
def _static(root: Path) -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def _wait_http(url: str, child: subprocess.Popen[bytes], log: Path) -> None:
    """Until ``url`` answers (any HTTP status); the child's log in the error if it died or never did."""
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if child.poll() is not None:
            raise RuntimeError(f"{child.args!r} exited {child.returncode}:\n{log.read_text(errors='replace')[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=5):
                return
        except urllib.error.HTTPError:
            return
        except OSError:
            # Not listening yet: polled, since a child server gives no event to wait on.
            time.sleep(0.3)
    raise RuntimeError(f"{url} did not answer in {START_TIMEOUT:.0f} s:\n{log.read_text(errors='replace')[-3000:]}")


@contextlib.contextmanager
def _child(cmd: list[str], cwd: Path, env: dict[str, str], url: str) -> Iterator[None]:
    log = cwd / "server.log"
    with open(log, "wb") as out:
        child = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                 start_new_session=True)
        try:
            _wait_http(url, child, log)
            yield
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGTERM)
            try:
                child.wait(15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.pid, signal.SIGKILL)
                child.wait(5)


# The Django project: one app, one model of eight columns shown whole in the changelist.
_SETTINGS = """
SECRET_KEY = "bench-only-not-secret"
DEBUG = True
ALLOWED_HOSTS = ["127.0.0.1"]
INSTALLED_APPS = ["django.contrib.admin", "django.contrib.auth", "django.contrib.contenttypes",
                  "django.contrib.sessions", "django.contrib.messages", "django.contrib.staticfiles", "shop"]
MIDDLEWARE = ["django.contrib.sessions.middleware.SessionMiddleware", "django.middleware.common.CommonMiddleware",
              "django.middleware.csrf.CsrfViewMiddleware",
              "django.contrib.auth.middleware.AuthenticationMiddleware",
              "django.contrib.messages.middleware.MessageMiddleware"]
ROOT_URLCONF = "urls"
TEMPLATES = [{"BACKEND": "django.template.backends.django.DjangoTemplates", "APP_DIRS": True, "OPTIONS": {
    "context_processors": ["django.template.context_processors.request", "django.contrib.auth.context_processors.auth",
                           "django.contrib.messages.context_processors.messages"]}}]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": "db.sqlite3"}}
STATIC_URL = "static/"
MEDIA_ROOT = "media"
MEDIA_URL = "media/"
USE_TZ = True
TIME_ZONE = "UTC"
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"
"""
_URLS = """
from django.contrib import admin
from django.urls import path
urlpatterns = [path("admin/", admin.site.urls)]
"""
_MODELS = """
from django.db import models

class Order(models.Model):
    number = models.CharField(max_length=20)
    customer = models.CharField(max_length=80)
    email = models.EmailField()
    status = models.CharField(max_length=12, choices=[("new", "New"), ("paid", "Paid"), ("shipped", "Shipped")])
    total = models.DecimalField(max_digits=8, decimal_places=2)
    placed = models.DateField()
    shipped_at = models.DateTimeField(null=True, blank=True)
    invoice = models.FileField(upload_to="invoices", blank=True)

    def __str__(self):
        return self.number
"""
_ADMIN = """
from django.contrib import admin
from .models import Order

@admin.register(Order)
class OrderAdmin(admin.ModelAdmin):
    list_display = ["number", "customer", "email", "status", "total", "placed", "shipped_at", "invoice"]
    list_per_page = 100
    list_filter = ["status"]
    search_fields = ["number", "customer"]
"""
# Rows made from a fixed seed of names, so every run serves the same pages; then a superuser and its session.
_SEED = """
import datetime, decimal, django
django.setup()
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
from django.contrib.auth.models import User
from django.contrib.sessions.backends.db import SessionStore
from shop.models import Order
first = ["Ada", "Grace", "Alan", "Edsger", "Barbara", "Donald", "Frances", "Ken", "Radia", "Tim"]
last = ["Lovelace", "Hopper", "Turing", "Dijkstra", "Liskov", "Knuth", "Allen", "Thompson", "Perlman", "Berners"]
start = datetime.date(2026, 1, 5)
for i in range(ROWS):
    name = f"{first[i % 10]} {last[(i * 3) % 10]}"
    placed = start + datetime.timedelta(days=i * 4)
    shipped = None if i % 3 == 0 else datetime.datetime(placed.year, placed.month, placed.day, 9 + i % 8, 15,
                                                         tzinfo=datetime.timezone.utc)
    Order.objects.create(number=f"SO-{1040 + i}", customer=name, email=f"{name.split()[0].lower()}{i}@example.com",
                         status=["new", "paid", "shipped"][i % 3], total=decimal.Decimal(19 + (i * 37) % 400)
                         + decimal.Decimal("0.95"), placed=placed, shipped_at=shipped,
                         invoice=f"invoices/SO-{1040 + i}.pdf" if i % 2 else "")
user = User.objects.create_superuser("admin", "admin@example.com", "bench-only-password")
session = SessionStore()
session[SESSION_KEY] = str(user.pk)
session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
session[HASH_SESSION_KEY] = user.get_session_auth_hash()
session.create()
print(session.session_key)
"""


def _django_project(root: Path, python: Path) -> str:
    """Writes, migrates and fills the project under ``root``; returns the logged-in session's key."""
    (root / "shop" / "migrations").mkdir(parents=True)
    (root / "settings.py").write_text(_SETTINGS, encoding="utf-8")
    (root / "urls.py").write_text(_URLS, encoding="utf-8")
    (root / "shop" / "__init__.py").write_text("", encoding="utf-8")
    (root / "shop" / "migrations" / "__init__.py").write_text("", encoding="utf-8")
    (root / "shop" / "models.py").write_text(_MODELS, encoding="utf-8")
    (root / "shop" / "admin.py").write_text(_ADMIN, encoding="utf-8")
    (root / "manage.py").write_text(textwrap.dedent("""
        import sys
        from django.core.management import execute_from_command_line
        execute_from_command_line(sys.argv)
    """), encoding="utf-8")
    env = _django_env(root)
    for step in (["makemigrations", "shop"], ["migrate"]):
        subprocess.run([str(python), "manage.py", *step, "-v", "0"], cwd=root, env=env, check=True)
    seeded = subprocess.run([str(python), "-c", _SEED.replace("ROWS", str(ROWS))], cwd=root, env=env,
                            capture_output=True, text=True, check=False)
    if seeded.returncode != 0:
        raise RuntimeError(f"the Django fixture failed:\n{seeded.stderr[-3000:]}")
    return seeded.stdout.strip().splitlines()[-1]


def _django_env(root: Path) -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(root), "PYTHONPATH": str(root),
            "DJANGO_SETTINGS_MODULE": "settings", "PYTHONDONTWRITEBYTECODE": "1"}


@contextlib.contextmanager
def django_admin(tmp: Path) -> Iterator[tuple[str, str]]:
    """The admin on 127.0.0.1:<free port>; yields its base URL and the superuser's session key."""
    python = _venv("django", f"django=={DJANGO}")
    root = tmp / "django"
    session = _django_project(root, python)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    cmd = [str(python), "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload", "--nothreading"]
    with _child(cmd, root, _django_env(root), f"{base}/admin/login/"):
        yield base, session


@contextlib.contextmanager
def jupyterlab(tmp: Path) -> Iterator[str]:
    """JupyterLab on 127.0.0.1:<free port> with no token, every Jupyter folder in ``tmp``; yields its base URL."""
    python = _venv("jupyterlab", f"jupyterlab=={JUPYTERLAB}")
    root = tmp / "jupyter"
    for sub in ("notebooks", "config", "data", "runtime"):
        (root / sub).mkdir(parents=True)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {"PATH": f"{python.parent}:{os.environ.get('PATH', '/usr/bin:/bin')}", "HOME": str(root),
           "JUPYTER_CONFIG_DIR": str(root / "config"), "JUPYTER_DATA_DIR": str(root / "data"),
           "JUPYTER_RUNTIME_DIR": str(root / "runtime"), "JUPYTER_PLATFORM_DIRS": "1"}
    cmd = [str(python), "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
           "--ServerApp.port_retries=0", "--IdentityProvider.token=", "--ServerApp.password=",
           "--ServerApp.disable_check_xsrf=True", f"--ServerApp.root_dir={root / 'notebooks'}",
           # Nothing asks the network: no news, no update check, no extension manager's PyPI look-ups.
           "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
           "--LabApp.extension_manager=readonly"]
    if os.geteuid() == 0:  # CI and this machine run as root, which Jupyter refuses without being told
        cmd.append("--allow-root")
    with _child(cmd, root, env, f"{base}/api/status"):
        yield base


@contextlib.contextmanager
def serving(full: bool = False) -> Iterator[Corpus]:
    """Every page of the corpus served on loopback while the block runs (installing first where needed)."""
    versions = ensure(full)
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="openab-corpus-")))
        docs = stack.enter_context(_static(DOC_ROOT))
        corpus = Corpus(versions=versions)
        corpus.pages += [
            Page("python docs: library index", f"{docs}/library/index.html"),
            Page("python docs: argparse", f"{docs}/library/argparse.html"),
            Page("python docs: os", f"{docs}/library/os.html"),
        ]
        admin, session = stack.enter_context(django_admin(tmp))
        corpus.cookies.append({"name": "sessionid", "value": session, "domain": "127.0.0.1", "path": "/"})
        corpus.pages += [
            Page("django admin: changelist", f"{admin}/admin/shop/order/"),
            Page("django admin: change form", f"{admin}/admin/shop/order/2/change/"),
        ]
        if full:
            lab = stack.enter_context(jupyterlab(tmp))
            corpus.pages.append(Page("jupyterlab: launcher", f"{lab}/lab", ready_text="Markdown File"))
        yield corpus


def main() -> None:
    full = "--full" in sys.argv[1:]
    print(json.dumps(ensure(full), indent=2))


if __name__ == "__main__":
    main()
