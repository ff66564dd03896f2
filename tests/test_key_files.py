"""The key file an operator points at: a plain 0600 file, or a Kubernetes Secret volume's exact layout.

The kubelet mounts a Secret as ``<volume>/key -> ..data/key``, ``..data -> ..<timestamp>``, everything owned by
root with the pod's ``fsGroup`` as group, the file ``0440`` from ``defaultMode: 0400`` and the volume's tmpfs
root ``drwxrwsrwt``. That is built here, as root, and read once as the pod's own uid (the shipped manifest's
10001) by a real `openab run`, and many times as root by the reader itself against what an attacker with a
foot in the volume or the host would plant: links out of the volume, loose modes, another uid's files, a fifo,
a loop, a huge file. The suite runs as root, so the rules are also checked where "ours" and "root's" are one.
"""

from __future__ import annotations

import asyncio
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fake_extension import connect_extension

from openab_browser.core.errors import ConfigurationError
from openab_browser.core.statedir import read_secret_file
from openab_browser.gateway.pairing import read_key_file

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="builds root-owned files as the kubelet does")

TIMESTAMPED = "..2026_12_01_21_00_00.123456789"
POD_UID = 10001  # docker/k8s/base/deployment.yaml's runAsUser, runAsGroup and fsGroup
OTHER_UID = 65534


def secret_volume(parent: Path, files: dict[str, str], *, gid: int = 0, mode: int = 0o440) -> Path:
    """The kubelet's Secret volume with ``files`` in it, as it lays them out (pkg/volume/util/atomic_writer.go,
    then SetVolumeOwnership with the fsGroup ``gid``)."""
    volume = parent / "key"
    volume.mkdir()
    data = volume / TIMESTAMPED
    data.mkdir()
    for name, text in files.items():
        (data / name).write_text(text)
        os.chown(data / name, 0, gid)
        os.chmod(data / name, mode)
    (volume / "..data").symlink_to(TIMESTAMPED)
    for name in files:
        (volume / name).symlink_to(f"..data/{name}")
    for entry in volume.iterdir():
        os.lchown(entry, 0, gid)
    os.chown(volume, 0, gid)
    os.chmod(data, 0o2755)
    os.chmod(volume, 0o3777)  # the tmpfs root: world-writable and sticky, group set by fsGroup
    return volume


@pytest.fixture
def traversable() -> Iterator[Path]:
    """A temporary folder another uid can pass through (pytest's own are 0700 root's)."""
    root = Path(tempfile.mkdtemp(prefix="oab-keys-"))
    os.chmod(root, 0o711)
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_the_kubelets_secret_layout_is_read_and_a_rotation_is_followed(tmp_path: Path) -> None:
    key = secrets.token_hex(32)
    volume = secret_volume(tmp_path, {"key": key + "\n"})
    assert read_key_file(volume / "key") == key
    # The kubelet rotates by writing a new timestamped folder and swapping ..data to it.
    rotated = secrets.token_hex(32)
    newer = volume / "..2026_12_02_09_30_00.987654321"
    newer.mkdir(mode=0o755)
    (newer / "key").write_text(rotated)
    os.chmod(newer / "key", 0o440)
    (volume / "..data_tmp").symlink_to(newer.name)
    os.rename(volume / "..data_tmp", volume / "..data")
    assert read_key_file(volume / "key") == rotated
    # A plain 0600 file of ours stays what it was.
    plain = tmp_path / "plain.key"
    plain.write_text(key)
    plain.chmod(0o600)
    assert read_key_file(plain) == key


