"""From an uploaded file to passages: read its text and headings (Markdown, HTML, plain text, PDF), then cut it into
bounded passages under their heading paths.

Everything here is bounded by what the code controls, so a hostile file is refused with a clear
:class:`KnowledgeReadError` instead of holding a worker: the file's bytes (``KNOWLEDGE_MAX_FILE_BYTES``), a PDF's
pages (``KNOWLEDGE_MAX_PDF_PAGES``) and pypdf's own decompression and parsing budgets (tightened in :data:`PDF_LIMITS`,
so a zip-bomb stream stops at a few megabytes), the text read out of any file (:data:`MAX_TEXT_CHARS`), HTML's
nesting (:data:`MAX_HTML_DEPTH`, counted as the stream is read: Python's parser itself does not recurse) and the
passages of one document (:data:`MAX_PASSAGES`).
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import PurePath
from typing import Any

import pypdf
from django.conf import settings

from common.errors import DomainError
from knowledge.models import DocumentKind

PASSAGE_CHARS = 1200  # a passage's most characters: a few paragraphs, what a citation quotes from
MAX_TEXT_CHARS = 2_000_000  # the most text read out of one file, whatever its kind
MAX_HTML_DEPTH = 200
MAX_PASSAGES = 3_000  # of one document
HEADING_SEPARATOR = " › "
SUFFIXES = {
    ".md": DocumentKind.MARKDOWN,
    ".markdown": DocumentKind.MARKDOWN,
    ".html": DocumentKind.HTML,
    ".htm": DocumentKind.HTML,
    ".txt": DocumentKind.TEXT,
    ".text": DocumentKind.TEXT,
    ".pdf": DocumentKind.PDF,
}
# pypdf's budgets, far below its defaults (75 MB a stream): a help centre's PDF is text, a few MB decoded at most.
PDF_LIMITS: dict[str, Any] = {
    "zlib_maximum_output_length": 20_000_000,
    "lzw_maximum_output_length": 20_000_000,
    "run_length_maximum_output_length": 20_000_000,
    "brotli_maximum_output_length": 20_000_000,
    "array_based_stream_maximum_output_length": 20_000_000,
    "maximum_declared_stream_length": 20_000_000,
    "stream_decoding_work_maximum_length": 60_000_000,
    "jbig2dec_binary": None,  # images carry no text to read: never start a decoder process
}

ERROR_KIND = "Unsupported file type {name!r}: upload Markdown (.md), HTML (.html), plain text (.txt) or PDF (.pdf)."
ERROR_TOO_LARGE = "The file is larger than the limit of {limit} bytes."
ERROR_NOT_UTF8 = "The file is not UTF-8 text."
ERROR_TOO_MUCH_TEXT = "The file holds more than {limit} characters of text."
ERROR_HTML_TOO_DEEP = "The HTML is nested more than {limit} elements deep."
ERROR_PDF_UNREADABLE = "The PDF could not be read: {reason}"
ERROR_PDF_ENCRYPTED = "The PDF is encrypted: upload it without a password."
ERROR_PDF_TOO_MANY_PAGES = "The PDF has more than {limit} pages."
ERROR_TOO_MANY_PASSAGES = "The document would make more than {limit} passages: split it into smaller files."
ERROR_NO_TEXT = "The file holds no text to search."


class KnowledgeReadError(DomainError):
    """A file that cannot become passages: its kind, size, shape or content (400, code ``knowledge_unreadable``)."""

    code = "knowledge_unreadable"


@dataclass(frozen=True)
class Section:
    """Text under one heading path, its paragraphs separated by blank lines."""

    path: tuple[str, ...]
    text: str


@dataclass(frozen=True)
class Reading:
    """What a file says: its title (blank when it names none) and its sections in order."""

    title: str
    sections: list[Section]


@dataclass(frozen=True)
class Piece:
    """One passage to store."""

    heading: str
    text: str


def kind_of(file_name: str) -> DocumentKind:
    """The kind a file name's suffix says, or :class:`KnowledgeReadError` naming the file."""
    kind = SUFFIXES.get(PurePath(file_name).suffix.lower())
    if kind is None:
        raise _refuse(ERROR_KIND.format(name=file_name))
    return kind


def _refuse(message: str) -> KnowledgeReadError:
    return KnowledgeReadError(message, fields={"file": [message]})


def _decoded(data: bytes) -> str:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise _refuse(ERROR_NOT_UTF8) from None
    return _bounded(text)


def _bounded(text: str) -> str:
    if len(text) > MAX_TEXT_CHARS:
        raise _refuse(ERROR_TOO_MUCH_TEXT.format(limit=MAX_TEXT_CHARS))
    return text.replace("\x00", "").replace("\r\n", "\n").replace("\r", "\n")  # no database stores NUL


_ATX = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t#]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")


def _headed(path: list[tuple[int, str]], level: int, title: str) -> list[tuple[int, str]]:
    return [*[(lvl, text) for lvl, text in path if lvl < level], (level, title)]


