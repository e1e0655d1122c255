"""Planting secret-sharer canaries in the clients' text (``[canaries] kind = "secret"``).

Carlini et al. 2019 (Section 3): a canary is a template with a random secret, inserted
a number of times into the training data; secrets drawn from the same space but never
inserted are the baseline a model that memorised nothing ranks like any candidate.

:func:`plant_secrets`: for every listed client c and every value k of ``repeats``,
``count`` secrets, each inserted k times into c's training data; then ``references``
secrets inserted nowhere.  All secrets are distinct, drawn uniformly from
``alphabet ** secret_length``.  One insertion is one new sequence of the client:

    text = template + secret + "\\n" + the first characters of a uniformly drawn
           training window of the client (its speaker's own words), to seq_len + 1,

cut into x = text[:L], y = text[1:L+1] like every window, so the template stands at the
start of the sequence, where the attacker's prefix puts it.  The new sequences are
appended after the corpus's (their ids follow the last corpus sequence, in planting order;
every corpus id is unchanged), each is a speech of its own spoken by the client's role, and
they are marked in ``FederatedData.canary``.  Characters of the template or the alphabet
that the corpus lacks are appended to the vocabulary (tiny-shakespeare has no digit but
3), so every corpus token keeps its id.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fedaudit.data.datasets.base import TextMeta
from fedaudit.errors import ScenarioError
from fedaudit.scenario import CanariesConfig
from fedaudit.secrets import candidate_tokens

__all__ = ["PlantedSecrets", "PlantedText", "plant_secrets"]

#: mixed into the scenario seed: independent of every other draw
_SEED_TAG = 32_2019


@dataclass(frozen=True)
class PlantedSecrets:
    """The planted and the reference secrets (arrays of length S, planting order: the
    listed clients in order, each client's repeats values in order, then the references)."""

    prefix: np.ndarray  # int64 (P,): the template's tokens
    alphabet: np.ndarray  # int64 (A,): the alphabet's tokens
    tokens: np.ndarray  # int64 (S, secret_length): each secret's tokens
    client: np.ndarray  # int64 (S,): the client it is inserted into, -1 = reference
    repeats: np.ndarray  # int64 (S,): times inserted, 0 = reference
    sequence_ids: tuple[np.ndarray, ...]  # per secret: the ids of its inserted sequences

    @property
    def size(self) -> int:
        return int(len(self.client))

    def text(self, s: int, vocab: tuple[str, ...]) -> str:
        return "".join(vocab[t] for t in self.tokens[s])


@dataclass(frozen=True)
class PlantedText:
    """The data after planting."""

    x: np.ndarray
    y: np.ndarray
    vocab: tuple[str, ...]
    text: TextMeta
    clients: list[np.ndarray]
    canary: np.ndarray  # bool (N,)
    secrets: PlantedSecrets


def _extend_vocab(vocab: tuple[str, ...], chars: str) -> tuple[str, ...]:
    missing = sorted(set(chars) - set(vocab))
    return vocab + tuple(missing)


def plant_secrets(x: np.ndarray, y: np.ndarray, vocab: tuple[str, ...], text: TextMeta,
                  clients: list[np.ndarray], cfg: CanariesConfig, seed: int) -> PlantedText:
    """Insert the ``[canaries]`` secrets into ``clients`` (module docstring)."""
    if not cfg.alphabet or len(set(cfg.alphabet)) != len(cfg.alphabet):
        raise ScenarioError(f"canaries.alphabet = {cfg.alphabet!r}: needs distinct characters")
    if not cfg.template:
        raise ScenarioError("canaries.template = '': the attacker's prefix needs at least "
                            "one character")
    if any(k < 1 for k in cfg.repeats) or not cfg.repeats:
        raise ScenarioError(f"canaries.repeats = {list(cfg.repeats)!r}: each value must be "
                            ">= 1, at least one value")
    seq_len = x.shape[1]
    need = len(cfg.template) + cfg.secret_length + 1
    if need > seq_len + 1:
        raise ScenarioError(f"canaries.template: {len(cfg.template)} characters + "
                            f"canaries.secret_length = {cfg.secret_length} + a line break "
                            f"exceed data.seq_len + 1 = {seq_len + 1}")
    space = len(cfg.alphabet) ** cfg.secret_length
    owners = [c for c in cfg.clients for _ in cfg.repeats for _ in range(cfg.count)]
    reps = [k for _ in cfg.clients for k in cfg.repeats for _ in range(cfg.count)]
    total = len(owners) + cfg.references
    if total > space:
        raise ScenarioError(f"canaries: {total} distinct secrets needed, the space "
                            f"len(canaries.alphabet) ** canaries.secret_length has {space}")
    vocab = _extend_vocab(vocab, cfg.template + cfg.alphabet)
    index = {ch: i for i, ch in enumerate(vocab)}
    prefix = np.array([index[ch] for ch in cfg.template], dtype=np.int64)
    alphabet = np.array([index[ch] for ch in cfg.alphabet], dtype=np.int64)
    rng = np.random.default_rng([seed, _SEED_TAG])
    tokens = candidate_tokens(rng.choice(space, size=total, replace=False), alphabet,
                              cfg.secret_length)
    newline = np.array([index["\n"]] if "\n" in index else [], dtype=np.int64)
    xs, ys, speakers, speeches, seq_ids = [], [], [], [], []
    corpus = [c.copy() for c in clients]  # the fills come from the corpus's windows
    clients = [c.copy() for c in clients]
    next_id, next_speech = len(x), int(text.speech.max()) + 1 if len(text.speech) else 0
    for s, (c, k) in enumerate(zip(owners, reps)):
        if not len(corpus[c]):
            raise ScenarioError(f"canaries.clients: client {c} has no training sequences")
        head = np.concatenate([prefix, tokens[s], newline])
        fill = rng.choice(corpus[c], size=k)
        ids = []
        for f in fill:
            window = np.concatenate([x[f], y[f][-1:]])  # the window's L + 1 characters
            seq = np.concatenate([head, window])[:seq_len + 1]
            xs.append(seq[:-1])
            ys.append(seq[1:])
            speakers.append(text.speaker[f])
            speeches.append(next_speech)
            next_speech += 1
            ids.append(next_id)
            next_id += 1
        seq_ids.append(np.array(ids, dtype=np.int64))
        clients[c] = np.concatenate([clients[c], seq_ids[-1]])
    seq_ids += [np.zeros(0, dtype=np.int64)] * cfg.references
    n_new = next_id - len(x)
    new_x = np.concatenate([x, np.array(xs, dtype=np.int64).reshape(n_new, seq_len)])
    new_y = np.concatenate([y, np.array(ys, dtype=np.int64).reshape(n_new, seq_len)])
    meta = TextMeta(text.roles, np.concatenate([text.speaker, np.array(speakers, np.int64)]),
                    np.concatenate([text.speech, np.array(speeches, np.int64)]))
    canary = np.zeros(len(new_x), dtype=bool)
    canary[len(x):] = True
    secrets = PlantedSecrets(prefix, alphabet, tokens,
                             np.array(owners + [-1] * cfg.references, dtype=np.int64),
                             np.array(reps + [0] * cfg.references, dtype=np.int64),
                             tuple(seq_ids))
    return PlantedText(new_x, new_y, vocab, meta, [np.sort(c) for c in clients], canary,
                       secrets)
