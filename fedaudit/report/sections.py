"""The HTML sections of the report (header, tables) and their order (:data:`SECTIONS`).

Every number here is read from results.json as it is; the figures of a section
(:data:`fedaudit.report.registry.FIGURES`) go between a section's ``before`` and ``after``
HTML.
"""

from __future__ import annotations

import html
import math
import re
from typing import Callable

from fedaudit.report.format import (client_leaks, fmt, fmt_ci, fmt_g, leak_style, sparkline,
                                     table, tpr_at_fpr, verdict_of)
from fedaudit.report.registry import not_run
from fedaudit.report.format import method_label, ordered_methods
from fedaudit.rundir.reading import RunData, num


def dp_audit_card(audit: dict) -> tuple[str, str, str]:
    """The card "empirical lower bound vs claimed epsilon" (results.json ``dp_audit``)."""
    claimed = num(audit.get("claimed_epsilon"))
    verdict = ("; EXCEEDS THE CLAIM" if audit.get("exceeds_claimed")
               else "" if claimed is not None else "; no epsilon claimed")
    beta = num(audit.get("beta"))
    conf = f"{1 - beta:.0%}" if beta is not None else "?"
    gdp = ""
    if audit.get("epsilon_lower_bound_gdp") is not None:
        g = audit.get("gdp") or {}
        gdp = (f"; Gaussian DP: mu >= {fmt_g(audit.get('mu_lower_bound'))} (claimed "
               f"{fmt_g(num(audit.get('claimed_mu')))}), epsilon >= "
               f"{fmt_g(audit.get('epsilon_lower_bound_gdp'))} ({g.get('correct', '?')} of "
               f"{g.get('guesses', '?')} searched guesses)")
        if isinstance(audit.get("global"), dict):
            gdp += (f"; on the global model: epsilon >= "
                    f"{fmt_g(audit['global'].get('epsilon_lower_bound'))} (Steinke), "
                    f"{fmt_g(audit['global'].get('epsilon_lower_bound_gdp'))} (Gaussian DP)")
    return ("empirical lower bound vs claimed epsilon",
            f"{fmt_g(audit.get('epsilon_lower_bound'))} vs {fmt_g(claimed)}",
            f"DP audit ({audit.get('level', '?')} canaries, {audit.get('attack', '?')} "
            f"score): {audit.get('correct', '?')} of {audit.get('guesses', '?')} guesses "
            f"correct, confidence {conf}{gdp}{verdict}")


def section_header(run: RunData) -> str:
    """Title, run facts and the key numbers."""
    r = run.results
    scen = run.scenario.get("scenario", {})
    data = r.get("data") or {}
    fed = run.scenario.get("federation", {})
    facts = [("run directory", html.escape(str(run.path.resolve()))),
             ("fedaudit", html.escape(str(r.get("fedaudit_version", "?")))),
             ("seed", html.escape(str(r.get("seed", scen.get("seed", "?")))))]
    if data:
        facts.append(("data", html.escape(
            f"{data.get('dataset', '?')}: {data.get('train', '?')} train / "
            f"{data.get('holdout', '?')} holdout / {data.get('test', '?')} test, "
            + (f"{data.get('num_classes', '?')} classes" if not data.get("text") else
               f"sequences of {data['text'].get('seq_len', '?')} characters over "
               f"{data.get('num_classes', '?')}, {data['text'].get('roles', '?')} roles"))))
    if fed:
        facts.append(("federation", html.escape(
            f"{fed.get('num_clients', '?')} clients, {fed.get('rounds', '?')} rounds, "
            f"{fed.get('strategy', '?')}, partition "
            f"{run.scenario.get('data', {}).get('partitioner', '?')}")))
    defense = (run.scenario.get("defense") or {}).get("kind")
    if defense:
        facts.append(("defense", html.escape(str(defense))))
    facts_html = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in facts)

    cards = []
    model = r.get("model") or {}
    cards.append(("test accuracy", fmt(model.get("test_accuracy")),
                  f"loss {fmt(model.get('test_loss'))}"))
    for m in ordered_methods(r.get("attacks") or {}):
        a = r["attacks"][m] or {}
        ci = a.get("auc_ci")
        cards.append((f"{method_label(m)} AUC", fmt(a.get("auc")),
                      (f"95% CI [{fmt(ci[0])}, {fmt(ci[1])}], {verdict_of(a)}; "
                       if isinstance(ci, list) else "")
                      + f"TPR@1%FPR {fmt(a.get('tpr_at_1pct_fpr'))}"))
    if not r.get("attacks"):
        cards.append(("attacks", "–", "not run in this scenario"))
    audit = r.get("dp_audit")
    if isinstance(audit, dict):
        cards.append(dp_audit_card(audit))
    t = r.get("timing") or {}
    if t:
        parts = [f"{k.replace('_seconds', '')} {num(v):.0f} s" for k, v in t.items()
                 if k != "total_seconds" and num(v) is not None]
        cards.append(("total time", f"{num(t.get('total_seconds')) or 0:.0f} s",
                      ", ".join(parts)))
    failures = sum(int(num(x.get("failures")) or 0) for x in run.rounds)
    if failures:
        cards.append(("failed replies", str(failures), "see the training curves"))
    cards_html = "".join(f'<div class="card"><div class="k">{html.escape(k)}</div>'
                         f'<div class="v">{html.escape(v)}</div>'
                         f'<div class="s">{html.escape(s)}</div></div>' for k, v, s in cards)
    desc = html.escape(str(scen.get("description", "")))
    warns = [w for w in run.results.get("warnings") or [] if isinstance(w, dict)]
    warn_html = "".join(f'<p class="warning" role="alert"><strong>Warning:</strong> '
                        f'{html.escape(str(w.get("message", "")))}</p>' for w in warns)
    return (f'<header><h1>fedaudit report: {html.escape(run.name)}</h1>{warn_html}'
            f'<p class="desc">{desc}</p><dl class="facts">{facts_html}</dl>'
            f'<div class="cards">{cards_html}</div></header>')


