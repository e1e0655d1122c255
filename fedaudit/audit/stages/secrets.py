"""Planted secrets (``[canaries] kind = "secret"``, :mod:`fedaudit.data.secrets`): each
secret's exposure and extraction on the released global model and on the server's view of
its client (the client's model as the server last received it), and its GNQ percentile in
its client; results.json ``secrets`` (one entry per planted or reference secret) and
``secrets_summary`` (mean exposure by repeats, per client and pooled; GNQ vs exposure).

Exposure (:mod:`fedaudit.secrets.exposure`, Carlini et al. 2019): exact when the candidate
space has at most :data:`EXACT_LIMIT` secrets (every candidate's log-perplexity by a tree
walk; the secret's rank read from the same numbers), else the paper's skew-normal
extrapolation from :data:`SAMPLE` candidates drawn uniformly.  Extraction
(:mod:`fedaudit.secrets.extraction`): the secret is among the final ``canaries.beam``
beams decoded from the template.  The never-inserted reference secrets are measured on
every view: their mean is the baseline of a secret the model did not see.

GNQ percentile (``audit.gnq.client``): a sequence's total client-side GNQ (the sum over
every time it was scored, rounds and local epochs) ranked among its client's training
sequences, ``100 * |{s in client: total(s) <= total(canary)}| / |client|``; a secret's
percentile is the mean over its inserted copies.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np
import torch

from fedaudit.audit.context import AuditContext
from fedaudit.audit.stages.base import Stage, register_stage
from fedaudit.data.secrets import PlantedSecrets
from fedaudit.rundir import load_checkpoint
from fedaudit.rundir.client_models import client_model_rounds
from fedaudit.rundir.layout import GNQ_SAMPLES_NAME, client_model_path
from fedaudit.secrets import (NextLogProbs, beam_decode, candidate_index,
                              candidate_log_perplexities, candidate_tokens, exposure,
                              exposure_extrapolated, log_perplexities)

__all__ = ["EXACT_LIMIT", "SAMPLE", "Secrets", "client_percentiles", "gnq_percentiles",
           "next_log_probs", "view_exposure"]

log = logging.getLogger("fedaudit")

#: the largest candidate space enumerated exactly (10^6: 111,111 model calls)
EXACT_LIMIT = 10 ** 6
#: candidates sampled for the extrapolation beyond it
SAMPLE = 5_000


def next_log_probs(model: torch.nn.Module, device: torch.device,
                   batch_size: int = 1024) -> NextLogProbs:
    """The model's natural-log next-token probabilities after each context (float64)."""
    model.to(device).eval()

    def call(contexts: np.ndarray) -> np.ndarray:
        out = []
        with torch.no_grad():
            for i in range(0, len(contexts), batch_size):
                t = torch.from_numpy(np.ascontiguousarray(contexts[i:i + batch_size])).to(device)
                out.append(torch.log_softmax(model(t)[:, -1].double(), -1).cpu().numpy())
        return np.concatenate(out) if out else np.zeros((0, 0))
    return call


def view_exposure(model: NextLogProbs, secrets: PlantedSecrets, *, beam: int,
                  seed: int) -> tuple[np.ndarray, np.ndarray, str]:
    """(exposure per secret, extracted per secret, the method) on one model."""
    a, length = len(secrets.alphabet), secrets.tokens.shape[1]
    space = a ** length
    if space <= EXACT_LIMIT:
        px = candidate_log_perplexities(model, secrets.prefix, secrets.alphabet, length)
        own = px[candidate_index(secrets.tokens, secrets.alphabet)]
        expo = np.asarray(exposure(own, px), dtype=np.float64)
        method = f"exact: all {space} candidates ranked"
    else:
        rng = np.random.default_rng([seed, 32, 1])
        drawn = candidate_tokens(rng.choice(space, size=SAMPLE, replace=False),
                                 secrets.alphabet, length)
        sample = log_perplexities(model, secrets.prefix, drawn)
        own = log_perplexities(model, secrets.prefix, secrets.tokens)
        expo = np.asarray(exposure_extrapolated(own, sample), dtype=np.float64)
        method = f"extrapolated: skew-normal fit to {SAMPLE} of {space} candidates"
    beams, _ = beam_decode(model, secrets.prefix, secrets.alphabet, length, beam=beam)
    extracted = np.array([bool((beams == t).all(axis=1).any()) for t in secrets.tokens])
    return expo, extracted, method


