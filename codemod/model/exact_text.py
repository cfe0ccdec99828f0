"""Refuse, by path and line, a file the tool would not write back byte-identical.

The planners decode files as UTF-8 and count lines by \\n only; a file that is
not UTF-8, or holds a carriage return (CRLF line endings, which Python's text
mode would silently turn into \\n and shift every byte offset), would not
survive decode / split / join unchanged, so it is reported and left alone.
"""
from __future__ import annotations

from codemod.model.errors import BadInput
from codemod.model.tree import Tree


def read(tree: Tree, rel_path: str) -> str:
    return decode(rel_path, tree.path(rel_path).read_bytes())


def decode(rel_path: str, data: bytes) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise BadInput(f"{rel_path}:{line}: not valid UTF-8 ({error.reason}); the tool edits UTF-8 files only, nothing was written")
    if "\r" in text:
        line = text[: text.index("\r")].count("\n") + 1
        raise BadInput(
            f"{rel_path}:{line}: a carriage return (CRLF line endings?); the tool would not write the file back "
            "byte-identical, nothing was written: convert it to LF line endings and run again"
        )
    return text