def as_uid(uid: int, *, groups: tuple[int, ...] = ()) -> list[str] | None:
    """`openab`'s command line run as ``uid`` (with the ``groups``), with this venv's packages by the system's
    Python of the same version (the venv's own may live under root's home); ``None`` where there is none."""
    if shutil.which("setpriv") is None:
        return None
    system = Path("/usr/bin/python3")
    if not system.exists():
        return None
    version = subprocess.run([system, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True,
                             text=True, check=False, timeout=30).stdout.strip()
    if version != str(sys.version_info[:2]):
        return None
    site = next(p for p in sys.path if p.endswith("site-packages"))
    boot = (f"import runpy, site, sys; site.addsitedir({site!r}); sys.argv[0] = 'openab'; "
            "runpy.run_module('openab_browser.gateway.cli', run_name='__main__')")
    group_flag = f"--groups={','.join(map(str, groups))}" if groups else "--clear-groups"
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", group_flag, str(system), "-c", boot]


@pytest.mark.anyio
async def test_openab_run_as_the_pods_uid_serves_with_the_key_from_a_secret_volume(traversable: Path) -> None:
    python = as_uid(POD_UID, groups=(POD_UID,))
    if python is None:
        pytest.skip("needs setpriv and a system Python of this venv's version")
    key = secrets.token_hex(32)
    volume = secret_volume(traversable, {"key": key + "\n"}, gid=POD_UID)
    state = traversable / "state"
    state.mkdir(mode=0o700)
    os.chown(state, POD_UID, POD_UID)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(state), "LANG": "C.UTF-8"}
    argv = [*python, "run", "--port", "0", "--state-dir", str(state), "--key-file", str(volume / "key")]
    process = await asyncio.create_subprocess_exec(*argv, env=env, cwd=traversable, stdout=subprocess.DEVNULL,
                                                   stderr=subprocess.PIPE, start_new_session=True)
    assert process.stderr is not None
    lines: list[str] = []
    try:
        async with asyncio.timeout(60):
            while not (found := re.search(r"running on http://[^:]+:(\d+)", "".join(lines), re.IGNORECASE)):
                line = (await process.stderr.readline()).decode()
                assert line, "openab run exited while starting:\n" + "".join(lines)
                lines.append(line)
        async with connect_extension(f"ws://127.0.0.1:{found.group(1)}/acp", key) as ext:
            assert (await ext.initialize())["protocolVersion"] == 1
        assert key not in "".join(lines), "an operator's own key is not printed"
    finally:
        if process.returncode is None:
            process.terminate()
        async with asyncio.timeout(30):
            await process.wait()

    # Without the pod's fsGroup the kubelet leaves the file root's alone: one line says what to set.
    os.chown(volume / TIMESTAMPED / "key", 0, 0)
    unreadable = await asyncio.create_subprocess_exec(*argv, env=env, cwd=traversable, stdout=subprocess.DEVNULL,
                                                      stderr=subprocess.PIPE)
    async with asyncio.timeout(60):
        _, err = await unreadable.communicate()
    assert unreadable.returncode == 2 and "fsGroup" in err.decode() and "Traceback" not in err.decode(), err

    # The same uid, a file in the volume that another uid owns: one line, exit 2.
    (volume / TIMESTAMPED / "key").unlink()
    (volume / TIMESTAMPED / "key").write_text(key)
    os.chown(volume / TIMESTAMPED / "key", OTHER_UID, POD_UID)
    os.chmod(volume / TIMESTAMPED / "key", 0o440)
    refused = await asyncio.create_subprocess_exec(*argv, env=env, cwd=traversable, stdout=subprocess.DEVNULL,
                                                   stderr=subprocess.PIPE)
    async with asyncio.timeout(60):
        _, err = await refused.communicate()
    said = err.decode()
    assert refused.returncode == 2, said
    assert f"belongs to uid {OTHER_UID}" in said and "Traceback" not in said and key not in said


def _link_out_of_the_volume(volume: Path) -> None:
    outside = volume.parent / "outside"
    outside.mkdir()
    (outside / "key").write_text(secrets.token_hex(32))
    os.chmod(outside / "key", 0o600)
    (volume / "key").unlink()
    (volume / "key").symlink_to("..data/../../outside/key")


def _link_to(target: str) -> Callable[[Path], None]:
    def plant(volume: Path) -> None:
        (volume / "key").unlink()
        (volume / "key").symlink_to(target)
    return plant


def _data_to(target: str) -> Callable[[Path], None]:
    def plant(volume: Path) -> None:
        (volume / "..data").unlink()
        (volume / "..data").symlink_to(target)
    return plant


def _file_mode(mode: int, gid: int = 0) -> Callable[[Path], None]:
    def plant(volume: Path) -> None:
        os.chown(volume / TIMESTAMPED / "key", 0, gid)
        os.chmod(volume / TIMESTAMPED / "key", mode)
    return plant


