"""Temporary folders. A measuring process ends without the interpreter's teardown
(`os._exit`, dlbench.run.supervisor), so the temporary files its libraries would remove at
exit stay behind — TensorFlow's autograph writes a module per converted function (16 for a
DistilBERT `graph` cell, over 100 for an XLA generation cell). So each measuring process gets
a temporary folder of its own (Python's `tempfile` there), removed by its supervisor when it
ends, however it ends. What must outlive a process or be shared between processes — the
device locks, ONNX exports of random weights made once per machine — goes to the shared
temporary folder instead.
"""

import shutil
import tempfile
from pathlib import Path

PREFIX = "dlbench-process-"
_shared: Path | None = None  # the shared folder, once `use` has pointed tempfile elsewhere


def shared() -> Path:
    """The machine's temporary folder as every process sees it (Python's choice: TMPDIR,
    TEMP or TMP if usable, else /tmp, …), also in a process whose own files `use` moved."""
    return _shared or Path(tempfile.gettempdir())


def private() -> Path:
    """A new folder for one measuring process's temporary files, in the shared one."""
    return Path(tempfile.mkdtemp(prefix=PREFIX, dir=shared()))


def use(folder: Path) -> None:
    """This process's temporary files go to `folder` from now on (Python's tempfile; its
    environment, which programs it starts would inherit, is left as it is)."""
    global _shared
    _shared = shared()
    tempfile.tempdir = str(folder)


def remove(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)
