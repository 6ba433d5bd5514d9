"""The tuning records database: every measured candidate, one SQLite row each, append-only.

A record holds the task (its key and name), the trace as JSON, the costs (seconds per call, one per repeat) or
the error that stands in for them, the build and run wall times, when it was measured, which policy or sketch
proposed it (`origin`), and the machine it was measured on (`machine_fingerprint()`): timings from another CPU,
compiler or thread count are kept but never chosen as this machine's best.

The file survives a kill at any moment: the journal is a write-ahead log with `synchronous=FULL`, each `add` is
one committed transaction, the schema is created in one transaction, and rows are never updated or deleted. A
killed writer loses at most the row it was adding; reopening and appending just works.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import math
import re
import sqlite3
import statistics
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .. import config
from ..config import Config
from ..backend import backend_for
from ..errors import RecordsError
from ..runtime.build import compiler_identity, find_compiler
from ..target import Target, host

if TYPE_CHECKING:
    from ..schedule import Trace
    from .measure import MeasureInput, MeasureResult

APPLICATION = "tilegrad-records"
SCHEMA_VERSION = 1
ANY_MACHINE = "*"  # as `fingerprint`: records from every machine
CONFIRMED = "confirm"  # the origin policy of a task's confirmed best record (`confirm.py`)

_SCHEMA = [
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE records (
        id INTEGER PRIMARY KEY,
        task_key TEXT NOT NULL,
        task_name TEXT NOT NULL,
        trace TEXT NOT NULL,
        costs TEXT NOT NULL,
        latency REAL,
        error_kind TEXT,
        error TEXT,
        build_s REAL NOT NULL,
        run_s REAL NOT NULL,
        timestamp REAL NOT NULL,
        origin TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        CHECK ((error_kind IS NULL) = (error IS NULL)),
        CHECK ((error_kind IS NULL) = (latency IS NOT NULL))
    )""",
    "CREATE INDEX records_by_task ON records (task_key, fingerprint, latency)",
]
_COLUMNS = ("id", "task_key", "task_name", "trace", "costs", "error_kind", "error", "build_s", "run_s", "timestamp",
            "origin", "fingerprint")


@dataclasses.dataclass(frozen=True)
class Record:
    """One measured candidate. `fingerprint`, `timestamp` and `id` left None are filled in by `Database.add`."""

    task_key: str
    task_name: str
    trace_json: str
    costs: tuple[float, ...]
    error_kind: str | None = None
    error: str | None = None
    build_s: float = 0.0
    run_s: float = 0.0
    origin: str = ""
    fingerprint: str | None = None
    timestamp: float | None = None
    id: int | None = None

    @property
    def valid(self) -> bool:
        return self.error_kind is None

    @property
    def latency(self) -> float:
        """Median cost; infinite for a failed candidate."""
        return statistics.median(self.costs) if self.valid and self.costs else math.inf

    @functools.cached_property
    def trace(self) -> Trace:
        from ..schedule import Trace

        return Trace.from_json(self.trace_json)

    @staticmethod
    def from_measurement(inp: MeasureInput, result: MeasureResult, *, origin: str = "") -> Record:
        """The record of one measured candidate (the tuner's database callback)."""
        return Record(inp.task.key, inp.task.name, inp.trace.to_json(), tuple(result.costs), result.error_kind,
                      result.error, result.build_s, result.run_s, origin)


def machine_fingerprint(cfg: Config | None = None) -> str:
    """What a timing depends on besides the kernel: CPU model and ISA, compiler and flags, thread count.

    Readable and stable: `AMD EPYC 7R13 Processor; isa 3f0c1a2b9d8e; gcc (Debian 12.2.0-14) 12.2.0;
    cflags 91ab2c3d4e5f; 2 threads`.
    """
    cfg = cfg or config.get()
    machine = host()
    cc = compiler_identity(find_compiler(cfg))
    return f"{machine.model}; isa {_digest(' '.join(sorted(machine.flags)))}; {cc}; cflags {_digest(' '.join(cfg.compile_flags))}; {cfg.num_threads} threads"


