#!/usr/bin/env python3
"""Whole-process wall times of commands run in interleaved rounds (issue 26): each round runs every
command once, in order, its output thrown away. Prints one line per command: its best and median
time in seconds. Timed here around the spawn and the wait (perf_counter), not in the shell with
`$(date)` before and after: the second `$(date)` forks a subshell and execs date once the command
has ended, and those ~1.2 ms of a 45 ms run were counted as the command's.
    rounds.py ROUNDS 'COMMAND' ['COMMAND'…]   (each command split on spaces)
"""
import statistics
import subprocess
import sys
import time


def main() -> None:
    rounds, commands = int(sys.argv[1]), [c.split() for c in sys.argv[2:]]
    times = [[] for _ in commands]
    for _ in range(rounds):
        for command, spent in zip(commands, times):
            start = time.perf_counter()
            subprocess.run(command, stdout=subprocess.DEVNULL, check=True)
            spent.append(time.perf_counter() - start)
    for spent in times:
        print(f"{min(spent):.4f} {statistics.median(spent):.4f}")


if __name__ == "__main__":
    main()
