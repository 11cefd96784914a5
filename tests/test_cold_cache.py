"""cold_cache that shows: eviction of real files read back with mincore, a file set that
stays resident flagged (tmpfs keeps its pages: they are its storage), and a real training
cell's cold first epoch reported on its own."""

import os
from pathlib import Path

import pandas as pd
import pytest

from dlbench.analysis import bottleneck
from dlbench.measure import pagecache
from dlbench.records import result
from tests.test_bottleneck import data, train  # noqa: F401 (the fixture)


def files_in(folder: Path, count: int = 4, size: int = 256 * 1024) -> list[Path]:
    paths = []
    for i in range(count):
        path = folder / f"f{i}.bin"
        path.write_bytes(os.urandom(size))
        path.read_bytes()  # in the page cache now
        paths.append(path)
    return paths


def test_eviction_of_files_on_disk_is_read_back_and_not_flagged(tmp_path):
    paths = files_in(tmp_path)
    assert pagecache.residency(paths)["resident_fraction"] > 0.9
    pagecache.evict(paths)
    cache = pagecache.after_eviction(paths, evicted=True)
    assert cache["resident_fraction"] <= pagecache.STILL_RESIDENT_FRACTION
    assert not cache["still_resident"] and cache["files"] == 4


@pytest.mark.skipif(not Path("/dev/shm").is_dir(), reason="no tmpfs at /dev/shm")
def test_files_that_stay_resident_after_eviction_are_flagged():
    """On tmpfs the pages are the files: eviction cannot drop them."""
    import tempfile

    with tempfile.TemporaryDirectory(dir="/dev/shm") as folder:
        paths = files_in(Path(folder))
        pagecache.evict(paths)
        cache = pagecache.after_eviction(paths, evicted=True)
        assert cache["resident_fraction"] > 0.9
        assert cache["still_resident"] and "cold cache not reached" in \
            cache["still_resident_reason"]
        # Not evicted on purpose: a warm start is what was asked for, nothing to flag.
        assert not pagecache.after_eviction(paths, evicted=False)["still_resident"]


def test_the_first_epoch_table_shows_the_cold_epoch_and_the_flag():
    rows = pd.DataFrame([{"cell_id": f"c{i}", "pipeline_page_cache_evicted": True,
                          "pipeline_page_cache_resident_fraction": resident,
                          "pipeline_page_cache_still_resident": resident > 0.1,
                          "pipeline_page_cache_still_resident_reason":
                              "cold cache not reached: 95% …" if resident > 0.1 else None,
                          "pipeline_first_epoch_images_per_s": 120.0,
                          "pipeline_first_epoch_images_per_s_after_first_step": 150.0,
                          "pipeline_first_epoch_input_wait_share": 0.31,
                          "pipeline_first_epoch_later_epochs_images_per_s": 400.0}
                         for i, resident in enumerate((0.0, 0.95))])
    table = bottleneck.first_epoch_table(rows).set_index("cell")
    assert table.loc["c0", "first epoch"] == "cold (evicted)"
    assert table.loc["c0", "waiting for data"] == "31.0%"
    assert table.loc["c0", "first epoch images/s"] == "120" and table.loc["c0", "flag"] == ""
    assert table.loc["c1", "flag"].startswith("cold cache not reached")
    assert "cold cache not reached" in bottleneck.evidence(rows.iloc[1])


@pytest.mark.slow
def test_a_cold_cache_cell_reports_its_cold_first_epoch(tmp_path, data):  # noqa: F811
    """w0 from evicted files, 2 epochs: the first epoch's images/s from its wall time and
    its waiting share, the residency after eviction (low: the files are on a disk)."""
    cell = train(tmp_path, data, "w0", "--epochs=2", "--cold-cache")
    record = result.read(tmp_path / "w0.json")
    first, cache = record["pipeline"]["first_epoch"], record["pipeline"]["page_cache"]
    assert cache["evicted"] and not cache["still_resident"]
    assert cache["resident_fraction"] <= pagecache.STILL_RESIDENT_FRACTION
    assert first["cold"] and first["steps"] == record["training"]["steps_per_epoch"]
    assert first["images_per_s"] == pytest.approx(
        first["steps"] * 32 / record["training"]["epoch_s"][0])
    assert 0 < first["input_wait_share"] < 1 and first["later_epochs_images_per_s"] > 0
    assert cell["pipeline_first_epoch_images_per_s"] == pytest.approx(first["images_per_s"])
