"""The collectives one transformer layer issues under AxoNN's 4D algorithm, with their sizes.

Which collective runs on which group comes from AxoNN's tensor-parallel linear layer
(``axonn/intra_layer/fully_connected.py``). A linear layer with weight [out, in]:

- its input features are split over the *inner* group and its output features over the *outer*
  group (inner = X, outer = Y; a *transposed* layer swaps them), so a GPU's weight block is
  out/outer × in/inner, further sharded 1/Z over the depth group Z (akin to FSDP);
- the batch is split over Z·D, so a GPU's activations have T' = batch·seq / (Z·D) tokens;
- forward: all-gather of the weight block over Z, then all-reduce of the output partial sums
  [T', out/outer] over the inner group;
- backward: all-gather of the weight block over Z again, all-reduce of the input gradient
  [T', in/inner] over the outer group, reduce-scatter of the weight gradient over Z;
- after the backward pass: all-reduce of the weight-gradient shard (out·in / (X·Y·Z)) over D.

How often each runs follows AxoNN's own configuration model (Megatron-AxoNN
``examples/comm_model.py``): three depth collectives (two all-gathers, one reduce-scatter), the
forward all-reduce twice when activations are recomputed in the backward pass, and the
data-parallel all-reduce in ``grad_bytes`` per element (fp32 gradients) while everything else
moves ``bytes_per_element`` (bf16). That model charges the 4H side of the transposed MLP layer
to the other group; here both transposed layers follow the layer code above.

A GPT layer has four linear layers (as AxoNN's Megatron integration builds them): QKV H→3H,
attention projection H→H (transposed), MLP up H→4H, MLP down 4H→H (transposed). Biases,
layer norms and the pure-data-parallel transitions of AxoNN's non-expert mode are left out, as
in AxoNN's model.
"""
from __future__ import annotations

from dataclasses import dataclass

from optcoll.analysis.axonn.grid import ParallelGrid
from optcoll.errors import InputError

AG, RS, AR = "allgather", "reducescatter", "allreduce"


@dataclass(frozen=True)
class Linear:
    name: str
    in_features: int
    out_features: int
    transposed: bool = False


@dataclass(frozen=True)
class TransformerLayer:
    """One GPT layer: hidden size H, sequence length, global batch in samples, element sizes."""

    hidden: int
    seq_len: int
    batch: int
    bytes_per_element: int = 2
    grad_bytes: int = 4
    recompute: bool = True

    def __post_init__(self) -> None:
        for name in ("hidden", "seq_len", "batch", "bytes_per_element", "grad_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InputError(f"must be a positive integer, got {value!r}", field=name)

    @property
    def tokens(self) -> int:
        return self.batch * self.seq_len

    def linears(self) -> tuple[Linear, ...]:
        h = self.hidden
        return (Linear("qkv", h, 3 * h), Linear("proj", h, h, True),
                Linear("fc1", h, 4 * h), Linear("fc2", 4 * h, h, True))

    def describe(self) -> str:
        return (f"GPT layer H={self.hidden}, seq {self.seq_len}, batch {self.batch} samples, "
                f"{self.bytes_per_element} B/element ({self.grad_bytes} B for data-parallel "
                f"gradients), recompute={'on' if self.recompute else 'off'}")


@dataclass(frozen=True)
class Call:
    """One collective the layer issues ``count`` times on every group of dimension ``dim``.

    ``size_bytes`` is optcoll's M: the gathered output of an all-gather, the input of a
    reduce-scatter, the vector of an all-reduce.
    """

    linear: str
    what: str
    dim: str
    kind: str
    size_bytes: float
    count: int


def infeasible(layer: TransformerLayer, grid: ParallelGrid) -> str | None:
    """Why AxoNN cannot split this layer on ``grid`` (its layer code asserts these), or None."""
    if layer.batch % (grid.z * grid.d):
        return f"batch {layer.batch} not divisible by Z·D = {grid.z * grid.d}"
    for lin in layer.linears():
        inner, outer = (grid.y, grid.x) if lin.transposed else (grid.x, grid.y)
        if lin.in_features % inner or lin.out_features % outer:
            return f"{lin.name} ({lin.in_features}→{lin.out_features}) does not split {inner}×{outer}"
        if (lin.in_features // inner) * (lin.out_features // outer) % grid.z:
            return f"{lin.name} weight block does not shard over Z = {grid.z}"
    return None


def layer_calls(layer: TransformerLayer, grid: ParallelGrid) -> list[Call]:
    """Every collective of one training step of ``layer`` on ``grid`` (groups of size 1 skipped)."""
    reason = infeasible(layer, grid)
    if reason is not None:
        raise InputError(f"configuration {grid.label()}: {reason}", field="shape")
    e, local_tokens = layer.bytes_per_element, layer.tokens // (grid.z * grid.d)
    calls = []
    for lin in layer.linears():
        inner, outer = ("Y", "X") if lin.transposed else ("X", "Y")
        block = lin.out_features * lin.in_features // (grid.x * grid.y)
        calls += [
            Call(lin.name, "weights (fwd + bwd)", "Z", AG, block * e, 2),
            Call(lin.name, "weight gradient", "Z", RS, block * e, 1),
            Call(lin.name, "output partial sums (fwd" + (" + recompute)" if layer.recompute else ")"),
                 inner, AR, local_tokens * lin.out_features // grid.size(outer) * e,
                 2 if layer.recompute else 1),
            Call(lin.name, "input gradient (bwd)", outer, AR,
                 local_tokens * lin.in_features // grid.size(inner) * e, 1),
            Call(lin.name, "gradient shard (data parallel)", "D", AR,
                 block // grid.z * layer.grad_bytes, 1),
        ]
    return [c for c in calls if grid.size(c.dim) > 1]
