"""A training iteration's collectives from a model description, as Megatron-style 3D (and
expert) parallelism lays them out.

The model: ``layers`` transformer layers of ``hidden`` size, ``params`` parameters (default
12 x layers x hidden^2, a transformer layer's weights without embeddings), gradients of
``grad_bytes`` per element, activations of ``seq`` x ``mbs`` x ``hidden`` elements of
``act_bytes`` per micro-batch (or ``activation`` bytes), ``micro_batches`` per iteration,
gradient buckets of ``bucket`` bytes, parallel sizes ``tp``, ``pp``, ``dp``, ``ep``, and
``moe_every`` (every k-th layer is a mixture of experts; 0: none).

Rank placement: tensor parallel fastest (a TP group is consecutive ranks, inside one server),
then pipeline, then data parallel: rank = (dp_index x pp + pp_index) x tp + tp_index. Expert
parallel groups are ``ep`` consecutive data-parallel replicas of the same (pp, tp) position
(experts split the data-parallel dimension, as in Megatron).

What one iteration sends, per micro-batch: forward, on each stage in turn, per layer two TP
all-reduces of the activation (after attention and after the MLP), per MoE layer two EP
all-to-alls (dispatch and combine), then each TP rank's activation to the same TP rank of the
next stage (a PP send); backward the same in reverse (activation gradients). Then, per stage,
its gradients (params / (pp x tp) per rank) in buckets, each an all-reduce over the
data-parallel group (``dp_op=rs-ag``: a reduce-scatter then an all-gather, as ZeRO).

Simplifications: no compute (communication only; a call starts when the calls it depends on
have ended), GPipe order (every micro-batch forward, then every one backward; no 1F1B), a
stage's gradient buckets after its whole backward (no overlap with backward compute), a PP
send of the full activation per TP rank (no scatter-gather optimization), and the same
activation size for every layer and micro-batch. Each rank runs its calls in order; a send
waits for its sender's previous call, and its receiver's next call waits for it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from cellfabric.collectives.iteration import SEND, Call
from cellfabric.core.workloads import WorkloadError

_SIZE = re.compile(r"^(?P<n>\d+(?:\.\d+)?(?:e\d+)?)\s*(?P<u>|[kKmMgGtTbB]i?B?)$")
_UNITS = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "b": 1e9, "t": 1e12,
          "ki": 2**10, "mi": 2**20, "gi": 2**30, "ti": 2**40}
DP_OPS = ("all-reduce", "rs-ag")


@dataclass(frozen=True)
class ModelSpec:
    layers: int
    hidden: int
    params: int = 0  # 0: 12 x layers x hidden^2
    grad_bytes: int = 2
    act_bytes: int = 2
    seq: int = 2048
    mbs: int = 1  # micro-batch size (sequences)
    activation: int = 0  # bytes of one micro-batch's activation; 0: seq x mbs x hidden x act_bytes
    micro_batches: int = 1
    bucket: int = 25 * 2**20
    tp: int = 1
    pp: int = 1
    dp: int = 1
    ep: int = 1
    moe_every: int = 0
    dp_op: str = "all-reduce"
    algorithm: str = ""  # all-reduce algorithm ('' = ring)

    @property
    def world(self) -> int:
        return self.tp * self.pp * self.dp

    @property
    def total_params(self) -> int:
        return self.params or 12 * self.layers * self.hidden ** 2

    @property
    def activation_bytes(self) -> int:
        return self.activation or self.seq * self.mbs * self.hidden * self.act_bytes

    def rank(self, dp: int, pp: int, tp: int) -> int:
        return (dp * self.pp + pp) * self.tp + tp

    def check(self, where: str) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            floor = 0 if f.name in ("params", "activation", "moe_every") else 1
            if f.type == "int" and value < floor:
                raise WorkloadError(f"{where}: {f.name} {value} must be at least {floor}")
        if self.layers % self.pp:
            raise WorkloadError(f"{where}: layers {self.layers} do not split into pp "
                                f"{self.pp} equal stages")
        if self.dp % self.ep:
            raise WorkloadError(f"{where}: ep {self.ep} does not divide dp {self.dp}")
        if self.moe_every and self.ep < 2:
            raise WorkloadError(f"{where}: moe_every {self.moe_every} needs ep >= 2")
        if self.dp_op not in DP_OPS:
            raise WorkloadError(f"{where}: dp_op '{self.dp_op}' is not one of {', '.join(DP_OPS)}")


def _number(key: str, text: Any, where: str) -> int:
    if isinstance(text, bool):
        raise WorkloadError(f"{where}: {key} {text!r} is not a number")
    if isinstance(text, int | float):
        return int(text)
    m = _SIZE.match(str(text).strip())
    if not m:
        raise WorkloadError(f"{where}: {key} '{text}' is not a number (e.g. 4, 25MiB, 1.3B)")
    return int(float(m["n"]) * _UNITS[m["u"].removesuffix("B").lower() or ""])


def model_from(doc: dict[str, Any], where: str) -> ModelSpec:
    known = {f.name: f for f in fields(ModelSpec)}
    unknown = sorted(set(doc) - set(known))
    if unknown:
        raise WorkloadError(f"{where}: unknown field '{unknown[0]}' (expected "
                            f"{', '.join(known)})")
    for need in ("layers", "hidden"):
        if need not in doc:
            raise WorkloadError(f"{where}: the model needs '{need}'")
    values = {k: (str(v) if known[k].type == "str" else _number(k, v, where))
              for k, v in doc.items()}
    spec = ModelSpec(**values)
    spec.check(where)
    return spec


def parse_model(text: str) -> ModelSpec:
    """``train:SPEC``'s SPEC: inline ``layers=2,hidden=1024,tp=2,pp=2,dp=2`` or a JSON or
    YAML file of the same fields."""
    if "=" in text:
        where = f"--workload train:{text}"
        doc: dict[str, Any] = {}
        for item in text.split(","):
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise WorkloadError(f"{where}: '{item}' is not KEY=VALUE")
            doc[key.strip()] = value.strip()
        return model_from(doc, where)
    path = Path(text)
    where = str(path)
    try:
        raw = path.read_text()
    except OSError as exc:
        raise WorkloadError(f"--workload train:{text}: cannot read it ({exc.strerror})") from None
    try:
        if path.suffix == ".json":
            loaded = json.loads(raw)
        else:
            import yaml

            loaded = yaml.safe_load(raw)
    except (ValueError, ImportError) as exc:
        raise WorkloadError(f"{where}: not a model description ({str(exc).splitlines()[0]})") \
            from None
    if not isinstance(loaded, dict):
        raise WorkloadError(f"{where}: expected a mapping of model fields")
    return model_from(loaded, where)


class _Calls:
    """Calls in order, each waiting for the previous call of every rank it involves."""

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.last: dict[int, set[int]] = {}

    def add(self, op: str, size: int, group: tuple[int, ...], label: str,
            algorithm: str | None = None) -> None:
        idx = len(self.calls)
        waits = group[:1] if op == SEND else group  # a send waits for its sender only
        after = sorted(set().union(*(self.last.get(r, set()) for r in waits)))
        self.calls.append(Call(op, size, group, tuple(after), algorithm, label))
        for r in waits:
            self.last[r] = {idx}
        if op == SEND:  # the receiver's next call waits for what it had to do and the send
            self.last.setdefault(group[1], set()).add(idx)


def _stage_layers(m: ModelSpec, pp: int) -> range:
    per = m.layers // m.pp
    return range(pp * per, (pp + 1) * per)


def _layer_calls(out: _Calls, m: ModelSpec, pp: int, layer: int, tag: str) -> None:
    act, ar = m.activation_bytes, m.algorithm or None
    for dp in range(m.dp):
        if m.tp > 1:
            group = tuple(m.rank(dp, pp, t) for t in range(m.tp))
            for part in ("attn", "mlp"):
                out.add("all-reduce", act, group, f"tp {tag} layer{layer} {part} dp{dp}", ar)
    if m.moe_every and (layer + 1) % m.moe_every == 0:
        for part in ("dispatch", "combine"):
            for base in range(0, m.dp, m.ep):
                for t in range(m.tp):
                    group = tuple(m.rank(d, pp, t) for d in range(base, base + m.ep))
                    out.add("all-to-all", act, group,
                            f"ep {tag} layer{layer} {part} dp{base}-{base + m.ep - 1} tp{t}")


def _pass(out: _Calls, m: ModelSpec, mb: int, forward: bool) -> None:
    tag = f"{'fwd' if forward else 'bwd'} mb{mb}"
    stages = range(m.pp) if forward else range(m.pp - 1, -1, -1)
    for pp in stages:
        layers = _stage_layers(m, pp)
        for layer in (layers if forward else reversed(layers)):
            _layer_calls(out, m, pp, layer, tag)
        nxt = pp + 1 if forward else pp - 1
        if 0 <= nxt < m.pp:
            for dp in range(m.dp):
                for t in range(m.tp):
                    out.add(SEND, m.activation_bytes, (m.rank(dp, pp, t), m.rank(dp, nxt, t)),
                            f"pp {tag} stage{pp}->stage{nxt} dp{dp} tp{t}")


def _gradient_calls(out: _Calls, m: ModelSpec) -> None:
    if m.dp < 2:
        return
    per_rank = -(-m.total_params // (m.pp * m.tp)) * m.grad_bytes
    buckets = [min(m.bucket, per_rank - off) for off in range(0, per_rank, m.bucket)]
    for pp in range(m.pp - 1, -1, -1):  # the last stage's backward ends first
        for b, size in enumerate(buckets):
            for t in range(m.tp):
                group = tuple(m.rank(d, pp, t) for d in range(m.dp))
                what = f"dp bucket{b} stage{pp} tp{t}"
                if m.dp_op == "rs-ag":
                    out.add("reduce-scatter", size, group, what + " reduce-scatter")
                    out.add("all-gather", size, group, what + " all-gather")
                else:
                    out.add("all-reduce", size, group, what, m.algorithm or None)


def iteration_calls(m: ModelSpec) -> list[Call]:
    out = _Calls()
    for forward in (True, False):
        for mb in range(m.micro_batches):
            _pass(out, m, mb, forward)
    _gradient_calls(out, m)
    return out.calls
