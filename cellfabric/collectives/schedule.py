"""The schedule model: a collective over N ranks as, per channel, a DAG of sends.

A buffer of B bytes is cut into chunks (each chunk belongs to one channel, and to one rank's
block where the collective has blocks). A send moves some chunks from one rank to another
and either copies them (the receiver's value is replaced) or reduces them (the receiver's
value and the incoming one are combined). A send waits for the sends it lists; those are
always earlier in the schedule, so the list order is a topological order of the DAG, and
they are always on the same channel, so every channel is a DAG of its own.

Algorithms do not write dependencies by hand: ``ScheduleBuilder`` derives them from the
order sends are emitted in, like a compiler does from a sequential program (a send waits for
whatever last wrote what it reads, and for whatever read or wrote what it overwrites), plus
the order of one connection: the sends of one channel between one pair of ranks go in
sequence, as over NCCL's one connection per peer per channel. That second rule is what makes
chunked steps a pipeline instead of everything at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

COPY = "copy"
REDUCE = "reduce"
OPERATIONS = (COPY, REDUCE)

ALL_REDUCE = "all-reduce"
REDUCE_SCATTER = "reduce-scatter"
ALL_GATHER = "all-gather"
ALL_TO_ALL = "all-to-all"
BROADCAST = "broadcast"
COLLECTIVES = (ALL_REDUCE, REDUCE_SCATTER, ALL_GATHER, ALL_TO_ALL, BROADCAST)

# A channel's rank order: (channel, the ranks of one ring or tree) -> those ranks in the order
# the ring or tree lays them out. The channel scheduler fills it; by default, rank order.
OrderFn = Callable[[int, list[int]], list[int]]


class ScheduleError(ValueError):
    pass


def rank_order(channel: int, ranks: list[int]) -> list[int]:
    return list(ranks)


@dataclass(frozen=True)
class Chunk:
    id: int
    nbytes: int
    channel: int
    owner: int  # the rank whose block it is (reduce-scatter's result, all-gather's origin)
    peer: int = -1  # all-to-all: the rank the owner's chunk is for


@dataclass(frozen=True)
class Send:
    id: int
    channel: int
    src: int
    dst: int
    chunks: tuple[int, ...]
    nbytes: int
    op: str
    deps: tuple[int, ...] = ()


@dataclass(frozen=True)
class CollectiveSpec:
    """What to build: ``nbytes`` is nccl-tests' size (all-gather: the gathered buffer;
    reduce-scatter: the buffer reduced; all-to-all: what each rank sends in all)."""

    nranks: int
    nbytes: int
    channels: int = 1
    chunk_size: int | None = None  # pipelining slice; None: one slice per step
    root: int = 0  # broadcast
    servers: tuple[str, ...] | None = None  # rank -> server (hierarchical algorithms)
    order: OrderFn = rank_order

    def check(self) -> None:
        if self.nranks < 1:
            raise ScheduleError(f"a collective needs at least 1 rank (got {self.nranks})")
        if self.nbytes < 1:
            raise ScheduleError(f"a collective's buffer needs at least 1 byte (got {self.nbytes})")
        if self.channels < 1:
            raise ScheduleError(f"--channels {self.channels}: expected at least 1")
        if self.chunk_size is not None and self.chunk_size < 1:
            raise ScheduleError(f"chunk size {self.chunk_size}: expected at least 1 byte")
        if not 0 <= self.root < self.nranks:
            raise ScheduleError(f"root {self.root}: expected a rank in 0..{self.nranks - 1}")
        if self.servers is not None and len(self.servers) != self.nranks:
            raise ScheduleError(f"the rank->server map has {len(self.servers)} entries for "
                                f"{self.nranks} ranks")

    def ordered(self, channel: int, ranks: list[int]) -> list[int]:
        """The order hook's layout of ``ranks``, checked to be a permutation of them."""
        out = list(self.order(channel, list(ranks)))
        if sorted(out) != sorted(ranks):
            raise ScheduleError(f"channel {channel}: the rank order {out} is not a "
                                f"permutation of {sorted(ranks)}")
        return out


