"""pandas: one row appended to a CSV file per step with df.to_csv(mode="a").

Mistake: every one of 3,000 steps builds a one-row DataFrame and calls
to_csv(..., mode="a"), which opens the file, seeks to its end, writes one
short line and closes it again: 3,000 open/write/close cycles on one file.
Fix: collect the rows in a list and write the table once at the end with a
single to_csv call.  The CSV file is byte-for-byte the same.
"""
import sys

import numpy as np
import pandas as pd

STEPS = 3000


def main(mode: str) -> None:
    rng = np.random.default_rng(7)
    energy = 1.0
    rows = []
    for step in range(STEPS):
        energy = energy * 0.999 + 0.001 * float(rng.random())
        row = {"step": step, "time": step * 0.01, "energy": round(energy, 9)}
        if mode == "mistake":
            pd.DataFrame([row]).to_csv("log.csv", mode="a", index=False, header=step == 0)
        else:
            rows.append(row)
    if mode == "fixed":
        pd.DataFrame(rows).to_csv("log.csv", index=False)

    assert len(pd.read_csv("log.csv")) == STEPS


if __name__ == "__main__":
    main(sys.argv[1])
