"""GramAccumulator: the float64 K of row blocks and (B x B) parts, against X X^T formed
directly in float64 from the concatenated rows."""

from __future__ import annotations

import torch

from fedaudit.gnq.ghost import GramAccumulator, Rows


def reference(blocks: list[torch.Tensor], extra: torch.Tensor) -> torch.Tensor:
    X = torch.cat([b.to(torch.float64) for b in blocks], 1)
    return X @ X.T + extra


def test_rows_across_buffer_flushes_equal_float64_gram():
    """Blocks wider than the buffer, blocks that straddle a flush, a (B x B) part.

    The products are the same float64 products of float32 values (exact: 24 + 24 bits
    fit float64's 53); only the order of the float64 sums differs, an error of about
    n eps64 relative to sum |x_ik x_jk| (n <= 300 here), hence rtol 1e-12."""
    g = torch.Generator().manual_seed(0)
    blocks = [torch.randn(8, n, generator=g) for n in (5, 17, 64, 3, 150, 40)]
    part = torch.randn(8, 8, generator=g, dtype=torch.float64)
    part = part @ part.T
    acc = GramAccumulator(cols=32)
    for i, X in enumerate(blocks):
        acc.add(Rows(X) if i != 2 else [Rows(X), part.clone()])
    torch.testing.assert_close(acc.result(), reference(blocks, part), rtol=1e-12, atol=0)
    # asking again is idempotent; reset empties it and the buffer is reused
    torch.testing.assert_close(acc.result(), reference(blocks, part), rtol=1e-12, atol=0)
    acc.reset()
    assert acc.empty and acc.result() is None
    acc.add(Rows(blocks[1]))
    acc.add(None)
    torch.testing.assert_close(acc.result(), reference([blocks[1]], 0.0), rtol=1e-12, atol=0)


def test_batch_size_change_reallocates_the_buffer():
    g = torch.Generator().manual_seed(1)
    acc = GramAccumulator(cols=16)
    acc.add(Rows(torch.randn(4, 10, generator=g)))
    acc.reset()
    X = torch.randn(3, 20, generator=g)
    acc.add(Rows(X))
    torch.testing.assert_close(acc.result(), reference([X], 0.0), rtol=1e-12, atol=0)