def read_markdown(text: str) -> Reading:
    """ATX (``## Refunds``) and setext headings, outside fenced code, start sections; the first level-1 heading is
    the title."""
    sections: list[Section] = []
    path: list[tuple[int, str]] = []
    lines: list[str] = []
    title = ""
    fenced = False

    def close() -> None:
        if body := "\n".join(lines).strip():
            sections.append(Section(tuple(text for _, text in path), body))
        lines.clear()

    for line in text.split("\n"):
        if _FENCE.match(line):
            fenced = not fenced
        heading = None if fenced else _ATX.match(line)
        underline = None if fenced or not lines or not lines[-1].strip() else _SETEXT.match(line)
        if heading:
            level, name = len(heading.group(1)), heading.group(2).strip()
        elif underline:
            level, name = (1 if underline.group(1)[0] == "=" else 2), lines.pop().strip()
        else:
            lines.append(line)
            continue
        close()
        path = _headed(path, level, name)
        title = title or (name if level == 1 else "")
    close()
    return Reading(title, sections)


def read_text(text: str) -> Reading:
    return Reading("", [Section((), text.strip())] if text.strip() else [])


class _HtmlReader(HTMLParser):
    """Headings (``h1``-``h6``) start sections, block elements end paragraphs, scripts and styles are skipped. The
    open elements are counted as they come (one an end tag never closes counts too): past :data:`MAX_HTML_DEPTH` the
    document is refused."""

    VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"})
    SELF_CLOSING = frozenset({"p", "li", "dt", "dd", "tr", "td", "th", "option"})  # an open one closes at the next
    SKIPPED = frozenset({"script", "style", "template", "noscript", "head", "svg"})
    BLOCKS = frozenset({"p", "div", "li", "tr", "section", "article", "blockquote", "pre", "table", "ul", "ol", "br"})
    HEADINGS = {f"h{level}": level for level in range(1, 7)}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.open: list[str] = []
        self.skipping = 0
        self.title = ""
        self.in_title = False
        self.heading_level = 0
        self.heading_text: list[str] = []
        self.path: list[tuple[int, str]] = []
        self.buffer: list[str] = []
        self.sections: list[Section] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self.VOID:
            if tag == "br":
                self.buffer.append("\n")
            return
        if tag in self.SELF_CLOSING and self.open and self.open[-1] == tag:
            self.open.pop()
        self.open.append(tag)
        if len(self.open) > MAX_HTML_DEPTH:
            raise _refuse(ERROR_HTML_TOO_DEEP.format(limit=MAX_HTML_DEPTH))
        if tag in self.SKIPPED:
            self.skipping += 1
        elif tag == "title":
            self.in_title = True
        elif tag in self.HEADINGS and not self.skipping:
            self._close()
            self.heading_level, self.heading_text = self.HEADINGS[tag], []
        elif tag in self.BLOCKS:
            self.buffer.append("\n\n")

    def handle_endtag(self, tag: str) -> None:
        if tag not in self.open:
            return
        while self.open:
            closed = self.open.pop()
            if closed in self.SKIPPED:
                self.skipping -= 1
            if closed == tag:
                break
        if tag == "title":
            self.in_title = False
        elif tag in self.HEADINGS and self.heading_level:
            name = " ".join("".join(self.heading_text).split())
            if name:
                self.path = _headed(self.path, self.heading_level, name)
            self.heading_level = 0
        elif tag in self.BLOCKS:
            self.buffer.append("\n\n")

    def handle_data(self, data: str) -> None:
        if self.in_title:
            self.title += data
        elif self.skipping:
            return
        elif self.heading_level:
            self.heading_text.append(data)
        else:
            self.buffer.append(data)

    def _close(self) -> None:
        paragraphs = (" ".join(part.split()) for part in "".join(self.buffer).split("\n\n"))
        if body := "\n\n".join(part for part in paragraphs if part):
            self.sections.append(Section(tuple(text for _, text in self.path), body))
        self.buffer = []

    def reading(self) -> Reading:
        self._close()
        first_h1 = next((text for level, text in self.path if level == 1), "")
        return Reading(" ".join(self.title.split()) or first_h1, self.sections)


def read_html(text: str) -> Reading:
    reader = _HtmlReader()
    reader.feed(text)
    reader.close()
    return reader.reading()


def read_pdf(data: bytes) -> Reading:
    """Each page's text as a section headed ``Page N``; the title from the document's information, if it has one."""
    with pypdf.apply_configuration(pypdf.get_configuration().with_overwrites(**PDF_LIMITS)):
        try:
            reader = pypdf.PdfReader(io.BytesIO(data))
            if reader.is_encrypted:
                raise _refuse(ERROR_PDF_ENCRYPTED)
            if len(reader.pages) > settings.KNOWLEDGE_MAX_PDF_PAGES:
                raise _refuse(ERROR_PDF_TOO_MANY_PAGES.format(limit=settings.KNOWLEDGE_MAX_PDF_PAGES))
            sections, read = [], 0
            for number, page in enumerate(reader.pages, start=1):
                text = page.extract_text() or ""
                read += len(text)
                if read > MAX_TEXT_CHARS:
                    raise _refuse(ERROR_TOO_MUCH_TEXT.format(limit=MAX_TEXT_CHARS))
                text = _bounded(text)
                if text.strip():
                    sections.append(Section((f"Page {number}",), text.strip()))
            title = ((reader.metadata.title if reader.metadata else None) or "").strip()
        except KnowledgeReadError:
            raise
        except Exception as error:  # noqa: BLE001 — a malformed PDF raises anything from deep inside pypdf
            reason = f"{type(error).__name__}: {error}"[:200]
            raise _refuse(ERROR_PDF_UNREADABLE.format(reason=reason)) from None
    return Reading(title, sections)


