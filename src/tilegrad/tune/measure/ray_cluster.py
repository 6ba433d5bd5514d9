"""Devices on a Ray cluster, registered under a key, and the measurer that tunes on them.

As with TVM's tracker, a device registers under a key that names the kind of machine ("amd-epyc-7b13-avx2"; by
default this machine's CPU model and ISA), and a tuning run asks for a key, not a machine: it measures on every
device of that key, wherever it is in the cluster. A device is a named, detached Ray actor (`ray_actors.Device`)
pinned to its node and to a set of its cores, so it outlives the command that registered it; its name is
`tilegrad-device:KEY:HOST:CORES` in the `tilegrad` namespace.

`tilegrad ray-device --address HEAD --key KEY --cores 0-7` registers devices from a node of the cluster, and
`tilegrad tune --ray HEAD --ray-key KEY` tunes on them (docs/tuning.md, "Tuning on a cluster").
"""

from __future__ import annotations

import logging
import re
import socket

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from ... import config
from ...config import Config
from ...errors import MeasureError
from ...target import host
from .measurer import Measurer
from .ray_actors import Device
from .ray_builder import RayBuilder
from .ray_runner import RayRunner

NAMESPACE = "tilegrad"
_PREFIX = "tilegrad-device:"
_log = logging.getLogger(__name__)
_DESCRIBE_TIMEOUT_S = 120.0  # a new device's start: an interpreter importing tilegrad


def default_key() -> str:
    """This machine's key: its CPU model and widest vector ISA, as a lower-case slug ("amd-epyc-7b13-avx2")."""
    machine = host()
    model = re.sub(r"\((r|tm)\)|\bcpu\b|\bprocessor\b|@.*$", "", machine.model.lower())
    return "-".join(re.findall(r"[a-z0-9]+", model) + [machine.isa])


def connect(address: str, *, start: bool = True) -> None:
    """Join the Ray cluster at `address`; "auto" is the one running on this machine, or with `start` a new one
    when none runs (`ray.init()`). Nothing when this process is connected already."""
    if ray.is_initialized():
        return
    if address == "auto" and not start:
        ray.init(address="auto", namespace=NAMESPACE, log_to_driver=False)
    elif address == "auto":
        ray.init(namespace=NAMESPACE, include_dashboard=False, log_to_driver=False)
    else:
        ray.init(address=address, namespace=NAMESPACE, log_to_driver=False)


def register_device(key: str, cores: list[int] | None = None, *, detached: bool = True):
    """A device of `key` on this node, on `cores` (all when None); an existing one of the same name is reused.
    A detached device outlives this process; one that is not ends with it, or once no reference to it is left."""
    if not re.fullmatch(r"[A-Za-z0-9._-]+", key):
        raise MeasureError(f"device key {key!r}: use letters, digits, '.', '_' and '-' (it is part of the "
                           f"device's name, whose parts ':' separates)")
    cores_text = ",".join(map(str, sorted(cores))) if cores else "all"
    name = f"{_PREFIX}{key}:{socket.gethostname()}:{cores_text}"
    node = ray.get_runtime_context().get_node_id()
    device = Device.options(name=name, namespace=NAMESPACE, get_if_exists=True, num_cpus=0,
                            lifetime="detached" if detached else None,
                            scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)).remote(cores)
    niceness = describe(device)["niceness"]  # waits for it to start
    if niceness > 0:
        _log.warning("device %s times at niceness %d: Ray starts its workers there (RAY_worker_niceness, 15 by "
                     "default) and only root may lower it, so its kernels lose their cores to any busy process; "
                     "start Ray with RAY_worker_niceness=0 in its environment", name, niceness)
    return device


def describe(device) -> dict:
    """The device's host, Ray node, cores, niceness and machine identity (`ray_actors.Device.describe`)."""
    return ray.get(device.describe.remote(), timeout=_DESCRIBE_TIMEOUT_S)


def devices(key: str) -> list:
    """The devices registered under `key`, anywhere in the cluster."""
    names = sorted(a["name"] for a in ray.util.list_named_actors(all_namespaces=True)
                   if a["namespace"] == NAMESPACE and a["name"].startswith(f"{_PREFIX}{key}:"))
    return [ray.get_actor(name, namespace=NAMESPACE) for name in names]


def keys() -> list[str]:
    """The keys devices are registered under."""
    return sorted({a["name"][len(_PREFIX):].split(":")[0] for a in ray.util.list_named_actors(all_namespaces=True)
                   if a["namespace"] == NAMESPACE and a["name"].startswith(_PREFIX)})


def ray_measurer(address: str, key: str | None = None, *, cfg: Config | None = None, builders: int | None = None,
                 build_timeout_s: float = 60.0, check_fraction: float = 0.25, **timing) -> Measurer:
    """A `Measurer` that builds on Ray workers near the devices of `key` (default: `default_key()`) and times on
    those devices, both with `cfg` (default: this process's configuration). With `address` "auto" and no device of the key registered, this machine becomes the one
    device (for as long as this process runs). `check_fraction` is the `Measurer`'s, `timing` are `LocalRunner`'s
    settings."""
    connect(address)
    cfg = cfg or config.get()
    key = key or default_key()
    found = devices(key)
    if not found and address == "auto" and key == default_key():
        found = [register_device(key, detached=False)]
    if not found:
        known = ", ".join(keys()) or "none"
        raise MeasureError(f"no device is registered under key {key!r} on the Ray cluster at {address} (keys: "
                           f"{known}); register one on a machine of the cluster with `tilegrad ray-device "
                           f"--address {address} --key {key}`")
    nodes = sorted({describe(d)["node_id"] for d in found})
    runner = RayRunner(found, cfg, **timing)
    builder = RayBuilder(cfg, workers=builders, timeout_s=build_timeout_s, nodes=nodes)
    return Measurer(runner=runner, builder=builder, check_fraction=check_fraction, cfg=cfg)
