"""``shakespeare``: a plain-text play (``data.path``) cut into character sequences with
next-character targets, one speaker role per sequence (the data of LEAF's Shakespeare
task, Caldas et al. 2018, arXiv 1812.01097; the file the tests use is the "tiny
shakespeare" corpus of char-rnn)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

import numpy as np

from fedaudit.data.datasets.base import Dataset, TextMeta, register_dataset
from fedaudit.errors import ScenarioError
from fedaudit.options import option
from fedaudit.scenario import DataConfig

__all__ = ["Speech", "load_shakespeare_dataset", "parse_speeches", "windows"]

#: a line that opens a speech: a role name (no colon in it) followed by one colon
_NAME_LINE = re.compile(r"([^:\s][^:]*):")


class Speech(NamedTuple):
    """One speech: ``role`` is None for a block of text that no ``NAME:`` line opens."""
    role: str | None
    text: str


def parse_speeches(text: str) -> list[Speech]:
    """The speeches of a play, in file order.

    Blocks are maximal runs of non-blank lines (a blank line is empty or whitespace
    only).  A block whose first line, stripped, is ``NAME:`` (one colon, at the end) is a
    speech of role ``NAME`` and its text is the block's other lines; any other block is a
    speech of no role whose text is the whole block.  A speech's text keeps its line
    breaks and ends with one: ``"line 1\\nline 2\\n"`` (a name-only block has text "")."""
    speeches: list[Speech] = []
    block: list[str] = []
    for line in text.split("\n") + [""]:
        if line.strip():
            block.append(line)
            continue
        if block:
            m = _NAME_LINE.fullmatch(block[0].strip())
            body = block[1:] if m else block
            speeches.append(Speech(m.group(1).strip() if m else None,
                                   "".join(b + "\n" for b in body)))
            block = []
    return speeches


def windows(tokens: np.ndarray, seq_len: int) -> tuple[np.ndarray, np.ndarray]:
    """Non-overlapping windows of one speech's tokens t_0..t_{n-1}: window k is
    x = t[kL : kL + L], y = t[kL + 1 : kL + L + 1] (L = seq_len) for every k with
    kL + L + 1 <= n; the last (n - 1) mod L characters, too few for a window, are dropped.
    Returns int64 (K, L) each (K = (n - 1) // L, possibly 0)."""
    k = max(len(tokens) - 1, 0) // seq_len
    x = tokens[: k * seq_len].reshape(k, seq_len)
    y = tokens[1 : k * seq_len + 1].reshape(k, seq_len)
    return x.astype(np.int64), y.astype(np.int64)


def _read(path: Path, where: str) -> str:
    if not path.is_file():
        raise ScenarioError(f"{where}: no such file")
    try:
        text = path.read_text(encoding="utf-8-sig")  # universal newlines: \r\n -> \n
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioError(f"{where}: not a readable UTF-8 text file "
                            f"({type(exc).__name__})") from None
    if not text.strip():
        raise ScenarioError(f"{where}: the file is empty")
    return text


#: the text dataset's own keys of the scenario's ``[data]`` table (``cfg.seq_len``;
#: ``min_role_sequences`` is read by the speaker partitioner, :mod:`fedaudit.data.text`)
OPTIONS = {
    "seq_len": option(int, 80, "text: characters per sequence; a speech is cut into "
                      "non-overlapping windows of seq_len characters, each with the "
                      "next-character targets (the speech's last < seq_len + 1 characters "
                      "are dropped)", min=1, max=4096),
    "min_role_sequences": option(int, 16, "speaker partitioner: roles with fewer training "
                                 "sequences are dropped (not merged); the "
                                 "federation.num_clients largest of the others are the "
                                 "clients", min=1),
}


@register_dataset("shakespeare", needs_path=True, kind="text", options=OPTIONS)
def load_shakespeare_dataset(cfg: DataConfig) -> Dataset:
    """A play in plain text (UTF-8): speeches, each a ``NAME:`` line and the lines
    spoken, separated by blank lines (:func:`parse_speeches`).

    Vocabulary: the sorted distinct characters of the whole file (name lines included),
    token = index in it, stored as :attr:`Dataset.classes`.  Every speech is cut into
    non-overlapping windows of ``data.seq_len`` characters with the next-character
    targets (:func:`windows`); a window never crosses two speeches, so never two
    speakers.  Sequence ids are positions in the order (speech in file order, window in
    the speech), the same on every load of the same file and ``seq_len``.
    :attr:`Dataset.text` keeps each sequence's role and speech.  Speeches shorter than
    ``seq_len + 1`` characters give no sequence (they are counted in :attr:`Dataset.notes`).
    """
    path = Path(cfg.path).expanduser()
    where = f"data.path = {str(path)!r}"
    text = _read(path, where)
    vocab = sorted(set(text))
    lookup = np.full(max(map(ord, vocab)) + 1, -1, dtype=np.int64)
    lookup[[ord(c) for c in vocab]] = np.arange(len(vocab))
    roles: dict[str, int] = {}
    xs, ys, speaker, speech = [], [], [], []
    speeches = parse_speeches(text)
    empty = 0
    for s, sp in enumerate(speeches):
        role = -1 if sp.role is None else roles.setdefault(sp.role, len(roles))
        tokens = lookup[np.frombuffer(sp.text.encode("utf-32-le"), dtype=np.uint32)]
        x, y = windows(tokens, cfg.seq_len)
        empty += len(x) == 0
        xs.append(x)
        ys.append(y)
        speaker += [role] * len(x)
        speech += [s] * len(x)
    if not speaker:
        raise ScenarioError(f"{where}: no speech has data.seq_len + 1 = {cfg.seq_len + 1} "
                            "characters, so there are no sequences; lower data.seq_len")
    meta = TextMeta(tuple(roles), np.asarray(speaker, dtype=np.int64),
                    np.asarray(speech, dtype=np.int64))
    notes = ((f"{where}: {empty} of {len(speeches)} speeches are shorter than "
              f"data.seq_len + 1 = {cfg.seq_len + 1} characters and give no sequence",)
             if empty else ())
    return Dataset(path.stem, np.concatenate(xs), np.concatenate(ys), tuple(vocab), notes,
                   meta)
