"""``fedaudit lab challenge`` and ``fedaudit lab grade`` (the capstone challenge)."""

from __future__ import annotations

import argparse
import sys

__all__ = ["add_lab_parser", "cmd_lab"]


def add_lab_parser(sub, parser_class) -> None:
    """The ``lab`` command and its sub-commands on the CLI's subparsers."""
    lab = sub.add_parser("lab", help="classroom labs: the capstone challenge and its grading")
    cmds = lab.add_subparsers(dest="lab_command", metavar="{challenge,grade}", required=True,
                              parser_class=parser_class)
    ch = cmds.add_parser("challenge", help="train a target federation whose membership the "
                         "students must infer; writes OUT/challenge-SEED/{student/,key.csv}")
    ch.add_argument("--seed", type=int, required=True,
                    help="scenario seed (keep it secret for an exam variant)")
    ch.add_argument("--out", default=".", help="parent folder (default: the current one)")
    ch.add_argument("--data", default="mnist", metavar="{mnist,digits,PATH.npz}",
                    help="mnist (default: 1,000 members, 2,500 non-members), the bundled "
                    "digits (offline fallback: 1,078 non-members), or MNIST in an .npz (x, y)")
    ch.add_argument("--data-dir", default="data",
                    help="where torchvision's MNIST is read from (default: ./data)")
    ch.add_argument("--download", action="store_true",
                    help="download MNIST into --data-dir when it is not there")
    ch.add_argument("--allow-weak", action="store_true",
                    help="keep a seed on which the LOSS attack does not beat random "
                    "submissions in AUC (refused otherwise)")
    gr = cmds.add_parser("grade", help="score a submission (CSV id,score): AUC (the rank) "
                         "and TPR@1%%FPR, each beside its chance level; prints one "
                         "leaderboard CSV line")
    gr.add_argument("submission", metavar="SUBMISSION.csv")
    gr.add_argument("--key", default="key.csv",
                    help="the challenge's key.csv (default: ./key.csv)")
    gr.add_argument("--header", action="store_true", help="print the CSV header line first")
    gr.add_argument("--quiet", action="store_true",
                    help="only the CSV line (no sentence on stderr)")


def cmd_lab(args: argparse.Namespace) -> int:
    from fedaudit.errors import ScenarioError
    from fedaudit.labs.challenge import Grade, challenge_info, grade, make_challenge

    if args.lab_command == "challenge":
        try:
            root = make_challenge(args.seed, args.out, data=args.data,
                                  data_dir=args.data_dir, download=args.download,
                                  allow_weak=args.allow_weak, progress=True)
        except ScenarioError as exc:
            if "data.download" not in str(exc) or args.download:
                raise
            raise ScenarioError(f"{exc} -- here: fedaudit lab challenge ... --download "
                                "(or --data-dir DIR, --data digits offline)") from None
        info = challenge_info(root)
        if info["weak"]:
            print(f"fedaudit: warning: seed {args.seed}: the LOSS attack does not beat random "
                  "submissions in AUC (kept with --allow-weak)", file=sys.stderr)
        print(info["loss_baseline_summary"], file=sys.stderr)
        print(f"students get {root / 'student'}; keep {root / 'key.csv'} for grading",
              file=sys.stderr)
        print(root)
        return 0
    g = grade(args.submission, args.key)
    if args.header:
        print(Grade.CSV_HEADER)
    print(g.csv_line())
    if not args.quiet:
        print(g.summary(), file=sys.stderr)
    return 0
