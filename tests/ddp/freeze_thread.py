#!/usr/bin/env python3
"""tests/ddp/freeze_thread.py — stops ONE thread of a running process (ptrace PTRACE_SEIZE +
PTRACE_INTERRUPT), leaving its other threads running: a rank whose main thread hangs while its
MPI watchdog thread still answers. The thread resumes when this script exits.

    freeze_thread.py TID SECONDS   freeze thread TID (a process's pid is its main thread) for SECONDS
    freeze_thread.py --probe       exit 0 when this machine lets us do that to a process that is not our child
"""
import ctypes
import subprocess
import sys
import time

PTRACE_SEIZE, PTRACE_INTERRUPT = 0x4206, 0x4207
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
libc.ptrace.restype = ctypes.c_long


def freeze(tid):
    if libc.ptrace(PTRACE_SEIZE, tid, None, None) != 0 or libc.ptrace(PTRACE_INTERRUPT, tid, None, None) != 0:
        return ctypes.get_errno()
    return 0


if sys.argv[1:] == ["--probe"]:
    # a process that is not our descendant (yama's ptrace_scope 1 refuses those without CAP_SYS_PTRACE)
    pid = int(subprocess.check_output(["sh", "-c", "sleep 5 >/dev/null 2>&1 & echo $!"]).decode())
    rc = freeze(pid)
    subprocess.call(["kill", "-9", str(pid)])
    sys.exit(1 if rc else 0)

err = freeze(int(sys.argv[1]))
if err:
    sys.exit("freeze_thread.py: cannot stop thread %s: errno %d" % (sys.argv[1], err))
print("frozen", flush=True)
time.sleep(float(sys.argv[2]))
