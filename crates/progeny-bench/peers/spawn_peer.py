"""Spawn benchmark peer for `progeny bench spawn`: Python's subprocess.Popen
and os.posix_spawn.

Runs its own timed loop in its own process (so it is timed by its own
monotonic clock, time.perf_counter_ns) and prints the raw figures for the
harness to parse:

    python3 spawn_peer.py MODE ITERATIONS BUDGET_SECONDS WARMUP MIN_ITERATIONS PROGRAM [ARGS...]

MODE is `popen` (subprocess.Popen(...).wait()) or `posix_spawn`
(os.posix_spawn + os.waitpid). Both do the harness's housekeeping: stdout to
/dev/null (opened for each spawn), stdin and stderr inherited, the parent's
environment. The loop stops after ITERATIONS measured runs, or once
BUDGET_SECONDS have passed and MIN_ITERATIONS runs are measured.

Output on success (stdout, exit 0):

    samples_ns N N N ...
    wall_ns N

On failure: "error MESSAGE" on stdout and exit 1.
"""

import os
import subprocess
import sys
import time


def fail(message):
    print("error " + message)
    sys.exit(1)


def run_popen(argv):
    child = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
    return child.wait()


def run_posix_spawn(argv):
    dev_null = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
    try:
        pid = os.posix_spawn(
            argv[0], argv, os.environ, file_actions=[(os.POSIX_SPAWN_DUP2, dev_null, 1)]
        )
    finally:
        os.close(dev_null)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def main():
    if len(sys.argv) < 7:
        fail("usage: spawn_peer.py MODE ITERATIONS BUDGET_SECONDS WARMUP MIN_ITERATIONS PROGRAM [ARGS...]")
    mode = sys.argv[1]
    try:
        iterations = int(sys.argv[2])
        budget_ns = int(float(sys.argv[3]) * 1e9)
        warmup = int(sys.argv[4])
        min_iterations = int(sys.argv[5])
    except ValueError:
        fail("bad numeric argument in %r" % (sys.argv[2:6],))
    argv = sys.argv[6:]
    runners = {"popen": run_popen, "posix_spawn": run_posix_spawn}
    if mode not in runners:
        fail("unknown mode %r" % mode)
    runner = runners[mode]

    def run():
        try:
            code = runner(argv)
        except OSError as error:
            fail("%s: %s" % (argv[0], error))
        if code != 0:
            fail("%s exited with status %d" % (argv[0], code))

    for _ in range(warmup):
        run()

    clock = time.perf_counter_ns
    samples = []
    start = clock()
    while len(samples) < iterations:
        before = clock()
        run()
        after = clock()
        samples.append(after - before)
        if after - start >= budget_ns and len(samples) >= min_iterations:
            break
    wall = clock() - start

    sys.stdout.write("samples_ns " + " ".join(map(str, samples)) + "\n")
    sys.stdout.write("wall_ns %d\n" % wall)


if __name__ == "__main__":
    main()
