"""The HTML report of one run: what failed, to which value, in which transaction, under
which fault. ``write_report(run_dir)`` renders ``report.html`` beside the run's files."""

from harness.report.render import write_report

__all__ = ["write_report"]
