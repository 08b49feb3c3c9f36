"""Indexes the snapshot keeps up to date as pods are assumed, bound and deleted, so PodTopologySpread and
InterPodAffinity read per-domain counts instead of scanning every pod on every node for every pod.

* `TopologyIndex`: for a node label key, each row's domain id (-1 without the label) and the domain values;
  rebuilt only after a node change.
* `MatchIndex`: for a predicate on pods (a spread constraint's selector in a namespace, an affinity term
  with its owner's namespace), how many pods on each row it accepts; registered on first use, then
  updated per pod event (a bounded number of predicates, least recently used dropped).
* `TermIndex`: for each distinct (kind, term, owner namespace) that existing pods carry (required
  anti-affinity, required affinity, preferred affinity / anti-affinity), how many pods on each row carry it;
  the incoming pod is matched once per distinct term rather than once per existing pod.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import orjson

from ..objects import LabelSelector, Pod, PodAffinityTerm

if TYPE_CHECKING:
    from .types import NodeInfo

PodPredicate = Callable[[Pod], bool]

ANTI_REQUIRED, AFFINITY_REQUIRED, AFFINITY_PREFERRED, ANTI_PREFERRED = range(4)


def selector_key(sel: LabelSelector | None) -> bytes | None:
    """A selector is fully defined by its raw form (matchLabelKeys already merged into it)."""
    return None if sel is None else orjson.dumps(sel.raw, option=orjson.OPT_SORT_KEYS)


def term_key(t: PodAffinityTerm) -> Hashable:
    """What decides which pods a term matches (its topology key and weight do not)."""
    return (selector_key(t.selector), t.namespaces, selector_key(t.namespace_selector))


@dataclass(slots=True)
class Topology:
    ids: np.ndarray  # per row: domain id, -1 when the node lacks the key
    values: list[str]  # domain id -> label value
    index: dict[str, int]  # label value -> domain id
    #: every node carries the key (no -1 in `ids`)
    full: bool = False
    #: every node carries its own value, so domain ids are the rows (kubernetes.io/hostname)
    identity: bool = False


def per_domain_sums(top: Topology, per_row: np.ndarray) -> np.ndarray | None:
    """Per domain of `top`: the sum of `per_row` over its nodes where per_row > 0; None when no node with the
    key has per_row > 0. Topologies every node carries (hostname, most zone keys) take the sums without
    selecting rows first: several times cheaper on thousands of nodes, and this runs per pod and term."""
    if top.full:
        pos = per_row > 0
        if not pos.any():
            return None
        kept = per_row * pos
        if top.identity:
            return kept.astype(np.int64, copy=False)
        if len(top.values) == 1:
            return np.array([kept.sum()], dtype=np.int64)
        return np.bincount(top.ids, weights=kept, minlength=len(top.values)).astype(np.int64)
    mask = (top.ids >= 0) & (per_row > 0)
    if not mask.any():
        return None
    return np.bincount(top.ids[mask], weights=per_row[mask], minlength=len(top.values)).astype(np.int64)


class TopologyIndex:
    def __init__(self) -> None:
        self._by_key: dict[str, Topology] = {}

    def get(self, key: str, infos: list[NodeInfo]) -> Topology:
        t = self._by_key.get(key)
        if t is None:
            index: dict[str, int] = {}
            ids = np.fromiter((-1 if (v := (ni.node.labels.get(key) if ni.node is not None else None)) is None
                               else index.setdefault(v, len(index)) for ni in infos), dtype=np.int64,
                              count=len(infos))
            full = not len(ids) or int(ids.min()) >= 0
            t = self._by_key[key] = Topology(ids, list(index), index, full, full and len(index) == len(ids))
        return t

    def reset(self) -> None:
        self._by_key.clear()


class MatchIndex:
    MAX_PREDICATES = 256

    def __init__(self) -> None:
        self._entries: dict[Hashable, tuple[PodPredicate, np.ndarray]] = {}

    def counts(self, key: Hashable, pred: PodPredicate, infos: list[NodeInfo]) -> np.ndarray:
        """Per row: pods on the node that `pred` accepts (read-only)."""
        e = self._entries.pop(key, None)
        if e is None:
            arr = np.fromiter((sum(1 for p in ni.pods if pred(p)) for ni in infos), dtype=np.int64,
                              count=len(infos))
            e = (pred, arr)
            if len(self._entries) >= self.MAX_PREDICATES:
                del self._entries[next(iter(self._entries))]
        self._entries[key] = e  # most recently used last
        return e[1]

    def on_pod(self, row: int, pod: Pod, sign: int) -> None:
        for pred, arr in self._entries.values():
            if pred(pod):
                arr[row] += sign

    def reset(self) -> None:
        self._entries.clear()


@dataclass(slots=True)
class TermEntry:
    kind: int
    term: PodAffinityTerm
    owner_ns: str
    counts: np.ndarray
    total: int = 0
    #: (the Topology of the term's key it was summed over, pods per domain), kept up to date per pod event
    #: while that Topology is the snapshot's current one
    by_domain: tuple[Topology, np.ndarray] | None = None

    def domain_counts(self, top: Topology) -> np.ndarray:
        """Pods carrying the term per domain of `top` (read-only): summed once, then updated per pod."""
        got = self.by_domain
        if got is not None and got[0] is top:
            return got[1]
        mask = top.ids >= 0
        arr = np.bincount(top.ids[mask], weights=self.counts[mask], minlength=len(top.values)).astype(np.int64)
        self.by_domain = (top, arr)
        return arr

    def count(self, row: int, sign: int) -> None:
        self.counts[row] += sign
        self.total += sign
        got = self.by_domain
        if got is not None:
            d = got[0].ids[row]
            if d >= 0:
                got[1][d] += sign


def _pod_terms(pod: Pod) -> Iterable[tuple[int, PodAffinityTerm]]:
    for t in pod.anti_affinity_required:
        yield ANTI_REQUIRED, t
    for t in pod.affinity_required:
        yield AFFINITY_REQUIRED, t
    for t in pod.affinity_preferred:
        yield AFFINITY_PREFERRED, t
    for t in pod.anti_affinity_preferred:
        yield ANTI_PREFERRED, t


_term_versions = iter(range(1, 2**62))


class TermIndex:
    def __init__(self) -> None:
        self._entries: dict[Hashable, TermEntry] | None = None  # None: rebuild from the nodes on next read
        self._n = 0
        #: changes whenever some entry's counts may have (unique across TermIndex objects and resets), so a
        #: result computed from the entries can be kept while it stays the same
        self.version = next(_term_versions)

    def entries(self, infos: list[NodeInfo]) -> Iterable[TermEntry]:
        if self._entries is None:
            self._entries = {}
            self._n = len(infos)
            for ni in infos:
                for p in ni.pods_with_affinity:
                    self._add(ni.row, p, 1)
        return [e for e in self._entries.values() if e.total > 0]

    def _add(self, row: int, pod: Pod, sign: int) -> None:
        assert self._entries is not None
        self.version = next(_term_versions)
        for kind, t in _pod_terms(pod):
            key = (kind, term_key(t), t.topology_key, t.weight, pod.namespace)
            e = self._entries.get(key)
            if e is None:
                e = self._entries[key] = TermEntry(kind, t, pod.namespace, np.zeros(self._n, dtype=np.int64))
            e.count(row, sign)

    def on_pod(self, row: int, pod: Pod, sign: int) -> None:
        if self._entries is not None and (pod.anti_affinity_required or pod.affinity_required
                                          or pod.affinity_preferred or pod.anti_affinity_preferred):
            self._add(row, pod, sign)

    def reset(self) -> None:
        self._entries = None
        self.version = next(_term_versions)


class DomainCounts:
    """A mapping (topology key, label value) -> count, held as one array per key over the snapshot's domain
    ids, so adding a whole per-row count vector and reading it back per row are array operations. An entry
    exists once it has been touched (as in a dict filled by `d[k] = d.get(k, 0) + n`)."""

    __slots__ = ("snap", "tops", "arrays", "touched", "extra")

    def __init__(self, snap: Any) -> None:
        self.snap = snap
        self.tops: dict[str, Topology] = {}
        self.arrays: dict[str, np.ndarray] = {}
        self.touched: dict[str, np.ndarray] = {}
        self.extra: dict[tuple[str, str], int] = {}  # values no node in the snapshot carries

    def _key(self, key: str) -> Topology:
        top = self.tops.get(key)
        if top is None:
            top = self.tops[key] = self.snap.topology(key)
            self.arrays[key] = np.zeros(len(top.values), dtype=np.int64)
            self.touched[key] = np.zeros(len(top.values), dtype=bool)
        return top

    def add_rows(self, key: str, per_row: np.ndarray, weight: int) -> None:
        """self[(key, domain of row)] += weight * per_row[row], for every row with per_row > 0."""
        top = self.snap.topology(key) if key not in self.tops else self.tops[key]
        per_domain = per_domain_sums(top, per_row)
        if per_domain is None:
            return
        self._key(key)
        self.arrays[key] += weight * per_domain
        self.touched[key] |= per_domain > 0

    def add_domains(self, key: str, top: Topology, per_domain: np.ndarray, weight: int) -> None:
        """self[(key, d)] += weight * per_domain[d] for every domain d of `top` (the snapshot's topology of
        `key`) with per_domain[d] > 0: `add_rows` with the per-row sum already done."""
        pos = per_domain > 0
        if not pos.any():
            return
        if key not in self.tops:
            self.tops[key] = top
            self.arrays[key] = np.zeros(len(top.values), dtype=np.int64)
            self.touched[key] = np.zeros(len(top.values), dtype=bool)
        self.arrays[key] += weight * per_domain
        self.touched[key] |= pos

    def any_positive(self) -> bool:
        """any(v > 0 for v in self.values()), without walking the entries."""
        return any(v > 0 for v in self.extra.values()) or any(
            bool(((arr > 0) & self.touched[key]).any()) for key, arr in self.arrays.items())

    def get(self, pair: tuple[str, str], default: int = 0) -> int:
        key, val = pair
        top = self.tops.get(key)
        if top is not None:
            i = top.index.get(val)
            if i is not None:
                return int(self.arrays[key][i]) if self.touched[key][i] else default
        return self.extra.get(pair, default)

    def __setitem__(self, pair: tuple[str, str], value: int) -> None:
        key, val = pair
        top = self._key(key)
        i = top.index.get(val)
        if i is None:
            self.extra[pair] = value
        else:
            self.arrays[key][i] = value
            self.touched[key][i] = True

    def items(self) -> Iterable[tuple[tuple[str, str], int]]:
        for key, arr in self.arrays.items():
            values = self.tops[key].values
            for i in np.flatnonzero(self.touched[key]).tolist():
                yield (key, values[i]), int(arr[i])
        yield from self.extra.items()

    def values(self) -> Iterable[int]:
        return (v for _, v in self.items())

    def __bool__(self) -> bool:
        return bool(self.extra) or any(t.any() for t in self.touched.values())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, DomainCounts | dict):
            return dict(self.items()) == dict(other.items())
        return NotImplemented

    # defining __eq__ leaves __hash__ None: a DomainCounts is mutable, so unhashable

    def copy(self) -> DomainCounts:
        out = DomainCounts(self.snap)
        out.tops = dict(self.tops)
        out.arrays = {k: a.copy() for k, a in self.arrays.items()}
        out.touched = {k: t.copy() for k, t in self.touched.items()}
        out.extra = dict(self.extra)
        return out

    def rows_positive(self, n: int, keys: set[str] | None = None) -> np.ndarray:
        """Rows whose node carries a label (k, v) with self[(k, v)] > 0 (k among `keys` when given)."""
        out = np.zeros(n, dtype=bool)
        for key, arr in self.arrays.items():
            if keys is not None and key not in keys:
                continue
            pos = (arr > 0) & self.touched[key]
            if pos.any():
                top = self.tops[key]
                if top.identity:
                    out |= pos
                elif top.full:
                    out |= pos[top.ids]
                else:
                    out |= (top.ids >= 0) & np.append(pos, False)[top.ids]
        return out
