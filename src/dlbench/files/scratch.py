"""Temporary folders. A measuring process ends without the interpreter's teardown
(`os._exit`, dlbench.run.supervisor), so the temporary files its libraries would remove at
exit stay behind — TensorFlow's autograph writes a module per converted function (16 for a
DistilBERT `graph` cell, over 100 for an XLA generation cell). So each measuring process gets
a temporary folder of its own (Python's `tempfile` there), removed by its supervisor when it
ends, however it ends. What must outlive a process or be shared between processes — the
device locks, ONNX exports of random weights made once per machine — goes to the shared
temporary folder instead.
"""

import os
import shutil
import tempfile
from pathlib import Path

PREFIX = "dlbench-process-"


def shared() -> Path:
    """The machine's temporary folder as every process sees it (TMPDIR, TEMP or TMP, else
    /tmp), whatever this process's `tempfile` was pointed at."""
    for name in ("TMPDIR", "TEMP", "TMP"):
        if os.environ.get(name):
            return Path(os.environ[name])
    return Path("/tmp")


def private() -> Path:
    """A new folder for one measuring process's temporary files, in the shared one."""
    return Path(tempfile.mkdtemp(prefix=PREFIX, dir=shared()))


def use(folder: Path) -> None:
    """This process's temporary files go to `folder` from now on (Python's tempfile; its
    environment, which programs it starts would inherit, is left as it is)."""
    tempfile.tempdir = str(folder)


def remove(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)
