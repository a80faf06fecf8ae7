"""Two I/O mistakes on known lines, for the call-site tests: each line marked
"MISTAKE: <check> in <function>" is the call the finding of that check is
about.

1. save_values writes one 8-byte value per f.write on an unbuffered file;
2. the loop opens log.txt again, appends one line and closes it, every step.
Usage: python plain.py   (writes values.bin and log.txt in the current directory)
"""

import struct

VALUES, STEPS = 20000, 300


def save_values(path: str) -> None:
    with open(path, "wb", buffering=0) as f:
        for i in range(VALUES):
            f.write(struct.pack("<d", i * 1e-3))  # MISTAKE: posix-small-writes in save_values


def main() -> None:
    save_values("values.bin")
    for step in range(STEPS):
        with open("log.txt", "a") as log:  # MISTAKE: reopened-files in main
            log.write(f"step {step}\n")


if __name__ == "__main__":
    main()
