"""The runtimes' hand-written XML reader (msccl-executor-nccl c6f6b36 msccl_parser.cc), derived
case by case from its tokenizer: what it stops at, and how it reads what it accepts."""
from pathlib import Path

import pytest

from optcoll.interop.msccl import validate_msccl_xml
from optcoll.interop.msccl.reader import ReaderError, read_like_runtime, strtol

RING_AG = (Path(__file__).parent / "data" / "allgather_ring_8.xml").read_text()


@pytest.mark.parametrize("text, where, words", [
    # mscclXmlGetNode skips only ' ', '\n', '\r' before '<'
    ('<?xml version="1.0"?>\n<algo a="1"></algo>', (1, 20), "expected >, got '?'"),
    ('<algo a="1">\n\t<gpu/></algo>', (2, 1), "expecting '<', got a tab"),
    ('<algo a="1">text</algo>', (1, 13), "expecting '<', got 't'"),
    # only a space separates attributes; a name ends at a line break, which then is no '>'
    ('<algo a="1"\n b="2"></algo>', (1, 12), "expected >, got a line break"),
    ('<algo\n a="1"></algo>', (1, 6), "expected >, got a line break"),
    ('<algo\ta="1"></algo>', (1, 8), "Unexpected value with name algo\ta"),
    # a value opened by ' still ends at the next ": here at none
    ("<algo a='1'></algo>", (1, 20), "Unexpected EOF"),
    ('<algo a="1"></algo >', (1, 19), "unexpected trailing ' ' in closing tag algo"),
    ('<algo a="1"><gpu></algo>', (1, 18), "XML Mismatch : gpu / algo"),
    ('<algo a="1"><gpu id="0">', (1, 25), "unterminated gpu"),
    ('<algo><gpu><tb><step s="0"><x/></step></tb></gpu></algo>', (1, 28), "inside a <step>"),
    ('<algo a="' + "x" * 256 + '"/>', (1, 9), "overflows the reader's 256-byte buffer"),
    ("<!-- no end", (1, 12), "unterminated comment"),
    ("<topology/>", (1, 12), "no <algo> element"),
])
def test_what_the_reader_stops_at(text, where, words):
    with pytest.raises(ReaderError) as err:
        read_like_runtime(text)
    assert (err.value.line, err.value.column) == where and words in str(err.value)


def test_what_the_reader_accepts_and_how_it_reads_it():
    algo = read_like_runtime('<!-- a/b --> \r\n<algo  a="1" b="x>y" c ="3"/>\n<other><algo z="9"/></other>')
    # a double space is an empty attribute; `c ="3"` leaves c empty and "3" nameless; the
    # unknown top-level element and what is in it are skipped
    assert algo.attrib == {"": "3", "a": "1", "b": "x>y", "c": ""}
    assert len(read_like_runtime("<algo " + " ".join(f'k{i}="{i}"' for i in range(20)) + "/>").attrib) == 16
    assert [strtol(v) for v in ("010", "0x1f", "-3", " 7abc", "", "abc", "1.5", "+0")] == [8, 31, -3, 7, 0, 0, 1, 0]


def test_validation_reports_the_reader_and_what_else_is_wrong():
    tabs = RING_AG.replace("  <gpu", "\t<gpu")
    assert validate_msccl_xml(tabs) == ["the runtimes' XML reader stops at line 2 column 1: expecting '<', "
                                        "got a tab"]
    assert validate_msccl_xml(tabs, runtime="msccl")[0].startswith("the runtimes' XML reader stops")
    quoted = RING_AG.replace('id="3"', "id='3'", 1)
    assert validate_msccl_xml(quoted)[0].startswith("the runtimes' XML reader stops at line")
    octal = RING_AG.replace('<gpu id="3"', '<gpu id="03"').replace('<gpu id="1"', '<gpu id="010"')
    out = validate_msccl_xml(octal)
    assert "gpu element #1: attribute id='010' is read as 8 by the runtimes (C strtol, base 0)" in out
    assert "gpu 8: id outside 0..7 (ngpus=8)" in out
    assert not any("'03'" in f for f in out)  # read as 3 either way


def test_a_file_read_like_the_runtime_is_read_again_when_it_changes(tmp_path):
    """read_for_runtime keeps a file's reading by its content stamp (mtime, size): a rewritten
    file is read anew, never served from the earlier reading."""
    from optcoll.interop.msccl.validate import read_for_runtime

    path = tmp_path / "ring.xml"
    path.write_text(RING_AG)
    first, _, _ = read_for_runtime(path)
    assert read_for_runtime(path)[0] is first  # same content: one reading
    path.write_text(RING_AG.replace('name="', 'name="renamed-', 1))
    again, _, _ = read_for_runtime(path)
    assert again.name == "renamed-" + first.name and again.gpus == first.gpus
