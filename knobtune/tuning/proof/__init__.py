"""Proof before belief: interleaved repeats, the study's verdict, and which changes earned the gain."""

from knobtune.tuning.proof.explain import EXPLANATION, change_groups, explain_study
from knobtune.tuning.proof.finish import DEFAULT_LABEL, name_lead, study_result, verdict, verify_study
from knobtune.tuning.proof.verify import (MACHINE_RETRIES, Candidate, CandidateRuns, Comparison, Resumed, Stop,
                                          run_interleaved, stopped_open)

__all__ = ["DEFAULT_LABEL", "EXPLANATION", "MACHINE_RETRIES", "Candidate", "CandidateRuns", "Comparison", "Resumed",
           "Stop", "change_groups", "explain_study", "name_lead", "run_interleaved", "stopped_open", "study_result",
           "verdict", "verify_study"]
