"""Where the search looks: the space from a catalog, the samplers, the rules' starts, the knobs that matter."""

from knobtune.tuning.search.guide import Advice, Guide, compare_findings, composed_here, counter_meanings, rules_of
from knobtune.tuning.search.prior import LEARNS_FROM_TRIALS, LearnsFromEarlier, given_at_most
from knobtune.tuning.search.ranking import rank_study, ranked_knobs
from knobtune.tuning.search.samplers import (
    LHS_ROW, REMOVED_SAMPLERS, SAMPLERS, LatinHypercubeSampler, make_sampler, removed_note)
from knobtune.tuning.search.space import (
    SPECIAL_SUFFIX, VALUE_CHOICE, SearchSpace, build_space, config_hash, kept_out_label, left_out_line, meeting_value,
    mend)

__all__ = ["LEARNS_FROM_TRIALS", "LHS_ROW", "REMOVED_SAMPLERS", "SAMPLERS", "SPECIAL_SUFFIX", "VALUE_CHOICE", "Advice",
           "Guide", "LatinHypercubeSampler", "LearnsFromEarlier", "SearchSpace", "build_space", "compare_findings",
           "composed_here", "config_hash", "counter_meanings", "given_at_most", "kept_out_label", "left_out_line",
           "make_sampler", "meeting_value", "mend", "rank_study", "ranked_knobs", "removed_note", "rules_of"]
