"""Block-diagonal splitting of a Kronecker factor, the information it loses, and the damped inverse by blocks.

Why split: THOR assumes the inputs (and outputs) of a layer fall into independent groups of size b, so a d×d
factor becomes d/b blocks of b×b whose inverses cost d·b² instead of d³. The loss of that assumption is measured
by the spectral norm: L = 1 - λmax(ÂÂᵀ) / λmax(AAᵀ), Â the factor with its off-diagonal blocks zeroed.
"""

from __future__ import annotations

import torch

from ..errors import OptimizerError


def _diagonal_blocks(m: torch.Tensor, size: int) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Views of the diagonal blocks of `m` at `size`: the full ones stacked (k, size, size), and the smaller last
    one (or None). Writing into the views writes into `m`."""
    k = m.shape[0] // size
    full = m[:k * size, :k * size].view(k, size, k, size).diagonal(dim1=0, dim2=2).permute(2, 0, 1)
    rest = m[k * size:, k * size:] if k * size < m.shape[0] else None
    return full, rest


def split_blocks(m: torch.Tensor, size: int | None) -> torch.Tensor:
    """Â: `m` with every entry outside the diagonal blocks of `size` set to zero."""
    size = min(size or m.shape[0], m.shape[0])
    out = torch.zeros_like(m)
    for src, dst in zip(_diagonal_blocks(m, size), _diagonal_blocks(out, size)):
        if src is not None:
            dst.copy_(src)
    return out


def information_loss(m: torch.Tensor, size: int | None) -> float:
    """L = 1 - λmax(ÂÂᵀ) / λmax(AAᵀ); λmax(XXᵀ) is the square of X's largest singular value."""
    full = torch.linalg.matrix_norm(m.double(), ord=2) ** 2
    if full == 0:
        return 0.0
    split = torch.linalg.matrix_norm(split_blocks(m, size).double(), ord=2) ** 2
    return float(1.0 - split / full)


def damped_inverse(m: torch.Tensor, damping: float, size: int | None, layer: str = "?") -> torch.Tensor:
    """(M + λI)⁻¹ by Cholesky, block by block at `size` (the full blocks in one batched call, then the smaller
    last one); a diagonal factor, given as a vector, is inverted element-wise."""
    if m.dim() == 1:
        return 1.0 / (m + damping)
    if size is not None and size < 1:
        raise OptimizerError(f"THOR block size must be at least 1, got {size}")
    size = min(size or m.shape[0], m.shape[0])
    out = torch.zeros_like(m)
    for src, dst in zip(_diagonal_blocks(m, size), _diagonal_blocks(out, size)):
        if src is None:
            continue
        eye = torch.eye(src.shape[-1], dtype=m.dtype, device=m.device)
        chol, info = torch.linalg.cholesky_ex(src + damping * eye)
        if int(info.max()) > 0:
            raise OptimizerError(f"layer {layer}: the damped factor (damping {damping}) is not positive definite; "
                                 "raise the damping")
        dst.copy_(torch.cholesky_inverse(chol))
    return out
