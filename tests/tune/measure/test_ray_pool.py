"""The actor pool under the Ray builder and runner: calls spread over actors, a dead actor's call runs again on
another, a hung actor is killed and its call times out, and every call has exactly one result; the same for
batches streamed back item by item, where an actor that fails mid-batch keeps what it sent and hands the rest on."""

import os
import time

import pytest
import ray

from tilegrad.tune.measure.ray_pool import ActorPool

# A local Ray cluster, whose actors are processes of their own; one cluster at a time under xdist.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]


@pytest.fixture(scope="module", autouse=True)
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@ray.remote(num_cpus=0)
class _Echo:
    def pid(self):
        return os.getpid()

    def call(self, x, sleep_s=0.0):
        time.sleep(sleep_s)
        return (x, os.getpid())

    def die_once(self, x, marker):
        """Dies the first time any actor runs it (`marker` is a file they share), answers after."""
        if _first(marker):
            os._exit(1)
        return (x, os.getpid())

    def die(self):
        os._exit(1)

    def refuse(self, x):
        raise ValueError(f"no {x}")

    @ray.method(num_returns="streaming")
    def stream(self, xs, log, fail_at=None, how=None):
        """Yields (x, pid) for each x, noting each x it starts in `log`; at `fail_at`, `how` it fails: "die" (the
        first time any actor gets there), "hang" or "refuse"."""
        for x in xs:
            with open(log, "a") as f:
                f.write(f"{x}\n")
            if x == fail_at and how == "die" and _first(log + ".died"):
                time.sleep(0.5)  # the results yielded so far reach the caller (their reports are asynchronous)
                os._exit(1)
            if x == fail_at and how == "hang":
                time.sleep(3600)
            if x == fail_at and how == "refuse":
                raise ValueError(f"no {x}")
            yield (x, os.getpid())


def _first(marker: str) -> bool:
    """True for the first caller only (`marker` is a file the actors share)."""
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        return False
    return True


def _failed(i, kind, detail):
    return (kind, detail)


def _echoes(n):
    actors = [_Echo.remote() for _ in range(n)]
    ray.get([a.pid.remote() for a in actors], timeout=60)
    return actors


def test_calls_spread_over_the_actors_and_come_back_in_order():
    pool = ActorPool(_echoes(2))
    out = pool.map(6, lambda a, i: a.call.remote(i, 0.2), lambda i: 30.0, _failed)
    assert [x for x, _ in out] == list(range(6))
    assert len({pid for _, pid in out}) == 2  # both actors took calls


def test_a_dead_actors_call_runs_again_on_another(tmp_path):
    actors = _echoes(2)
    pool = ActorPool(actors)
    marker = str(tmp_path / "died")
    out = pool.map(3, lambda a, i: a.die_once.remote(i, marker) if i == 0 else a.call.remote(i),
                   lambda i: 30.0, _failed)
    assert [x for x, _ in out] == [0, 1, 2]  # nothing lost, nothing twice
    assert len(pool.actors) == 1 and os.path.exists(marker)


def test_a_lost_actor_is_replaced_when_the_pool_can():
    pool = ActorPool(_echoes(1), replace=_Echo.remote, max_attempts=3)
    first = pool.actors[0]
    out = pool.map(1, lambda a, i: a.die.remote() if a is first else a.call.remote(i), lambda i: 30.0, _failed)
    assert out[0][0] == 0 and len(pool.actors) == 1 and pool.actors[0] is not first


def test_a_call_that_kills_every_actor_it_meets_is_given_up_as_lost():
    pool = ActorPool(_echoes(2), max_attempts=2)
    out = pool.map(1, lambda a, i: a.die.remote(), lambda i: 30.0, _failed)
    assert out[0][0] == "lost" and "2 actors died" in out[0][1] and pool.actors == []
    assert pool.map(2, lambda a, i: a.call.remote(i), lambda i: 30.0, _failed) == [
        ("lost", "no actor is left to run it")] * 2


def test_a_hung_actor_is_killed_and_its_call_times_out():
    actors = _echoes(2)
    pool = ActorPool(actors)
    start = time.monotonic()
    out = pool.map(3, lambda a, i: a.call.remote(i, 3600.0 if i == 0 else 0.0), lambda i: 2.0, _failed)
    assert out[0] == ("timeout", "timeout after 2 s") and [x for x, _ in out[1:]] == [1, 2]
    assert time.monotonic() - start < 30 and len(pool.actors) == 1
    with pytest.raises(ray.exceptions.RayActorError):
        ray.get(actors[0].pid.remote(), timeout=30)


def test_an_exception_in_the_call_is_its_error():
    pool = ActorPool(_echoes(1))
    (out,) = pool.map(1, lambda a, i: a.refuse.remote(i), lambda i: 30.0, _failed)
    assert out[0] == "error" and "ValueError: no 0" in out[1] and len(pool.actors) == 1


def _started(log) -> list[int]:
    """How many times each item was started, by item."""
    with open(log) as f:
        items = [int(line) for line in f]
    return [items.count(x) for x in range(max(items) + 1)]


def test_batches_spread_over_the_actors_and_come_back_in_order(tmp_path):
    actors = _echoes(2)
    pool = ActorPool(actors)
    log = str(tmp_path / "log")
    out = pool.map_batches(10, lambda a, items: a.stream.remote(items, log), lambda i: 30.0, _failed)
    assert [x for x, _ in out] == list(range(10)) and _started(log) == [1] * 10
    assert len({pid for _, pid in out}) == 2


def test_an_actor_dying_mid_batch_keeps_what_it_sent_and_hands_on_the_rest(tmp_path):
    actors = _echoes(2)
    pids = ray.get([a.pid.remote() for a in actors])
    pool = ActorPool(actors)
    log = str(tmp_path / "log")
    out = pool.map_batches(8, lambda a, items: a.stream.remote(items, log, 1, "die"), lambda i: 30.0, _failed)
    assert [x for x, _ in out] == list(range(8))  # nothing lost
    assert out[0][1] == pids[0] and {pid for _, pid in out[1:]} == {pids[1]}  # item 0 came back before the death
    assert _started(log) == [1, 2, 1, 1, 1, 1, 1, 1]  # only the item it died on ran twice
    assert pool.actors == [actors[1]]


def test_an_actor_hanging_mid_batch_is_killed_its_item_times_out_and_the_rest_run_elsewhere(tmp_path):
    actors = _echoes(2)
    pool = ActorPool(actors)
    log = str(tmp_path / "log")
    out = pool.map_batches(8, lambda a, items: a.stream.remote(items, log, 1, "hang"), lambda i: 2.0, _failed)
    assert out[1] == ("timeout", "timeout after 2 s")
    assert [x for x, _ in out[:1] + out[2:]] == [0, 2, 3, 4, 5, 6, 7] and _started(log) == [1] * 8
    assert pool.actors == [actors[1]]


def test_an_exception_mid_batch_is_its_items_error_and_the_rest_still_run(tmp_path):
    pool = ActorPool(_echoes(1))
    log = str(tmp_path / "log")
    out = pool.map_batches(4, lambda a, items: a.stream.remote(items, log, 1, "refuse"), lambda i: 30.0, _failed)
    assert out[1][0] == "error" and "ValueError: no 1" in out[1][1]
    assert [x for x, _ in out[:1] + out[2:]] == [0, 2, 3] and _started(log) == [1] * 4 and len(pool.actors) == 1
