"""Recordings of Codex traffic, their replay through the engine, and the RFD checker.

- :mod:`.format`: the JSON Lines format (``docs/recordings.md``), read with errors naming the line.
- :mod:`.recorder`: the ``record`` command's tap, which writes a recording as the bridge serves.
- :mod:`.replay`: a recording through a fresh engine → the ACP transcript.
- :mod:`.checker`: the Subagent Sessions RFD's transcript-level invariants.
- :mod:`.redact`: what keeps secrets out of recordings.
"""

from .checker import TranscriptChecker, Violation
from .format import Recording, RecordingError, parse_recording, read_recording
from .replay import Transcript, normalize, replay

__all__ = [
    "Recording",
    "RecordingError",
    "Transcript",
    "TranscriptChecker",
    "Violation",
    "normalize",
    "parse_recording",
    "read_recording",
    "replay",
]
