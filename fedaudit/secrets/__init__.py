"""Planted secrets of a language model (the "secret sharer" of Carlini et al., USENIX
Security 2019): exposure (:mod:`fedaudit.secrets.exposure`) and extraction by decoding
(:mod:`fedaudit.secrets.extraction`), pure functions over a model's next-token
log-probabilities (:data:`NextLogProbs`)."""

from fedaudit.secrets.exposure import (NextLogProbs, candidate_index,
                                       candidate_log_perplexities, candidate_tokens, exposure,
                                       exposure_extrapolated, log_perplexities, rank)
from fedaudit.secrets.extraction import beam_decode

__all__ = ["NextLogProbs", "beam_decode", "candidate_index", "candidate_log_perplexities",
           "candidate_tokens", "exposure", "exposure_extrapolated", "log_perplexities", "rank"]
