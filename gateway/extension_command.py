"""`openab extension path|pack`: the side panel's own files, as this installation carries them.

The wheel installs the extension as ``openab_browser/extension`` beside ``openab_browser/gateway``; in a checkout it is
the
``extension/`` folder beside ``gateway/``. Either way it is this module's grandparent's ``extension`` folder, so
both commands hand a person exactly the extension that matches the pod's version of the wire contract.

`pack` writes two builds, because the manifest's fixed public ``key`` (the same extension id on every machine,
which enterprise policies and the pod's allowed origins name) is one the Chrome Web Store refuses in an upload: the
store assigns its own id. The developer build keeps the key, for Load unpacked and enterprise installs; the store
build has none.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

__all__ = ["BUILDS", "extension_dir", "pack", "register"]

MANIFEST = "manifest.json"
# Each build: its name in the zip's file name, whether its manifest keeps `key`, and what it is for.
BUILDS = (
    ("developer", True, "keeps the manifest's key, so the id is the fixed one: unzip it and Load unpacked in "
                        "chrome://extensions (Developer mode), or install it by enterprise policy"),
    ("store", False, "no key in its manifest: upload this one to the Chrome Web Store, which gives it the store's id"),
)


def extension_dir() -> Path:
    return Path(__file__).resolve().parent.parent / "extension"


def register(commands: Any) -> None:
    extension = commands.add_parser("extension", help="the Chrome side panel: where it is, or a zip of it")
    actions = extension.add_subparsers(dest="extension_action", required=True, metavar="ACTION")
    path = actions.add_parser(
        "path", help="print the unpacked extension's folder (chrome://extensions > Load unpacked)")
    path.set_defaults(handler=_path)
    pack_parser = actions.add_parser(
        "pack", help="write the extension as two zips: a developer build (fixed id, Load unpacked) and a store build")
    pack_parser.add_argument("--output-dir", "-o", metavar="DIR",
                             help="the folder to write openab-extension-<version>-{developer,store}.zip in "
                                  "(default: this one)")
    pack_parser.set_defaults(handler=_pack)


def _folder() -> Path | None:
    folder = extension_dir()
    if not (folder / MANIFEST).is_file():
        print(f"openab: the extension is not at {folder} (no {MANIFEST}): reinstall openab "
              "(`pip install --force-reinstall openab-browser`)", file=sys.stderr)
        return None
    return folder


def _path(_args: argparse.Namespace) -> int:
    folder = _folder()
    if folder is None:
        return 1
    print(folder)
    return 0


def _pack(args: argparse.Namespace) -> int:
    import json

    folder = _folder()
    if folder is None:
        return 1
    try:
        version = str(json.loads((folder / MANIFEST).read_text(encoding="utf-8"))["version"])
    except (OSError, ValueError, KeyError) as exc:
        print(f"openab: {folder / MANIFEST} is unreadable ({exc}): reinstall openab", file=sys.stderr)
        return 1
    where = Path(args.output_dir) if args.output_dir else Path.cwd()
    written = []
    for name, keep_key, what in BUILDS:
        output = where / f"openab-extension-{version}-{name}.zip"
        try:
            count = pack(folder, output, keep_key=keep_key)
        except (OSError, ValueError) as exc:
            print(f"openab: could not write {output}: {exc}", file=sys.stderr)
            return 1
        written.append((name, output.resolve(), count, what))
    for name, output, _count, _what in written:
        print(f"{name}: {output}")
    for name, _output, count, what in written:
        print(f"The {name} build ({count} files, version {version}) {what}.", file=sys.stderr)
    return 0


def pack(folder: Path, output: Path, *, keep_key: bool = True) -> int:
    """Zip ``folder`` with ``manifest.json`` at the zip's root, in a stable order, with fixed timestamps (the same
    extension always makes the same zip); returns how many files it holds. Without ``keep_key`` the manifest goes
    in without its ``key`` (the store build), its other fields as they are. Only regular files are taken: a
    symbolic link in the folder is never followed out of it. A checkout's ``defaults.json`` (a developer's pod
    URL and key, see tests/browser/harness.py) is never packed."""
    import zipfile

    files = sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()
                   and not any(part.startswith(".") for part in p.relative_to(folder).parts)
                   and "__pycache__" not in p.parts and p.relative_to(folder).as_posix() != "defaults.json")
    output.parent.mkdir(parents=True, exist_ok=True)
    partial = output.with_name(output.name + ".part")
    with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path in files:
            info = zipfile.ZipInfo(path.relative_to(folder).as_posix(), date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            data = path.read_bytes()
            if not keep_key and path == folder / MANIFEST:
                data = _without_key(data)
            archive.writestr(info, data)
    partial.replace(output)  # a person never finds half a zip under the final name
    return len(files)


def _without_key(manifest: bytes) -> bytes:
    import json

    fields = json.loads(manifest)
    fields.pop("key", None)
    return (json.dumps(fields, indent=2, ensure_ascii=False) + "\n").encode()
