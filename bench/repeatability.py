"""Repeatability: one cell measured in 5 fresh processes; the spread of their medians.

    .venv/bin/python bench/repeatability.py

Target: a coefficient of variation of the medians of at most 3% on this CPU for cells of
10 ms or more. Uses `--repeats 5`, so the 5 processes run back to back under one lock.
"""

from cells import label, run_cell

CELLS = [
    ("pytorch", "bert-base-uncased", 1, 64, "eager"),
    ("tensorflow", "distilbert-base-uncased", 1, 64, "graph"),
    ("pytorch", "distilbert-base-uncased", 2, 16, "eager"),
]


def main() -> None:
    print(f"{'cell':46} {'median ms':>9} {'CV':>6}  medians of the 5 processes (ms)")
    for cell in CELLS:
        record = run_cell(*cell, "--repeats=5", "--min-duration-s=2", "--min-iterations=10")
        spread = record["timing"]["between_processes"]
        medians = [r["median_ms"] for r in record["timing"]["repeats"]]
        flag = "" if spread["cv"] <= 0.03 else "  (above the 3% target)"
        print(f"{label(*cell):46} {spread['median_of_medians_ms']:9.2f} {spread['cv']:6.1%}  "
              + " ".join(f"{m:.2f}" for m in medians) + flag)
        for reason in record["flags"]["reasons"]:  # e.g. CPU stolen by the host meanwhile
            print(f"{'':46}   flagged: {reason}")


if __name__ == "__main__":
    main()
