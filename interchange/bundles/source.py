"""Open a bundle folder or .zip and hand out its files as decoded, numbered lines.

Safety of zips is checked from the central directory BEFORE anything is read: an entry
with an absolute path or a `..` component, a total uncompressed size over
`SNAGLIST_IMPORT_MAX_BUNDLE_BYTES` (2 GiB), a compression ratio over
`SNAGLIST_IMPORT_MAX_ZIP_RATIO` (200:1 for members over 1 MiB), the encryption flag, a
compression method other than stored, deflate, bzip2 or LZMA (e.g. 93, zstd), or two
entries with one name (after dropping `./` and ignoring case: `unzip` would show one,
the import read another) refuses the whole zip. Members are read into memory with a hard
limit and nothing is ever extracted to disk; a member that inflates to another size than
it declared, fails its CRC-32 or cannot be inflated refuses the zip with its name
(`BundleError`, never a traceback).

Text: UTF-8 with or without a BOM; lines end in LF, CRLF or CR. A line longer than
`SNAGLIST_IMPORT_MAX_LINE_BYTES` (10 MiB) or bytes that are not UTF-8 are problems that
name the line (and the byte offset).
"""

from __future__ import annotations

import re
import zipfile
import zlib
from abc import ABC, abstractmethod
from pathlib import Path, PurePosixPath

from django.conf import settings

from interchange.bundles.problems import BundleError, Problems

BOM = b"\xef\xbb\xbf"
_MIB = 1024 * 1024
_BREAK = re.compile(rb"\r\n|\r|\n")


def _setting(name: str, default: int) -> int:
    return int(getattr(settings, name, default))


def max_line_bytes() -> int:
    return _setting("SNAGLIST_IMPORT_MAX_LINE_BYTES", 10 * _MIB)


def max_bundle_bytes() -> int:
    return _setting("SNAGLIST_IMPORT_MAX_BUNDLE_BYTES", 2 * 1024 * _MIB)


def max_zip_ratio() -> int:
    return _setting("SNAGLIST_IMPORT_MAX_ZIP_RATIO", 200)


class BundleSource(ABC):
    """The files of one bundle, by name (`questions.jsonl`), wherever they live."""

    label: str

    @abstractmethod
    def exists(self, name: str) -> bool:
        """Return True when the bundle holds a file of that name."""

    @abstractmethod
    def read_bytes(self, name: str) -> bytes:
        """Return the file's bytes (raises BundleError when it cannot be read)."""


class FolderSource(BundleSource):
    def __init__(self, root: Path) -> None:
        self.root = root
        self.label = str(root)

    def exists(self, name: str) -> bool:
        return (self.root / name).is_file()

    def read_bytes(self, name: str) -> bytes:
        return (self.root / name).read_bytes()


class ZipSource(BundleSource):
    """A zip whose files sit at its root or inside one top-level folder."""

    def __init__(self, path: Path, members: dict[str, zipfile.ZipInfo]) -> None:
        self.path = path
        self.label = str(path)
        self.members = members

    def exists(self, name: str) -> bool:
        return name in self.members

    def read_bytes(self, name: str) -> bytes:
        """Return the member's bytes; BundleError naming it when they cannot be trusted.

        zipfile checks the CRC-32 when a member is read to its end (read past the declared
        size, so it always is); a size that is not the declared one is refused here.
        """
        info = self.members[name]
        try:
            with zipfile.ZipFile(self.path) as archive, archive.open(info) as stream:
                data = stream.read(info.file_size + 1)
        except zipfile.BadZipFile as exc:
            # "Bad CRC-32 for file ...": also what a size smaller than the data gives, as
            # zipfile stops at the declared size; or a local header unlike the directory's.
            raise BundleError(
                [
                    f"{name}:0: zip: damaged member: {exc} (its data, declared size and "
                    "CRC-32 do not agree); refused"
                ]
            ) from exc
        except (zlib.error, EOFError, OSError, RuntimeError, NotImplementedError) as exc:
            raise BundleError(
                [f"{name}:0: zip: member cannot be inflated ({exc}); refused"]
            ) from exc
        if len(data) != info.file_size:
            shown = f"more than {info.file_size}" if len(data) > info.file_size else len(data)
            raise BundleError(
                [f"{name}:0: zip: declares {info.file_size} bytes but inflates to {shown}; refused"]
            )
        return data


def _unsafe_name(name: str) -> bool:
    if name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", name):
        return True
    return any(part == ".." for part in re.split(r"[\\/]", name))


# Methods zipfile inflates with the standard library (zlib, bz2, lzma).
_METHODS = {
    zipfile.ZIP_STORED: "stored",
    zipfile.ZIP_DEFLATED: "deflate",
    zipfile.ZIP_BZIP2: "bzip2",
    zipfile.ZIP_LZMA: "LZMA",
}


def normal_name(name: str) -> str:
    """Return a zip entry's name as `unzip` extracts it: `\\` read as `/`, empty and `.`
    parts dropped (`./questions.jsonl` is `questions.jsonl`)."""
    return "/".join(part for part in re.split(r"[\\/]", name) if part not in ("", "."))