def section_attack_table(run: RunData) -> str:
    """Pooled metrics per attack on the global model."""
    att = run.results.get("attacks") or {}
    if not att:
        return ""
    rows = []
    for m in ordered_methods(att):
        a = att[m] or {}
        res = a.get("min_fpr_resolution")
        rows.append([method_label(m), fmt_ci(a.get("auc"), a.get("auc_ci")), verdict_of(a),
                     tpr_at_fpr(a.get("tpr_at_1pct_fpr"), res, 0.01, a.get("tpr_at_1pct_fpr_ci")),
                     tpr_at_fpr(a.get("tpr_at_0p1pct_fpr"), res, 0.001,
                                a.get("tpr_at_0p1pct_fpr_ci")),
                     fmt(a.get("fpr_at_80pct_tpr")),
                     fmt_g(a.get("min_fpr_resolution")), fmt_g(a.get("queries_per_sample")),
                     fmt_g((num(a.get("seconds_per_sample")) or math.nan) * 1e3)])
    return ("<h3>Pooled over clients (global model)</h3>"
            + table(["attack", "AUC [95% CI]", "verdict", "TPR@1%FPR [95% CI]",
                     "TPR@0.1%FPR [95% CI]", "FPR@80%TPR", "lowest FPR", "queries/sample",
                     "ms/sample"], rows, "num")
            + "<p class=\"note\">Intervals: DeLong's for the AUC (Newcombe's, with the exact "
              "Mann-Whitney test, below 50 samples of a class), Clopper-Pearson's on the "
              "members for a TPR (docs/algorithms.md section 5); chance is 0.5 for the AUC "
              "and the FPR bound for a TPR.  Each attack's verdict is its own: leaks (its "
              "test rejects chance; inverted: below 0.5), no leak beyond 0.05 (its interval "
              "within 0.45-0.55) or inconclusive.</p>"
            + _references_line(run.results.get("references")))


def _references_line(ref: dict | None) -> str:
    """One line on LiRA's / RMIA's reference models: how many, how trained, their size."""
    if not ref:
        return ""
    sizes = sorted(set(ref.get("train_size") or []))
    parity = ("the target's size" if ref.get("size_parity")
              else f"<b>smaller than the target's {ref.get('target_train_size')}</b>")
    a = ref.get("rmia_a")
    tuned = "" if a is None else (f"; RMIA's a = {a:.1f}"
                                  + (" (tuned on the references)" if ref.get("rmia_a_tuned")
                                     else ""))
    mode = html.escape(str(ref.get("mode", "")))
    return (f"<p>Reference models: {ref.get('models')} {mode}, "
            f"{'/'.join(map(str, sizes))} training samples each ({parity}){tuned}.</p>")


