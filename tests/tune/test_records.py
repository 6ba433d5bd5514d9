import json
import math
import random
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from tilegrad import config
from tilegrad.errors import RecordsError
from tilegrad.schedule import Step, Trace
from tilegrad.tune.records import ANY_MACHINE, Database, Record, machine_fingerprint

HERE = "this machine"


def trace_json(factor: int) -> str:
    return Trace((Step.make("split", stage="C", loop="i", factor=factor),)).to_json()


def valid(costs, task_key="t1", factor=4, **kw) -> Record:
    return Record(task_key, f"matmul[{task_key}]", trace_json(factor), tuple(costs), **kw)


def failed(kind="crash", task_key="t1") -> Record:
    return Record(task_key, f"matmul[{task_key}]", trace_json(2), (), kind, f"{kind}: boom", build_s=0.5)


def test_records_survive_a_reopen(tmp_path):
    path = tmp_path / "tune.db"
    with Database(path, fingerprint=HERE) as db:
        added = [db.add(valid([3e-3, 1e-3, 2e-3], origin="random")), db.add(failed()),
                 db.add(valid([5e-4], task_key="t2", factor=8, build_s=0.2, run_s=0.1))]
    assert [r.id for r in added] == [1, 2, 3]
    assert all(r.fingerprint == HERE and r.timestamp > 0 for r in added)
    with Database(path, fingerprint=HERE) as db:
        assert db.records() == added
        assert db.records("t2") == added[2:]
        assert len(db) == 3 and db.count("t1") == 2 and db.count() == 3
    first = added[0]
    assert first.latency == 2e-3 and first.valid and first.origin == "random"
    assert first.trace == Trace.from_json(trace_json(4))
    assert added[1].latency == math.inf and not added[1].valid and added[1].error == "crash: boom"


def test_best_is_the_lowest_median_of_valid_records_on_this_machine(tmp_path):
    with Database(tmp_path / "tune.db", fingerprint=HERE) as db:
        assert db.best("t1") is None
        db.add(valid([4.0, 1.0, 4.0], factor=1))  # median 4: a fast outlier does not win
        db.add(failed("wrong"))
        db.add(valid([2.0, 3.0, 2.5], factor=2))
        db.add(valid([0.5], factor=3, fingerprint="another machine"))
        db.add(valid([0.1], task_key="t2", factor=5))
        assert db.best("t1").trace_json == trace_json(2)
        assert [r.latency for r in db.top("t1", 5)] == [2.5, 4.0]
        assert db.best("t1", fingerprint="another machine").latency == 0.5
        assert len(db.records("t1", fingerprint=ANY_MACHINE)) == 4
        assert db.count("t1") == 3 and len(db) == 5


def test_incomplete_records_are_refused(tmp_path):
    with Database(tmp_path / "tune.db", fingerprint=HERE) as db:
        with pytest.raises(RecordsError, match="both set or both None"):
            db.add(Record("t1", "n", "[]", (), "crash", None))
        with pytest.raises(RecordsError, match="finite costs"):
            db.add(Record("t1", "n", "[]", (math.inf,)))
        with pytest.raises(RecordsError, match="finite costs"):
            db.add(Record("t1", "n", "[]", ()))
        assert len(db) == 0


def test_a_record_from_a_measurement():
    from tilegrad.ir.graph import GraphBuilder
    from tilegrad.tune.measure import MeasureInput, MeasureResult
    from tilegrad.tune.task import extract_tasks

    b = GraphBuilder()
    (task,) = extract_tasks(b.build(b.op("relu", b.input("x", (4, 8)))))
    inp = MeasureInput(task, task.default_trace())
    rec = Record.from_measurement(inp, MeasureResult((1e-6, 2e-6), build_s=0.3, run_s=0.01), origin="default")
    assert (rec.task_key, rec.task_name, rec.trace, rec.costs) == (task.key, task.name, inp.trace, (1e-6, 2e-6))
    assert (rec.build_s, rec.run_s, rec.origin, rec.valid) == (0.3, 0.01, "default", True)


def test_the_fingerprint_names_cpu_compiler_flags_and_threads():
    with config.override(num_threads=3):
        three = machine_fingerprint()
    with config.override(num_threads=4):
        four = machine_fingerprint()
    with config.override(num_threads=4, cflags=("-O2", "-fPIC", "-shared")):
        other_flags = machine_fingerprint()
    assert three.endswith("; 3 threads") and four.endswith("; 4 threads")
    assert three.replace("3 threads", "4 threads") == four != other_flags
    assert "isa " in four and ("gcc" in four or "clang" in four or "cc" in four)


