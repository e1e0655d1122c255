"""A generated play: text data for a run without the shared tiny shakespeare."""

from pathlib import Path

import numpy as np

#: the play's vocabulary
WORDS = ("my lord", "the king", "good", "sweet", "night", "love", "what", "is", "not",
         "and", "so", "here", "come", "hence", "thou", "art", "a", "fool", "speak", "now")


def write_play(path: Path, roles=("ANNA", "BORIS", "CLARA", "DMITRI"), speeches=36,
               seed=0) -> Path:
    """``speeches`` speeches per role, each two to four lines of random words."""
    rng = np.random.default_rng(seed)
    blocks = []
    for s in range(speeches * len(roles)):
        lines = [" ".join(rng.choice(WORDS, int(rng.integers(5, 9)))).capitalize() + ","
                 for _ in range(int(rng.integers(2, 5)))]
        blocks.append(f"{roles[s % len(roles)]}:\n" + "\n".join(lines) + "\n")
    path.write_text("\n".join(blocks), encoding="utf-8")
    return path
