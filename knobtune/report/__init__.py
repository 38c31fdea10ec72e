"""What a study found, for people: summaries, exports and the HTML report."""

from knobtune.report.export import export_beside, export_config, load_config_file
from knobtune.report.html import write_report
from knobtune.report.summary import StudySummary, count_outcomes, summarize

__all__ = ["StudySummary", "count_outcomes", "export_beside", "export_config", "load_config_file", "summarize",
           "write_report"]