@dataclass(frozen=True)
class Schedule:
    collective: str
    algorithm: str
    nranks: int
    nbytes: int
    channels: int
    chunks: tuple[Chunk, ...]
    sends: tuple[Send, ...]
    root: int = 0

    def channel_sends(self, channel: int) -> list[Send]:
        return [s for s in self.sends if s.channel == channel]

    @property
    def bytes_sent(self) -> int:
        return sum(s.nbytes for s in self.sends)

    def levels(self) -> list[list[Send]]:
        """Sends by DAG depth: a send's level is one more than its deepest dependency's."""
        depth: dict[int, int] = {}
        out: list[list[Send]] = []
        for s in self.sends:
            d = 1 + max((depth[p] for p in s.deps), default=-1)
            depth[s.id] = d
            while len(out) <= d:
                out.append([])
            out[d].append(s)
        return out


def split(total: int, parts: int) -> list[int]:
    """``total`` bytes in ``parts`` pieces as even as possible, the larger ones first (some
    are 0 bytes when total < parts: the piece still exists, it moves nothing)."""
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def slices_of(nbytes: int, per_slice_parts: int, chunk_size: int | None) -> int:
    """How many pipeline slices a ``nbytes`` part is cut into when each slice is cut again
    into ``per_slice_parts`` chunks of at most about ``chunk_size`` bytes."""
    if chunk_size is None:
        return 1
    return max(1, -(-nbytes // (per_slice_parts * chunk_size)))


@dataclass
class _Slot:
    """What the builder knows of one (rank, chunk): the sends whose writes make its value,
    the sends that read it since, and what a commuting reduce into it must wait for."""

    frontier: set[int] = field(default_factory=set)
    reads: set[int] = field(default_factory=set)
    base: set[int] = field(default_factory=set)


class ScheduleBuilder:
    def __init__(self, collective: str, algorithm: str, spec: CollectiveSpec) -> None:
        self.collective, self.algorithm, self.spec = collective, algorithm, spec
        self.chunks: list[Chunk] = []
        self.sends: list[Send] = []
        self._slots: dict[tuple[int, int], _Slot] = {}
        self._last_on_connection: dict[tuple[int, int, int], int] = {}

    def chunk(self, nbytes: int, channel: int, owner: int, peer: int = -1) -> int:
        self.chunks.append(Chunk(len(self.chunks), nbytes, channel, owner, peer))
        return len(self.chunks) - 1

    def send(self, channel: int, src: int, dst: int, chunks: Sequence[int], op: str,
             after: Iterable[int] = ()) -> int:
        """Emit a send; its dependencies follow from what was emitted before (and ``after``:
        sends it must wait for although no data says so, e.g. a pairwise exchange's steps)."""
        sid = len(self.sends)
        deps = set(after)
        last = self._last_on_connection.get((channel, src, dst))
        if last is not None:
            deps.add(last)
        for c in chunks:
            read = self._slots.setdefault((src, c), _Slot())
            deps |= read.frontier
            read.reads.add(sid)
            deps |= self._write(self._slots.setdefault((dst, c), _Slot()), sid, op)
        self._last_on_connection[(channel, src, dst)] = sid
        nbytes = sum(self.chunks[c].nbytes for c in chunks)
        self.sends.append(Send(sid, channel, src, dst, tuple(chunks), nbytes, op,
                               tuple(sorted(deps))))
        return sid

    @staticmethod
    def _write(slot: _Slot, sid: int, op: str) -> set[int]:
        """The sends a write into ``slot`` waits for. Reduces into one slot commute, so they
        wait only for the last copy and the reads before them, not for each other (a tree
        node's two children send up at once)."""
        if op == COPY:
            deps = slot.frontier | slot.reads
            slot.frontier, slot.reads, slot.base = {sid}, set(), {sid}
            return deps
        if slot.reads:  # the value was read: later reduces come after those reads
            slot.base, slot.frontier, slot.reads = set(slot.reads), set(), set()
        slot.frontier.add(sid)
        return set(slot.base)

    def build(self) -> Schedule:
        s = self.spec
        return Schedule(self.collective, self.algorithm, s.nranks, s.nbytes, s.channels,
                        tuple(self.chunks), tuple(self.sends), s.root)
