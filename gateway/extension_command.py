"""`openab extension path|pack`: the side panel's own files, as this installation carries them.

The wheel installs the extension as ``openab/extension`` beside ``openab/gateway``; in a checkout it is the
``extension/`` folder beside ``gateway/``. Either way it is this module's grandparent's ``extension`` folder, so
both commands hand a person exactly the extension that matches the pod's version of the wire contract.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

__all__ = ["extension_dir", "pack", "register"]

MANIFEST = "manifest.json"


def extension_dir() -> Path:
    return Path(__file__).resolve().parent.parent / "extension"


def register(commands: Any) -> None:
    extension = commands.add_parser("extension", help="the Chrome side panel: where it is, or a zip of it")
    actions = extension.add_subparsers(dest="extension_action", required=True, metavar="ACTION")
    path = actions.add_parser(
        "path", help="print the unpacked extension's folder (chrome://extensions > Load unpacked)")
    path.set_defaults(handler=_path)
    pack_parser = actions.add_parser(
        "pack", help="write the extension as a zip, to load unpacked after unzipping or to upload to a store")
    pack_parser.add_argument("--output", "-o", metavar="ZIP",
                             help="where to write it (default: ./openab-extension-<version>.zip)")
    pack_parser.set_defaults(handler=_pack)


def _folder() -> Path | None:
    folder = extension_dir()
    if not (folder / MANIFEST).is_file():
        print(f"openab: the extension is not at {folder} (no {MANIFEST}): reinstall openab "
              "(`pip install --force-reinstall openab`)", file=sys.stderr)
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
    output = Path(args.output) if args.output else Path.cwd() / f"openab-extension-{version}.zip"
    try:
        count = pack(folder, output)
    except OSError as exc:
        print(f"openab: could not write {output}: {exc}", file=sys.stderr)
        return 1
    print(output.resolve())
    print(f"{count} files, version {version}. Unzip it and load the folder in chrome://extensions (Developer mode "
          "> Load unpacked), or upload the zip to a store.", file=sys.stderr)
    return 0


def pack(folder: Path, output: Path) -> int:
    """Zip ``folder`` with ``manifest.json`` at the zip's root, in a stable order, with fixed timestamps (the same
    extension always makes the same zip); returns how many files it holds. Only regular files are taken: a
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
            archive.writestr(info, path.read_bytes())
    partial.replace(output)  # a person never finds half a zip under the final name
    return len(files)
