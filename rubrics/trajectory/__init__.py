"""The trajectory format: the typed model (format.py), loading every accepted shape (load.py), the one way from
paths (files and folders) to trajectories (paths.py), the hardened JSON reader (json_text.py), the selectors that
point check and judge items at parts of a trajectory (selectors.py), and the adapters for other tools' logs
(adapters/)."""
from rubrics.trajectory.format import (SEND_EMAIL_TOOL, Attachment, Email, Message, State, ToolCall, Trajectory,
                                       TrajectoryError, TrajectoryLoadError)
from rubrics.trajectory.json_text import MAX_NESTING
from rubrics.trajectory.load import iter_trajectory_file, load_trajectory
from rubrics.trajectory.paths import TRAJECTORY_FILE_SUFFIXES, is_trajectory_file

__all__ = ["MAX_NESTING", "SEND_EMAIL_TOOL", "TRAJECTORY_FILE_SUFFIXES", "Attachment", "Email", "Message", "State",
           "ToolCall", "Trajectory", "TrajectoryError", "TrajectoryLoadError", "is_trajectory_file",
           "iter_trajectory_file", "load_trajectory"]
