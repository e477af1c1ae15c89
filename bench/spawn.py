# SPDX-License-Identifier: Apache-2.0
"""Launcher that measures one command exactly: spawn.py FD ARGV...

A child forked from a large process (the benchmark harness with pyarrow loaded) inherits the
parent's resident set until it execs, and the kernel keeps that high-water mark in ru_maxrss
across the exec, so every child of the harness would report >= ~100 MB peak RSS. This small
launcher (run with `python -S`, a few MB) forks and execs the command itself, forwards SIGINT and
SIGTERM to it, reaps it with os.wait4 and writes to FD: the child's pid on the first line, then
one JSON line with its exit code, wall seconds from fork to reaping, user/system CPU seconds and peak RSS (bytes). Floor of the
peak figure: this launcher's own size at fork time (about 8 MB).
"""
import json
import os
import signal
import sys
import time


def main():
    fd = int(sys.argv[1])
    argv = sys.argv[2:]
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:
        try:
            os.execvp(argv[0], argv)
        finally:
            os._exit(127)
    os.write(fd, b"%d\n" % pid)

    def forward(signum, frame):
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass

    signal.signal(signal.SIGINT, forward)
    signal.signal(signal.SIGTERM, forward)
    _, status, ru = os.wait4(pid, 0)
    rec = {"exit": os.waitstatus_to_exitcode(status), "wall_s": time.monotonic() - t0,
           "user_s": ru.ru_utime,
           "sys_s": ru.ru_stime, "maxrss": ru.ru_maxrss * 1024}
    os.write(fd, (json.dumps(rec) + "\n").encode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
