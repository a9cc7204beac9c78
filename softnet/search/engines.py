"""The search engines by name: what ``softnet search --engine`` and a spec's
``method.engine`` choose.

- ``mlrsearch`` (the default): the reference, MLRsearch 1.2.1 (reference.py);
- ``softnet``: softnet's own search (algorithm.py) classifying loads by the
  MLRsearch specification's duration sums;
- ``bayes``: softnet's own search classifying loads by posterior confidence
  with its knee model (SearchConfig.rule = "bayes"); its bounds are its own,
  the specification's are computed beside them.

Every engine's result carries the specification's relevant bounds and
conditional throughput over its trials (softnet.analysis.mlr_spec).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable

from softnet.search.algorithm import OnTrial, search
from softnet.search.config import SearchConfig
from softnet.search.model import Measurement, SearchResult
from softnet.search.reference import search_mlrsearch

ENGINES = ("softnet", "mlrsearch", "bayes")


def run_engine(engine: str, measure: Callable[[float, float], Measurement], config: SearchConfig,
               on_trial: OnTrial | None = None) -> SearchResult:
    if engine == "mlrsearch":
        return search_mlrsearch(measure, config, on_trial)
    if engine in ("softnet", "bayes"):
        return search(measure, replace(config, rule="spec" if engine == "softnet" else "bayes"), on_trial)
    raise ValueError(f"engine '{engine}': expected one of {', '.join(ENGINES)}")
