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
    gr = cmds.add_parser("grade", help="score a submission (CSV id,score) by TPR@1%%FPR and "
                         "AUC; prints one leaderboard CSV line")
    gr.add_argument("submission", metavar="SUBMISSION.csv")
    gr.add_argument("--key", default="key.csv",
                    help="the challenge's key.csv (default: ./key.csv)")
    gr.add_argument("--header", action="store_true", help="print the CSV header line first")


def cmd_lab(args: argparse.Namespace) -> int:
    from fedaudit.labs.challenge import Grade, grade, make_challenge

    if args.lab_command == "challenge":
        root = make_challenge(args.seed, args.out, progress=True)
        print(f"students get {root / 'student'}; keep {root / 'key.csv'} for grading",
              file=sys.stderr)
        print(root)
        return 0
    g = grade(args.submission, args.key)
    if args.header:
        print(Grade.CSV_HEADER)
    print(g.csv_line())
    return 0