def section_gnq_tables(run: RunData) -> str:
    """Canary ranks and the GNQ-vs-attack links."""
    out = []
    can = run.results.get("canaries")
    if isinstance(can, dict) and can.get("samples"):
        rows = [[str(c.get("sample_id")), str(c.get("client")), fmt_g(c.get("gnq_mean")),
                 fmt(c.get("percentile"), 1)] for c in can["samples"]]
        out.append("<h3>Canaries</h3><p>Percentile of each canary's mean GNQ among its "
                   "client's samples (100 = the most unique sample); mean percentile "
                   f"{fmt(can.get('mean_percentile'), 1)}.</p>"
                   + table(["sample id", "client", "mean GNQ", "percentile"], rows, "num"))
    link = run.results.get("gnq_vs_attack")
    if isinstance(link, dict) and link:
        items = []
        for key, v in link.items():  # per attack of the gnq-link stage (registered gnq_link)
            c = re.fullmatch(r"client_update_gnq_vs_(.+)_auc", key)
            s = re.fullmatch(r"sample_top5pct_gnq_(.+)_tpr", key)
            if not isinstance(v, dict) or not (c or s):
                continue
            label = html.escape(method_label((c or s).group(1)))
            if c:
                items.append(f"<li>Per client, update GNQ (total over rounds) vs {label} AUC: "
                             f"Spearman {fmt(v.get('spearman'), 2)} (p = "
                             f"{fmt_g(v.get('pvalue'))}, {v.get('n_clients', '?')} clients).</li>")
            else:
                items.append(f"<li>Per sample, at a {label} threshold with FPR "
                             f"{fmt(v.get('fpr'))}: TPR {fmt(v.get('tpr_top5pct_gnq'))} on the "
                             f"{v.get('n_top', '?')} members with the top-5% GNQ vs "
                             f"{fmt(v.get('tpr_all_members'))} on all "
                             f"{v.get('n_members', '?')} members.</li>")
        if items:
            out.append("<h3>Does GNQ point where the attack hits?</h3><ul>"
                       + "".join(items) + "</ul>")
    return "".join(out)


def section_quant_table(run: RunData) -> str:
    """One row per quantizer, and the r_Qn-vs-attack rank correlations."""
    entries = [e for e in run.results.get("quantization") or [] if isinstance(e, dict)]
    if not entries:
        return ""
    methods = ordered_methods(m for e in entries for m in (e.get("attacks") or {}))
    rows = []
    for e in entries:
        note = e.get("rqn_note")
        rqn = fmt_g(e.get("rqn"))
        if len(e.get("rqn_runs") or []) > 1:
            rqn += f" [{fmt_g(e.get('rqn_q25'))}, {fmt_g(e.get('rqn_q75'))}]"
        rows.append([html.escape(str(e.get("quantizer"))), fmt_g(e.get("bits")),
                     fmt_g(e.get("sparsity")), rqn,
                     f"{e.get('n_kept', '–')}/{e.get('n_distinct', '–')}/{e.get('n_candidates', '–')}",
                     fmt(e.get("test_accuracy"))]
                    + [fmt((e.get("attacks") or {}).get(m, {}).get("auc")) for m in methods]
                    + [html.escape(str(note)) if note else ""])
    out = ("<h3>Per quantizer</h3>"
           + ("<p>r_Qn: median over runs [quartiles] when extra seeds ran; candidates: "
              "kept (lowest test loss) / distinct / checkpoints.</p>"
              if any(len(e.get("rqn_runs") or []) > 1 for e in entries) else "")
           + table(["quantizer", "bits", "sparsity", "r_Qn", "kept/distinct/candidates",
                     "test acc"] + [f"{method_label(m)} AUC" for m in methods] + ["note"],
                    rows, "num", text_cols=(-1,)))
    corr = run.results.get("rqn_vs_attack")
    if isinstance(corr, dict) and corr:
        crow = [[method_label(m), fmt(v.get("spearman"), 2), fmt_g(v.get("pvalue")),
                 str(v.get("n", "–")), html.escape(str(v.get("note") or ""))]
                for m, v in ((m, corr[m] or {}) for m in ordered_methods(corr))]
        out += ("<h3>Does r_Qn rank the quantizers like the attacks do?</h3><p>Spearman "
                "correlation between r_Qn and attack AUC across quantizers; the paper's "
                "claim (higher r_Qn, lower AUC) predicts a negative value.</p>"
                + table(["attack", "Spearman", "p-value", "quantizers", "note"], crow, "num",
                         text_cols=(-1,)))
    return out


