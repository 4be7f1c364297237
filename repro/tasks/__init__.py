"""Synthetic long-context evaluation tasks (importing this registers them all).

RULER's 13 tasks (``niah_*``, ``vt``, ``cwe``, ``fwe``, ``qa_1``, ``qa_2``),
HELMET's ``json_kv``, CDT's ``multihop_2/3/4`` and ``niah_position``, BABILong's ``babilong_qa1`` .. ``qa5``
(generated).
"""

from repro.tasks.base import Example, Task, available_tasks, get_task, register  # noqa: F401
from repro.tasks import niah  # noqa: F401  (registers the NIAH family)
from repro.tasks import aggregation, babilong, json_kv, multihop, niah_position, qa, variable_tracking  # noqa: F401
from repro.tasks.summary import RULER_TASKS  # noqa: F401
