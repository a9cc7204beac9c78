"""The search's strategies, one per module (as MLRsearch's strategy/ package).

GOAL_STRATEGIES are asked in this order for each goal; the first that
answers decides the goal's next trial or verdict. The InversionCheck runs
once every goal has its verdict (config.check_min_load).
"""
from softnet.search.strategy.base import Done, Step, Strategy
from softnet.search.strategy.bisection import Bisection
from softnet.search.strategy.bracketing import Bracketing
from softnet.search.strategy.inversion import CHECKED, InversionCheck
from softnet.search.strategy.knee import KNEE_SPAN, KneeModel, KneeStrategy

GOAL_STRATEGIES = (Bracketing, KneeStrategy, Bisection)

__all__ = ["Strategy", "Step", "Done", "Bracketing", "KneeStrategy", "KneeModel", "Bisection", "InversionCheck",
           "CHECKED", "KNEE_SPAN", "GOAL_STRATEGIES"]