def section_positions(run: RunData) -> str:
    """The attacker positions table (results.json ``attack_positions``)."""
    rows = [p for p in run.results.get("attack_positions") or [] if isinstance(p, dict)]
    if not rows:
        return ('<p class="absent">Only the outsider was simulated: add "clients" (the '
                'curious server) and "rounds" (the global model round by round) to '
                'attack.targets.</p>')
    body = [[html.escape(str(p.get("position"))), html.escape(str(p.get("target")))
             + (f" (round {p['round']})" if p.get("round") is not None else ""),
             method_label(str(p.get("best_method"))), fmt_ci(p.get("auc"), p.get("auc_ci")),
             fmt(p.get("tpr_at_1pct_fpr")),
             html.escape(str((p.get("cell_verdict") or {}).get("summary")
                             or verdict_of(p)))] for p in rows]
    bound = next((p["best_round_upper_bound"] for p in rows
                  if isinstance(p.get("best_round_upper_bound"), dict)), None)
    upper = (f'<p class="guide">Insider upper bound: {fmt(bound.get("auc"))} AUC '
             f'({html.escape(method_label(str(bound.get("best_method"))))}, round '
             f'{html.escape(str(bound.get("round")))}), {html.escape(str(bound.get("note")))}.'
             "</p>") if bound else ""
    sv = run.results.get("server_view") or {}
    notes = "".join(f"<li>{html.escape(str(n))}</li>" for n in sv.get("notes") or [])
    seen = (f'<p class="guide">What the server attacks: {html.escape(str(sv["model_seen"]))}.'
            "</p>") if sv.get("model_seen") else ""
    return ("<h3>Who learns what</h3>"
            + table(["position", "what it attacks", "best attack", "AUC [95% CI]",
                     "TPR@1%FPR", "verdict (best of the attacks and the most exposed client, "
                     "Holm)"], body, "num", text_cols=(0, 1, 2, 5))
            + upper + seen + (f"<ul class=\"notes\">{notes}</ul>" if notes else ""))


def section_clients(run: RunData) -> str:
    """The per-client table."""
    clients = [c for c in run.results.get("clients") or [] if isinstance(c, dict)]
    if not clients:
        return '<p class="absent">No per-client results recorded in this run.</p>'
    methods = ordered_methods(m for c in clients for m in (c.get("attacks") or {}))
    canaries: dict[int, int] = {}
    can = run.results.get("canaries")
    if isinstance(can, dict):
        for s in can.get("samples") or []:
            canaries[s.get("client")] = canaries.get(s.get("client"), 0) + 1
    head1 = ('<tr><th rowspan="2">client</th><th rowspan="2">examples</th>'
             '<th rowspan="2">labels</th><th colspan="2">GNQ</th>'
             + ('<th rowspan="2">canaries</th>' if canaries else "")
             + "".join(f'<th colspan="2">{method_label(m)}</th>' for m in methods) + "</tr>")
    head2 = ("<tr><th>update total</th><th>sample mean</th>"
             + "".join("<th>AUC [95% CI]</th><th>TPR@1%</th>" for _ in methods) + "</tr>")
    leaks = client_leaks(clients)
    body = []
    for c in clients:
        g = c.get("gnq") or {}
        a = c.get("attacks") or {}
        cells = [html.escape(str(c.get("client", "?"))), fmt_g(c.get("num_examples")),
                 sparkline(c.get("label_histogram") or []), fmt_g(g.get("update_total")),
                 fmt_g(g.get("sample_mean"))]
        if canaries:
            cells.append(str(canaries.get(c.get("client"), 0)))
        tds = "".join(f"<td>{x}</td>" for x in cells)
        for m in methods:
            am = a.get(m) or {}
            auc = num(am.get("auc"))
            tpr = tpr_at_fpr(am.get("tpr_at_1pct_fpr"), am.get("min_fpr_resolution"), 0.01)
            flag = leaks.get((c.get("client"), m))
            mark = " (inverted)" if flag and flag != "leaks" else ""
            tds += (f"<td{leak_style(flag, auc)}>{fmt_ci(auc, am.get('auc_ci'))}{mark}</td>"
                    f"<td>{tpr}</td>")
        body.append(f"<tr>{tds}</tr>")
    res = [num((a or {}).get("min_fpr_resolution")) for c in clients
           for a in (c.get("attacks") or {}).values()]
    res = [v for v in res if v is not None]
    note = ""
    if res:
        span = f"{min(res):.2g}" + (f" to {max(res):.2g}" if max(res) > min(res) else "")
        note = (f" The lowest FPR a client's evaluation can resolve is 1/n non-members "
                f"({span} here); TPR@1% is only meaningful where that is at most 0.01.")
    if not methods:
        note += (" Attack columns: " + str(not_run(run, ("attack", "enabled"),
                                                   what="per-client attack results")))
    return ('<p class="guide">One row per client: its size, label histogram (bars per '
            'class; hover for counts), how unique its updates and samples were (GNQ), and '
            'every attack\'s AUC with its 95 % interval (the exact test and Newcombe\'s '
            'interval below 50 members) and TPR at 1% FPR on its members vs class-matched '
            'non-members; an AUC is shaded red only where it leaks, every client and attack '
            f'of the table looked at (Holm).{html.escape(note)}</p>'
            f'<div class="scroll"><table class="num clients"><thead>{head1}{head2}</thead>'
            f'<tbody>{"".join(body)}</tbody></table></div>')


