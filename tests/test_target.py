"""The host's caches as sysfs describes them: what the rules size tiles by."""

from tilegrad.target import _cache_sizes


def _index(root, name, **files):
    d = root / name
    d.mkdir()
    for key, text in files.items():
        (d / key).write_text(text + "\n")


def test_cache_sizes_and_the_l1_ways_come_from_sysfs(tmp_path):
    _index(tmp_path, "index0", level="1", type="Data", size="48K", coherency_line_size="64", ways_of_associativity="12")
    _index(tmp_path, "index1", level="1", type="Instruction", size="32K", coherency_line_size="64",
           ways_of_associativity="8")
    _index(tmp_path, "index2", level="2", type="Unified", size="2048K", coherency_line_size="64",
           ways_of_associativity="16")
    assert _cache_sizes(tmp_path) == {"L1d": 48 * 1024, "line": 64, "L1d_ways": 12, "L2": 2 * 1024 * 1024}


def test_a_cache_whose_ways_are_unreadable_keeps_its_size(tmp_path):
    """Some hypervisors leave out or zero the associativity: the size stands and the ways keep the default."""
    _index(tmp_path, "index0", level="1", type="Data", size="32K", coherency_line_size="64", ways_of_associativity="0")
    assert _cache_sizes(tmp_path) == {"L1d": 32 * 1024, "line": 64}