@pytest.mark.parametrize("content", [b"", b"hello, this is not a database" * 100, bytes(range(256)) * 64],
                         ids=["empty", "text", "binary"])
def test_a_file_that_is_not_a_database_is_refused(tmp_path, content):
    path = tmp_path / "notes.db"
    path.write_bytes(content)
    if not content:  # an empty file is a new database
        with Database(path, fingerprint=HERE) as db:
            assert len(db) == 0
        return
    with pytest.raises(RecordsError, match=f"{path} is not a readable tilegrad records database"):
        Database(path, fingerprint=HERE)


def test_a_foreign_or_newer_database_is_refused(tmp_path):
    foreign = tmp_path / "app.db"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE users (name TEXT)")
    conn.close()
    with pytest.raises(RecordsError, match=rf"{foreign} is an SQLite database but not .*its tables: users"):
        Database(foreign, fingerprint=HERE)

    newer = tmp_path / "newer.db"
    Database(newer, fingerprint=HERE).close()
    with sqlite3.connect(newer) as conn:
        conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema'")
    conn.close()
    with pytest.raises(RecordsError, match=rf"{newer} has records schema 99; this tilegrad reads schema 1"):
        Database(newer, fingerprint=HERE)

    with pytest.raises(RecordsError, match="is a directory"):
        Database(tmp_path, fingerprint=HERE)
    with pytest.raises(RecordsError, match="missing"):
        Database(tmp_path / "missing" / "tune.db", fingerprint=HERE)


# A writer that appends records as fast as it can and prints each committed id; the test kills it with SIGKILL.
WRITER = """
import random, sys
from tilegrad.schedule import Step, Trace
from tilegrad.tune.records import Database, Record

rng = random.Random(int(sys.argv[2]))
with Database(sys.argv[1], fingerprint="killed writer") as db:
    print("open", flush=True)
    while True:
        steps = tuple(Step.make("split", stage="C", loop=f"i{k}", factor=rng.randint(1, 64))
                      for k in range(rng.randint(1, 400)))  # up to ~30 KB: kills land inside big writes too
        ok = rng.random() < 0.8
        rec = Record("t%d" % rng.randint(0, 3), "task", Trace(steps).to_json(),
                     tuple(rng.random() for _ in range(3)) if ok else (),
                     None if ok else "crash", None if ok else "worker crashed: SIGSEGV" * rng.randint(1, 50),
                     rng.random(), rng.random(), origin="kill-test")
        print(db.add(rec).id, flush=True)
"""


def test_a_writer_killed_at_any_moment_leaves_a_sound_database(tmp_path):
    path = tmp_path / "tune.db"
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    rng = random.Random(7)
    committed = 0
    for round_ in range(6):
        proc = subprocess.Popen([sys.executable, str(script), str(path), str(round_)], stdout=subprocess.PIPE)
        if round_ == 0:
            time.sleep(rng.uniform(0.0, 0.3))  # often while it imports or creates the schema
        else:
            assert proc.stdout.readline() == b"open\n"
            time.sleep(rng.uniform(0.02, 0.4))
        proc.send_signal(signal.SIGKILL)
        out, _ = proc.communicate()
        assert proc.returncode == -signal.SIGKILL
        ids = [int(line) for line in out.split() if line.isdigit()]
        committed = max([committed, *ids])
        _assert_sound(path, committed)
    assert committed > 20  # the writer did get going between kills
    with Database(path, fingerprint="killed writer") as db:  # and the file takes more records
        rec = db.add(valid([1.0]))
        assert rec.id == len(db) and db.records(fingerprint=ANY_MACHINE)[-1] == rec


def _assert_sound(path, committed: int) -> None:
    """Integrity check ok; every committed row is there; ids contiguous; every row complete and parseable."""
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not tables:  # killed before it created the schema
            assert committed == 0
            return
        rows = conn.execute("SELECT id, task_key, trace, costs, latency, error_kind, error FROM records ORDER BY id")
        rows = rows.fetchall()
    finally:
        conn.close()
    assert [r[0] for r in rows] == list(range(1, len(rows) + 1))
    assert len(rows) >= committed
    for _, task_key, trace, costs, latency, error_kind, error in rows:
        assert task_key.startswith("t") and Trace.from_json(trace).steps
        costs = json.loads(costs)
        if error_kind is None:
            assert len(costs) == 3 and latency == sorted(costs)[1] and error is None
        else:
            assert costs == [] and latency is None and error.startswith("worker crashed")