def section_scenario(run: RunData) -> str:
    if not run.scenario_toml:
        return '<p class="absent">The resolved scenario was not recorded in this run.</p>'
    # one block per TOML table, so a column or page break never splits a table
    blocks = re.split(r"\n\s*\n(?=\[)", run.scenario_toml.strip())
    pres = "".join(f"<pre>{html.escape(b)}</pre>" for b in blocks)
    return ('<p class="guide">Every key with its resolved value (defaults filled in); '
            'rerun with <code>fedaudit run scenario.toml</code> from the run directory.</p>'
            f'<div class="toml">{pres}</div>')


#: (id, heading, intro, extra HTML before the figures, extra HTML after)
SECTIONS: list[tuple[str, str, str, Callable[[RunData], str] | None,
                     Callable[[RunData], str] | None]] = [
    ("training", "Training", "The global model after each federated round.", None, None),
    ("attacks", "Membership inference", "Black-box attacks on the global model: members "
     "are each client's training samples, non-members are holdout samples with the same "
     "label histogram.", section_attack_table, None),
    ("gnq", "Gradient uniqueness (GNQ)", "How much each client's update, and each sample's "
     "gradient, stands out from the rest of its round or batch.", None, section_gnq_tables),
    ("quantization", "Post-training quantization and r_Qn", "Each quantizer applied to the "
     "released global model; r_Qn is the attack-free membership-inference-security "
     "indicator computed from the quantized training trajectory.", None, section_quant_table),
    ("positions", "Attacker positions", "The same attacks from where a federated attacker "
     "stands: outside (the final global model), inside (the global model of every round), "
     "and at the server (every client's model as received).", section_positions, None),
    ("clients", "Per-client table", "", section_clients, None),
    ("scenario", "Resolved scenario", "", section_scenario, None),
]


def register_section(sid: str, heading: str, intro: str = "", *,
                     html: Callable[[RunData], str] | None = None,
                     before: str = "clients") -> None:
    """Add a report section (an audit stage's, say): ``html(run)`` gives its body (empty
    for none; figures registered with :func:`fedaudit.report.registry.figure` under
    ``sid`` follow it).  It goes before the section ``before`` (default: the per-client
    table); registering ``sid`` again replaces it in place."""
    entry = (sid, heading, intro, html, None)
    ids = [s[0] for s in SECTIONS]
    if sid in ids:
        SECTIONS[ids.index(sid)] = entry
        return
    SECTIONS.insert(ids.index(before) if before in ids else len(SECTIONS), entry)


def unregister_section(sid: str) -> None:
    """Remove a section added by :func:`register_section`."""
    SECTIONS[:] = [s for s in SECTIONS if s[0] != sid]
