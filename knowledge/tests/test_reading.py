"""Files into sections and passages: headings kept, sizes bounded, hostile files refused within bounds."""

from __future__ import annotations

import zlib

import pytest

from knowledge.reading import (
    ERROR_HTML_TOO_DEEP,
    ERROR_KIND,
    ERROR_NOT_UTF8,
    ERROR_PDF_TOO_MANY_PAGES,
    ERROR_TOO_LARGE,
    HEADING_SEPARATOR,
    MAX_HTML_DEPTH,
    PASSAGE_CHARS,
    KnowledgeReadError,
    passages_of,
    read_file,
)


def pdf(*streams: bytes, compressed: bool = False) -> bytes:
    """A minimal PDF of one page per content stream, written by hand (offsets computed, so strict readers agree)."""
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>"]
    count = len(streams)
    kids = " ".join(f"{4 + 2 * i} 0 R" for i in range(count))
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {count} >>".encode())
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    for index, stream in enumerate(streams):
        content = 5 + 2 * index
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {content} 0 R "
            f"/Resources << /Font << /F1 3 0 R >> >> >>".encode()
        )
        body = zlib.compress(stream) if compressed else stream
        flate = b" /Filter /FlateDecode" if compressed else b""
        objects.append(b"<< /Length %d%s >>\nstream\n" % (len(body), flate) + body + b"\nendstream")
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def text_page(line: str) -> bytes:
    return f"BT /F1 12 Tf 72 720 Td ({line}) Tj ET".encode()


def test_markdown_headings_become_the_passages_heading_paths_and_the_first_h1_the_title():
    kind, reading = read_file(
        "help.md",
        b"# Help\n\nIntro.\n\n## Billing\n\n### Refunds\n\nFive days.\n\n## Login\n\n```\n# not a heading\n```\n",
    )

    pieces = passages_of(reading)

    assert kind == "markdown" and reading.title == "Help"
    assert [piece.heading for piece in pieces] == [
        "Help",
        HEADING_SEPARATOR.join(["Help", "Billing", "Refunds"]),
        "Help › Login",
    ]
    assert "# not a heading" in pieces[2].text


def test_a_long_section_is_cut_into_passages_no_longer_than_the_bound_in_order():
    sentence = "The router reads every keyword of the profile before it asks the model. "
    text = ("## Long\n\n" + sentence * 100 + "\n\n" + "word " * 600).encode()

    pieces = passages_of(read_file("long.md", text)[1])

    assert len(pieces) > 3
    assert all(len(piece.text) <= PASSAGE_CHARS for piece in pieces)
    assert " ".join(piece.text for piece in pieces).split() == text.decode().split()[2:]


def test_html_headings_and_paragraphs_are_read_and_scripts_skipped():
    page = b"""<html><head><title>Help | Shop</title><script>var secret = 1;</script></head><body>
    <h1>Help</h1><h2>Delivery</h2><p>We deliver in <b>two</b> days.<p>Weekends too.</p>
    <style>p { color: red }</style><h2>Returns</h2><ul><li>Thirty days<li>Free</ul></body></html>"""

    kind, reading = read_file("help.html", page)
    pieces = passages_of(reading)

    assert kind == "html" and reading.title == "Help | Shop"
    assert [piece.heading for piece in pieces] == ["Help › Delivery", "Help › Returns"]
    assert pieces[0].text == "We deliver in two days.\n\nWeekends too."
    assert "secret" not in pieces[0].text and "color" not in pieces[1].text


def test_html_nested_past_the_bound_is_refused_naming_the_bound():
    deep = b"<div>" * (MAX_HTML_DEPTH + 1) + b"text"

    with pytest.raises(KnowledgeReadError) as refused:
        read_file("deep.html", deep)

    assert refused.value.message == ERROR_HTML_TOO_DEEP.format(limit=MAX_HTML_DEPTH)
    assert refused.value.fields == {"file": [refused.value.message]}


def test_html_with_a_hundred_thousand_unclosed_paragraphs_is_no_deep_nesting():
    page = b"<h1>Many</h1>" + b"<p>line " * 100_000

    pieces = passages_of(read_file("many.html", page)[1])

    assert sum(piece.text.count("line") for piece in pieces) == 100_000


def test_the_text_of_a_pdfs_pages_is_read_each_page_headed():
    data = pdf(text_page("Refunds take five days."), text_page("Passwords are reset in Settings."))

    kind, reading = read_file("guide.pdf", data)

    assert kind == "pdf"
    assert [(section.path, section.text) for section in reading.sections] == [
        (("Page 1",), "Refunds take five days."),
        (("Page 2",), "Passwords are reset in Settings."),
    ]


def test_a_zip_bomb_pdf_is_refused_without_decoding_it_all():
    bomb = b"BT /F1 12 Tf 72 720 Td (x) Tj ET\n" + b" " * 40_000_000  # 40 MB, twice the bound, that compress to 40 KB

    with pytest.raises(KnowledgeReadError) as refused:
        read_file("bomb.pdf", pdf(bomb, compressed=True))

    assert refused.value.message.startswith("The PDF could not be read: LimitReachedError")


def test_a_pdf_past_the_pages_bound_is_refused(settings):
    settings.KNOWLEDGE_MAX_PDF_PAGES = 2

    with pytest.raises(KnowledgeReadError) as refused:
        read_file("book.pdf", pdf(*[text_page("page")] * 3))

    assert refused.value.message == ERROR_PDF_TOO_MANY_PAGES.format(limit=2)


def test_a_file_past_the_size_bound_an_unknown_kind_and_text_not_utf8_are_refused(settings):
    settings.KNOWLEDGE_MAX_FILE_BYTES = 100

    with pytest.raises(KnowledgeReadError) as large:
        read_file("big.txt", b"x" * 101)
    with pytest.raises(KnowledgeReadError) as kind:
        read_file("sheet.xlsx", b"x")
    with pytest.raises(KnowledgeReadError) as encoding:
        read_file("latin.txt", "ação".encode("latin-1"))

    assert large.value.message == ERROR_TOO_LARGE.format(limit=100)
    assert kind.value.message == ERROR_KIND.format(name="sheet.xlsx")
    assert encoding.value.message == ERROR_NOT_UTF8