def _owned_by_another_uid(name: str) -> Callable[[Path], None]:
    def plant(volume: Path) -> None:
        os.lchown(volume / name, OTHER_UID, OTHER_UID)
    return plant


def _replace_file(make: Callable[[Path], None]) -> Callable[[Path], None]:
    def plant(volume: Path) -> None:
        (volume / TIMESTAMPED / "key").unlink()
        make(volume / TIMESTAMPED / "key")
    return plant


def _loop(volume: Path) -> None:
    (volume / "key").unlink()
    (volume / "key").symlink_to("loop")
    (volume / "loop").symlink_to("key")


def _huge(path: Path) -> None:
    with path.open("wb") as f:
        f.truncate(1 << 30)  # a sparse GiB: only the bound keeps it out of memory
    os.chmod(path, 0o440)


def _world_writable_folder(volume: Path) -> None:
    os.chmod(volume / TIMESTAMPED, 0o777)


ATTACKS: dict[str, tuple[Callable[[Path], None], str]] = {
    "a link leading out of the volume": (_link_out_of_the_volume, "leading out of"),
    "a link to /etc/passwd": (_link_to("/etc/passwd"), "leading out of"),
    "..data to an absolute folder": (_data_to("/etc"), "leading out of"),
    "..data up and back into the volume's parent": (_data_to(".."), "leading out of"),
    "a link loop": (_loop, "symbolic links"),
    "a file a group not ours can write": (_file_mode(0o460, OTHER_UID), "written by other users"),
    "a file a group not ours can read": (_file_mode(0o440, OTHER_UID), "read by other users"),
    "a file others can write": (_file_mode(0o442), "written by other users"),
    "a file others can read (the default defaultMode 0644)": (_file_mode(0o644), "defaultMode: 0400"),
    "a file of another uid": (_owned_by_another_uid(f"{TIMESTAMPED}/key"), f"belongs to uid {OTHER_UID}"),
    "a link of another uid": (_owned_by_another_uid("key"), f"belongs to uid {OTHER_UID}"),
    "a folder of another uid": (_owned_by_another_uid(TIMESTAMPED), f"belongs to uid {OTHER_UID}"),
    "a folder anyone can write to, not sticky": (_world_writable_folder, "other users can write to"),
    "a fifo": (_replace_file(lambda p: os.mkfifo(p, 0o440)), "not a regular file"),
    "a folder in place of the file": (_replace_file(lambda p: p.mkdir(mode=0o500)), "not a regular file"),
    "a huge file": (_replace_file(_huge), "larger than 4096 bytes"),
}


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_what_an_attacker_plants_in_the_volume_is_refused_in_one_line(tmp_path: Path, attack: str) -> None:
    key = secrets.token_hex(32)
    volume = secret_volume(tmp_path, {"key": key})
    plant, says = ATTACKS[attack]
    plant(volume)
    with pytest.raises(ConfigurationError, match=re.escape(says)) as refused:
        read_key_file(volume / "key")
    assert "\n" not in str(refused.value) and key not in str(refused.value)


def test_a_plain_key_file_keeps_its_rules_for_any_caller(tmp_path: Path) -> None:
    plain = tmp_path / "metrics.key"
    plain.write_text("k" * 40)
    plain.chmod(0o640)
    os.chown(plain, 0, OTHER_UID)  # group-readable by a group that is not ours
    with pytest.raises(ConfigurationError, match="read by other users"):
        read_secret_file(plain, what="the metrics key file")
    plain.chmod(0o600)
    assert read_secret_file(plain, what="the metrics key file") == "k" * 40
    with pytest.raises(ConfigurationError, match=r"the metrics key file .* cannot be read"):
        read_secret_file(tmp_path / "missing", what="the metrics key file")


def test_the_secret_has_one_name_on_the_command_line() -> None:
    """`--key-file` beside `--metrics-key-file`, as the panel's Key field and OPENAB_ACP_AUTH_KEY say it; the
    flag's earlier name `--token-file` is still taken but no longer shown."""
    for command in ("run", "doctor"):
        shown = subprocess.run([sys.executable, "-m", "openab_browser.gateway.cli", command, "--help"],
                               capture_output=True, text=True, timeout=60)
        assert shown.returncode == 0, shown.stderr
        assert "--key-file" in shown.stdout and "token-file" not in shown.stdout
