"""Semantic versions (``library/semverlib.go``, parsing as ``blang/semver/v4``)."""

from __future__ import annotations

from functools import lru_cache

from webhook.cel.library.base import LibraryError, OpaqueValue, Overload
from webhook.gocompat.fmt import go_quote

_NUMBERS = set("0123456789")
_ALPHANUM = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-") | _NUMBERS
_MAX_UINT64 = 2**64 - 1


class Semver(OpaqueValue):
    """major.minor.patch[-pre]; build metadata is dropped (it never affects equality)."""

    cel_type = "kubernetes.Semver"
    __slots__ = ("major", "minor", "patch", "pre")

    def __init__(self, major: int, minor: int, patch: int, pre: tuple[int | str, ...]) -> None:
        self.major, self.minor, self.patch, self.pre = major, minor, patch, pre

    @property
    def key(self) -> str:
        core = f"{self.major}.{self.minor}.{self.patch}"
        return core + ("-" + ".".join(map(str, self.pre)) if self.pre else "")

    @classmethod
    def from_key(cls, key: str) -> Semver:
        return _parse(key)

    def compare(self, other: Semver) -> int:
        mine, theirs = (self.major, self.minor, self.patch), (other.major, other.minor, other.patch)
        if mine != theirs:
            return -1 if mine < theirs else 1
        if not self.pre or not other.pre:
            return (not self.pre) - (not other.pre)
        for a, b in zip(self.pre, other.pre):
            if a == b:
                continue
            if isinstance(a, int) != isinstance(b, int):
                return -1 if isinstance(a, int) else 1
            return -1 if a < b else 1  # type: ignore[operator]
        return (len(self.pre) > len(other.pre)) - (len(self.pre) < len(other.pre))


def _uint(text: str) -> int:
    if not text or not text.isascii() or not text.isdigit():
        raise LibraryError(f'strconv.ParseUint: parsing {go_quote(text)}: invalid syntax')
    value = int(text)
    if value > _MAX_UINT64:
        raise LibraryError(f'strconv.ParseUint: parsing {go_quote(text)}: value out of range')
    return value


def _number(text: str, what: str) -> int:
    if not set(text) <= _NUMBERS:
        raise LibraryError(f"Invalid character(s) found in {what} number {go_quote(text)}")
    if len(text) > 1 and text[0] == "0":
        raise LibraryError(f"{what.capitalize()} number must not contain leading zeroes {go_quote(text)}")
    return _uint(text)


@lru_cache(maxsize=4096)
def _parse(text: str) -> Semver:
    """``semver.Parse``."""
    if not text:
        raise LibraryError("Version string empty")
    parts = text.split(".", 2)
    if len(parts) != 3:
        raise LibraryError("No Major.Minor.Patch elements found")
    major = _number(parts[0], "major")
    minor = _number(parts[1], "minor")
    patch_text, build = parts[2], None
    if "+" in patch_text:
        patch_text, build = patch_text.split("+", 1)
    pre_text = None
    if "-" in patch_text:
        patch_text, pre_text = patch_text.split("-", 1)
    patch = _number(patch_text, "patch")
    pre: list[int | str] = []
    for item in pre_text.split(".") if pre_text is not None else ():
        if not item:
            raise LibraryError("Prerelease is empty")
        if set(item) <= _NUMBERS:
            if len(item) > 1 and item[0] == "0":
                raise LibraryError(f"Numeric PreRelease version must not contain leading zeroes {go_quote(item)}")
            pre.append(_uint(item))
        elif set(item) <= _ALPHANUM:
            pre.append(item)
        else:
            raise LibraryError(f"Invalid character(s) found in prerelease {go_quote(item)}")
    for item in build.split(".") if build is not None else ():
        if not item:
            raise LibraryError("Build meta data is empty")
        if not set(item) <= _ALPHANUM:
            raise LibraryError(f"Invalid character(s) found in build meta data {go_quote(item)}")
    return Semver(major, minor, patch, tuple(pre))


def _normalize(text: str) -> str:
    """Kubernetes' ``normalizeAndParse`` preprocessing (no whitespace trimming)."""
    text = text.removeprefix("v")
    parts = text.split(".", 2)
    for i, part in enumerate(parts):
        if len(part) > 1:
            part = part.lstrip("0")
            if not part or part[0] not in _NUMBERS:
                part = "0" + part
            parts[i] = part
    if len(parts) < 3:
        if any(c in parts[-1] for c in "+-"):
            raise LibraryError("short version cannot contain PreRelease/Build meta data")
        parts += ["0"] * (3 - len(parts))
    return ".".join(parts)


def semver(text: str, normalize: bool = False) -> Semver:
    return _parse(_normalize(text) if normalize else text)


def is_semver(text: str, normalize: bool = False) -> bool:
    try:
        semver(text, normalize)
    except LibraryError:
        return False
    return True


def compare_to(v: Semver, other: Semver) -> int:
    return v.compare(other)


def is_greater_than(v: Semver, other: Semver) -> bool:
    return v.compare(other) == 1


def is_less_than(v: Semver, other: Semver) -> bool:
    return v.compare(other) == -1


S = Semver.cel_type
TYPES = (Semver,)
OVERLOADS = (
    Overload("semver", "string_to_semver", ("string",), S, semver),
    Overload("semver", "string_bool_to_semver", ("string", "bool"), S, semver),
    Overload("isSemver", "is_semver_string", ("string",), "bool", is_semver),
    Overload("isSemver", "is_semver_string_bool", ("string", "bool"), "bool", is_semver),
    Overload("isGreaterThan", "semver_is_greater_than", (S, S), "bool", is_greater_than, member=True),
    Overload("isLessThan", "semver_is_less_than", (S, S), "bool", is_less_than, member=True),
    Overload("compareTo", "semver_compare_to", (S, S), "int", compare_to, member=True),
    Overload("major", "semver_major", (S,), "int", lambda v: v.major, member=True),
    Overload("minor", "semver_minor", (S,), "int", lambda v: v.minor, member=True),
    Overload("patch", "semver_patch", (S,), "int", lambda v: v.patch, member=True),
)
