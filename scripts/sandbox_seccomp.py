"""A seccomp filter that refuses user namespaces, as a Fargate container's default profile does.

Docker's default seccomp profile (which Fargate applies and does not let a task change)
allows ``clone``/``unshare`` with namespace flags only to a process holding CAP_SYS_ADMIN,
and answers ``clone3`` with ENOSYS (its flags sit in memory a filter cannot read). A worker
with every capability dropped therefore cannot create a user namespace, which is what
Chromium's own sandbox needs. This builds the part of that profile that matters here, as
the classic-BPF program ``bwrap --seccomp FD`` loads.
"""

from __future__ import annotations

import errno
import platform
import struct

# struct seccomp_data: int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6]
_NR, _ARCH, _ARG0_LOW = 0, 4, 16
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JSET_K = 0x45
_RET_K = 0x06
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000
CLONE_NEWUSER = 0x10000000

# audit arch, clone, unshare, clone3 (asm-generic numbers on arm64)
_ARCHES = {
    "x86_64": (0xC000003E, 56, 272, 435),
    "aarch64": (0xC00000B7, 220, 97, 435),
}


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def no_user_namespaces(machine: str | None = None) -> bytes:
    """The compiled filter for this machine's architecture."""
    arch, clone, unshare, clone3 = _ARCHES[machine or platform.machine()]
    program = [
        _op(_LD_W_ABS, _ARCH),
        _op(_JEQ_K, arch, 1, 0),
        _op(_RET_K, _ERRNO | errno.EPERM),  # another ABI (e.g. x32): refuse
        _op(_LD_W_ABS, _NR),
        _op(_JEQ_K, clone3, 0, 1),
        _op(_RET_K, _ERRNO | errno.ENOSYS),
        _op(_JEQ_K, clone, 1, 0),
        _op(_JEQ_K, unshare, 0, 3),
        _op(_LD_W_ABS, _ARG0_LOW),  # flags (first argument of both)
        _op(_JSET_K, CLONE_NEWUSER, 0, 1),
        _op(_RET_K, _ERRNO | errno.EPERM),
        _op(_RET_K, _ALLOW),
    ]
    return b"".join(program)