def member_key(name: str) -> str:
    """Return the name two zip entries must not share: `normal_name` case folded
    (`Questions.jsonl` and `questions.jsonl` are one file on a case-insensitive disk)."""
    return normal_name(name).casefold()


def _entry_problems(label: str, info: zipfile.ZipInfo) -> list[str]:
    problems = []
    if _unsafe_name(info.filename):
        problems.append(
            f"{label}:0: zip: entry {info.filename!r} has an absolute path or '..'; "
            "refused (path traversal)"
        )
    if info.flag_bits & 0x1:
        problems.append(
            f"{label}:0: zip: entry {info.filename!r} is encrypted; refused (a bundle "
            "carries no secrets: zip it without a password)"
        )
    if info.compress_type not in _METHODS:
        problems.append(
            f"{label}:0: zip: entry {info.filename!r} uses compression method "
            f"{info.compress_type}, which is not supported ({', '.join(_METHODS.values())} "
            "are); refused"
        )
    if info.file_size > _MIB and info.file_size > max_zip_ratio() * max(info.compress_size, 1):
        problems.append(
            f"{label}:0: zip: entry {info.filename!r} expands {info.file_size} bytes from "
            f"{info.compress_size}: compression ratio over {max_zip_ratio()}:1 "
            "(zip bomb?); refused"
        )
    return problems


def open_zip(path: Path) -> ZipSource:
    """Check a zip's central directory and return a source over it, or raise BundleError."""
    label = path.name
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError) as exc:
        raise BundleError([f"{label}:0: zip: not a readable zip file ({exc})"]) from exc
    with archive:
        infos = archive.infolist()
    problems: list[str] = []
    total = 0
    seen: dict[str, str] = {}
    for info in infos:
        problems.extend(_entry_problems(label, info))
        total += info.file_size
        key = member_key(info.filename)
        if key in seen:
            problems.append(
                f"{label}:0: zip: entry {info.filename!r} has the same name as "
                f"{seen[key]!r}; two entries of one name are refused (unzip and the import "
                "could read different ones)"
            )
        else:
            seen[key] = info.filename
    if total > max_bundle_bytes():
        problems.append(
            f"{label}:0: zip: uncompressed size {total} bytes exceeds the cap of "
            f"{max_bundle_bytes()} bytes; refused"
        )
    if problems:
        raise BundleError(problems)
    files = {normal_name(i.filename): i for i in infos if not i.is_dir()}  # unique above
    prefix = ""
    if "manifest.json" not in files:
        candidates = [n for n in files if PurePosixPath(n).name == "manifest.json"]
        if len(candidates) == 1 and len(PurePosixPath(candidates[0]).parts) == 2:
            prefix = PurePosixPath(candidates[0]).parts[0] + "/"
    members = {
        n[len(prefix) :]: i
        for n, i in files.items()
        if n.startswith(prefix) and "/" not in n[len(prefix) :]
    }
    return ZipSource(path, members)


def open_source(path: str | Path) -> BundleSource:
    """Return a source for a bundle folder or .zip; BundleError when it is neither."""
    path = Path(path)
    if path.is_dir():
        return FolderSource(path)
    if path.is_file() and (path.suffix.lower() == ".zip" or zipfile.is_zipfile(path)):
        return open_zip(path)
    raise BundleError([f"{path}:0: path: not a bundle folder or .zip file"])


def decode_lines(
    name: str, data: bytes, problems: Problems, *, keepends: bool = False, partial: bool = False
) -> list[tuple[int, str]] | None:
    """Split UTF-8 bytes into (line number, text) pairs; None when any line is unusable.

    A leading BOM is dropped. Lines break at LF, CRLF or CR (bytes.splitlines breaks at
    exactly these three). With `keepends` the break characters stay, for the csv module.
    With `partial` (JSONL, one record per line) the usable lines are returned even when
    others were reported, so one bad line does not make every row that refers to the
    file's other records look wrong too; the import still fails on the reported line.
    """
    if data.startswith(BOM):
        data = data[len(BOM) :]
        offset = len(BOM)
    else:
        offset = 0
    cap = max_line_bytes()
    out: list[tuple[int, str]] = []
    ok = True
    for number, raw in enumerate(data.splitlines(keepends=True), start=1):
        body = raw.rstrip(b"\r\n")
        if len(body) > cap:
            problems.add(name, number, "line", f"longer than the cap of {cap} bytes; refused")
            ok = False
        else:
            try:
                text = raw.decode("utf-8") if keepends else body.decode("utf-8")
            except UnicodeDecodeError as exc:
                problems.add(
                    name,
                    number,
                    "encoding",
                    f"not valid UTF-8: byte 0x{raw[exc.start]:02x} at byte {exc.start + 1} of "
                    f"the line (byte offset {offset + exc.start} in the file)",
                )
                ok = False
            else:
                out.append((number, text))
        offset += len(raw)
    return out if ok or partial else None
