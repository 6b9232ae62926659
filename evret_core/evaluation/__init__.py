"""The retrieval evaluation: its config, the ``Evaluator`` that runs stages 2 to 7, its working table (the retrieved
rows as columns), and the executors they run on.
"""

from evret_core.evaluation.evaluator import MATCHING_MODES, Evaluator, UnmeasuredJudgmentsError

__all__ = ["Evaluator", "MATCHING_MODES", "UnmeasuredJudgmentsError"]
