"""pandas: the same parameter file re-read with pd.read_csv every step.

Mistake: the simulation loop calls pd.read_csv("params.csv") at the start of
each of 1,500 steps to look up its coefficients, so the same small file is
opened, stat-ed, read and parsed 1,500 times though it never changes.
Fix: read the parameters once before the loop and keep them in a dict.
"""
import sys

import numpy as np
import pandas as pd

STEPS = 1500


def write_params() -> None:
    names = [f"coef_{i}" for i in range(40)]
    pd.DataFrame({"name": names, "value": np.linspace(0.1, 4.0, 40)}).to_csv(
        "params.csv", index=False)


def load_params() -> dict:
    table = pd.read_csv("params.csv")
    return dict(zip(table["name"], table["value"], strict=True))


def main(mode: str) -> None:
    write_params()
    state = np.ones(256)
    params = load_params() if mode == "fixed" else None
    for _ in range(STEPS):
        if mode == "mistake":
            params = load_params()
        state = params["coef_3"] * state - params["coef_1"] * np.sqrt(state)
        state = np.clip(state, 0.0, 10.0)
    np.save("state.npy", state)


if __name__ == "__main__":
    main(sys.argv[1])
