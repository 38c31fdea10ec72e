"""What a study found, for people: summaries, exports and the HTML report."""

from knobtune.report.config_file import load_config_file
from knobtune.report.export import export_beside, export_config, export_files
from knobtune.report.html import page_files, write_report
from knobtune.report.summary import StudySummary, count_outcomes, summarize

__all__ = ["StudySummary", "count_outcomes", "export_beside", "export_config", "export_files", "load_config_file",
           "page_files", "summarize", "write_report"]
