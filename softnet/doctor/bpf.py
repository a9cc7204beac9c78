"""bpf(2), BTF and perf_event_open(2) through ctypes: try an attach type with a no-op program."""
from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct
from pathlib import Path



from softnet.doctor.checks import SYSCALLS, _errno_text

# ---- bpf(2) with ctypes -------------------------------------------------------
BPF_PROG_LOAD, BPF_RAW_TRACEPOINT_OPEN = 5, 17
BPF_PROG_TYPE_RAW_TRACEPOINT, BPF_PROG_TYPE_TRACING = 17, 26
BPF_TRACE_RAW_TP, BPF_TRACE_FENTRY, BPF_TRACE_FEXIT = 23, 24, 25
BTF_KIND_TYPEDEF, BTF_KIND_FUNC = 8, 12
# "r0 = 0; exit": the smallest valid program.
_NOOP_INSNS = struct.pack("<BBhi", 0xB7, 0, 0, 0) + struct.pack("<BBhi", 0x95, 0, 0, 0)
_PROG_LOAD_ATTR_SIZE = 144


def _libc():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def _syscall_nr(name: str) -> int | None:
    return SYSCALLS.get(platform.machine(), {}).get(name)


def _bpf(cmd: int, attr: ctypes.Array) -> tuple[int, int]:
    """bpf(cmd, attr): (fd or -1, errno)."""
    nr = _syscall_nr("bpf")
    if nr is None:
        return -1, errno.ENOSYS
    libc = _libc()
    ctypes.set_errno(0)
    ret = libc.syscall(ctypes.c_long(nr), ctypes.c_long(cmd), attr, ctypes.c_uint(len(attr)))
    return int(ret), ctypes.get_errno()


def _bpf_load_noop(prog_type: int, attach_type: int = 0, attach_btf_id: int = 0) -> tuple[int, int, str]:
    """Load the no-op program: (fd or -1, errno, last line of the verifier log)."""
    insns = ctypes.create_string_buffer(_NOOP_INSNS, len(_NOOP_INSNS))
    license_ = ctypes.create_string_buffer(b"GPL")
    log = ctypes.create_string_buffer(1 << 16)
    attr = ctypes.create_string_buffer(_PROG_LOAD_ATTR_SIZE)
    struct.pack_into("<IIQQIIQ", attr, 0, prog_type, len(_NOOP_INSNS) // 8, ctypes.addressof(insns),
                     ctypes.addressof(license_), 1, len(log), ctypes.addressof(log))
    struct.pack_into("<16s", attr, 48, b"sn_doctor")
    struct.pack_into("<I", attr, 68, attach_type)
    struct.pack_into("<I", attr, 108, attach_btf_id)
    fd, err = _bpf(BPF_PROG_LOAD, attr)
    lines = [ln for ln in log.value.decode(errors="replace").splitlines() if ln.strip()]
    return fd, err, lines[-1] if lines else ""


def _bpf_raw_tp_open(prog_fd: int, name: str | None) -> tuple[int, int]:
    """BPF_RAW_TRACEPOINT_OPEN: attaches raw_tracepoint programs by name, tracing programs (name NULL) by BTF id."""
    name_buf = ctypes.create_string_buffer(name.encode()) if name else None
    attr = ctypes.create_string_buffer(16)
    struct.pack_into("<QI", attr, 0, ctypes.addressof(name_buf) if name_buf else 0, prog_fd)
    return _bpf(BPF_RAW_TRACEPOINT_OPEN, attr)


def _try_attach(what: str, prog_type: int, tp_name: str | None, attach_type: int = 0, btf_id: int = 0) -> tuple[bool, str]:
    fd, err, log = _bpf_load_noop(prog_type, attach_type, btf_id)
    if fd < 0:
        return False, f"{what}: load refused: {_errno_text(err)}" + (f"; verifier: {log}" if log else "")
    try:
        link, err = _bpf_raw_tp_open(fd, tp_name)
        if link < 0:
            return False, f"{what}: loaded, attach refused: {_errno_text(err)}"
        os.close(link)
        return True, f"{what}: loaded and attached"
    finally:
        os.close(fd)


def btf_ids(names: dict[str, int], path: str = "/sys/kernel/btf/vmlinux") -> dict[str, int]:
    """BTF type ids of `names` ({name: BTF kind}) in the kernel's BTF; missing names are left out."""
    data = Path(path).read_bytes()
    magic, _ver, _flags, hdr_len, type_off, type_len, str_off, str_len = struct.unpack_from("<HBBIIIII", data, 0)
    if magic != 0xEB9F:
        raise ValueError(f"{path}: not BTF (magic {magic:#x})")
    strings = data[hdr_len + str_off:hdr_len + str_off + str_len]
    wanted = {}
    for name, kind in names.items():
        at = strings.find(b"\0" + name.encode() + b"\0")
        if at >= 0:
            wanted[(at + 1, kind)] = name
    # bytes after the 12-byte btf_type header, by kind (vlen = number of members/params/...)
    extra = {1: lambda v: 4, 3: lambda v: 12, 4: lambda v: 12 * v, 5: lambda v: 12 * v, 6: lambda v: 8 * v,
             13: lambda v: 8 * v, 14: lambda v: 4, 15: lambda v: 12 * v, 17: lambda v: 4, 19: lambda v: 12 * v}
    found = {}
    pos, end, type_id = hdr_len + type_off, hdr_len + type_off + type_len, 0
    while pos < end and len(found) < len(wanted):
        type_id += 1
        name_off, info, _ = struct.unpack_from("<III", data, pos)
        kind, vlen = (info >> 24) & 0x1F, info & 0xFFFF
        hit = wanted.get((name_off, kind))
        if hit:
            found[hit] = type_id
        f = extra.get(kind)
        pos += 12 + (f(vlen) if f else 0)
    return found



def _perf_open(type_: int, config: int) -> tuple[int, int]:
    nr = _syscall_nr("perf_event_open")
    if nr is None:
        return -1, errno.ENOSYS
    attr = ctypes.create_string_buffer(64)  # PERF_ATTR_SIZE_VER0
    struct.pack_into("<IIQ", attr, 0, type_, 64, config)
    struct.pack_into("<Q", attr, 40, 1)  # flags: disabled
    libc = _libc()
    ctypes.set_errno(0)
    fd = libc.syscall(ctypes.c_long(nr), attr, ctypes.c_int(0), ctypes.c_int(-1), ctypes.c_int(-1),
                      ctypes.c_ulong(8))  # this thread, any CPU, no group, PERF_FLAG_FD_CLOEXEC
    err = ctypes.get_errno()
    if fd >= 0:
        os.close(fd)
    return int(fd), err