def read_file(file_name: str, data: bytes) -> tuple[DocumentKind, Reading]:
    """The file's kind (by its name) and what it says, or :class:`KnowledgeReadError` naming the bound it breaks."""
    kind = kind_of(file_name)
    if len(data) > settings.KNOWLEDGE_MAX_FILE_BYTES:
        raise _refuse(ERROR_TOO_LARGE.format(limit=settings.KNOWLEDGE_MAX_FILE_BYTES))
    if kind == DocumentKind.PDF:
        return kind, read_pdf(data)
    text = _decoded(data)
    reader = {DocumentKind.MARKDOWN: read_markdown, DocumentKind.HTML: read_html}.get(kind, read_text)
    return kind, reader(text)


_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+")


def _paragraphs(text: str) -> list[str]:
    """The text's paragraphs, each cut at sentence ends, then at spaces, to at most :data:`PASSAGE_CHARS`."""
    out: list[str] = []
    for paragraph in re.split(r"\n\s*\n", text):
        paragraph = paragraph.strip()
        while len(paragraph) > PASSAGE_CHARS:
            window = paragraph[: PASSAGE_CHARS + 1]
            cut = max((match.start() for match in _SENTENCE_END.finditer(window)), default=0)
            if cut < PASSAGE_CHARS // 3:  # no sentence ends in a useful place: cut at a space, else anywhere
                cut = window.rfind(" ")
            if cut <= 0:
                cut = PASSAGE_CHARS
            out.append(paragraph[:cut].strip())
            paragraph = paragraph[cut:].strip()
        if paragraph:
            out.append(paragraph)
    return out


def passages_of(reading: Reading) -> list[Piece]:
    """Each section's paragraphs packed, in order, into passages of at most :data:`PASSAGE_CHARS` characters under
    the section's heading path; :class:`KnowledgeReadError` past :data:`MAX_PASSAGES` or with no text at all."""
    pieces: list[Piece] = []
    for section in reading.sections:
        heading = HEADING_SEPARATOR.join(section.path)[:500]
        packed: list[str] = []
        for paragraph in _paragraphs(section.text):
            if packed and sum(len(part) + 2 for part in packed) + len(paragraph) > PASSAGE_CHARS:
                pieces.append(Piece(heading, "\n\n".join(packed)))
                packed = []
            packed.append(paragraph)
            if len(pieces) > MAX_PASSAGES:
                raise _refuse(ERROR_TOO_MANY_PASSAGES.format(limit=MAX_PASSAGES))
        if packed:
            pieces.append(Piece(heading, "\n\n".join(packed)))
    if len(pieces) > MAX_PASSAGES:
        raise _refuse(ERROR_TOO_MANY_PASSAGES.format(limit=MAX_PASSAGES))
    if not pieces:
        raise _refuse(ERROR_NO_TEXT)
    return pieces


def read_readable(file_name: str, data: bytes) -> tuple[DocumentKind, Reading]:
    """A document's readable text (:func:`readable_text`, as an export writes it, whatever the file's kind): the kind
    its file name says, and what the text says, read as Markdown."""
    kind = kind_of(file_name)
    if len(data) > settings.KNOWLEDGE_MAX_FILE_BYTES:
        raise _refuse(ERROR_TOO_LARGE.format(limit=settings.KNOWLEDGE_MAX_FILE_BYTES))
    return kind, read_markdown(_decoded(data))


def readable_text(pieces: list[Piece]) -> str:
    """A document's passages as Markdown that :func:`read_readable` cuts into the same passages: each heading path
    written as the headings that change (a path shorter than the one before repeats its last heading), the passages
    under one path as its paragraphs. Not kept: two sections under the same path one after the other read as one
    (their last and first paragraphs may then share a passage)."""
    out: list[str] = []
    before: tuple[str, ...] = ()
    for piece in pieces:
        path = tuple(piece.heading.split(HEADING_SEPARATOR)) if piece.heading else ()
        if path != before:
            same = 0
            while same < min(len(path), len(before)) and path[same] == before[same]:
                same += 1
            start = len(path) - 1 if same == len(path) else same
            out.extend(f"{'#' * (level + 1)} {path[level]}" for level in range(start, len(path)))
            before = path
        out.append(piece.text)
    return "\n\n".join(out) + "\n"
