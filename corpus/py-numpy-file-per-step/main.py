"""NumPy: one small .npy file saved per time step (2,000 files).

Mistake: np.save(f"step_{i:05d}.npy", state) every step creates, writes and
closes a new 4 KiB file 2,000 times; the run pays a create, a header write and
a close (and directory updates) per step, and whatever reads the results back
must open 2,000 files.
Fix: keep the steps in one preallocated array and save it once as a single
.npy file (2,000 x 512 values); every step's data is still there, in order.
"""
import glob
import sys

import numpy as np

STEPS, N = 2000, 512


def main(mode: str) -> None:
    rng = np.random.default_rng(1)
    state = rng.random(N)
    history = np.empty((STEPS, N)) if mode == "fixed" else None
    for step in range(STEPS):
        state = 0.5 * (state + np.roll(state, 1))       # the "simulation"
        if mode == "mistake":
            np.save(f"step_{step:05d}.npy", state)
        else:
            history[step] = state

    if mode == "fixed":
        np.save("steps.npy", history)
        assert np.load("steps.npy", mmap_mode="r").shape == (STEPS, N)
    else:
        assert len(glob.glob("step_*.npy")) == STEPS


if __name__ == "__main__":
    main(sys.argv[1])