def machine_class(fingerprint: str) -> str | None:
    """The ISA and compiler flags a CPU fingerprint names: machines of one class build the same code from a
    schedule, so one's records are a good start on another (None for a GPU's fingerprint)."""
    found = re.search(r"; (isa \w+); .*; (cflags \w+); ", fingerprint)
    return f"{found[1]}; {found[2]}" if found else None


class RecordsFromAnotherMachine(UserWarning):
    """The records used were measured on another machine of this one's class (`machine_class`)."""


def target_fingerprint(target: Target | None, cfg: Config | None = None) -> str:
    """The fingerprint of timings on `target` (None: this CPU), as its backend names it: this machine's
    (`machine_fingerprint`) for the CPU, and for a GPU its model, architecture and NVRTC version, so that CPU and
    GPU records of one database never mix.

    `cuda; NVIDIA H100 80GB HBM3; sm_90; nvrtc 12.9`.
    """
    if target is None:
        return machine_fingerprint(cfg)
    return backend_for(target).fingerprint(target, cfg)


class Database:
    """The records file at `path`, created if missing. Use as a context manager, or `close()` it."""

    def __init__(self, path: str | Path, *, fingerprint: str | None = None):
        self.path = Path(path)
        self.fingerprint = fingerprint or machine_fingerprint()
        if self.path.is_dir():
            raise RecordsError(f"{self.path} is a directory; give the path of a records file (e.g. tune.db)")
        try:
            self._conn = sqlite3.connect(self.path, isolation_level=None, timeout=60.0)
        except sqlite3.Error as e:
            raise RecordsError(f"cannot open records database {self.path}: {e}") from None
        try:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=FULL")
            self._check_or_create_schema()
        except sqlite3.DatabaseError as e:
            self._conn.close()
            raise RecordsError(f"{self.path} is not a readable tilegrad records database: {e}") from None
        except RecordsError:
            self._conn.close()
            raise

    def add(self, rec: Record) -> Record:
        """Append `rec` in one committed transaction; returns it with its id, timestamp and fingerprint."""
        _check(rec)
        rec = dataclasses.replace(rec, fingerprint=rec.fingerprint or self.fingerprint,
                                  timestamp=time.time() if rec.timestamp is None else rec.timestamp)
        row = (rec.task_key, rec.task_name, rec.trace_json, json.dumps(list(rec.costs)),
               rec.latency if rec.valid else None, rec.error_kind, rec.error, rec.build_s, rec.run_s, rec.timestamp,
               rec.origin, rec.fingerprint)
        with self._transaction():
            cur = self._conn.execute(
                "INSERT INTO records (task_key, task_name, trace, costs, latency, error_kind, error, build_s, run_s,"
                " timestamp, origin, fingerprint) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", row)
        return dataclasses.replace(rec, id=cur.lastrowid)

    def records(self, task_key: str | None = None, fingerprint: str | None = None) -> list[Record]:
        """Records in the order they were added: of one task or all, of this machine (or `fingerprint`, or
        ANY_MACHINE)."""
        where, args = self._filter(task_key, fingerprint)
        return self._select(f"{where} ORDER BY id", args)

    def top(self, task_key: str, k: int, fingerprint: str | None = None) -> list[Record]:
        """The `k` valid records of `task_key` with the lowest latency on this machine (or `fingerprint`)."""
        where, args = self._filter(task_key, fingerprint)
        return self._select(f"{where} AND error_kind IS NULL ORDER BY latency, id LIMIT ?", (*args, k))

    def best(self, task_key: str, fingerprint: str | None = None) -> Record | None:
        """The schedule to use for `task_key` on this machine: the newest confirmed record (`confirm.py`) if
        there is one, else the fastest valid record; None if it has none."""
        where, args = self._filter(task_key, fingerprint)
        confirmed = self._select(f"{where} AND error_kind IS NULL AND origin LIKE ? ORDER BY id DESC LIMIT 1",
                                 (*args, f'{{"policy": "{CONFIRMED}"%'))
        if confirmed:
            return confirmed[0]
        top = self.top(task_key, 1, fingerprint)
        return top[0] if top else None

    def count(self, task_key: str | None = None, fingerprint: str | None = None) -> int:
        """How many records (valid or not) `task_key` has on this machine (or `fingerprint`)."""
        where, args = self._filter(task_key, fingerprint)
        return self._conn.execute(f"SELECT COUNT(*) FROM records {where}", args).fetchone()[0]

    def kin(self) -> str | None:
        """When this machine has no records here: the fingerprint of the machine of its class (`machine_class`)
        with the most records, if any."""
        own_class = machine_class(self.fingerprint)
        if own_class is None or self.count() > 0:
            return None
        counts = self._conn.execute("SELECT fingerprint, COUNT(*) FROM records GROUP BY fingerprint ORDER BY 2 DESC")
        return next((fp for fp, _ in counts if machine_class(fp) == own_class), None)

    def __len__(self) -> int:
        return self._conn.execute("SELECT COUNT(*) FROM records").fetchone()[0]

    def graph_choice(self, digest: str) -> dict | None:
        """The whole-graph decision stored for the graph of `digest` on this machine (`graph_choice.py`)."""
        row = self._conn.execute("SELECT value FROM meta WHERE key = ?",
                                 (f"graph/{self.fingerprint}/{digest}",)).fetchone()
        return None if row is None else json.loads(row[0])

    def set_graph_choice(self, digest: str, decision: dict) -> None:
        """Store (or replace) the whole-graph decision for the graph of `digest` on this machine."""
        with self._transaction():
            self._conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                               (f"graph/{self.fingerprint}/{digest}", json.dumps(decision, sort_keys=True)))

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- internals --
    def _check_or_create_schema(self) -> None:
        if not self._tables():
            with self._transaction():
                if not self._tables():  # another process may have created it while we waited for the lock
                    for statement in _SCHEMA:
                        self._conn.execute(statement)
                    self._conn.executemany("INSERT INTO meta VALUES (?, ?)",
                                           [("application", APPLICATION), ("schema", str(SCHEMA_VERSION))])
        tables = self._tables()
        meta = dict(self._conn.execute("SELECT key, value FROM meta")) if "meta" in tables else {}
        if meta.get("application") != APPLICATION or "records" not in tables:
            raise RecordsError(f"{self.path} is an SQLite database but not a tilegrad records database "
                               f"(its tables: {', '.join(sorted(tables))}); give a new path or a tune database")
        if meta.get("schema") != str(SCHEMA_VERSION):
            raise RecordsError(f"{self.path} has records schema {meta.get('schema')}; this tilegrad reads schema "
                               f"{SCHEMA_VERSION}: use the tilegrad version that wrote it, or a new database")

    def _tables(self) -> set[str]:
        return {name for (name,) in self._conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    def _filter(self, task_key: str | None, fingerprint: str | None) -> tuple[str, tuple]:
        fingerprint = fingerprint or self.fingerprint
        clauses, args = ["1"], []
        if task_key is not None:
            clauses.append("task_key = ?")
            args.append(task_key)
        if fingerprint != ANY_MACHINE:
            clauses.append("fingerprint = ?")
            args.append(fingerprint)
        return "WHERE " + " AND ".join(clauses), tuple(args)

    def _select(self, tail: str, args: Sequence) -> list[Record]:
        rows = self._conn.execute(f"SELECT {', '.join(_COLUMNS)} FROM records {tail}", args)
        return [_record(row) for row in rows]


def _record(row: tuple) -> Record:
    (rid, task_key, task_name, trace, costs, error_kind, error, build_s, run_s, timestamp, origin,
     fingerprint) = row
    return Record(task_key, task_name, trace, tuple(json.loads(costs)), error_kind, error, build_s, run_s, origin,
                  fingerprint, timestamp, rid)


def _check(rec: Record) -> None:
    """Refuse a record the schema would store but no reader could trust."""
    if (rec.error_kind is None) != (rec.error is None):
        raise RecordsError(f"record of task {rec.task_key}: error_kind and error must be both set or both None")
    if rec.valid and (not rec.costs or not all(math.isfinite(c) and c >= 0 for c in rec.costs)):
        raise RecordsError(f"record of task {rec.task_key}: a valid record needs finite costs, got {rec.costs}")


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]