def client_percentiles(sample_id: np.ndarray, score: np.ndarray,
                       clients: tuple[np.ndarray, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(every scored training sequence's id, sorted; its total GNQ's percentile in its
    client, 100 |{s in client: total(s) <= its total}| / |client's scored sequences|)."""
    uniq, inv = np.unique(sample_id, return_inverse=True)
    total = np.bincount(inv, weights=score)
    pct = np.full(len(uniq), np.nan)
    for ids in clients:
        at = np.searchsorted(uniq, ids[np.isin(ids, uniq)])
        if len(at):
            pct[at] = 100.0 * np.searchsorted(np.sort(total[at]), total[at],
                                              side="right") / len(at)
    keep = ~np.isnan(pct)
    return uniq[keep], pct[keep]


def gnq_percentiles(sample_id: np.ndarray, score: np.ndarray,
                    clients: tuple[np.ndarray, ...], secrets: PlantedSecrets) -> np.ndarray:
    """Each secret's GNQ percentile in its client (module docstring): the mean of its
    copies' :func:`client_percentiles`; NaN for a reference or a secret none of whose
    copies was scored."""
    ids, pct = client_percentiles(sample_id, score, clients)
    out = np.full(secrets.size, np.nan)
    for s in range(secrets.size):
        got = secrets.sequence_ids[s][np.isin(secrets.sequence_ids[s], ids)]
        if secrets.client[s] >= 0 and len(got):
            out[s] = float(np.mean(pct[np.searchsorted(ids, got)]))
    return out


def _mean_by_repeats(expo: np.ndarray, secrets: PlantedSecrets,
                     mask: np.ndarray) -> dict[str, float]:
    """Mean exposure of the secrets in ``mask`` by repeats ("0" = the references)."""
    return {str(k): float(np.mean(expo[mask & (secrets.repeats == k)]))
            for k in sorted(set(secrets.repeats[mask].tolist()))}


@register_stage
class Secrets(Stage):
    name = "secrets"
    order = 450
    writes = ("secrets", "secrets_summary")

    def enabled(self, scenario):
        return scenario.canaries.kind == "secret" and scenario.canaries.count > 0

    def run(self, ctx: AuditContext) -> None:
        secrets = ctx.data.secrets
        assert secrets is not None
        cfg, seed = ctx.scenario.canaries, ctx.scenario.seed
        model = ctx.model()
        bs = ctx.scenario.attack.batch_size

        def on(state):
            model.load_state_dict(state)
            return view_exposure(next_log_probs(model, ctx.device, bs), secrets, beam=cfg.beam,
                                 seed=seed)

        expo, extracted, method = on(ctx.trajectory.final)
        refs = secrets.client < 0
        summary: dict[str, Any] = {
            "template": cfg.template, "alphabet": cfg.alphabet,
            "secret_length": cfg.secret_length, "candidates": len(cfg.alphabet) ** cfg.secret_length,
            "max_exposure": math.log2(len(cfg.alphabet) ** cfg.secret_length),
            "method": method, "beam": cfg.beam,
            "global": {"mean_exposure": _mean_by_repeats(expo, secrets, np.ones_like(refs)),
                       "extracted": int(extracted[~refs].sum()),
                       "references_extracted": int(extracted[refs].sum())},
            "clients": [], "notes": []}
        server = {}  # secret -> (exposure, extracted) on its client's model
        kept = client_model_rounds(ctx.run_dir)
        for c in sorted(set(secrets.client[~refs].tolist())):
            rounds = [r for r, cl in kept.items() if c in cl]
            if not rounds:
                summary["notes"].append(f"client {c}: no model of it was kept (list 'clients' "
                                        "in attack.targets for the server's view)")
                continue
            e, x, _ = on(load_checkpoint(client_model_path(ctx.run_dir, max(rounds), c)))
            mine = secrets.client == c
            summary["clients"].append({
                "client": c, "round": max(rounds),
                "mean_exposure": _mean_by_repeats(e, secrets, mine | refs),
                "extracted": int(x[mine].sum())})
            for s in np.flatnonzero(mine):
                server[int(s)] = (float(e[s]), bool(x[s]))
        gnq = np.full(secrets.size, np.nan)
        path = ctx.run_dir / GNQ_SAMPLES_NAME
        if path.exists():
            with np.load(path) as z:
                gnq = gnq_percentiles(z["sample_id"], z["score"], ctx.data.clients, secrets)
        vocab = ctx.data.classes
        ctx.results["secrets"] = [{
            "secret": secrets.text(s, vocab),
            "client": None if secrets.client[s] < 0 else int(secrets.client[s]),
            "repeats": int(secrets.repeats[s]), "exposure": float(expo[s]),
            "extracted": bool(extracted[s]),
            "gnq_percentile": None if np.isnan(gnq[s]) else float(gnq[s]),
            "server_view": (None if s not in server else
                            {"exposure": server[s][0], "extracted": server[s][1]}),
        } for s in range(secrets.size)]
        planted = ~refs & ~np.isnan(gnq)
        if planted.sum() >= 3:
            from scipy.stats import spearmanr

            rho, p = spearmanr(gnq[planted], expo[planted])
            summary["gnq_vs_exposure"] = {"spearman": float(rho), "pvalue": float(p),
                                          "n": int(planted.sum()),
                                          "mean_gnq_percentile": float(gnq[planted].mean())}
        ctx.results["secrets_summary"] = summary
        log.info("secrets: mean exposure on the global model by repeats %s (%s); %d of %d "
                 "planted extracted", summary["global"]["mean_exposure"], method,
                 summary["global"]["extracted"], int((~refs).sum()))
