"""Task decontamination: n-gram matching of training documents against downstream tasks.

``tasks`` reads task files (ready-made specs), ``index`` and ``ngrams`` hash and match,
``cut`` decides where documents are cut, ``phases`` runs it all restartably, ``stage`` is the
``decontaminate`` stage."""

from curator.stages.decontaminate.stage import Decontaminate
from curator.stages.decontaminate.tasks import SPECS, Task

__all__ = ["SPECS", "Decontaminate", "Task"]
